# Answer key for notebook 01 (Your first jit) -- for teachers; not in the student kit.
# Run it (python teacher/keys/01_first_jit.py): every answer below is computed, and checked
# with an assert, on this checkout, so the key cannot drift from the compiler.

# %% [markdown]
# # 01 · Your first jit -- answer key
#
# **Goals of the chapter.** Students see that `jit` traces Python into HLO, that the
# compiler rewrites it (fusion), that fused programs move fewer bytes, and that a jitted
# function is cached per shape, dtype and flags.
#
# **Time.** 45 minutes in class, 1 hour of exercises. **Where students stall:** reading the
# `metadata={...}` of every line (tell them `print_metadata=False`), and timing on a busy
# machine (take the best of several runs, as the notebook does).

# %%
import tempfile
from pathlib import Path

import numpy as np

import xla_teach as xt
import xla_teach.numpy as xnp
from xla_teach import flags

rng = np.random.default_rng(0)
x, y = (rng.standard_normal(1024, dtype=np.float32) for _ in range(2))


def kernels(compiled):
    return [i for i in compiled.executable.module.entry.instructions
            if i.opcode not in ("parameter", "constant", "bitcast", "tuple", "get-tuple-element")]


def described(compiled):
    return [f"{i.opcode}:{i.fusion_kind}" if i.opcode == "fusion" else i.opcode for i in kernels(compiled)]


# %% [markdown]
# ## Exercise 1: predict, then check
#
# The HLO before optimization is one instruction per operation: `exponential(x)`,
# `multiply(exp, y)`, a scalar `constant(0)` and a `reduce` with an `add` computation.
# Without fusion each of `exponential`, `multiply` and the `reduce` is a kernel (the
# tree-reduction rewriter may add a second, small `reduce` for long sums); with fusion,
# the elementwise producers fuse into the reduction: one `kInput` fusion (plus that small
# reduce). `cost_analysis()` counts one transcendental per element of `exponential`: 1024.

# %%
fn = xt.jit(lambda x, y: xnp.sum(xnp.exp(x) * y))
lowered = fn.lower(x, y)
before = [i.opcode for i in lowered.module.entry.instructions]
assert {"exponential", "multiply", "reduce"} <= set(before), before
fused = lowered.compile()
with flags.override(xla_disable_hlo_passes="fusion,multi_output_fusion"):
    unfused = fn.lower(x, y).compile()
print("before optimization:", before)
print("kernels without fusion:", [i.opcode for i in kernels(unfused)])
print("kernels with fusion:   ", described(fused))
assert len(kernels(fused)) < len(kernels(unfused))
assert fused.cost_analysis()["transcendentals"] == 1024

# %% [markdown]
# ## Exercise 2: size matters
#
# The unfused/fused time ratio approaches the ratio of bytes accessed (about 7/3) only when
# the arrays are larger than the last-level cache (here at 2^22 and 2^24 elements: 16 and 64
# MiB per array). Below that the intermediates stay in cache, so writing and re-reading
# them costs little, and for 2^12 elements the fixed cost of starting each kernel dominates.
# The byte ratio itself does not depend on N:

# %%
for n in (2**12, 2**16, 2**20):
    args = [np.ones(n, np.float32)] * 3
    f = xt.jit(lambda x, y, z: xnp.sum(x + y * z))
    a = f.lower(*args).compile()
    with flags.override(xla_disable_hlo_passes="fusion,multi_output_fusion"):
        b = f.lower(*args).compile()
    ratio = b.cost_analysis()["bytes accessed"] / a.cost_analysis()["bytes accessed"]
    print(f"N = {n:>8}: bytes accessed unfused/fused = {ratio:.2f}")
    assert 2.0 < ratio < 2.5

# %% [markdown]
# ## Exercise 3: two outputs
#
# `(sum(x + y*z), max(x))` has two reductions over the same inputs. Fusion makes one kInput
# fusion per reduction; `multi_output_fusion` then merges the two sibling reductions that
# read the same `x` into one kernel with a tuple result, so the optimized module runs one
# kernel (for long arrays the tree-reduction rewriter adds small second reductions). The fusion
# pass's notes name what it fused; `multi_output_fusion`'s name the siblings it merged.

# %%
two = xt.jit(lambda x, y, z: (xnp.sum(x + y * z), xnp.max(x)))
compiled_two = two.lower(x, y, y).compile()
records = {r.pass_name: r for r in compiled_two.executable.recorder.records if r.changed}
print("kernels:", described(compiled_two))
print("multi_output_fusion notes:", records["multi_output_fusion"].notes[:3] if "multi_output_fusion" in records
      else "(did not change the module)")
assert "fusion" in records and len(kernels(compiled_two)) == 1

# %% [markdown]
# ## Exercise 4: recompilation
#
# The cache key is the arguments' shapes and dtypes (and the flags): 8 elements compiles
# (1 miss), 9 compiles again (2 misses), 8 again is a hit, float64 compiles a third time.
# A training loop whose last batch is smaller compiles a second program for that batch;
# padding the last batch (or dropping it) avoids it.

# %%
@xt.jit
def model_fn(x, y, z):
    return xnp.sum(x + y * z)


for n, dtype in ((8, np.float32), (9, np.float32), (8, np.float32), (8, np.float64)):
    model_fn(*[np.ones(n, dtype)] * 3)
info = model_fn.cache_info()
print(info)
assert (info.hits, info.misses) == (1, 3), info

# %% [markdown]
# ## Exercise 5: dumps
#
# With `xla_dump_to` set, a fresh jit writes `module_NNNN.jit_model_fn.before_optimizations.txt`
# (the `lowered.as_text("hlo")` text) and `module_NNNN.jit_model_fn.cpu_after_optimizations.txt`
# (the optimized module), among others (notebook 07 lists them).

# %%
with tempfile.TemporaryDirectory() as folder:
    with flags.override(xla_dump_to=folder):
        xt.jit(model_fn.__wrapped__)(x, y, y)
    names = sorted(p.name for p in Path(folder).iterdir())
print([n for n in names if "optimizations" in n])
assert "module_0000.jit_model_fn.before_optimizations.txt" in names
assert any("after_optimizations.txt" in n for n in names)
