# Source of notebooks/05_llvm_ir_assembly_ptx.ipynb -- edit here, then run scripts/build_notebooks.py.

# %% [markdown]
# # 05 · From HLO to LLVM IR, assembly and PTX
#
# After the HLO passes, a backend turns each kernel of the optimized module into
# machine code. XLA's CPU and GPU backends both go through **LLVM**:
#
# ```
# optimized HLO ──► buffer assignment ──► LLVM IR (one function per kernel)
#                                             │
#                     CPU: LLVM -O3 for the host ──► x86/ARM assembly ──► machine code (JIT)
#                     GPU: LLVM -O3 for NVPTX   ──► PTX ──► (driver) SASS on the GPU
# ```
#
# Every stage is kept in `executable.artifacts`, so you can read each one. We follow
# the seed example `reduce_sum(x + y*z)` all the way down, then an elementwise fusion
# on the GPU, written once by XLA's route (LLVM) and once as CUDA C compiled by NVRTC.

# %%
import re

import numpy as np

from xla_teach import execute
from xla_teach.api import compile_module

SEED_HLO = """
HloModule seed
add_f32 {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY main {
  x = f32[1024] parameter(0)
  y = f32[1024] parameter(1)
  z = f32[1024] parameter(2)
  m = f32[1024] multiply(y, z)
  a = f32[1024] add(x, m)
  zero = f32[] constant(0)
  ROOT sum = f32[] reduce(a, zero), dimensions={0}, to_apply=add_f32
}
"""
cpu = compile_module(SEED_HLO, "cpu")
artifacts = cpu.artifacts
print(cpu.module.entry.to_text())
for stage in ("buffer_assignment_text", "llvm_ir", "optimized_llvm_ir", "assembly"):
    print(f"{stage:<24} {len(getattr(artifacts, stage).splitlines()):5d} lines")

# %% [markdown]
# The optimized module as a graph: one `kInput` fusion (the grey cluster) reading the three
# parameters. That fusion is the one kernel the rest of this notebook follows down to machine code.

# %%
cpu.module

# %% [markdown]
# ## 1. LLVM IR, as emitted
#
# One LLVM function per kernel, named after the HLO instruction (here the single
# `kInput` fusion). Above it, as a comment, the HLO it implements.
#
# * The outer function `@add_reduce_fusion` is what the runtime calls: a pointer to a
#   table of buffer addresses (the buffer assignment decided which buffer is where),
#   plus the range of the loop this call should run (for splitting across threads).
# * It calls `@add_reduce_fusion.wrapped`, whose parameters are the buffers themselves,
#   marked `noalias` when buffer assignment proves that no other argument shares their
#   bytes: a promise to LLVM that lets it vectorize without run-time overlap checks.
# * The body is the loop the **elemental emitter** wrote: a `header` block with a `phi`
#   (the induction variable), a `body` that loads `x[i]`, `y[i]`, `z[i]`, computes
#   `x + y*z` and adds it to an accumulator, and an `exit` that stores the sum.
#   `reassoc` on the `fadd` allows LLVM to reorder the sum (XLA allows it too).

# %%
print(artifacts.llvm_ir)

# %% [markdown]
# The compile explorer links each instruction to its kernel: click the fusion box and its panel
# has the LLVM IR of `add_reduce_fusion`, with the HLO line it came from and its buffer (on the
# GPU, the PTX too). Step to the `fusion` pass on the left to see the three instructions go in.

# %%
from xla_teach.tools.explorer import explore

explore(cpu)

# %% [markdown]
# ## 2. After LLVM's optimizations
#
# LLVM inlines the wrapper, **vectorizes** the loop (operations on `<N x float>`
# vectors: 4, 8 or 16 floats at once depending on your CPU) and unrolls it. Count what
# changed:

# %%
optimized = artifacts.optimized_llvm_ir
vector_types = sorted(set(re.findall(r"<(\d+) x float>", optimized)), key=int)
print("vector types used:", [f"<{n} x float>" for n in vector_types])
print("fadd instructions before -> after:", artifacts.llvm_ir.count(" fadd "), "->", optimized.count(" fadd "))
loop = re.search(r"vector\.body:.*?\n\n", optimized, re.S)
print(loop.group(0)[:2500] if loop else optimized[:2500])

# %% [markdown]
# ## 3. Assembly
#
# The machine code of the same function, for the CPU you are on. On x86-64, `xmm`,
# `ymm` and `zmm` registers hold 4, 8 and 16 floats; `vmulps` / `vaddps` multiply and
# add a whole register at once. The loop body (`.LBB0_*`) is what runs 1024 / width
# times.

# %%
assembly = artifacts.assembly
registers = {width: len(re.findall(rf"%{width}mm\d+", assembly)) for width in ("x", "y", "z")}
print("register uses: xmm", registers["x"], " ymm", registers["y"], " zmm", registers["z"])
start = assembly.find("add_reduce_fusion:")
print(assembly[start:start + 2500] if start >= 0 else assembly[:2500])

# %% [markdown]
# The command-line tool shows the same stop points (as XLA's `hlo-opt` does):
#
# ```
# xla-teach opt seed.hlo --stage=llvm_ir            # also: hlo, buffer-assignment, optimized_llvm_ir, asm, ptx
# ```
#
# ## 4. The GPU backend: PTX
#
# Compiling for the GPU **needs no GPU**: PTX is text produced by LLVM's NVPTX backend,
# for a target architecture (`sm_80` unless a device or `--xla_teach_gpu_arch` says
# otherwise). The same HLO passes run, with the GPU's fusion rules, and then each
# kernel gets **launch dimensions**: how many blocks of how many threads. They are
# recorded in the instruction's `backend_config`, exactly where XLA puts them.

# %%
gpu = compile_module(SEED_HLO, "gpu")
print(gpu.module.entry.to_text())
print("launch dimensions:", gpu.launch_dimensions)

# %% [markdown]
# The reduction is one block of threads. Each thread sums a strided slice of the input
# (the loop at `$L__BB0_1`), then the threads combine their partial sums with **warp
# shuffles** (`shfl.sync.down`: a register exchange between the 32 threads of a warp,
# no memory involved) and, across warps, through **shared memory** (`.shared`,
# `bar.sync`).

# %%
ptx = gpu.artifacts.ptx
print(ptx[:4000])
print("...\nshfl.sync instructions:", ptx.count("shfl.sync"), "  bar.sync:", ptx.count("bar.sync"))

# %% [markdown]
# ## 5. Two routes to the same kernel: LLVM and NVRTC
#
# Many hand-written GPU kernels are CUDA C compiled with NVRTC (NVIDIA's runtime
# compiler, which also needs no GPU). `compare_routes` writes a loop fusion as CUDA C,
# the way the elemental emitter thinks (one thread per output element, one local
# variable per fused instruction), compiles it with NVRTC, and puts the two PTX
# kernels side by side.

# %%
ELEMENTWISE_HLO = """
HloModule tanh_fma
ENTRY main {
  x = f32[1000] parameter(0)
  y = f32[1000] parameter(1)
  m = f32[1000] multiply(x, y)
  t = f32[1000] tanh(m)
  ROOT s = f32[1000] add(t, x)
}
"""
routes = None
try:
    from xla_teach.api import compile_module
    from xla_teach.backends.gpu.cuda_c import compare_routes

    routes = compare_routes(compile_module(ELEMENTWISE_HLO, "gpu"))
except (ImportError, RuntimeError, OSError) as err:
    print("the NVRTC route is not available here:", err)

if routes is not None:
    print(routes.cuda_source)

# %%
if routes is not None:
    nvrtc_kernel, llvm_kernel = routes.nvrtc_kernel_ptx(), routes.llvm_kernel_ptx()
    for label, kernel in (("NVRTC (CUDA C)", nvrtc_kernel), ("LLVM (XLA's route)", llvm_kernel)):
        instructions = [line for line in kernel.splitlines() if line.startswith("\t") and not line.startswith("\t.")]
        approx = sorted({m for m in re.findall(r"\b\w+\.approx(?:\.\w+)*", kernel)})
        print(f"{label:<20} {len(instructions):3d} instructions; approximate ops: {approx or 'none'}")
    print("\n--- NVRTC kernel, first lines of the body\n" + "\n".join(nvrtc_kernel.splitlines()[:45]))

# %% [markdown]
# Both kernels compute one element per thread, at index `%ctaid.x * %ntid.x + %tid.x`
# (block number times block size plus thread number), with an early exit for the spare
# threads of the last block. The NVRTC kernel also keeps the `t % 1000` the C source
# wrote (the `mul`/`shr` sequence is a division by 1000 done by multiplication), which
# the LLVM route does not need for a 1-D array. They differ most in `tanh`: CUDA's
# `tanhf` uses the GPU's fast approximate instructions (`ex2.approx`, `rcp.approx`),
# while xla_teach's emitter writes its own careful polynomial, the same one on CPU and
# GPU, so that results agree across backends within a few ulp.
#
# ## 6. Running on a GPU, if there is one

# %%
from xla_teach.backends.gpu.runtime import device_available, unavailable_reason

rng = np.random.default_rng(0)
args = [rng.standard_normal(1024, dtype=np.float32) for _ in range(3)]
(expected,) = execute(SEED_HLO, args, backend="interpreter")
if device_available():
    (on_gpu,) = gpu.execute(args)
    print(f"GPU: {on_gpu:.5f}   interpreter: {expected:.5f}   match: {np.allclose(on_gpu, expected, rtol=1e-5)}")
    if routes is not None:
        from xla_teach.backends.gpu.cuda_c import run_nvrtc_fusion

        ew_args = [rng.standard_normal(1000, dtype=np.float32) for _ in range(2)]
        (ew_expected,) = execute(ELEMENTWISE_HLO, ew_args, backend="interpreter")
        (ew_llvm,) = routes.executable.execute(ew_args)
        ew_nvrtc = run_nvrtc_fusion(routes, ew_args)
        print("max |LLVM route - interpreter| =", np.abs(ew_llvm - ew_expected).max())
        print("max |NVRTC route - interpreter| =", np.abs(ew_nvrtc - ew_expected).max())
else:
    print("No GPU here, so the PTX above was compiled but not run.")
    print("Reason:", unavailable_reason())
    (on_cpu,) = cpu.execute(args)
    print(f"CPU: {on_cpu:.5f}   interpreter: {expected:.5f}")

# %% [markdown]
# ## Graded exercises: `elemental_emitter`, `reduction_loop`
#
# This chapter prepares these exercises (docs/exercises.md). The cell copies each
# starter file into `~/xla_teach_exercises/` -- never over a copy you already edited -- and grades it
# with the hidden checks, in a fenced-in process of its own. The task is in the starter's
# docstring: fill in its `TODO`s, then run the cell again. The untouched starter scores 0.

# %%
from xla_teach.exercises import grade, start

for exercise in ['elemental_emitter', 'reduction_loop']:
    mine = start(exercise)  # your copy, in ~/xla_teach_exercises/: made once, never overwritten
    report = grade(exercise, mine)
    print(mine, "->", report.feedback[0].split(": ")[-1])  # print(report): every check, and why it failed

# %% [markdown]
# ## Exercises
#
# 1. **Vector width.** Recompile the seed example with `flags.override(xla_backend_optimization_level=0)`
#    and compare `optimized_llvm_ir` and `assembly` with the `-O3` versions. Is the loop
#    still vectorized? How many instructions does the loop body have now?
# 2. **A 2-D kernel.** Compile `transpose(x)` followed by `exponential` for `x: f32[64,32]`
#    for the CPU, and find in the LLVM IR how the output index is split into a row and a
#    column. Where does the transpose appear in the loads?
# 3. **Launch dimensions.** Compile elementwise modules with 100, 1000, 10^5 and 10^7
#    elements for the GPU and tabulate `launch_dimensions`. What rule picks the block
#    count, and why are there spare threads in the last block?
