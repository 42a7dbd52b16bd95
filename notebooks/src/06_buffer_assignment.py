# Source of notebooks/06_buffer_assignment.ipynb -- edit here, then run scripts/build_notebooks.py.

# %% [markdown]
# # 06 · Buffer assignment and memory
#
# Every array an instruction produces needs bytes somewhere. Before emitting code, the
# backend decides **where each value lives**: XLA's *buffer assignment*. It works on
# the module's **schedule** (the order the kernels will run in, chosen by the memory
# scheduler) and sorts values into kinds of allocation:
#
# | allocation | holds |
# |---|---|
# | parameter | the arguments, in the caller's memory (never copied) |
# | constant | literal data compiled into the program |
# | output | the result the caller receives |
# | preallocated-temp | **all temporaries, packed into one arena** |
#
# Two temporaries whose **live ranges** (from the instruction that writes them to the
# last instruction that reads them) do not overlap may share the same bytes, and an
# elementwise kernel may write its result **in place** over an operand that dies
# there. A *heap simulator* packs the temporaries into the arena, largest first. The
# result: a program needs far less memory than one buffer per value.

# %%
from xla_teach import execute, flags
from xla_teach.api import compile_module

HLO = """
HloModule mlp_block
ENTRY main {
  x = f32[128,64] parameter(0)
  w1 = f32[64,256] parameter(1)
  w2 = f32[256,64] parameter(2)
  h = f32[128,256] dot(x, w1), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  zero = f32[] constant(0)
  zeros = f32[128,256] broadcast(zero), dimensions={}
  r = f32[128,256] maximum(h, zeros)
  o = f32[128,64] dot(r, w2), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  s = f32[128,64] add(o, x)
  t = f32[128,64] tanh(s)
  ROOT out = f32[128,64] multiply(t, x)
}
"""
# Without fusion every instruction has its own result buffer: more to look at.
with flags.override(xla_disable_hlo_passes="fusion"):
    unfused = compile_module(HLO, "cpu")
print(unfused.module.entry.to_text())

# %% [markdown]
# ## 1. The buffer assignment, as XLA prints it
#
# This is the text XLA dumps as `*-buffer-assignment.txt`: one block per allocation,
# listing the values it holds with their offset inside it.

# %%
print(unfused.artifacts.buffer_assignment_text)

# %% [markdown]
# Read the `preallocated-temp` arena: `h` and `r` share offset 0 (`r = max(h, 0)` is
# elementwise and `h` dies there, so `r` is written **in place**), and later `o`, `s`
# and `t` reuse the bytes that `zeros` held, because `zeros` was dead by then.
#
# ## 2. The same, as objects
#
# `executable.buffer_assignment` is a `ModuleBufferAssignment` (see
# `xla_teach/passes/scheduling/buffer_assignment.py`): one `BufferAssignment` per
# sequential computation. Each holds the schedule (`order`), the values, their live
# ranges in schedule steps, the allocations, and the in-place decisions.

# %%
ba = unfused.buffer_assignment.entry
print("schedule:", " -> ".join(instr.name for instr in ba.order))
print()
print(f"{'value':<8} {'allocation':<18} {'offset':>8} {'bytes':>8}   live steps")
for value in ba.values:
    buffer = ba.slice(value.instruction, value.index)
    start, end = ba.live_ranges[value.id]
    print(f"{value.label():<8} {buffer.allocation.kind + ' #' + str(buffer.allocation.index):<18} "
          f"{buffer.offset:>8} {buffer.size:>8}   {start:>2} .. {end}")
print("\nin place:", ", ".join(f"{instr} over {operand}" for instr, operand in ba.in_place))

# %% [markdown]
# ## 3. A liveness chart
#
# Time (schedule steps) runs left to right; the arena's bytes run bottom to top. Each
# box is one temporary value, from the step that writes it to the last step that reads
# it; its height is its size. Boxes may share bytes only when they do not overlap in
# time (a value written in place starts exactly where its operand ends). That is the
# puzzle the heap simulator solves.

# %%
temp = ba.temp_allocation
boxes = []  # (name, first step, last step, offset, size)
for value, offset in temp.values:
    start, end = ba.live_ranges[value.id]
    boxes.append((value.label(), start, end, offset, value.size))
boxes.sort(key=lambda box: (box[1], box[3]))

try:
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle
except ImportError:
    plt = None

if plt is not None:
    fig, ax = plt.subplots(figsize=(9, 4))
    colors = plt.get_cmap("tab10")
    for i, (name, start, end, offset, size) in enumerate(boxes):
        ax.add_patch(Rectangle((start, offset / 1024), max(end - start, 0.5), size / 1024, alpha=0.6,
                               facecolor=colors(i % 10), edgecolor="black"))
        ax.text(start + 0.1, (offset + size / 2) / 1024, name, va="center", fontsize=9)
    ax.axhline(temp.size / 1024, color="red", linestyle="--", label=f"arena: {temp.size // 1024} KiB")
    ax.axhline(ba.naive_temp_bytes() / 1024, color="gray", linestyle=":",
               label=f"one buffer per value: {ba.naive_temp_bytes() // 1024} KiB")
    ax.set_xlim(-0.5, len(ba.order) - 0.5)
    ax.set_ylim(0, ba.naive_temp_bytes() / 1024 * 1.05)
    ax.set_xticks(range(len(ba.order)))
    ax.set_xticklabels([instr.name for instr in ba.order], rotation=45, ha="right")
    ax.set_xlabel("schedule step (the instruction that runs)")
    ax.set_ylabel("offset in the temp arena (KiB)")
    ax.set_title(f"temporaries of {unfused.module.name} (fusion disabled)")
    ax.legend(loc="upper right")
    fig.tight_layout()
    plt.show()
else:
    print("matplotlib is not installed: a text chart instead (# = live, one column per step)")
    for name, start, end, offset, size in boxes:
        row = "".join("#" if start <= step <= end else "." for step in range(len(ba.order)))
        print(f"{name:<8} {row}  offset {offset:>7}, {size:>7} bytes")

# %% [markdown]
# ## 4. How much memory was saved, and what fusion does to it

# %%
fused = compile_module(HLO, "cpu")
print(f"{'':<10} {'ops run':>8} {'temp arena':>12} {'one buffer per value':>22}")
for label, executable in (("unfused", unfused), ("fused", fused)):
    assignment = executable.buffer_assignment
    ops_run = sum(1 for i in executable.module.entry.instructions if i.opcode not in ("parameter", "constant"))
    print(f"{label:<10} {ops_run:>8} {assignment.temp_bytes():>12,} {assignment.naive_temp_bytes():>22,}")
print()
print(fused.artifacts.buffer_assignment_text)

# %% [markdown]
# Fusion removes most temporaries altogether: the values inside a fusion live in
# registers, so only the fusion's result needs a buffer. Here just one temporary is
# left, the `f32[128,256]` hidden layer that the second matrix multiply reads.
#
# The **memory scheduler** chose the order in the first place, trying several
# orderings and keeping the one with the smallest peak of live bytes; its note says
# which won:

# %%
for executable in (unfused, fused):
    record = next(r for r in executable.recorder.records if r.pass_name == "hlo-memory-scheduler")
    print(record.notes)

# %% [markdown]
# Here every candidate order gives the same peak, so the choice does not show. In the next
# module it does. `m1 = p2 * p1` is read by `abs` and by `m2`, and `abs` is read last, by the
# root. Post-order (and, here, the list scheduler) computes `m1` and `abs` first, then
# `m0` and `m2`, so `abs` waits, holding its 256 KiB, while `m1`, `m0` and `m2` are all alive.
# The depth-first order that visits the larger operand first computes `m2` (with `m1` and `m0`)
# before `abs`, and `m0` dies before `abs` is written.

# %%
from xla_teach.hlo.text.parser import parse_hlo
from xla_teach.passes.scheduling.hlo_memory_scheduler import (
    defined_bytes,
    dfs_by_size_schedule,
    list_schedule,
    simulate_peak,
)

ORDER_MATTERS = """
HloModule order_matters
ENTRY main {
  p0 = f32[256,256] parameter(0)
  p1 = f32[256,256] parameter(1)
  p2 = f32[256,256] parameter(2)
  m0 = f32[256,256] multiply(p0, p1)
  m1 = f32[256,256] multiply(p2, p1)
  m2 = f32[256,256] multiply(m1, m0)
  abs = f32[256,256] abs(m1)
  ROOT out = f32[256,256] multiply(abs, m2)
}
"""
with flags.override(xla_disable_hlo_passes="fusion,multi_output_fusion"):
    ordered = compile_module(ORDER_MATTERS, "cpu")
print(next(r for r in ordered.recorder.records if r.pass_name == "hlo-memory-scheduler").notes)

comp = parse_hlo(ORDER_MATTERS).entry
candidates = {"post-order": comp.post_order(), "list": list_schedule(comp), "dfs-by-size": dfs_by_size_schedule(comp)}


def live_bytes(order):
    """Bytes alive while each step of ``order`` runs: what it writes, and every value written
    before that a later (or this) step still reads. Parameters are the caller's: not counted."""
    last = {i.unique_id: max((order.index(u) for u in i.users), default=len(order)) for i in order}
    return [sum(defined_bytes(i) for i in order[:n + 1] if last[i.unique_id] >= n) for n in range(len(order))]


for name, order in candidates.items():
    print(f"{name:<12} peak {simulate_peak(order) // 1024:4d} KiB: {' -> '.join(i.name for i in order)}")

# %%
try:
    import matplotlib.pyplot as plt
except ImportError:
    plt = None
    print("matplotlib is not installed: the peaks are printed above")
if plt is not None:
    fig, ax = plt.subplots(figsize=(8, 3.2))
    for (name, order), style in zip(candidates.items(), ("-", "--", ":"), strict=True):
        curve = [b / 1024 for i, b in zip(order, live_bytes(order), strict=True) if i.opcode != "parameter"]
        assert max(curve) * 1024 == simulate_peak(order)
        ax.step(range(1, len(curve) + 1), curve, style, where="mid", linewidth=2.5,
                label=f"{name} (peak {max(curve):.0f} KiB)")
    ax.set_xticks(range(1, len(curve) + 1))
    ax.set_xlabel("step (an instruction runs)", fontsize=11)
    ax.set_ylabel("live temporaries (KiB)", fontsize=11)
    ax.set_title("the same module in three orders: the scheduler keeps the smallest peak", fontsize=12)
    ax.legend(fontsize=10)
    fig.tight_layout()
    plt.show()

# %% [markdown]
# And, as always, moving bytes around must not change the answer:

# %%
import numpy as np

rng = np.random.default_rng(0)
args = [rng.standard_normal(shape, dtype=np.float32) for shape in ((128, 64), (64, 256), (256, 64))]
(reference,) = execute(HLO, args, backend="interpreter")
for label, executable in (("unfused", unfused), ("fused", fused)):
    (got,) = executable.execute(args)
    print(f"{label}: max |cpu - interpreter| = {np.abs(got - reference).max():.2e}")

# %% [markdown]
# ## Graded exercise: `liveness`
#
# This chapter prepares this exercise (docs/exercises.md). The cell copies the
# starter file into `~/xla_teach_exercises/` -- never over a copy you already edited -- and grades it
# with the hidden checks, in a fenced-in process of its own. The task is in the starter's
# docstring: fill in its `TODO`s, then run the cell again. The untouched starter scores 0.

# %%
from xla_teach.exercises import grade, start

for exercise in ['liveness']:
    mine = start(exercise)  # your copy, in ~/xla_teach_exercises/: made once, never overwritten
    report = grade(exercise, mine)
    print(mine, "->", report.feedback[0].split(": ")[-1])  # print(report): every check, and why it failed

# %% [markdown]
# ## Exercises
#
# 1. **Schedule matters.** Write a module where two independent branches each make a
#    large temporary and are combined at the end (`add(exp(a), exp(b))` with `a` and `b`
#    computed from `x`). Compile it with fusion disabled, draw its liveness chart, and
#    compare the arena with the sum of the temporaries. Which order of the two branches
#    would need more memory, and why did the scheduler not choose it?
# 2. **In place.** Why can `r = maximum(h, zeros)` be written over `h` but a `transpose`
#    never over its operand? Find the rule in `can_run_in_place` and construct a module
#    where an elementwise op could run in place but does not, because its operand is
#    still needed later.
# 3. **Heap packing.** `pack_blocks` in `heap_simulator.py` places blocks largest first,
#    each into the smallest gap that fits. Build a small list of `BufferBlock`s for which
#    placing them in *schedule* order (first come, first placed) needs a bigger arena
#    than largest-first.
