# Answer key for notebook 11 (How XLA splits a program across devices) -- for teachers; not in
# the student kit. Run it: every answer is computed and checked with an assert.

# %% [markdown]
# # 11 · Splitting across devices -- answer key
#
# **Goals.** Students read a sharding (tile grid, device order), predict the per-device
# program and its collectives for the three ways of splitting a product, count the bytes each
# device sends, and train data-parallel.
#
# **Time.** 1.5 hours in class, 2 hours of exercises (plus `sharding`). **Where students
# stall:** `last_tile_dim_replicate` (copies of a tile on several devices) and the byte counts
# of ring collectives (`2 (g-1)/g n` for an all-reduce, `(g-1)/g n` for an all-gather).

# %%
import numpy as np

import xla_teach
from xla_teach import flags
from xla_teach.passes.spmd.spmd_partitioner import SpmdPartitioner
from xla_teach.sharding import NamedSharding, P

flags.set(xla_force_host_platform_device_count=4)
A = np.random.default_rng(0).standard_normal((256, 512)).astype(np.float32)
W = np.random.default_rng(1).standard_normal((512, 128)).astype(np.float32)
mesh = xla_teach.make_mesh((4,), ("d",))
rows, cols, whole = (NamedSharding(mesh, P("d", None)), NamedSharding(mesh, P(None, "d")), NamedSharding(mesh, P()))
grid = xla_teach.make_mesh((2, 2), ("x", "y"))


def per_device(fn, shardings, *args):
    module = xla_teach.jit(fn, in_shardings=shardings).lower(*args).module.clone()
    partitioner = SpmdPartitioner()
    partitioner.run(module)
    return module, partitioner.notes


def collectives(module):
    return [(i.opcode, i.shape.element_count() * 4, str(i.attrs.get("replica_groups")))
            for i in module.instructions() if i.opcode in ("all-reduce", "all-gather", "all-to-all")]


# %% [markdown]
# ## Exercise 1: both ways at once
#
# `a` split as `P("x", "y")` (rows over x, columns over y) and `w` as `P("y", None)` (rows
# over y): the contraction dimension is split over `y`, the rows of `a` over `x`. The
# partitioner's note: the contraction is split, so each device computes a partial sum of its
# `[128, 128]` block of the result from `[128, 256] @ [256, 128]` pieces, and one all-reduce
# over the two devices of each `y` group (`{{0,1},{2,3}}`) adds them. Bytes per device:
# `2 (2-1)/2 x 64 KiB = 64 KiB`. The result stays split by rows over `x`.

# %%
module, notes = per_device(lambda a, w: a @ w, (NamedSharding(grid, P("x", "y")), NamedSharding(grid, P("y", None))),
                           A, W)
print(notes, collectives(module))
assert collectives(module) == [("all-reduce", 128 * 128 * 4, "{{0,1},{2,3}}")]
assert "the contraction is split" in notes[0]

# %% [markdown]
# ## Exercise 2: resharding
#
# Rows in, columns wanted: one `all-to-all` over the four devices. Each device cuts its
# `[64, 128]` piece into four `[64, 32]` column blocks (the reshape to `[64, 4, 32]`), sends
# three of them away and receives three; a transpose and reshape put the received rows in
# order. It sends `3/4 x 32 KiB = 24 KiB`, against `3/4 x 128 KiB = 96 KiB` to all-gather the
# whole result: four times less. On the 2x2 mesh, `P("x", None)` to `P(None, "y")` changes
# which mesh axis splits the array *and* which dimension: a device's target block overlaps
# source blocks held along the other mesh axis, which no single all-to-all over one group
# moves, so the partitioner gathers the whole array (`all-gather` over all four) and each
# device keeps its columns with a `dynamic-slice` at an offset computed from `partition-id`.

# %%
module, notes = per_device(lambda a, w: xla_teach.with_sharding_constraint(a @ w, cols), (rows, whole), A, W)
found = collectives(module)
print(notes[-1], found)
assert [c[0] for c in found] == ["all-to-all"] and found[0][1] == 64 * 128 * 4
module, notes = per_device(lambda a: xla_teach.with_sharding_constraint(a * 2, NamedSharding(grid, P(None, "y"))),
                           (NamedSharding(grid, P("x", None)),), A)
opcodes = [i.opcode for i in module.instructions()]
print([c[0] for c in collectives(module)], "dynamic-slice" in opcodes, "partition-id" in opcodes)
assert [c[0] for c in collectives(module)] == ["all-gather"] and "dynamic-slice" in opcodes

# %% [markdown]
# ## Exercise 3: cost model
#
# With 4-byte elements, `a: [B, K]`, `w: [K, N]`, `g` devices, bytes sent per device:
#
# 1. rows of `a`, `w` whole: `0` (each device has everything its rows need);
# 2. the contraction split: an all-reduce of the `[B, N]` result, `2 (g-1)/g x 4 B N`;
# 3. columns of `w`, `a` whole: `0`.
#
# If `w` arrives split by rows (as in case 2) and must be gathered for case 1 instead, that
# costs `(g-1)/g x 4 K N`. Splitting the contraction is cheaper when `2 B N < K N`, that is
# when `B < K / 2`: few rows (small batches) against a long contraction. The notebook's
# shapes (B = 256, K = 512) sit exactly at the break-even point: both send 192 KiB.

# %%
module, _ = per_device(lambda a, w: a @ w, (cols, rows), A, W)
(reduce_bytes,) = [b for op, b, _ in collectives(module) if op == "all-reduce"]
g, (B, K), N = 4, A.shape, W.shape[1]
assert 2 * (g - 1) / g * reduce_bytes == 2 * (g - 1) / g * 4 * B * N
print(f"B={B}, K={K}, N={N}: contraction split sends {2 * (g - 1) / g * 4 * B * N:,.0f} B, "
      f"gathering w {(g - 1) / g * 4 * K * N:,.0f} B")

# %% [markdown]
# ## Exercise 4: MPI
#
# Every process prints the same losses: the data-parallel step all-reduces the gradients, so
# every process applies the same update (and the losses are the one-device losses up to the
# order of the sums). With process 3 asleep and a 5 s collective timeout, the other processes
# give up at their first collective after about 5 s, each naming the missing member (process
# 3, and what it is doing: computing), and stop every process, process 3 included, within a
# few seconds more: the job ends instead of hanging. `tests/distributed/test_mpi.py` runs
# exactly this (with a 3 s timeout) and checks the message and the time; run it with
# `pytest tests/distributed/test_mpi.py -k timeout` to see it on your machine.
