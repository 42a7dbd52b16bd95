# Answer key for notebook 10 (Auto-clustering and ahead-of-time compilation) -- for teachers;
# not in the student kit. Run it: every answer is computed and checked with an assert.

# %% [markdown]
# # 10 · Auto-clustering and AOT -- answer key
#
# **Goals.** Students follow TensorFlow's route into XLA: a graph run op by op, the passes
# that find clusters (MarkForCompilation, EncapsulateSubgraphs, BuildXlaOps), per-shape
# compilation at run time, and ahead-of-time compilation to an object file and a header.
#
# **Time.** 1 hour in class, 1.5 hours of exercises. **Where students stall:** why a cluster
# may not swallow a node across a host op (it would make a cycle), and that clusters are
# cached by input *shapes*.

# %%
import tempfile
from pathlib import Path

import numpy as np

import xla_teach.graph as xg
import xla_teach.numpy as xnp
from xla_teach.aot import compile_aot
from xla_teach.graph import ops as gops
from xla_teach.graph.executor import FeedError
from xla_teach.graph.mnist_example import STEP_FETCHES, build_mnist_step, feeds


def double(v):
    return v * 2


def mixed(with_g: bool) -> xg.Graph:
    """The notebook's mixed graph, with exercise 1's extra node if asked."""
    graph = xg.Graph("mixed")
    with graph.as_default():
        x = gops.placeholder(np.float32, (4, 3), name="x")
        a = gops.exp(x, name="a")
        b = gops.tanh(a, name="b")
        p = gops.py_func(double, [b], np.float32, shape=(4, 3), name="p")
        c = gops.add(a, p, name="c")
        d = gops.multiply(c, c, name="d")
        if with_g:
            gops.add(b, d, name="g")
        e = gops.sum(gops.sigmoid(d, name="sig"), axis=1, name="e")
        gops.unique(gops.relu(x, name="r"), name="u")
        gops.as_string(e, name="summary")
    return graph


def clusters(graph: xg.Graph, **options) -> dict[str, list[str]]:
    mark = xg.MarkForCompilation(xg.ClusteringOptions(**options))
    mark.run(graph)
    return {name: sorted(members) for name, members in mark.result.clusters.items()}


# %% [markdown]
# ## Exercise 1: cycles
#
# `g = b + d` reads from both clusters. It joins `cluster_1` (with `c`, `d`, `sig`, `e`):
# its input `b` comes from `cluster_0`, which is fine. The two clusters still cannot merge:
# a cluster holding `b` and `c` would have a path that leaves it and comes back,
# `b -> p (PyFunc, on the host) -> c`, so the merged cluster would have to run both before
# and after the host op -- a cycle between the cluster and `p`.

# %%
options = {"auto_jit": 2, "cpu_global_jit": True, "min_cluster_size": 2}
before, after = clusters(mixed(False), **options), clusters(mixed(True), **options)
print(before, after, sep="\n")
assert after["cluster_0"] == ["a", "b"] and "g" in after["cluster_1"] and len(after) == 2

# %% [markdown]
# ## Exercise 2: level 1 vs 2
#
# `--tf_xla_auto_jit=1` leaves out the ops TensorFlow clusters only at level 2 -- here the
# `MatMul`s, `ArgMax` and `OneHot` (the explanations say so) -- which splits the step into
# two clusters around them; fewer ops are compiled, so more kernels launch than at level 2.

# %%
mnist = build_mnist_step(batch=32, hidden=64)
launches = {}
for level in (1, 2):
    plan = xg.Session(mnist, tf_xla_flags=f"--tf_xla_auto_jit={level} --tf_xla_cpu_global_jit").plan(STEP_FETCHES)
    timeline, _, _ = xg.compare_eager_and_clustered(mnist, STEP_FETCHES, feeds(32, 64), steps=1, auto_jit=level)
    launches[level] = (len(plan.clustering.clusters), xg.kernel_launches(timeline, f"auto_jit={level}"))
    left = sorted(n for n, why in plan.clustering.explanations.items() if "auto_jit" in why)
    print(f"level {level}: {launches[level][0]} cluster(s), {launches[level][1]} launches; left out: {left}")
assert launches[1][0] == 2 and launches[2][0] == 1 and launches[1][1] > launches[2][1]

# %% [markdown]
# ## Exercise 3: recompilation
#
# The MNIST graph fixes its batch in the placeholders, so a batch of 48 is refused
# (`FeedError`: the placeholder wants 32 rows) -- build the graph with a batch of `None`, as
# `graph_any_batch` does. Then batches of 32, 48 and 32 compile the cluster twice (one per
# shape), and the second 32 is a cache hit. Input pipelines pad batches to a few fixed sizes
# (bucketing) so that every shape is compiled once.

# %%
session = xg.Session(mnist, tf_xla_flags="--tf_xla_auto_jit=2 --tf_xla_cpu_global_jit")
try:
    session.run(STEP_FETCHES, feeds(48, 64))
    raise AssertionError("a batch of 48 was accepted")
except FeedError as err:
    print("FeedError:", err)
any_batch = xg.Graph("any_batch")
with any_batch.as_default():
    xs = gops.placeholder(np.float32, (None, 784), name="x")
    gops.sum(gops.tanh(gops.exp(gops.negative(xs))), axis=1, name="out")
session = xg.Session(any_batch, tf_xla_flags="--tf_xla_auto_jit=2 --tf_xla_cpu_global_jit --tf_xla_min_cluster_size=2")
for batch in (32, 48, 32):
    session.run("out", {"x": np.ones((batch, 784), np.float32)})
print(session.cache.summary())
assert session.cache.compile_count() == 2

# %% [markdown]
# ## Exercise 4: `_XlaCompile=true`
#
# With auto-clustering off, the nodes marked `_XlaCompile=true` (the forward pass:
# `dense/MatMul`, `dense/BiasAdd`, `dense/Relu`, `logits/MatMul`, `logits/BiasAdd`) form one
# cluster, and it is kept even with `--tf_xla_min_cluster_size` above its size: a node that
# asks for compilation is not subject to the minimum (as `jit_scope` in TensorFlow).

# %%
marked = build_mnist_step(batch=32, hidden=64)
for node in marked.nodes:
    if node.name.startswith(("dense/", "logits/")):
        node.attrs["_XlaCompile"] = True
for flags_text in ("--tf_xla_auto_jit=-1", "--tf_xla_auto_jit=-1 --tf_xla_min_cluster_size=10"):
    found = xg.Session(marked, tf_xla_flags=flags_text).plan(STEP_FETCHES).clustering.clusters
    print(flags_text, {k: sorted(v) for k, v in found.items()})
    assert list(found) == ["cluster_0"] and len(found["cluster_0"]) == 5

# %% [markdown]
# ## Exercise 5: AOT
#
# A `sort` on the CPU needs scratch memory: the object calls `malloc` and `free`
# (`aot.external_symbols`). The build command still works because those come from the C
# library, which every C program links anyway; a symbol outside libc and libm would need a
# library on the command line.

# %%
with tempfile.TemporaryDirectory() as folder:
    result = compile_aot(lambda x: xnp.sort(x), Path(folder) / "aot", entry_point="sorted_values",
                         example_args=[np.ones(16, np.float32)])
print("external symbols:", result.external_symbols)
assert set(result.external_symbols) <= {"malloc", "free", "memcpy", "memset"} and "malloc" in result.external_symbols
