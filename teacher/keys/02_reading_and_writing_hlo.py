# Answer key for notebook 02 (Reading and writing HLO) -- for teachers; not in the student kit.
# Run it: every answer is computed and checked with an assert on this checkout.

# %% [markdown]
# # 02 · Reading and writing HLO -- answer key
#
# **Goals.** Students can build a module with the builder, write one as text, read a line
# (name, shape, layout, opcode, operands, attributes), tell a parse error from a shape error,
# and run a module on the interpreter.
#
# **Time.** 1 hour in class, 1 hour of exercises. **Where students stall:** nested
# expressions in text (HLO has none: one instruction per line), `broadcast`'s `dimensions`
# (which result dimension each operand dimension becomes), and layouts `{1,0}`.

# %%
from collections import Counter
from pathlib import Path

import numpy as np

import xla_teach
from xla_teach import Shape, XlaBuilder, execute, parse_hlo
from xla_teach.hlo.errors import VerificationError
from xla_teach.hlo.verifier import verify_module

rng = np.random.default_rng(0)
xv = rng.standard_normal((8, 16)).astype(np.float32)
wv = rng.standard_normal((16, 4)).astype(np.float32)
bv = rng.standard_normal(4).astype(np.float32)
want = np.maximum(xv @ wv + bv, 0)

# %% [markdown]
# ## Exercise 1: builder
#
# `dot` contracts x's dimension 1 with w's dimension 0; the bias is broadcast along the
# result's dimension 1 (`broadcast_dimensions=(1,)`), and `max` with a scalar 0 broadcasts it.

# %%
b = XlaBuilder("dense_relu")
x = b.parameter(0, Shape.array("f32", (8, 16)), "x")
w = b.parameter(1, Shape.array("f32", (16, 4)), "w")
bias = b.parameter(2, Shape.array("f32", (4,)), "b")
h = b.add(b.dot(x, w), bias, broadcast_dimensions=(1,))
module = b.build(b.max(h, b.constant(np.float32(0))))
print(module.to_text(print_metadata=False))
(built,) = execute(module, [xv, wv, bv], backend="interpreter")
np.testing.assert_allclose(built, want, rtol=1e-5, atol=1e-5)

# %% [markdown]
# ## Exercise 2: text
#
# The same module in the short form; both give identical results (the same instructions in
# the same order). With a wrong declared shape the verifier names the instruction and both
# shapes: it *declared* one shape but shape inference gives another from the operands.

# %%
TEXT = """
HloModule dense_relu
ENTRY main {
  x = f32[8,16] parameter(0)
  w = f32[16,4] parameter(1)
  b = f32[4] parameter(2)
  d = f32[8,4] dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  bb = f32[8,4] broadcast(b), dimensions={1}
  h = f32[8,4] add(d, bb)
  zero = f32[] constant(0)
  zeros = f32[8,4] broadcast(zero), dimensions={}
  ROOT r = f32[8,4] maximum(h, zeros)
}
"""
(written,) = execute(parse_hlo(TEXT), [xv, wv, bv], backend="interpreter")
np.testing.assert_array_equal(written, built)
try:
    verify_module(parse_hlo(TEXT.replace("d = f32[8,4] dot", "d = f32[8,5] dot")))
    raise AssertionError("the verifier accepted a wrong shape")
except VerificationError as err:
    print(err)
    assert "declared f32[8,5]" in str(err) and "inferred f32[8,4]" in str(err)

# %% [markdown]
# ## Exercise 3: reading a dump
#
# XLA's optimized seed module has six computations: the ENTRY (`main.2`); `fused_computation`,
# called by `%multiply_add_fusion` (a kLoop fusion holding the `multiply` and the `add` of
# `x + y * z`: the instructions of `before` that became it); the `reduce-window` that sums 32
# partial sums, wrapped in a fusion of its own (`wrapped_reduce-window_computation`) with its
# reducer `region_0.1`; and the final `reduce` of those partial sums, also wrapped
# (`wrapped_reduce_computation`) with a copy of the reducer (`region_0.1.clone`). XLA wraps a
# lone reduction in a fusion so that every kernel is a fusion; the split into a
# `reduce-window` and a `reduce` is its tree-reduction rewriter.

# %%
SAMPLE = Path(xla_teach.__file__).resolve().parents[1] / "tests" / "data" / "xla_samples" / "seed_reduce_sum"
after = parse_hlo((SAMPLE / "after_optimizations.txt").read_text())
callers = {c.name: [f"{i.name} ({i.opcode})" for i in after.instructions()
                    if c in i.called_computations()] for c in after.computations}
for name, who in callers.items():
    print(f"{name:<32} called by {who or 'nobody: the ENTRY'}")
fusion = next(i for i in after.entry.instructions if i.name.startswith("multiply_add_fusion"))
inside = Counter(i.opcode for i in fusion.fused_computation.instructions)
print(fusion.name, dict(inside))
assert inside == Counter({"parameter": 3, "multiply": 1, "add": 1}) and len(after.computations) == 6
