# Answer key for notebook 05 (From HLO to LLVM IR, assembly and PTX) -- for teachers; not in the
# student kit. Run it: every answer is computed and checked with an assert on this checkout.

# %% [markdown]
# # 05 · LLVM IR, assembly and PTX -- answer key
#
# **Goals.** Students follow one kernel from HLO to LLVM IR (a loop nest the elemental emitter
# wrote), to vector IR after LLVM's -O3, to assembly; and see a GPU kernel's PTX with its
# launch dimensions, without needing a GPU.
#
# **Time.** 1.5 hours in class, 2 hours of exercises (plus `elemental_emitter`,
# `reduction_loop`). **Where students stall:** SSA and `phi` nodes (draw the loop's blocks
# on the board), and reading vector types `<8 x float>`.

# %%
import re
from pathlib import Path

from xla_teach import flags
from xla_teach.api import compile_module

SOURCE = (Path(__file__).resolve().parents[2] / "notebooks" / "src" / "05_llvm_ir_assembly_ptx.py").read_text()
SEED_HLO = re.search(r'SEED_HLO = """(.*?)"""', SOURCE, re.S).group(1)

# %% [markdown]
# ## Exercise 1: vector width
#
# At `xla_backend_optimization_level=0` LLVM runs no optimization pipeline: the optimized IR
# keeps the emitter's scalar loop (no `<N x float>` types), one element per iteration, with
# every value loaded and stored through memory; at -O3 the loop works on vectors (the width
# depends on the CPU: 16 floats with AVX-512, 8 with AVX2) and is unrolled.

# %%
with flags.override(xla_backend_optimization_level=0):
    o0 = compile_module(SEED_HLO, "cpu").artifacts
o3 = compile_module(SEED_HLO, "cpu").artifacts
widths = {level: sorted(set(re.findall(r"<(\d+) x float>", a.optimized_llvm_ir)), key=int)
          for level, a in (("O0", o0), ("O3", o3))}
print(widths)
assert widths["O0"] == [] and widths["O3"]

# %% [markdown]
# ## Exercise 2: a 2-D kernel
#
# The simplifier first moves the `exponential` before the `transpose` (elementwise ops commute
# with moving data), so the fusion computes `transpose(exp(x))`. The emitter writes a loop
# nest over the *output*'s dimensions (`loop.d0` over its 32 rows -- the range the runtime
# splits across threads -- and `loop.d1` over its 64 columns): no linear index is divided
# into a row and a column. The transpose is in the load: output element `(d0, d1)` reads
# `x[d1, d0]`, at address `d1 * 32 + d0` (`mul ... %loop.d1, 32` then `add ... %loop.d0`).

# %%
TRANSPOSE = """
HloModule t
ENTRY main {
  x = f32[64,32] parameter(0)
  t = f32[32,64] transpose(x), dimensions={1,0}
  ROOT e = f32[32,64] exponential(t)
}
"""
ir = compile_module(TRANSPOSE, "cpu").artifacts.llvm_ir
index = re.search(r'(%"\.\d+") = mul nuw nsw i64 %"loop\.d1", 32\n\s+%"\.\d+" = add nuw nsw i64 \1, %"loop\.d0"', ir)
print(index.group(0) if index else ir[:2000])
assert index and "udiv" not in ir and "urem" not in ir

# %% [markdown]
# ## Exercise 3: launch dimensions
#
# Blocks of 256 threads; each thread computes 1 element for small arrays and 4 (one vector
# of 4 floats) for large ones, and the block count is the element count divided by
# 256 x elements per thread, rounded up. Rounding up leaves spare threads in the last block
# (they test their index against the size and exit): 100 elements run 256 threads.

# %%
rows = {}
for n in (100, 1000, 10**5, 10**7):
    text = f"HloModule e\nENTRY main {{\n  x = f32[{n}] parameter(0)\n  ROOT y = f32[{n}] exponential(x)\n}}\n"
    launch = compile_module(text, "gpu").launch_dimensions["y"]
    rows[n] = (launch.blocks[0], launch.threads[0])
print(rows)
assert all(threads == 256 for _, threads in rows.values())
assert rows[100][0] == 1 and rows[1000][0] == 4
assert rows[10**5][0] == -(-10**5 // (256 * 4)) and rows[10**7][0] == -(-10**7 // (256 * 4))
