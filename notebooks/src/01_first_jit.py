# Source of notebooks/01_first_jit.ipynb -- edit here, then run scripts/build_notebooks.py.

# %% [markdown]
# # 01 · Your first jit
#
# The example every XLA introduction starts from is
#
# ```python
# def model_fn(x, y, z):
#     return tf.reduce_sum(x + y * z)
# ```
#
# Run **op by op** (eagerly), it is three kernels: a `multiply` that writes `y*z` to
# memory, an `add` that reads it back and writes `x + y*z`, and a `reduce` that reads
# that and sums it. Compiled with XLA, it is **one** kernel: each element of `x`, `y`
# and `z` is loaded once, multiplied, added and accumulated in a register, and the two
# temporary arrays never exist.
#
# In this notebook you will
#
# 1. write `model_fn` with `xla_teach.numpy` and compile it with `xla_teach.jit`;
# 2. read its HLO **before** and **after** the optimization passes;
# 3. see the three kernels become one, and **measure** the difference;
# 4. see the same fused kernel as GPU code.

# %%
import time

import numpy as np

import xla_teach as xt
import xla_teach.numpy as xnp
from xla_teach import flags
from xla_teach.tools.timeline import EagerProgram, Timeline, trace_runs


@xt.jit
def model_fn(x, y, z):
    return xnp.sum(x + y * z)


rng = np.random.default_rng(0)
x, y, z = (rng.standard_normal(8, dtype=np.float32) for _ in range(3))
print("xla_teach:", model_fn(x, y, z))
print("numpy:    ", np.sum(x + y * z))

# %% [markdown]
# ## 1. What `jit` did: tracing to HLO
#
# `model_fn(x, y, z)` did not run the Python body on the numbers. `jit` called it with
# **tracers** (a shape and a dtype, no values); every `xnp` operation appended an HLO
# instruction, and the result was a module named `jit_model_fn`, compiled for the CPU
# and cached for these input shapes. `lower` shows that module *before* any pass:

# %%
lowered = model_fn.lower(x, y, z)
print(lowered.as_text("hlo", short_metadata=True))  # short: the source file's name, not its folder

# %% [markdown]
# Read it from the top:
#
# * `%add_f32` is a small **computation** (a function) the `reduce` calls to combine
#   two partial sums: XLA's reductions take the combiner as a computation, so the same
#   `reduce` can also compute a max, a product, or a custom reduction.
# * The **ENTRY** computation is the program: three `parameter`s, then the `multiply`,
#   the `add` and the `reduce`, each with its result **shape** (`f32[8]{0}`: 8 floats,
#   layout `{0}`). `ROOT` marks the result.
# * `metadata={op_name="jit(model_fn)/mul" source_file=... source_line=...}` points every
#   instruction back at the Python line that created it (here, the cell above) -- it is
#   how profilers and error messages find your code.
#
# ## 2. After the optimization passes

# %%
compiled = lowered.compile()
print(compiled.as_text("optimized_hlo", short_metadata=True))

# %% [markdown]
# The `multiply`, `add` and `reduce` now live inside `%fused_computation`, and the
# ENTRY calls it through one `fusion` instruction of kind **`kInput`** (a reduction
# with its elementwise producers fused into its *input*). One fusion is one kernel.
# `is_scheduled=true` says the instruction order is final.
#
# Which passes did that? Every pass run is recorded; these are the ones that changed
# the module:

# %%
for record in compiled.pass_records():
    if record.changed:
        print(f"{record.pipeline:<28} {record.pass_name:<26} "
              f"{record.instructions_before:>3} -> {record.instructions_after:>3} instructions, "
              f"{record.fusions_after} fusion(s)")

# %% [markdown]
# The same story as a picture: the **compile explorer** shows every pass on the left (the
# changed ones bold), the optimized module in the middle, and what you click on the right.
# Pick `fusion` and step with `j`/`k`; click the `reduce` box for its HLO line, the Python
# line it came from, its kernel's LLVM IR and its buffer. `compiled.explore().path` is the
# same page as a file, to open in a browser.

# %%
compiled.explore()

# %% [markdown]
# ## 3. Three kernels versus one
#
# To see the program op by op, switch fusion off with XLA's own flag,
# `--xla_disable_hlo_passes=fusion,multi_output_fusion`. `flags.override` sets it for
# a block of code. The flags are part of `jit`'s cache key, so this compiles a second
# executable (the cache info shows two misses).

# %%
with flags.override(xla_disable_hlo_passes="fusion,multi_output_fusion"):
    unfused = model_fn.lower(x, y, z).compile()
print(unfused.as_text("optimized_hlo", print_metadata=False))
print(model_fn.cache_info())


def kernels(compiled_fn):
    """The ENTRY instructions that run code (parameters, constants and bitcasts do not)."""
    module = compiled_fn.executable.module
    return [i.name for i in module.entry.instructions if i.opcode not in ("parameter", "constant", "bitcast")]


print("unfused kernels:", kernels(unfused))
print("fused kernels:  ", kernels(compiled))

# %% [markdown]
# The compiler can also say what each version costs before running anything.
# `cost_analysis()` counts the floating-point operations and the **bytes accessed**
# (read and written) by every kernel, as XLA's `HloCostAnalysis` does. The arithmetic
# is identical; the memory traffic is not:

# %%
for label, c in (("fused", compiled), ("unfused", unfused)):
    cost = c.cost_analysis()
    print(f"{label:<8} flops {cost['flops']:>5.0f}   bytes accessed {cost['bytes accessed']:>5.0f}")

# %% [markdown]
# For 8 floats nobody cares. For 2^22 floats (16 MiB per array) the unfused program
# reads `x, y, z` (3 arrays), writes and reads back `y*z` and `x + y*z` (4 more): about
# 7 arrays of traffic against 3. Summing is so cheap that the time is the traffic.
#
# ## 4. Measured
#
# We run the same function three ways on 2^22 floats:
#
# * **eager**: op by op, as an eager framework dispatches it. `EagerProgram` compiles
#   each HLO instruction of the *unoptimized* module as its own one-op program, runs
#   them one after another, and passes NumPy arrays between them;
# * **compiled, unfused**: one executable, three kernels;
# * **compiled, fused**: one executable, one kernel.
#
# A `Timeline` (a profiler) records every kernel; we warm each program up once, then
# keep the best of several runs (the machine may be busy: expect noise, and rerun the
# cell to see how much the numbers move).

# %%
N = 1 << 22
big = [rng.standard_normal(N, dtype=np.float32) for _ in range(3)]
fused_big = model_fn.lower(*big).compile()
with flags.override(xla_disable_hlo_passes="fusion,multi_output_fusion"):
    unfused_big = model_fn.lower(*big).compile()
eager_big = EagerProgram(model_fn.lower(*big).module, "cpu")

RUNS = 7
timeline = Timeline()
for label, c in (("fused", fused_big), ("unfused", unfused_big)):
    c.executable.execute(big)  # warm-up: page faults, thread start-up
    trace_runs(c.executable, big, num_runs=RUNS, timeline=timeline, track=label)
eager_big.run(big)
with timeline.on_track("eager"):
    for _ in range(RUNS):
        with timeline.run():
            eager_big.run(big, profiler=timeline)

print(timeline.summary())

# %% [markdown]
# Each row is one kernel (for the eager track, one dispatched op). Note the extra small
# `reduce` in the compiled programs: for a reduction this large, the CPU pipeline's
# `tree_reduction_rewriter` splits the sum into 64 partial sums (so that several
# cores can share the work) and a tiny second reduction of those 64 values. The fused
# program is still one big kernel over the data.
#
# Now the whole runs, best of `RUNS`:

# %%
def best_ms(track):
    return 1e3 * min(e.seconds for e in timeline.events if e.kind == "run" and e.track == track)


numpy_ms = float("inf")
for _ in range(RUNS):
    start = time.perf_counter()
    np.sum(big[0] + big[1] * big[2])
    numpy_ms = min(numpy_ms, 1e3 * (time.perf_counter() - start))

times = {track: best_ms(track) for track in ("eager", "unfused", "fused")}
for track, ms in times.items():
    print(f"{track:<8} {ms:8.2f} ms   {times[track] / times['fused']:5.1f}x the fused time")
print(f"{'numpy':<8} {numpy_ms:8.2f} ms   (NumPy runs op by op too)")
bytes_ratio = unfused_big.cost_analysis()["bytes accessed"] / fused_big.cost_analysis()["bytes accessed"]
print(f"\nunfused / fused: time {times['unfused'] / times['fused']:.2f}x, bytes accessed {bytes_ratio:.2f}x")
results = [float(c.executable.execute(big)[0]) for c in (fused_big, unfused_big)]
print("fused and unfused agree:", np.isclose(results[0], results[1], rtol=1e-4), results)

# %% [markdown]
# The same numbers as a picture: the time of each way, and next to it the bytes each compiled
# program moves (from `cost_analysis`, known before anything runs).

# %%
try:
    import matplotlib.pyplot as plt
except ImportError:
    plt = None
    print("matplotlib is not installed: the table above is the chart")
if plt is not None:
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 2.8), gridspec_kw={"width_ratios": [3, 2]})
    labels = ["eager", "numpy", "unfused", "fused"]
    values = [times["eager"], numpy_ms, times["unfused"], times["fused"]]
    left.barh(labels, values, color=["#7f7f7f", "#bcbd22", "#ff7f0e", "#1f77b4"])
    for y, ms in enumerate(values):
        left.text(ms, y, f" {ms:.1f} ms", va="center", fontsize=11)
    left.set_xlim(0, max(values) * 1.25)
    left.set_xlabel(f"best of {RUNS} runs, 2^22 floats (this machine)", fontsize=11)
    moved = [c.cost_analysis()["bytes accessed"] / 2**20 for c in (unfused_big, fused_big)]
    right.bar(["unfused", "fused"], moved, color=["#ff7f0e", "#1f77b4"])
    for i, mib in enumerate(moved):
        right.text(i, mib, f"{mib:.0f} MiB", ha="center", va="bottom", fontsize=11)
    right.set_ylabel("bytes accessed (MiB)", fontsize=11)
    right.set_ylim(0, max(moved) * 1.2)
    fig.suptitle("sum(x + y * z): time follows the bytes moved", fontsize=12)
    fig.tight_layout()
    plt.show()

# %% [markdown]
# What to take away (your numbers will differ):
#
# * Compare **unfused / fused** time with the ratio of bytes accessed (about 7/3). Every
#   kernel here is limited by memory bandwidth, not by arithmetic, so time follows bytes;
#   caches, page faults and how the kernels share the cores move the measured ratio
#   around that figure.
# * **eager** is slower still: besides the same extra traffic, every op pays a dispatch
#   from Python and writes a freshly allocated output array (the compiled program
#   reuses buffers it planned at compile time -- notebook 06).
# * In general the two sums agree only up to rounding: floating-point addition is not
#   associative, and a compiler may change the order of a reduction (the tree rewrite
#   above does).
#
# ## 5. The same program for a GPU
#
# Compiling for `backend="gpu"` needs no GPU: the fused kernel becomes PTX text (the
# GPU's assembly language). Only running it needs a device.

# %%
from xla_teach.backends.gpu.runtime import device_available, unavailable_reason

gpu_fn = xt.jit(model_fn.__wrapped__, backend="gpu")
gpu_compiled = gpu_fn.lower(x, y, z).compile()
ptx = gpu_compiled.as_text("ptx")
print("GPU kernels:", [line.split("(")[0].split()[-1] for line in ptx.splitlines() if ".entry" in line])
print("\n".join(ptx.splitlines()[:20]))
if device_available():
    print("GPU result:", gpu_fn(x, y, z), " CPU result:", model_fn(x, y, z))
else:
    print(f"\nNo GPU here ({unavailable_reason()}): the PTX was produced but not run.")

# %% [markdown]
# ## Exercises
#
# 1. **Predict, then check.** For `xnp.sum(xnp.exp(x) * y)`, predict the HLO before
#    optimization, the number of kernels with and without fusion, and what
#    `cost_analysis()` reports as `transcendentals`. Check each prediction.
# 2. **Size matters.** Repeat the measurement of section 4 for `N = 2**12, 2**16, 2**20,
#    2**24` and plot unfused/fused against `N`. Where does the ratio approach 7/3, and
#    why is it smaller for small arrays? (Hint: cache sizes, `lscpu`.)
# 3. **Two outputs.** Change the function to return `(xnp.sum(x + y * z), xnp.max(x))`.
#    How many kernels does the optimized module have? Which pass merged what
#    (`pass_records()` and the `notes` of the fusion passes; notebook 04 explains them)?
# 4. **Recompilation.** Call `model_fn` with arrays of 8, 9 and 8 elements, then with
#    `float64` arrays. Predict `model_fn.cache_info()` after each call and read
#    `model_fn.compile_log`. Why does a training loop with a ragged last batch compile
#    twice?
# 5. **Dumps.** Set `flags.override(xla_dump_to="some/folder")`, call a fresh
#    `xt.jit(model_fn.__wrapped__)`, and find the files holding the two HLO texts you
#    printed above (notebook 07 explains the file names).
