# Answer key for notebook 06 (Buffer assignment and memory) -- for teachers; not in the student
# kit. Run it: every answer is computed and checked with an assert on this checkout.

# %% [markdown]
# # 06 · Buffer assignment and memory -- answer key
#
# **Goals.** Students read a buffer assignment (allocations, offsets, in-place reuse), relate
# live ranges to the schedule, and see why the schedule sets the peak memory.
#
# **Time.** 1 hour in class, 1.5 hours of exercises (plus `liveness`). **Where students
# stall:** inclusive live ranges (a value is live from the step that writes it to the last
# step that reads it, both included), and why the output and parameters are not in the arena.

# %%
from xla_teach import flags, parse_hlo
from xla_teach.api import compile_module
from xla_teach.passes.scheduling.heap_simulator import BufferBlock, pack_blocks
from xla_teach.passes.scheduling.hlo_memory_scheduler import simulate_peak
from xla_teach.passes.scheduling.in_place import can_run_in_place

# %% [markdown]
# ## Exercise 1: schedule matters
#
# Each branch makes two 256 KiB temporaries (`negate` or `tanh`, then `exp` of it) and reduces
# them to a 1 KiB row sum; the branches meet at the `add`. The scheduler runs one branch to
# the end, then the other: while the second branch runs, only the first branch's small sum is
# still live. Interleaving the branches (`a, b, ea, eb, ...`) keeps both branches' big
# temporaries live at once and raises the peak. The scheduler tries several orders
# (post-order, a list scheduler, a DFS by size) and keeps the smallest peak; none of them
# interleaves here, so they tie -- the interleaved order is the one it did not choose.

# %%
BRANCHES = """
HloModule branches
add_f32 {
  p = f32[] parameter(0)
  q = f32[] parameter(1)
  ROOT s = f32[] add(p, q)
}
ENTRY main {
  x = f32[256,256] parameter(0)
  zero = f32[] constant(0)
  a = f32[256,256] negate(x)
  ea = f32[256,256] exponential(a)
  ra = f32[256] reduce(ea, zero), dimensions={1}, to_apply=add_f32
  b = f32[256,256] tanh(x)
  eb = f32[256,256] exponential(b)
  rb = f32[256] reduce(eb, zero), dimensions={1}, to_apply=add_f32
  ROOT r = f32[256] add(ra, rb)
}
"""
with flags.override(xla_disable_hlo_passes="fusion,multi_output_fusion"):
    compiled = compile_module(BRANCHES, "cpu")
assignment = compiled.buffer_assignment
chosen = assignment.entry.order
print("schedule:", [i.name for i in chosen], " arena", assignment.temp_bytes(), "of",
      assignment.naive_temp_bytes(), "bytes of temporaries")
module = parse_hlo(BRANCHES)
by_name = {i.name: i for i in module.entry.instructions}
interleaved = [by_name[n] for n in ("x", "zero", "a", "b", "ea", "eb", "ra", "rb", "r")]
branch_by_branch = [by_name[i.name] for i in chosen]
peaks = {"branch by branch": simulate_peak(branch_by_branch), "interleaved": simulate_peak(interleaved)}
print(peaks)
assert peaks["interleaved"] > peaks["branch by branch"]
assert assignment.temp_bytes() < assignment.naive_temp_bytes()

# %% [markdown]
# ## Exercise 2: in place
#
# An elementwise op reads exactly the element it writes, so once it has read `h[i]` nothing
# else needs it and `r[i]` may take its place. A `transpose` writes `out[i, j]` from
# `x[j, i]`: writing over `x` would destroy elements it has not read yet.
# (`can_run_in_place`: same byte size, and an elementwise op with the same dimensions, or the
# few ops that update their first operand, such as `dynamic-update-slice`.) An elementwise op
# whose operand is read again later cannot take its buffer even though the rule allows it:
# buffer assignment only writes in place over an operand that *dies* there.

# %%
TRANSPOSE_AND_LATER_USE = """
HloModule still_needed
ENTRY main {
  x = f32[64,64] parameter(0)
  h = f32[64,64] exponential(x)
  t = f32[64,64] transpose(h), dimensions={1,0}
  r = f32[64,64] negate(h)
  ROOT out = f32[64,64] add(r, h)
}
"""
module = parse_hlo(TRANSPOSE_AND_LATER_USE)
ops = {i.name: i for i in module.entry.instructions}
assert can_run_in_place(ops["r"], 0) and not can_run_in_place(ops["t"], 0)
with flags.override(xla_disable_hlo_passes="fusion,multi_output_fusion,algsimp,dce"):
    still_needed = compile_module(TRANSPOSE_AND_LATER_USE, "cpu")
in_place = still_needed.buffer_assignment.entry.in_place
print("in place:", in_place)
assert ("r", "h") not in in_place  # h is read again by the add

# %% [markdown]
# ## Exercise 3: heap packing
#
# Three blocks: `A` (64 bytes, steps 0-1), `B` (64 bytes, steps 0-3) and `C` (128 bytes,
# steps 2-3). In schedule order, `A` goes at 0 and `B` at 64; `C` overlaps `B` in time and the
# 64-byte gap below `B` is too small, so it goes at 128: a 256-byte arena. Largest first, `C`
# takes 0, `B` goes above it at 128, and `A` (which never meets `C`) fits at 0: 192 bytes.

# %%
blocks = [BufferBlock(0, 64, 0, 1), BufferBlock(1, 64, 0, 3), BufferBlock(2, 128, 2, 3)]


def first_come(blocks: list[BufferBlock]) -> int:
    """Each block, in schedule order, at the lowest offset free over its whole live range."""
    placed: list[tuple[BufferBlock, int]] = []
    for block in sorted(blocks, key=lambda b: (b.start, b.id)):
        offset = 0
        for other, at in sorted(((b, o) for b, o in placed if b.overlaps_in_time(block)), key=lambda p: p[1]):
            if offset + block.size > at and offset < at + other.size:
                offset = at + other.size
        placed.append((block, offset))
    return max(o + b.size for b, o in placed)


_, largest_first = pack_blocks(blocks)
print("schedule order:", first_come(blocks), "bytes; largest first:", largest_first, "bytes")
assert (first_come(blocks), largest_first) == (256, 192)
