# Source of notebooks/04_fusion.ipynb -- edit here, then run scripts/build_notebooks.py.

# %% [markdown]
# # 04 · Fusion
#
# Without fusion, every HLO instruction becomes its own **kernel**: a loop that reads
# its operands from memory and writes its result back to memory. For
# `tanh(x + y * z) - x` that is four loops and three temporary arrays written and
# read again. A modern CPU or GPU computes far faster than it moves bytes, so those
# round trips through memory, not the arithmetic, set the speed.
#
# **Fusion** merges a producer into its consumer: one kernel computes the whole
# expression element by element, and the intermediate values never leave the
# registers. It is the single most important optimization in XLA.
#
# This notebook shows
#
# 1. the three kinds of fusion XLA makes (`kLoop`, `kInput`, `kOutput`);
# 2. how the fusion pass decides, including the candidates it **rejects** and why;
# 3. multi-output fusion, on softmax;
# 4. why it matters, **measured**: the same program fused and unfused.

# %%
import time

import numpy as np

from xla_teach import flags
from xla_teach.api import compile_module


def describe_fusions(executable):
    """One line per fusion of the optimized ENTRY: name, kind, and the opcodes fused inside."""
    for instr in executable.module.entry.instructions:
        if instr.opcode == "fusion":
            inside = [i.opcode for i in instr.fused_computation.instructions if i.opcode != "parameter"]
            print(f"{instr.name:<32} {instr.fusion_kind:<8} {' '.join(inside)}")


def fusion_notes(executable, pass_name="fusion"):
    """The notes of the first run of `pass_name`: what it fused and what it refused, and why."""
    record = next(r for r in executable.recorder.records if r.pass_name == pass_name)
    return record.notes


# %% [markdown]
# ## 1. The kinds of fusion
#
# **`kLoop`**: a loop over the output array; every fused instruction is computed per
# output element (elementwise ops, broadcasts, reshapes, transposes, slices...).

# %%
LOOP_HLO = """
HloModule loop_fusion
ENTRY main {
  x = f32[4096] parameter(0)
  y = f32[4096] parameter(1)
  z = f32[4096] parameter(2)
  m = f32[4096] multiply(y, z)
  a = f32[4096] add(x, m)
  t = f32[4096] tanh(a)
  ROOT s = f32[4096] subtract(t, x)
}
"""
loop = compile_module(LOOP_HLO, "cpu")
describe_fusions(loop)
print()
print(loop.module.to_text(print_metadata=False))

# %% [markdown]
# **`kInput`**: a reduction is the *hero* at the root, and elementwise producers are
# fused into its input. The loop runs over the reduction's **input**, and each output
# element accumulates many input elements. The seed example `reduce_sum(x + y*z)`
# becomes one `kInput` fusion.
#
# **`kOutput`**: a `dot` (matrix multiply) with an elementwise *epilogue* such as
# bias + ReLU. The epilogue is applied to each output element as the dot produces
# it, instead of in a second pass over the result.

# %%
INPUT_HLO = """
HloModule input_fusion
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
OUTPUT_HLO = """
HloModule output_fusion
ENTRY main {
  x = f32[16,32] parameter(0)
  w = f32[32,8] parameter(1)
  b = f32[8] parameter(2)
  d = f32[16,8] dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  bias = f32[16,8] broadcast(b), dimensions={1}
  pre = f32[16,8] add(d, bias)
  zero = f32[] constant(0)
  zeros = f32[16,8] broadcast(zero), dimensions={}
  ROOT relu = f32[16,8] maximum(pre, zeros)
}
"""
kinds = {"kLoop": loop}
for kind, text in (("kInput", INPUT_HLO), ("kOutput", OUTPUT_HLO)):
    executable = compile_module(text, "cpu")
    kinds[kind] = executable
    print(f"--- {executable.module.name}")
    describe_fusions(executable)
    print(executable.module.entry.to_text(print_metadata=False), "\n")

# %% [markdown]
# The three kinds side by side, as the optimized modules' graphs: each grey cluster is a
# fusion's computation (one kernel), with the instructions it holds; the boxes outside are
# the parameters it reads.

# %%
from IPython.display import HTML, display

from xla_teach.tools.render import have_dot, render_svg, svg_for_inline

if have_dot():
    pictures = "".join(f'<div style="flex:1;min-width:0">{svg_for_inline(render_svg(e.module.to_text(), title=kind))}'
                       "</div>" for kind, e in kinds.items())
    display(HTML('<style>.fusion-kinds svg {max-width: 100%; height: auto}</style>'
                 f'<div class="fusion-kinds" style="display:flex;gap:1em;align-items:flex-start">{pictures}</div>'))
else:
    print("Graphviz's `dot` is not available: the texts above are the pictures (apt-get install graphviz).")

# %% [markdown]
# ## 2. Decisions, and rejected candidates
#
# The fusion pass visits consumers from the root upwards and asks, for each operand
# (producer), *may I fuse it here?* The rules are in
# `xla_teach/passes/fusion/fusion_rules.py`; every answer is written into the pass's
# notes. Softmax is a good test: `exp(x - max(x))` is needed by **two** consumers,
# the sum and the final divide.
#
# One pass runs before instruction fusion and would take this example away from it:
# **row fusion** turns a whole softmax into a single kernel (section 3 ends with it). To
# watch instruction fusion and multi-output fusion decide on their own, it is switched
# off here with `--xla_disable_hlo_passes=row-fusion`.

# %%
SOFTMAX_HLO = """
HloModule softmax
max_f32 {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT m = f32[] maximum(a, b)
}
add_f32 {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY main {
  x = f32[64,128] parameter(0)
  ninf = f32[] constant(-inf)
  row_max = f32[64] reduce(x, ninf), dimensions={1}, to_apply=max_f32
  max_b = f32[64,128] broadcast(row_max), dimensions={0}
  shifted = f32[64,128] subtract(x, max_b)
  e = f32[64,128] exponential(shifted)
  zero = f32[] constant(0)
  row_sum = f32[64] reduce(e, zero), dimensions={1}, to_apply=add_f32
  sum_b = f32[64,128] broadcast(row_sum), dimensions={0}
  ROOT softmax = f32[64,128] divide(e, sum_b)
}
"""
with flags.override(xla_disable_hlo_passes="row-fusion"):
    softmax = compile_module(SOFTMAX_HLO, "cpu")
notes = fusion_notes(softmax)
print("fused:")
for note in notes:
    if note.startswith("fused"):
        print("   ", note)
print("rejected:")
for note in notes:
    if not note.startswith("fused"):
        print("   ", note)

# %% [markdown]
# Read the reasons. Two matter most:
#
# * **"exponential is expensive and has other users (never duplicated)"**. Fusing a
#   producer that has other users means computing it twice: once inside the fusion,
#   once for the other users. For a cheap op (an add, a broadcast) XLA accepts that
#   duplication; for `exp` it would double the expensive work, so the pass refuses.
# * **"a reduction is not recomputed per output element of its consumer"**. Fusing the
#   row sum into the divide would recompute a 128-element sum for every one of the
#   128 outputs of its row.
#
# Parameters are never fused: they are inputs, not computations.
#
# Drawn: the softmax module right after instruction fusion, with the producers it refused
# outlined in red (the reasons are the notes above). Each grey cluster is one fusion.

# %%
import re

from xla_teach.hlo.text.parser import parse_hlo

refused = {m.group(1) for note in notes if (m := re.match(r"not fusing (\S+) into", note))}
after_fusion = next(r for r in softmax.recorder.records if r.pass_name == "fusion").after
# a refused producer then became (part of) a fusion of its own, under its name with a suffix
outlined = sorted(i.name for i in parse_hlo(after_fusion).instructions() if i.name.split(".")[0] in refused - {"x"})
if have_dot():
    display(HTML(svg_for_inline(render_svg(after_fusion, title="after fusion: refused producers outlined",
                                           highlight=outlined))))
print("outlined:", outlined)

# %% [markdown]
# ## 3. Multi-output fusion
#
# After instruction fusion, softmax is still several kernels, and the `exp` result is
# written to memory, then read by the sum kernel and read again by the divide kernel.
# **Multi-output fusion** fuses the `exp` kernel into the sum kernel *and keeps its
# value as an extra output*: the reduction kernel computes `exp(x - max)`, adds it up
# and stores it on the way. One kernel and one full read of the array fewer.

# %%
record_fusion = next(r for r in softmax.recorder.records if r.pass_name == "fusion")
record_mof = next(r for r in softmax.recorder.records if r.pass_name == "multi_output_fusion")
print(f"after fusion:              {record_fusion.fusions_after} fusions")
print(f"after multi_output_fusion: {record_mof.fusions_after} fusions")
for note in record_mof.notes:
    print("  note:", note)
print()
print(softmax.module.to_text(print_metadata=False))

# %% [markdown]
# The multi-output fusion's root is a `tuple` of the row sum and the `exp` array; the
# ENTRY takes both apart with `get-tuple-element`. And it is still softmax:

# %%
rng = np.random.default_rng(0)
logits = rng.standard_normal((64, 128), dtype=np.float32)
(probabilities,) = softmax.execute([logits])
expected = np.exp(logits - logits.max(axis=1, keepdims=True))
expected /= expected.sum(axis=1, keepdims=True)
print("max |cpu - numpy| =", np.abs(probabilities - expected).max())
print("rows sum to one:", np.allclose(probabilities.sum(axis=1), 1.0, atol=1e-5))

# %% [markdown]
# With row fusion back on (the default), the whole softmax is **one** `kCustom` fusion: a
# row is read from memory once, reduced twice from the cache, and written once. The compile
# explorer below steps through every pass of that compilation: pick `row-fusion` on the
# left to see what it moved into the fusion, or click a box for its HLO line and kernel.

# %%
from xla_teach.tools.explorer import explore

softmax_rows = compile_module(SOFTMAX_HLO, "cpu")
describe_fusions(softmax_rows)
explore(softmax_rows)

# %% [markdown]
# The row kernel is written as **vector code** by the emitter itself
# (`backends/llvm/vector_emitter.py`), as XLA's CPU reduction emitter does: its LLVM IR works
# on `<8 x float>` before LLVM has optimized anything, keeps two vectors of running maxima,
# and stores each row's `exp` in a small row cache for the division. A module of such kernels
# needs none of LLVM's loop vectorizer, so it gets a shorter, cheaper pipeline: the optimized IR
# has no `vector.body` loop of the vectorizer's.

# %%
row_ir = softmax_rows.artifacts.llvm_ir
print("<8 x float> values in the emitted IR:", row_ir.count("<8 x float>"))
print("loops the vectorizer made:", softmax_rows.artifacts.optimized_llvm_ir.count("vector.body:"))
loop = row_ir.find(".row.ways.body:")  # the max loop: two vectors a step
print(row_ir[row_ir.rfind("\n", 0, loop) + 1:][:1500])

# %% [markdown]
# ## 4. Why it matters: memory bandwidth, measured
#
# Take `(x + y*z) * x - y` on 2^22 floats (16 MiB per array): four cheap operations, so
# the arithmetic costs almost nothing next to the memory traffic. Compile it twice: with
# fusion, and with `--xla_disable_hlo_passes=fusion`. Both compute the same thing with
# the same instructions; only the number of trips through memory differs.
#
# A profiler object passed to `execute` is told about every kernel (thunk) that runs:
# its name, start and end times and the bytes it reads and writes. We keep, for each
# kernel, its best time over several runs (the machine may be busy: expect noise).

# %%
N = 1 << 22
CHAIN_HLO = f"""
HloModule chain
ENTRY main {{
  x = f32[{N}] parameter(0)
  y = f32[{N}] parameter(1)
  z = f32[{N}] parameter(2)
  m = f32[{N}] multiply(y, z)
  a = f32[{N}] add(x, m)
  p = f32[{N}] multiply(a, x)
  ROOT s = f32[{N}] subtract(p, y)
}}
"""

fused = compile_module(CHAIN_HLO, "cpu")
with flags.override(xla_disable_hlo_passes="fusion"):
    unfused = compile_module(CHAIN_HLO, "cpu")


class KernelProfile:
    """Best time and bytes of every kernel (thunk), over all the runs it is given."""

    def __init__(self):
        self.best = {}  # kernel name -> (seconds, bytes)

    def record(self, name, kind, start, end, nbytes):
        seconds = end - start
        if name not in self.best or seconds < self.best[name][0]:
            self.best[name] = (seconds, nbytes)


def profile_and_time(executable, args, runs=7):
    """(per-kernel profile, best wall time of one whole execution)."""
    executable.execute(args)  # warm-up: first-touch page faults, thread start-up
    profile, best = KernelProfile(), float("inf")
    for _ in range(runs):
        start = time.perf_counter()
        executable.execute(args, profiler=profile)
        best = min(best, time.perf_counter() - start)
    return profile, best


args = [rng.standard_normal(N, dtype=np.float32) for _ in range(3)]
timings = {}
for label, executable in (("fused", fused), ("unfused", unfused)):
    profile, timings[label] = profile_and_time(executable, args)
    total_bytes = sum(nbytes for _, nbytes in profile.best.values())
    print(f"{label}: {len(profile.best)} kernel(s), {total_bytes / 2**20:.0f} MiB moved, "
          f"{timings[label] * 1e3:.2f} ms per execution")
    for name, (seconds, nbytes) in profile.best.items():
        print(f"    {name:<24} {nbytes / 2**20:5.0f} MiB {seconds * 1e3:8.2f} ms {nbytes / seconds / 1e9:7.1f} GB/s")

# %% [markdown]
# The unfused program moves three times as many bytes: each intermediate is written
# once and read once more. Each kernel reaches roughly the same GB/s, fused or not: they
# are **memory-bound**, their time is their bytes divided by the bandwidth, so every
# extra trip through memory costs its full price.

# %%
ratio = timings["unfused"] / timings["fused"]
print(f"fused   : {timings['fused'] * 1e3:7.2f} ms")
print(f"unfused : {timings['unfused'] * 1e3:7.2f} ms")
print(f"unfused / fused = {ratio:.1f}x")

(out_fused,), (out_unfused,) = fused.execute(args), unfused.execute(args)
print("same results:", np.array_equal(out_fused, out_unfused))

# %% [markdown]
# So the time ratio follows the byte ratio (about 3x here, more or less with noise and
# with the extra work of touching three fresh temporary arrays). Do not trust one
# measurement: rerun the cells, and try other sizes (at 2^12 elements everything fits
# in cache and the difference shrinks).
#
# Not every kernel is memory-bound. Expensive ops (`exponential`, `tanh`) do real
# arithmetic per byte; then the speed also depends on the code the backend emits,
# which exercise 3 and notebook 05 look into.

# %% [markdown]
# ## Graded exercises: `fusion_decision`, then the `capstone`
#
# This chapter prepares these exercises (docs/exercises.md). The cell copies each
# starter file into `~/xla_teach_exercises/` -- never over a copy you already edited -- and grades it
# with the hidden checks, in a fenced-in process of its own. The task is in the starter's
# docstring: fill in its `TODO`s, then run the cell again. The untouched starter scores 0.
#
# The `capstone` ends the track that `dce`, `cse` and `algsimp_rule` (chapter 03) began: copy your
# four graded pieces into it and put them in a pipeline, in the order that leaves the fewest
# kernels. It is graded on small models traced from Python that you have not seen.

# %%
from xla_teach.exercises import grade, start

for exercise in ['fusion_decision', 'capstone']:
    mine = start(exercise)  # your copy, in ~/xla_teach_exercises/: made once, never overwritten
    report = grade(exercise, mine)
    print(mine, "->", report.feedback[0].split(": ")[-1])  # print(report): every check, and why it failed

# %% [markdown]
# ## Exercises
#
# 1. **Predict, then check.** For `relu(x) * sigmoid(y) + x` where `sigmoid` is written
#    as `logistic`, predict how many fusions the CPU pipeline makes and of which kind.
#    Compile it and compare with `describe_fusions`. Which notes explain any surprise?
# 2. **Duplication.** In the softmax module, replace `exponential` by `negate` (a cheap
#    op). Does the fusion pass now duplicate it into both consumers? Find the note that
#    says so, and count the kernels.
# 3. **Bandwidth.** Repeat the measurement for sizes 2^12, 2^16, 2^20 and 2^22 and plot
#    the ratio against the size; explain the curve with your CPU's cache sizes (`lscpu`).
#    Then measure `LOOP_HLO` (with its `tanh`) at 2^22 elements the same way, and find the
#    unfused kernel with the fewest GB/s. Read `unfused.artifacts.buffer_assignment_text`
#    (which kernels run *in place*?) and look for `noalias` on that kernel's function in
#    `unfused.artifacts.llvm_ir`: what does it stop LLVM from doing? (Notebooks 05 and 06 help.)
