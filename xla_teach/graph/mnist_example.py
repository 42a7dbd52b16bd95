"""An MNIST-style example as a graph: one SGD step of a two-layer MLP, written op by op.

TensorFlow's XLA tutorial trains a small MNIST classifier and compares the
timeline of the plain run with ``--tf_xla_auto_jit=2``: the eager run launches one
kernel per op, the clustered run a handful of fused XLA kernels. Here the data is
synthetic (random pixels, random labels -- the point is the kernels, not the
accuracy), the gradients are written out by hand as graph ops, and two host ops
make sure the graph is *not* entirely compilable:

* ``PyFunc`` ``log_loss`` -- Python code that appends the loss to a list;
* ``AsString`` ``loss_summary`` -- a string summary of the loss.

::

    graph = build_mnist_step(batch=64)
    sess = Session(graph, tf_xla_flags="--tf_xla_auto_jit=2 --tf_xla_cpu_global_jit")
    new_w1, new_b1, new_w2, new_b2, loss = sess.run(STEP_FETCHES, feeds(graph))
"""

from __future__ import annotations

from typing import Any

import numpy as np

from xla_teach.graph import ops as gops
from xla_teach.graph.graph import Graph

IMAGE, HIDDEN, CLASSES = 784, 128, 10
STEP_FETCHES = ["new_w1", "new_b1", "new_w2", "new_b2", "loss", "accuracy", "logged", "loss_summary"]


def build_mnist_step(batch: int = 64, hidden: int = HIDDEN, learning_rate: float = 0.1,
                     losses: list[float] | None = None) -> Graph:
    """The training-step graph; ``losses`` (if given) collects each step's loss via a PyFunc."""
    log = losses if losses is not None else []

    def log_loss(loss: np.ndarray) -> np.ndarray:
        log.append(float(loss))
        return np.int32(len(log))

    g = Graph("mnist_step")
    with g.as_default():
        x = gops.placeholder(np.float32, (batch, IMAGE), name="images")
        labels = gops.placeholder(np.int32, (batch,), name="labels")
        w1 = gops.placeholder(np.float32, (IMAGE, hidden), name="w1")
        b1 = gops.placeholder(np.float32, (hidden,), name="b1")
        w2 = gops.placeholder(np.float32, (hidden, CLASSES), name="w2")
        b2 = gops.placeholder(np.float32, (CLASSES,), name="b2")
        # forward
        h = gops.relu(gops.bias_add(gops.matmul(x, w1, name="dense/MatMul"), b1, name="dense/BiasAdd"),
                      name="dense/Relu")
        logits = gops.bias_add(gops.matmul(h, w2, name="logits/MatMul"), b2, name="logits/BiasAdd")
        onehot = gops.one_hot(labels, CLASSES, name="onehot")
        xent = gops.negative(gops.sum(onehot * gops.log_softmax(logits, name="LogSoftmax"), axis=1), name="xent")
        loss = gops.mean(xent, name="loss")
        correct = gops.cast(gops.equal(gops.argmax(logits, axis=1), labels), np.float32, name="correct")
        gops.mean(correct, name="accuracy")
        # backward (d loss / d logits = (softmax - onehot) / batch)
        dlogits = gops.divide(gops.softmax(logits) - onehot, float(batch), name="dlogits")
        dw2 = gops.matmul(h, dlogits, transpose_a=True, name="grad/w2")
        db2 = gops.sum(dlogits, axis=0, name="grad/b2")
        dh = gops.relu_grad(gops.matmul(dlogits, w2, transpose_b=True), h, name="grad/h")
        dw1 = gops.matmul(x, dh, transpose_a=True, name="grad/w1")
        db1 = gops.sum(dh, axis=0, name="grad/b1")
        # SGD update
        for name, param, grad in (("new_w1", w1, dw1), ("new_b1", b1, db1), ("new_w2", w2, dw2),
                                  ("new_b2", b2, db2)):
            gops.subtract(param, grad * learning_rate, name=name)
        # host ops: XLA cannot compile these, so they stay outside the clusters
        gops.py_func(log_loss, [loss], np.int32, shape=(), name="logged")
        gops.as_string(loss, name="loss_summary")
    return g


def initial_parameters(hidden: int = HIDDEN, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {"w1": (rng.standard_normal((IMAGE, hidden)) * 0.05).astype(np.float32),
            "b1": np.zeros(hidden, np.float32),
            "w2": (rng.standard_normal((hidden, CLASSES)) * 0.05).astype(np.float32),
            "b2": np.zeros(CLASSES, np.float32)}


def synthetic_batch(batch: int = 64, seed: int = 0) -> dict[str, np.ndarray]:
    """Random "images" in [0, 1) and labels that depend on them (so the loss can fall)."""
    rng = np.random.default_rng(seed)
    images = rng.random((batch, IMAGE), dtype=np.float32)
    labels = (images[:, :CLASSES].argmax(axis=1)).astype(np.int32)
    return {"images": images, "labels": labels}


def feeds(batch: int = 64, hidden: int = HIDDEN, seed: int = 0) -> dict[str, Any]:
    return {**initial_parameters(hidden, seed), **synthetic_batch(batch, seed)}


def train(session: Any, steps: int, batch: int = 64, hidden: int = HIDDEN, profiler: Any = None,
          new_batch_each_step: bool = False) -> list[float]:
    """Run ``steps`` SGD steps, feeding the updated parameters back in; returns the losses.
    By default every step sees the same batch, so the falling loss shows the model fitting it."""
    params = initial_parameters(hidden)
    losses = []
    for step in range(steps):
        data = synthetic_batch(batch, seed=step if new_batch_each_step else 0)
        values = session.run(STEP_FETCHES, {**params, **data}, profiler=profiler)
        params = dict(zip(["w1", "b1", "w2", "b2"], values[:4], strict=True))
        losses.append(float(values[4]))
    return losses
