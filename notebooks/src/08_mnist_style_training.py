# Source of notebooks/08_mnist_style_training.ipynb -- edit here, then run scripts/build_notebooks.py.

# %% [markdown]
# # 08 · Training a digit classifier with a jit-compiled step
#
# The classic first tutorial trains **softmax regression** on MNIST with a training step
# compiled by XLA (`tf.function(jit_compile=True)`). We re-tell it with real
# handwritten digits that ship inside scikit-learn (1797 images of 8x8 pixels, loaded
# offline) and with `xla_teach.jit`.
#
# The point is the **training step**: the forward pass, the gradient and the optimizer
# update are traced into *one* HLO module, compiled once, and run for every batch. You
# will
#
# 1. build the model, the loss and the step, and read what the step compiled to;
# 2. train it and measure the test accuracy;
# 3. record a **timeline** of the step run eagerly (op by op) and compiled, write it as a
#    Chrome trace, and compare;
# 4. swap the optimizer.
#
# The same program is a command-line script: `python examples/train_digits.py --help`.

# %%
import tempfile
import time
from pathlib import Path

import numpy as np
from sklearn.datasets import load_digits

import xla_teach as xt
import xla_teach.nn as nn
import xla_teach.numpy as xnp
from xla_teach.frontend import optimizers
from xla_teach.frontend.pytree import tree_flatten
from xla_teach.tools.timeline import EagerProgram, Timeline, trace_runs

digits = load_digits()
images = (digits.data / 16.0).astype(np.float32)  # 64 pixels per image, scaled to [0, 1]
labels = digits.target.astype(np.int32)
order = np.random.default_rng(0).permutation(len(images))  # a fixed split
test, train = order[:450], order[450:]
x_train, y_train, x_test, y_test = images[train], labels[train], images[test], labels[test]
print(f"{len(x_train)} training and {len(x_test)} test images of {images.shape[1]} pixels; "
      f"labels {sorted(set(labels.tolist()))}")

# %%
try:
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 10, figsize=(10, 1.4))
    for ax, i in zip(axes, range(10), strict=True):
        ax.imshow(x_train[i].reshape(8, 8), cmap="gray_r")
        ax.set_title(str(y_train[i]))
        ax.axis("off")
    plt.show()
except ImportError:
    print("matplotlib is not installed; the first labels are", y_train[:10])

# %% [markdown]
# ## 1. Model, loss, step
#
# Softmax regression is one dense layer: `logits = x @ w + b` gives 10 scores per image;
# `softmax(logits)` turns them into probabilities. The loss is the **cross-entropy**,
# `-log p[true class]`, averaged over the batch; `log_softmax` computes
# `log p` without overflowing. With zero weights every class gets probability 1/10, so
# the first loss is `log(10) = 2.303`.
#
# The step takes the parameters, the optimizer state and a batch, and returns the new
# parameters, the new state and the loss. All of it -- forward, `value_and_grad`,
# update -- is inside one `xt.jit`. `xt.named_scope("optimizer")` (JAX's `jax.named_scope`)
# only labels the update's instructions, so we can find them below.

# %%
NUM_CLASSES = 10


def loss_fn(params, x, y):
    log_probs = nn.log_softmax(x @ params["w"] + params["b"])
    return -xnp.mean(xnp.sum(nn.one_hot(y, NUM_CLASSES) * log_probs, axis=-1))


def make_step(optimizer):
    @xt.jit
    def train_step(params, opt_state, x, y):
        loss, grads = xt.value_and_grad(loss_fn)(params, x, y)
        with xt.named_scope("optimizer"):
            params, opt_state = optimizer.update(grads, opt_state, params)
        return params, opt_state, loss

    return train_step


def init_params():
    return {"w": np.zeros((64, NUM_CLASSES), np.float32), "b": np.zeros(NUM_CLASSES, np.float32)}


BATCH = 64
optimizer = optimizers.sgd(0.5)
params = init_params()
opt_state = optimizer.init(params)  # plain SGD keeps no state: ()
train_step = make_step(optimizer)
example = (params, opt_state, x_train[:BATCH], y_train[:BATCH])

lowered = train_step.lower(*example)
hlo = lowered.as_text("hlo")
print(f"one module: {hlo.count('HloModule ')}, {len(lowered.module.entry.instructions)} ENTRY instructions")

# %% [markdown]
# Every instruction's metadata says which part of the program made it. Sorting them by
# `op_name` shows the three parts: the forward pass (`jit(train_step)/jvp(loss_fn)/...`), the
# backward pass (`jit(train_step)/transpose(jvp(loss_fn))/...`, notebook 09 reads it
# in detail) and the update (`jit(train_step)/optimizer/...`).

# %%
parts = {"parameters": [], "forward": [], "backward": [], "update": []}
for instr in lowered.module.entry.instructions:
    op_name = instr.metadata.op_name if instr.metadata else ""
    if instr.opcode == "parameter":
        parts["parameters"].append(instr)
    elif "/transpose(jvp(" in op_name:
        parts["backward"].append(instr)
    elif "/optimizer/" in op_name:
        parts["update"].append(instr)
    elif instr.opcode != "tuple":
        parts["forward"].append(instr)
for part, instrs in parts.items():
    print(f"{part:<11} {len(instrs):3d} instructions, e.g. {', '.join(i.opcode for i in instrs[:6])}")
root = lowered.module.entry.root_instruction
print("\nROOT:", root.shape, "=", [o.name for o in root.operands], " (b, w, loss: the pytree's leaves)")

# %% [markdown]
# After optimization, the whole step is a handful of kernels: the matrix products
# (`dot`), and fusions that each do one pass over memory for softmax, the loss and the
# gradient's elementwise work.

# %%
compiled = lowered.compile()
kernels = [(i.name, i.opcode, getattr(i, "fusion_kind", "") if i.opcode == "fusion" else "")
           for i in compiled.executable.module.entry.instructions
           if i.opcode not in ("parameter", "constant", "tuple", "get-tuple-element", "bitcast")]
for name, opcode, kind in kernels:
    print(f"  {name:<40} {opcode} {kind}")
print(f"{len(kernels)} kernels; cost: {compiled.cost_analysis()}")

# %% [markdown]
# ## 2. Training
#
# Every batch has the same shape (we drop the last, incomplete batch), so the step is
# compiled once and every later call is a cache hit.

# %%
def train(optimizer, epochs=10, seed=1, log=True):
    step = make_step(optimizer)
    params = init_params()
    opt_state = optimizer.init(params)
    rng = np.random.default_rng(seed)
    losses = []
    for epoch in range(epochs):
        perm = rng.permutation(len(x_train))
        epoch_losses = []
        for i in range(len(x_train) // BATCH):
            batch = perm[i * BATCH:(i + 1) * BATCH]
            params, opt_state, loss = step(params, opt_state, x_train[batch], y_train[batch])
            epoch_losses.append(float(loss))
        losses.append(np.mean(epoch_losses))
        if log:
            print(f"epoch {epoch + 1:2d}  loss {losses[-1]:.4f}")
    return params, losses, step


def accuracy(params, x, y):
    predictions = np.argmax(x @ params["w"] + params["b"], axis=1)  # NumPy is enough to evaluate
    return float(np.mean(predictions == y)), predictions


start = time.perf_counter()
params, losses, step = train(optimizers.sgd(0.5))
seconds = time.perf_counter() - start
test_accuracy, predictions = accuracy(params, x_test, y_test)
print(f"\ntest accuracy {test_accuracy:.3f}; {seconds:.2f} s in all; {step.cache_info()}")
assert test_accuracy >= 0.90 and step.cache_info().misses == 1

# %% [markdown]
# Over 90% of digits the model never saw are classified correctly by a linear model.
# Where does it go wrong? Rows are the true digit, columns the prediction:

# %%
confusion = np.zeros((NUM_CLASSES, NUM_CLASSES), np.int64)
np.add.at(confusion, (y_test, predictions), 1)
print("     " + " ".join(f"{c:3d}" for c in range(NUM_CLASSES)))
for digit in range(NUM_CLASSES):
    print(f"{digit:3d}: " + " ".join(f"{n:3d}" for n in confusion[digit]))

# %% [markdown]
# ## 3. A timeline: eager versus compiled
#
# How does the compiled step spend its time, and what would running the same step op
# by op cost? We profile both on the same batch:
#
# * **compiled**: the step's executable, run with a `Timeline` as its profiler, which
#   records every kernel;
# * **eager**: `EagerProgram` runs the step's *unoptimized* module one HLO instruction
#   at a time, each its own compiled one-op program, passing NumPy arrays between them
#   -- what an eager framework does for every operation.
#
# The arguments of the executable are the step's pytree leaves, in order.

# %%
args = [np.asarray(leaf) for leaf in tree_flatten(example)[0]]
eager = EagerProgram(lowered.module, "cpu")
RUNS = 20

timeline = Timeline()
compiled.executable.execute(args)  # warm-up
trace_runs(compiled.executable, args, num_runs=RUNS, timeline=timeline, track="compiled")
eager.run(args)  # warm-up
with timeline.on_track("eager"):
    for _ in range(RUNS):
        with timeline.run("step"):
            eager.run(args, profiler=timeline)

# Both give the same loss (the last output).
print("loss, compiled:", compiled.executable.execute(args)[-1], " eager:", eager.run(args)[-1])

with tempfile.TemporaryDirectory() as folder:
    trace_path = timeline.write_chrome_trace(Path(folder) / "train_step_trace.json")
    print(f"Chrome trace: {trace_path.stat().st_size} bytes, "
          f"{len(timeline.to_chrome_trace()['traceEvents'])} events (open it in chrome://tracing or Perfetto)")

# %% [markdown]
# (The trace was written to a temporary folder so this notebook leaves nothing behind;
# write it somewhere permanent to open it in `chrome://tracing` or
# https://ui.perfetto.dev.) The summary per track:

# %%
def step_table(timeline):
    rows = []
    for track in ("eager", "compiled"):
        runs = [e for e in timeline.events if e.kind == "run" and e.track == track]
        thunks = [e for e in timeline.thunk_events() if e.track == track]
        busy = sum(e.seconds for e in thunks) / len(runs)
        best = min(e.seconds for e in runs)
        rows.append((track, len(thunks) // len(runs), best * 1e3, busy * 1e3))
    print(f"{'track':<10} {'ops/kernels':>12} {'best step ms':>13} {'busy ms':>9}")
    for track, count, best, busy in rows:
        print(f"{track:<10} {count:12d} {best:13.3f} {busy:9.3f}")
    return {row[0]: row for row in rows}


table = step_table(timeline)
print(f"\neager / compiled: {table['eager'][2] / table['compiled'][2]:.1f}x per step")

# %% [markdown]
# *busy* is the time spent inside the ops or kernels, per step. For a batch this small
# an op does well under a microsecond of arithmetic, so an eager op's time is almost
# all fixed cost: calling an executable, binding its buffers, allocating its output --
# paid once per op, dozens of times per step. The compiled step pays that once, runs
# fewer, fused kernels, and wins by a large factor. (With big batches the arithmetic
# dominates and the gap narrows: see exercise 2.)
#
# One step of each, drawn on a common time axis from the start of the step:

# %%
def draw_one_step(timeline):
    """The last run of each track as a Gantt chart."""
    tracks = ["eager", "compiled"]
    try:
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed")
        return
    fig, ax = plt.subplots(figsize=(10, 2.2))
    for row, track in enumerate(tracks):
        span = [e for e in timeline.events if e.kind == "run" and e.track == track][-1]
        for e in timeline.thunk_events():
            if e.track == track and e.run == span.run:
                ax.barh(row, (e.end - e.start) * 1e3, left=(e.start - span.start) * 1e3, height=0.6,
                        color="tab:orange" if e.name.startswith("dot") else "tab:blue")
    ax.set_yticks(range(len(tracks)), tracks)
    ax.set_xlabel("ms since the start of the step (orange: dot)")
    plt.show()


draw_one_step(timeline)

# %% [markdown]
# ## 4. Other optimizers
#
# `xla_teach.frontend.optimizers` has `sgd`, `momentum`, `rmsprop` and `adam`, written
# as pure functions over pytrees (like `optax`), so the update is traced into the step
# like everything else. Their state (momentum's velocity, Adam's moments and step
# count) goes in and out of the step as arrays.

# %%
curves = {}
for name, opt in [("sgd", optimizers.sgd(0.5)), ("momentum", optimizers.momentum(0.1)),
                  ("rmsprop", optimizers.rmsprop(0.01)), ("adam", optimizers.adam(0.02))]:
    params_o, losses_o, step_o = train(opt, epochs=5, log=False)
    curves[name] = losses_o
    acc, _ = accuracy(params_o, x_test, y_test)
    info = step_o.cache_info()
    print(f"{name:<9} loss {losses_o[0]:.3f} -> {losses_o[-1]:.3f}   test accuracy {acc:.3f}   "
          f"compiled {info.misses}x, {info.hits} hits")

# %% [markdown]
# The loss curves, with the first run's SGD (10 epochs) for reference:

# %%
try:
    import matplotlib.pyplot as plt
except ImportError:
    plt = None
    print("matplotlib is not installed: the losses are printed above")
if plt is not None:
    fig, ax = plt.subplots(figsize=(7, 3.2))
    ax.plot(range(1, len(losses) + 1), losses, "k--", label="sgd, 10 epochs (section 2)")
    for name, curve in curves.items():
        ax.plot(range(1, len(curve) + 1), curve, "o-", label=name)
    ax.set_xlabel("epoch", fontsize=11)
    ax.set_ylabel("mean training loss", fontsize=11)
    ax.set_title("cross-entropy while training, by optimizer", fontsize=12)
    ax.legend(fontsize=10)
    fig.tight_layout()
    plt.show()

# %% [markdown]
# ## Exercises
#
# 1. **A hidden layer.** Make the model a 2-layer MLP (`relu(x @ w1 + b1) @ w2 + b2`, 32
#    or 64 hidden units, random initial weights). How does the test accuracy change? How
#    many kernels does the optimized step have now, and which fusion holds the ReLU's
#    gradient? (`python examples/train_digits.py --hidden 64 --optimizer adam` is a
#    reference.)
# 2. **Batch size.** Repeat the timeline of section 3 for batches of 8, 64 and 1024.
#    Plot eager/compiled against the batch size and explain the trend with the *busy*
#    column.
# 3. **Recompilation.** Keep the last, incomplete batch of every epoch. What do
#    `step.cache_info()` and `step.compile_log` say now? Why would that matter much more
#    on a real accelerator with long compile times?
# 4. **Read the trace.** Write the Chrome trace to a file you keep, open it in
#    https://ui.perfetto.dev, and find the longest kernel of the compiled step. Which HLO
#    instructions does it contain (`compiled.as_text("optimized_hlo")`)?
# 5. **Learning rate.** Train with SGD at learning rates 0.05, 0.5 and 5. Which one makes
#    the loss jump about, and why does none of them blow up to infinity (hint: the gradient
#    of the loss with respect to the logits)? Then add a learning-rate
#    schedule: pass the rate into the step as an argument -- does it recompile when
#    the value changes? Why not?
