# Source of notebooks/11_splitting_across_devices.ipynb -- edit here, then run scripts/build_notebooks.py.

# %% [markdown]
# # 11 · How XLA splits a program across devices
#
# A program that outgrows one device runs on many, each holding a *piece* of every big
# array. You say how the pieces are cut -- a **sharding** -- and XLA's **SPMD partitioner**
# rewrites the program into the one program every device runs on its own piece (*Single
# Program, Multiple Data*), adding the **collectives** through which devices exchange
# values: `all-reduce` (every device gets the sum of everyone's), `all-gather` (everyone
# gets everyone's pieces), `reduce-scatter`, `all-to-all`, `collective-permute`.
#
# This notebook splits one matrix product three ways and reads what the partitioner made of
# each: the per-device HLO, the collectives, and how many bytes every device sends. Then it
# trains a small network data-parallel. The devices are CPU threads of this process (XLA's
# `--xla_force_host_platform_device_count`, as in JAX); over MPI they would be processes.

# %%
import numpy as np

import xla_teach
import xla_teach.nn as nn
import xla_teach.numpy as xnp
from xla_teach import flags
from xla_teach.passes.spmd.spmd_partitioner import SpmdPartitioner
from xla_teach.sharding import NamedSharding, P

flags.set(xla_force_host_platform_device_count=4)
print(xla_teach.devices())

# %% [markdown]
# ## A mesh and a sharding
#
# A **mesh** arranges the devices in a named grid. A `PartitionSpec` says, per array
# dimension, which mesh axis splits it (`None`: kept whole). `NamedSharding(mesh, spec)` is
# the pair, and `.hlo_sharding(rank)` the sharding XLA writes into HLO: the tile grid, and
# which device holds which tile.

# %%
mesh = xla_teach.make_mesh((4,), ("d",))
rows = NamedSharding(mesh, P("d", None))  # rows split four ways
cols = NamedSharding(mesh, P(None, "d"))  # columns split four ways
whole = NamedSharding(mesh, P())  # every device holds all of it
for name, s in [("rows", rows), ("cols", cols), ("whole", whole)]:
    print(f"{name:6}", s.hlo_sharding(2))

x = np.arange(16, dtype=np.float32).reshape(4, 4)
hlo = rows.hlo_sharding(2)
for device in range(4):
    print("device", device, "holds", hlo.shard(x, device).tolist())

# %% [markdown]
# ## One product, three splits
#
# `y = a @ w` with `a: [256, 512]` and `w: [512, 128]`. Each way of splitting it gives the
# devices a different amount of work to do alone -- and a different amount to send.
#
# A small helper reads the partitioned module: every collective, and the bytes a device
# sends for it with the usual ring algorithms (an all-reduce of `n` bytes over `g` devices
# sends `2 (g-1)/g n`; an all-gather of a result of `n` bytes sends `(g-1)/g n`).

# %%
A = np.random.default_rng(0).standard_normal((256, 512)).astype(np.float32)
W = np.random.default_rng(1).standard_normal((512, 128)).astype(np.float32)


def per_device_program(fn, shardings, *args):
    """The module jit traces, partitioned as jit partitions it; and the partitioner's notes."""
    module = xla_teach.jit(fn, in_shardings=shardings).lower(*args).module.clone()
    partitioner = SpmdPartitioner()
    partitioner.run(module)
    return module, partitioner.notes


def bytes_sent(module):
    """(collective, bytes one device sends) for every collective of the per-device module."""
    sent = []
    for instr in module.instructions():
        if instr.opcode in ("all-reduce", "all-gather"):
            groups = str(instr.attrs.get("replica_groups"))
            group = len(groups.split("}")[0].strip("{").split(","))
            nbytes = instr.shape.element_count() * instr.shape.element_type.byte_size
            factor = 2 * (group - 1) / group if instr.opcode == "all-reduce" else (group - 1) / group
            sent.append((instr.opcode, int(factor * nbytes)))
    return sent


def matmul(a, w):
    return a @ w


# %% [markdown]
# **1 · Rows of `a` split, `w` whole (data parallelism).** Every device multiplies its 64
# rows by the whole `w`: its rows of the result, with nothing to exchange. The result stays
# split by rows.

# %%
module, notes = per_device_program(matmul, (rows, whole), A, W)
print("\n".join(notes))
print(module.entry.to_text(print_metadata=False))
print("sent per device:", bytes_sent(module))

# %% [markdown]
# **2 · The contraction split.** `a`'s columns and `w`'s rows split alike: each device holds
# a quarter of the 512 products that make every output element. Its local `dot` is a *partial
# sum* over its quarter; one `all-reduce` adds the four partial sums, and every device ends
# with the whole result. Compute is split four ways, but every device sends about twice the
# result's size.

# %%
module, notes = per_device_program(matmul, (cols, rows), A, W)
print("\n".join(notes))
print("sent per device:", bytes_sent(module))

# %% [markdown]
# The per-device program as a graph: each device's `dot` of its `[256, 128]` and `[128, 128]`
# pieces, then the `all-reduce` that adds the partial sums.

# %%
module

# %% [markdown]
# The compile explorer draws the same per-device program with its shardings: each value split
# across the devices has a band down the left of its box and a line saying how
# (`split 1x4`: columns in four pieces; `replicated`), values split alike in one colour, and the
# `all-reduce` in the collectives' colour. Click a box for its full sharding; step through the
# passes on the left to the `spmd-partitioning` stage to see the global program become the
# per-device one.

# %%
xla_teach.jit(matmul, in_shardings=(cols, rows)).lower(A, W).compile().explore()

# %% [markdown]
# **3 · Columns of `w` split, `a` whole.** Each device computes its 32 columns of the result
# from the whole `a` -- no exchange either, the result split by columns (the mirror image of
# case 1, what XLA does for the second matrix of a transformer's MLP).

# %%
module, notes = per_device_program(matmul, (whole, cols), A, W)
print("\n".join(notes))
print("sent per device:", bytes_sent(module))

# %% [markdown]
# All three give the one-device answer: `jit` with shardings partitions the program, runs it
# on the four devices and puts the global result back together.

# %%
for shardings in [(rows, whole), (cols, rows), (whole, cols)]:
    got = xla_teach.jit(matmul, in_shardings=shardings)(A, W)
    print(shardings[0].spec, shardings[1].spec, "max error:", float(np.abs(got - A @ W).max()))

# %% [markdown]
# ## Data-parallel training
#
# The batch split over the devices, the weights whole on each: every device computes the
# gradients of its part of the batch, and an `all-reduce` sums them -- the only communication
# in the step. The loss curve is the one-device curve.

# %%
rng = np.random.default_rng(0)
X = rng.standard_normal((64, 16)).astype(np.float32)
Y = np.eye(4, dtype=np.float32)[rng.integers(0, 4, 64)]


def loss(w1, w2, x, y):
    return -(nn.log_softmax(nn.relu(x @ w1) @ w2) * y).sum() / x.shape[0]


def step(w1, w2, x, y):
    value, (g1, g2) = xla_teach.value_and_grad(loss, argnums=(0, 1))(w1, w2, x, y)
    return value, w1 - 0.5 * g1, w2 - 0.5 * g2


def train(shardings, steps=5):
    w1 = (np.random.default_rng(2).standard_normal((16, 32)) * 0.3).astype(np.float32)
    w2 = (np.random.default_rng(3).standard_normal((32, 4)) * 0.3).astype(np.float32)
    f = xla_teach.jit(step, in_shardings=shardings)
    losses = []
    for _ in range(steps):
        value, w1, w2 = f(w1, w2, X, Y)
        losses.append(round(float(value), 5))
    return losses


batch = NamedSharding(mesh, P("d"))
print("4 devices:", train((whole, whole, batch, batch)))
print("1 device: ", train(None))
module, _ = per_device_program(step, (whole, whole, batch, batch), np.zeros((16, 32), np.float32),
                               np.zeros((32, 4), np.float32), X, Y)
print("collectives:", bytes_sent(module))

# %% [markdown]
# ## Keeping the data on the devices
#
# Above, every call cuts the global NumPy arrays into pieces and puts the results back together.
# In a real loop the weights and the batch *stay* on the devices: `device_put` cuts once, and a
# `jit` that gets such `ShardedArray`s takes their pieces as they are and leaves its results
# split too. Each shard knows which device holds it and which part of the global array it is.

# %%
w1 = (np.random.default_rng(2).standard_normal((16, 32)) * 0.3).astype(np.float32)
w2 = (np.random.default_rng(3).standard_normal((32, 4)) * 0.3).astype(np.float32)
xs, ys = xla_teach.device_put((X, Y), batch)
ws = xla_teach.device_put((w1, w2), whole)
for shard in xs.addressable_shards:
    print(shard.device, "holds rows", shard.index[0].start, "to", shard.index[0].stop)
fast = xla_teach.jit(step)
losses = []
for _ in range(5):
    value, *ws = fast(*ws, xs, ys)  # ShardedArrays in, ShardedArrays out
    losses.append(round(float(value), 5))
print("kept on the devices:", losses)
print(type(ws[0]).__name__, ws[0].sharding)

# %% [markdown]
# ## Graded exercise: `sharding`
#
# This chapter prepares this exercise (docs/exercises.md). The cell copies the
# starter file into `~/xla_teach_exercises/` -- never over a copy you already edited -- and grades it
# with the hidden checks, in a fenced-in process of its own. The task is in the starter's
# docstring: fill in its `TODO`s, then run the cell again. The untouched starter scores 0.

# %%
from xla_teach.exercises import grade, start

for exercise in ['sharding']:
    mine = start(exercise)  # your copy, in ~/xla_teach_exercises/: made once, never overwritten
    report = grade(exercise, mine)
    print(mine, "->", report.feedback[0].split(": ")[-1])  # print(report): every check, and why it failed

# %% [markdown]
# ## Exercises
#
# 1. **Both ways at once.** Make a 2x2 mesh (`make_mesh((2, 2), ("x", "y"))`) and split `a` as
#    `P("x", "y")` and `w` as `P("y", None)`. Which plan does the partitioner choose (read the
#    notes), which collectives appear, and how many bytes does a device send?
# 2. **Resharding.** Put `xla_teach.with_sharding_constraint(y, cols)` on the result of case 1
#    (rows in, columns wanted). Find the `all-to-all` the partitioner adds and the reshapes and
#    transpose around it: how many bytes does each device send, against gathering the whole
#    result? Then, on a 2x2 mesh, go from `P("x", None)` to `P(None, "y")`: why does the
#    partitioner fall back to an `all-gather` and a `dynamic-slice` by `partition-id`?
# 3. **Cost model.** For `a: [B, K]`, `w: [K, N]` on `g` devices, write the bytes each device
#    sends in cases 1-3 as formulas. For which shapes is splitting the contraction cheaper
#    than gathering `w`?
# 4. **MPI.** Save the training cell as a script, call `xla_teach.distributed.initialize()`
#    first and run it with `.venv/bin/mpiexec -n 4 .venv/bin/python train.py`. Does every
#    process print the same losses? Now let process 3 sleep for a minute before its first step
#    and run with `XLA_FLAGS=--xla_teach_collective_timeout_seconds=5`: what do the others
#    print, and how long until every process has stopped? (docs: "Several processes and
#    machines", which also shows how to run it on several machines and under SLURM.)
