# Source of notebooks/10_auto_clustering_and_aot.ipynb -- edit here, then run scripts/build_notebooks.py.

# %% [markdown]
# # 10 · Auto-clustering and ahead-of-time compilation
#
# `jit` is one door into XLA: you name a function and it is compiled whole. The seeds
# teach two more:
#
# * **Auto-clustering** (`TF_XLA_FLAGS=--tf_xla_auto_jit=2`): the framework runs a
#   *graph* of named ops one kernel at a time, and itself finds the subgraphs XLA can
#   compile. Three graph passes do it -- `MarkForCompilation`, `EncapsulateSubgraphs`,
#   `BuildXlaOps` -- and at run time `_XlaCompile` / `_XlaRun` compile each cluster for
#   the shapes it sees and run it. Everything else keeps running op by op.
# * **Ahead-of-time compilation** (`tfcompile`): a computation with a fixed signature
#   becomes an object file and a C header; a C program links them, with no Python and
#   no runtime at all.
#
# `xla_teach.graph` and `xla_teach.aot` implement both with TensorFlow's names.

# %%
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np

import xla_teach.graph as xg
from xla_teach.graph import ops as gops

WORK = Path(tempfile.mkdtemp(prefix="xla_teach_10_"))
print("working in", WORK)

# %% [markdown]
# ## A graph with ops XLA cannot compile
#
# Graphs are built with NumPy's function names; each call adds one node whose op
# type is TensorFlow's (`gops.exp` adds an `Exp`). Three of the nodes below have no
# XLA kernel: a **Python callback** (`PyFunc`), **`Unique`** (how many values it
# returns depends on the data, and XLA needs every shape at compile time), and a
# **string** op (`AsString`: strings have no XLA element type).

# %%
def double(v):
    return v * 2


graph = xg.Graph("mixed")
with graph.as_default():
    x = gops.placeholder(np.float32, (4, 3), name="x")
    a = gops.exp(x, name="a")
    b = gops.tanh(a, name="b")
    p = gops.py_func(double, [b], np.float32, shape=(4, 3), name="p")
    c = gops.add(a, p, name="c")
    d = gops.multiply(c, c, name="d")
    e = gops.sum(gops.sigmoid(d, name="sig"), axis=1, name="e")
    u = gops.unique(gops.relu(x, name="r"), name="u")
    s = gops.as_string(e, name="summary")
print(graph.to_text(show_specs=True))

# %% [markdown]
# ## Running it op by op
#
# The executor runs one kernel per node (here NumPy's precompiled loops, as TensorFlow
# runs its Eigen kernels) and reports each one to a profiler: one timeline event per op.

# %%
from xla_teach.tools.timeline import Timeline

x_value = np.random.default_rng(0).uniform(-1, 1, (4, 3)).astype(np.float32)
timeline = Timeline()
eager = xg.Session(graph)  # TF_XLA_FLAGS is empty: no auto-clustering
e_eager, u_eager, s_eager = eager.run(["e", "u", "summary"], {"x": x_value}, profiler=timeline)
print(s_eager)
print([event.name for event in timeline.thunk_events()])

# %% [markdown]
# ## Pass 1: MarkForCompilation
#
# The pass finds *maximal* clusters of compilable ops and gives their nodes
# `_XlaCluster="cluster_N"`. It explains every node it leaves out. Watch `a` and `c`:
# both are compilable and `a` feeds `c`, yet they end up in different clusters. One
# cluster holding both would have to run *before* `p` (it computes `a`, which `p`
# needs via `b`) and *after* `p` (`c` needs `p`): a cycle.

# %%
mark = xg.MarkForCompilation(xg.ClusteringOptions(auto_jit=2, cpu_global_jit=True, min_cluster_size=2))
marked = graph.copy()
mark.run(marked)
print(marked.to_text())
print()
print(mark.result.report())

# %% [markdown]
# The default `--tf_xla_min_cluster_size` is 4: clusters smaller than that are not
# worth a compilation. And on the CPU nothing is clustered at all unless
# `--tf_xla_cpu_global_jit` is given -- TensorFlow's rule, with TensorFlow's message:

# %%
strict = xg.MarkForCompilation(xg.ClusteringOptions(auto_jit=2, cpu_global_jit=False))
strict.run(graph.copy())
print(strict.result.report())

# %% [markdown]
# Clusters are easiest to see drawn: every cluster is a coloured box, ops XLA cannot
# compile are red, graph inputs orange.

# %%
from IPython.display import SVG, display

from xla_teach.tools.render.graphviz import have_dot, to_svg

dot_text = xg.graph_to_dot(marked, "after MarkForCompilation")
if have_dot():
    display(SVG(to_svg(dot_text)))
else:
    print(dot_text[:600], "...\n(install Graphviz to see the picture)")

# %% [markdown]
# ## Passes 2 and 3: EncapsulateSubgraphs and BuildXlaOps
#
# Each cluster becomes a *function* of the graph's library, called by one node
# (`_Arg` nodes bring tensors in, `_Retval` nodes send them out). Then each call is
# replaced by `_XlaCompile` (look up / compile for these input shapes) and `_XlaRun`
# (execute it).

# %%
encapsulated = marked.copy()
xg.EncapsulateSubgraphs(fetches=["e", "u", "summary"]).run(encapsulated)
print(encapsulated.to_text())

# %%
built = encapsulated.copy()
xg.BuildXlaOps().run(built)
print("\n".join(line for line in built.to_text().splitlines() if not line.startswith("  ")))

# %% [markdown]
# ## The same switches as TensorFlow
#
# A `Session` reads `TF_XLA_FLAGS` when it is created (here passed directly, which is the
# same as setting the environment variable). It prunes the graph to the fetches, runs
# the three passes, and runs the result op by op -- `_XlaRun` being one of the ops.
# The results equal the eager run's. An unknown flag is an error that suggests the
# right name.

# %%
flags_text = "--tf_xla_auto_jit=2 --tf_xla_cpu_global_jit --tf_xla_min_cluster_size=2"
session = xg.Session(graph, tf_xla_flags=flags_text)
e_xla, u_xla, s_xla = session.run(["e", "u", "summary"], {"x": x_value})
print("max |eager - clustered| =", np.abs(e_xla - e_eager).max(), "; unique equal:", np.array_equal(u_xla, u_eager))
try:
    xg.parse_tf_xla_flags("--tf_xla_auto_jt=2")
except ValueError as err:
    print("error:", str(err)[:95], "...")

# %% [markdown]
# Clusters compile at their first launch and are cached by **input shapes**. Feed
# another shape and the cluster is compiled again -- the `recompiled_on_launch` you
# look for when a model is slow because every batch has a new size.

# %%
graph_any_batch = xg.Graph("any_batch")
with graph_any_batch.as_default():
    xs = gops.placeholder(np.float32, (None, 3), name="x")
    gops.sum(gops.tanh(gops.exp(gops.negative(xs))), axis=1, name="out")
sess = xg.Session(graph_any_batch, tf_xla_flags=flags_text)
for batch in (2, 2, 5, 2):
    sess.run("out", {"x": np.ones((batch, 3), np.float32)})
print(sess.cache.summary())

# %% [markdown]
# ## Dumps: graphs and HLO
#
# TensorFlow's bug-report recipe works unchanged:
# `TF_DUMP_GRAPH_PREFIX=DIR TF_XLA_FLAGS="--tf_xla_clustering_debug --tf_xla_auto_jit=2"
# XLA_FLAGS="--xla_dump_to=DIR"`. The graph is written before and after each pass
# (`.pbtxt` text, `.dot` with clusters coloured), and XLA dumps one module per
# cluster, named the way TensorFlow names it.

# %%
from xla_teach import flags

dump_dir = WORK / "dumps"
debug_session = xg.Session(graph, tf_xla_flags=flags_text + " --tf_xla_clustering_debug", dump_prefix=str(dump_dir))
with flags.override(xla_dump_to=str(dump_dir)):
    debug_session.run("e", {"x": x_value})
for path in sorted(dump_dir.iterdir()):
    if path.suffix in (".pbtxt", ".dot") or "before_optimizations" in path.name:
        print(path.name)

# %% [markdown]
# ## The MNIST comparison
#
# One SGD step of a two-layer MLP, written op by op (forward, hand-written gradients,
# update), on synthetic data; a `PyFunc` logs the loss and an `AsString` makes a
# summary. Run eagerly, every op is one kernel launch. With `--tf_xla_auto_jit=2`
# everything but the two host ops is one cluster, and XLA's fusion turns its ops
# into a handful of kernels. The Chrome trace puts both runs side by side
# (open it in `chrome://tracing` or [Perfetto](https://ui.perfetto.dev)).

# %%
from xla_teach.graph.mnist_example import STEP_FETCHES, build_mnist_step, feeds

mnist = build_mnist_step(batch=32, hidden=64)
trace, eager_values, xla_values = xg.compare_eager_and_clustered(mnist, STEP_FETCHES, feeds(32, 64), steps=2)
print("kernel launches, eager      :", xg.kernel_launches(trace, "eager"))
print("kernel launches, auto_jit=2 :", xg.kernel_launches(trace, "auto_jit=2"))
print("loss eager / clustered      :", eager_values[4], xla_values[4])
print("trace written to", trace.write_chrome_trace(WORK / "mnist_timeline.json"))

# %%
summary_rows = trace.summary().splitlines()
print("\n".join(summary_rows[:30]))
if len(summary_rows) > 30:
    print(f"... {len(summary_rows) - 30} more rows (the whole table: trace.summary())")

# %% [markdown]
# ### The tutorial's own model: a CIFAR-10 CNN, time per epoch
#
# TensorFlow's auto-clustering tutorial trains a small Keras CNN on CIFAR-10 (four 3x3
# convolutions, two max-poolings, two dense layers, RMSprop) once without XLA and once
# auto-clustered, and reports the time of each (about 1.17x faster on a Titan V GPU).
# `xla_teach.graph.cifar_example` builds the same model as a graph, with its gradients written
# as graph ops (`Conv2DBackpropInput`, `Conv2DBackpropFilter`, `MaxPoolGrad`, `ReluGrad` ...:
# what Keras's `fit` builds behind the scenes). Op by op, each convolution is one NumPy kernel
# (a sum of nine matrix products, one per tap of the 3x3 window); auto-clustered, the whole step
# but the two host ops is one XLA cluster. An epoch is CIFAR-10's 50,000 training images.
#
# Take the ratio below with care: inside a Jupyter kernel on a small machine the op-by-op run
# can come out several times slower than the same code in a plain script (NumPy's threaded
# matrix products compete with the kernel's own threads, and each op starts on memory the
# cluster's run just used). `benchmarks/graph_auto_clustering.py` times both sides in blocks in
# a plain process: 3.4x on the 2-core machine of docs/performance.md.

# %%
import time

from xla_teach.graph import cifar_example as cifar

cnn = cifar.build_cifar_step(batch=32)
cnn_feeds = cifar.feeds(batch=32)
cnn_sessions = {"op by op": xg.Session(cnn, tf_xla_flags="--tf_xla_auto_jit=-1"),
                "auto-clustered": xg.Session(cnn, tf_xla_flags="--tf_xla_auto_jit=2 --tf_xla_cpu_global_jit")}
step_seconds = {}
for label, cnn_session in cnn_sessions.items():
    cnn_session.run(cifar.STEP_FETCHES, cnn_feeds)  # the clustered session compiles its cluster here
    times = []
    for _ in range(5):
        started = time.perf_counter()
        cnn_session.run(cifar.STEP_FETCHES, cnn_feeds)
        times.append(time.perf_counter() - started)
    step_seconds[label] = sorted(times)[2]  # the median of five steps
steps_per_epoch = 50_000 / 32
for label, seconds in step_seconds.items():
    print(f"{label:<15} {seconds * 1e3:7.1f} ms per step   {seconds * steps_per_epoch:6.1f} s per epoch")
speedup = step_seconds["op by op"] / step_seconds["auto-clustered"]
print(f"auto-clustering: {speedup:.2f}x faster (the tutorial: about 1.17x on a Titan V)")

# %%
try:
    import matplotlib.pyplot as plt
except ImportError:
    plt = None
    print("matplotlib is not installed: the numbers above are the chart")
if plt is not None:
    fig, ax = plt.subplots(figsize=(7, 2.2))
    labels = list(step_seconds)
    epochs = [step_seconds[k] * steps_per_epoch for k in labels]
    ax.barh(labels, epochs, color=["#7f7f7f", "#1f77b4"])
    for y, value in enumerate(epochs):
        ax.text(value, y, f" {value:.0f} s", va="center", fontsize=11)
    ax.set_xlabel("seconds per CIFAR-10 epoch (50,000 images, batch 32, this machine)", fontsize=11)
    ax.set_title(f"The same CNN graph: auto-clustering is {speedup:.2f}x faster", fontsize=12)
    ax.set_xlim(0, max(epochs) * 1.2)
    fig.tight_layout()
    plt.show()

# %% [markdown]
# ## Ahead of time: an object file and a header
#
# `compile_aot` (and `xla-teach aot file.hlo`) compiles for a fixed signature on the
# CPU backend: the normal passes, then the kernels, plus one emitted C entry function
# that calls them in schedule order over a `temp` buffer the caller provides. Dots use
# emitted loops, because the JIT's OpenBLAS is found inside NumPy at run time -- an
# object file cannot count on that.

# %%
import xla_teach.numpy as xnp
from xla_teach.aot import AotError, compile_aot


def predict(x, w, b):
    return xnp.argmax(x @ w + b, axis=1), xnp.max(x @ w + b, axis=1)


rng = np.random.default_rng(1)
example = [rng.standard_normal((8, 16)).astype(np.float32), rng.standard_normal((16, 4)).astype(np.float32),
           rng.standard_normal(4).astype(np.float32)]
aot = compile_aot(predict, WORK / "aot", entry_point="predict", example_args=example)
print(aot.header_path.read_text())

# %% [markdown]
# The example program reads the arguments from raw binary files and prints every
# result element. Built with the system C compiler, it gives the interpreter's answer.

# %%
from xla_teach import execute, jit

print("build:", aot.build_command)
if shutil.which("cc"):
    subprocess.run(aot.build_command.split(), check=True)
    files = []
    for i, array in enumerate(example):
        array.tofile(WORK / f"arg{i}.bin")
        files.append(str(WORK / f"arg{i}.bin"))
    out = subprocess.run([str(aot.main_path.with_suffix("")), *files], capture_output=True, text=True, check=True)
    print(out.stdout)
    print("interpreter:", execute(jit(predict).lower(*example).module, example, "interpreter"))
else:
    print("no C compiler here; the files are in", aot.object_path.parent)

# %% [markdown]
# What AOT refuses: `while`, `conditional`, `call` and `custom-call` run as Python host
# thunks in xla_teach's CPU runtime, so a module still holding one is refused with the
# instruction named (see `docs/auto-clustering-and-aot.md`).

# %%
loop = """
HloModule counting

cond {
  s = s32[] parameter(0)
  ten = s32[] constant(10)
  ROOT lt = pred[] compare(s, ten), direction=LT
}

body {
  s = s32[] parameter(0)
  one = s32[] constant(1)
  ROOT next = s32[] add(s, one)
}

ENTRY main {
  p = s32[] parameter(0)
  ROOT w = s32[] while(p), condition=cond, body=body
}
"""
try:
    compile_aot(loop, WORK / "loop")
except AotError as err:
    print("AotError:", err)

# %% [markdown]
# ## Exercises
#
# 1. **Cycles.** Add a node `g = gops.add(b, d)` to the mixed graph (it reads from both
#    clusters). Predict the clusters before running `MarkForCompilation`, then check with
#    `mark.result.report()`. Which path would a merged cluster create a cycle through?
# 2. **Level 1 vs 2.** Rerun the MNIST comparison with `auto_jit=1`. Which ops does level 1
#    leave out (read the explanations), how many clusters appear, and what happens to the
#    kernel-launch count?
# 3. **Recompilation.** Feed the MNIST step batches of 32, 48 and 32 again. How many
#    compilations does `session.cache.summary()` show, and what would you change in an
#    input pipeline to avoid them (hint: TensorFlow users pad batches)?
# 4. **`_XlaCompile=true`.** Turn auto-clustering off (`--tf_xla_auto_jit=-1`) and mark just
#    the forward pass of the MNIST graph with `node.attrs["_XlaCompile"] = True` (what
#    `tf.xla.experimental.jit_scope` does). Which cluster forms, and is it kept although it
#    is below `--tf_xla_min_cluster_size`?
# 5. **AOT.** Compile an HLO module with a `sort` ahead of time. Which external symbols does
#    the object need (`aot.external_symbols`), and why does the build command still work?
