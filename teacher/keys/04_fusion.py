# Answer key for notebook 04 (Fusion) -- for teachers; not in the student kit.
# Run it: every answer is computed and checked with an assert on this checkout.

# %% [markdown]
# # 04 · Fusion -- answer key
#
# **Goals.** Students name the fusion kinds (kLoop, kInput, kOutput, the CPU's row kernels),
# give the reasons a producer is not fused (a parameter, a reduction recomputed per element,
# expensive work duplicated), and connect fusion to bytes moved and measured time.
#
# **Time.** 1.5 hours in class, 2 hours of exercises (plus `fusion_decision`; the `capstone`
# after it). **Where students stall:** "why was exp not fused?" (it has two users and is
# expensive) and multi-output fusion's tuple root with its `get-tuple-element`s.

# %%
import re
from pathlib import Path

from xla_teach import flags
from xla_teach.api import compile_module

SOURCE = (Path(__file__).resolve().parents[2] / "notebooks" / "src" / "04_fusion.py").read_text()
SOFTMAX_HLO = re.search(r'SOFTMAX_HLO = """(.*?)"""', SOURCE, re.S).group(1)
LOOP_HLO = re.search(r'LOOP_HLO = """(.*?)"""', SOURCE, re.S).group(1)


def kernels(executable):
    return [i for i in executable.module.entry.instructions
            if i.opcode not in ("parameter", "constant", "get-tuple-element", "tuple", "bitcast")]


def fusion_notes(executable):
    return [n for r in executable.recorder.records if r.pass_name == "fusion" for n in r.notes]


# %% [markdown]
# ## Exercise 1: predict, then check
#
# Everything in `relu(x) * logistic(y) + x` is elementwise, so one kLoop fusion computes it
# all. The possible surprise: `logistic` is expensive, but it has a single user, so fusing it
# duplicates nothing; `x` has two users, but it is a parameter (never fused: it stays an
# operand of the fusion). The notes say "parameters are inputs, not computations".

# %%
RELU_GATE = """
HloModule relu_gate
ENTRY main {
  x = f32[1024] parameter(0)
  y = f32[1024] parameter(1)
  zero = f32[] constant(0)
  zeros = f32[1024] broadcast(zero), dimensions={}
  r = f32[1024] maximum(x, zeros)
  s = f32[1024] logistic(y)
  m = f32[1024] multiply(r, s)
  ROOT o = f32[1024] add(m, x)
}
"""
gate = compile_module(RELU_GATE, "cpu")
print([(k.name, k.fusion_kind) for k in kernels(gate)])
assert [k.fusion_kind for k in kernels(gate)] == ["kLoop"]
assert any("parameters are inputs" in n for n in fusion_notes(gate))

# %% [markdown]
# ## Exercise 2: duplication
#
# With `negate` (cheap) instead of `exponential`, the fusion pass copies `e = negate(...)`
# (and `shifted`, `max_b`) into *both* of its consumers: the notes say "fused e into
# broadcast_divide_fusion" and "fused e into negate_reduce_fusion". That leaves three
# kernels: the row maximum, the row sum (with its own copy of the negate), and the divide
# (with another). With `exponential` the pass refuses ("expensive and has other users"),
# and multi-output fusion then merges the exp into the sum's kernel instead; also three.

# %%
with flags.override(xla_disable_hlo_passes="row-fusion"):
    cheap = compile_module(SOFTMAX_HLO.replace("exponential", "negate"), "cpu")
notes = fusion_notes(cheap)
duplicated = [n for n in notes if n.startswith("fused e into")]
print(duplicated, len(kernels(cheap)), "kernels")
assert len(duplicated) == 2 and len(kernels(cheap)) == 3

# %% [markdown]
# ## Exercise 3: bandwidth
#
# The unfused/fused time ratio rises with the size and levels off near the ratio of bytes
# accessed once the arrays no longer fit in the last-level cache (2^20 floats is 4 MiB per
# array; 2^22 is 16 MiB): in cache, writing and re-reading an intermediate is nearly free.
# Among `LOOP_HLO`'s unfused kernels the `tanh` moves the fewest GB/s: it does real
# arithmetic per element (a polynomial), so it is bound by computation, not by memory.
#
# The buffer assignment writes `a = add(x, m)` over `m` and `t = tanh(a)` over `a`: each is
# elementwise, its operand dies there and has its shape, so the result takes its bytes. In
# the LLVM IR every pointer parameter of a kernel's `.wrapped` function is `noalias`: a
# promise that no two of them overlap, so LLVM may load and store whole vectors without
# checking at run time whether a store changes a later load. An in-place kernel keeps the
# promise by passing the shared buffer once: `t.wrapped` takes a single pointer.

# %%
with flags.override(xla_disable_hlo_passes="fusion,multi_output_fusion"):
    unfused = compile_module(LOOP_HLO, "cpu")
in_place = unfused.buffer_assignment.entry.in_place
print("in place:", in_place)
assert ("a", "m") in in_place and ("t", "a") in in_place
wrapped = {m.group(1): m.group(2) for m in re.finditer(r'define internal void @"(\w+)\.wrapped"\(([^)]*)\)',
                                                        unfused.artifacts.llvm_ir)}
print({name: params.count("ptr noalias") for name, params in wrapped.items()})
assert all(params.count("ptr ") == params.count("ptr noalias") for params in wrapped.values())
assert wrapped["t"].count("ptr noalias") == 1
