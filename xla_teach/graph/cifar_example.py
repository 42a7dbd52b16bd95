"""The CNN of TensorFlow's XLA auto-clustering tutorial, as a graph: one RMSprop step on CIFAR-10.

The tutorial trains a small Keras model on CIFAR-10 for 25 epochs, once as TensorFlow runs it
(one kernel per op) and once with ``tf.config.optimizer.set_jit(True)`` (auto-clustering), and
reports the time of each. The same model here, written op by op with its gradients (what
Keras's ``fit`` builds behind the scenes)::

    Conv2D(32, 3x3, same) ReLU  Conv2D(32, 3x3, same) ReLU  MaxPool 2x2
    Conv2D(64, 3x3, same) ReLU  Conv2D(64, 3x3, same) ReLU  MaxPool 2x2
    Flatten  Dense(512) ReLU  Dense(10)  softmax cross-entropy
    RMSprop: s <- rho s + (1 - rho) g^2;  w <- w - lr g / (sqrt(s) + eps)

(the tutorial's second and fourth convolutions are "valid" and it has dropout; here every
convolution keeps its size, and dropout, which changes nothing in how the step is compiled,
is left out). The data is CIFAR-shaped and synthetic: 32x32x3 images, 10 classes.
``benchmarks/graph_auto_clustering.py`` times an epoch both ways.

::

    graph = build_cifar_step(batch=32)
    sess = Session(graph, tf_xla_flags="--tf_xla_auto_jit=2 --tf_xla_cpu_global_jit")
    values = sess.run(STEP_FETCHES, feeds(batch=32))
"""

from __future__ import annotations

from typing import Any

import numpy as np

from xla_teach.graph import ops as gops
from xla_teach.graph.graph import Graph, Tensor

CLASSES = 10
FILTERS = {"conv1": (3, 3, 3, 32), "conv2": (3, 3, 32, 32), "conv3": (3, 3, 32, 64), "conv4": (3, 3, 64, 64),
           "dense1": (8 * 8 * 64, 512), "dense2": (512, CLASSES)}
PARAMS = [name for layer in FILTERS for name in (f"{layer}/kernel", f"{layer}/bias")]
STEP_FETCHES = [f"new/{p}" for p in PARAMS] + [f"new_ms/{p}" for p in PARAMS] + [
    "loss", "accuracy", "logged", "loss_summary"]


def build_cifar_step(batch: int = 32, dtype: Any = np.float32, learning_rate: float = 1e-4, rho: float = 0.9,
                     epsilon: float = 1e-7, losses: list[float] | None = None) -> Graph:
    """The training-step graph: parameters ``conv1/kernel`` ... and RMSprop's mean squares
    ``ms/conv1/kernel`` ... are fed, their new values fetched (``new/...``, ``new_ms/...``);
    ``losses`` (if given) collects each step's loss through a host op."""
    log = losses if losses is not None else []

    def log_loss(loss: np.ndarray) -> np.ndarray:
        log.append(float(loss))
        return np.int32(len(log))

    g = Graph("cifar_step")
    with g.as_default():
        x = gops.placeholder(dtype, (batch, 32, 32, 3), name="images")
        labels = gops.placeholder(np.int32, (batch,), name="labels")
        p = {name: gops.placeholder(dtype, _shape(name), name=name) for name in PARAMS}
        ms = {name: gops.placeholder(dtype, _shape(name), name=f"ms/{name}") for name in PARAMS}

        def conv(h: Tensor, layer: str) -> tuple[Tensor, Tensor]:
            z = gops.bias_add(gops.conv2d(h, p[f"{layer}/kernel"], 1, "SAME", name=f"{layer}/Conv2D"),
                              p[f"{layer}/bias"], name=f"{layer}/BiasAdd")
            return h, gops.relu(z, name=f"{layer}/Relu")

        x1, a1 = conv(x, "conv1")
        x2, a2 = conv(a1, "conv2")
        p1 = gops.max_pool(a2, 2, 2, name="pool1/MaxPool")
        x3, a3 = conv(p1, "conv3")
        x4, a4 = conv(a3, "conv4")
        p2 = gops.max_pool(a4, 2, 2, name="pool2/MaxPool")
        flat = gops.reshape(p2, (batch, 8 * 8 * 64), name="flatten")
        h = gops.relu(gops.bias_add(gops.matmul(flat, p["dense1/kernel"]), p["dense1/bias"]), name="dense1/Relu")
        logits = gops.bias_add(gops.matmul(h, p["dense2/kernel"]), p["dense2/bias"], name="logits")
        onehot = gops.cast(gops.one_hot(labels, CLASSES), dtype, name="onehot")
        loss = gops.mean(gops.negative(gops.sum(onehot * gops.log_softmax(logits), axis=1)), name="loss")
        correct = gops.cast(gops.equal(gops.argmax(logits, axis=1), labels), np.float32)
        gops.mean(correct, name="accuracy")

        # backward, layer by layer (d loss / d logits = (softmax - onehot) / batch)
        grads: dict[str, Tensor] = {}
        d = gops.divide(gops.softmax(logits) - onehot, float(batch), name="grad/logits")
        grads["dense2/kernel"] = gops.matmul(h, d, transpose_a=True, name="grad/dense2/kernel")
        grads["dense2/bias"] = gops.sum(d, axis=0, name="grad/dense2/bias")
        d = gops.relu_grad(gops.matmul(d, p["dense2/kernel"], transpose_b=True), h, name="grad/dense1/Relu")
        grads["dense1/kernel"] = gops.matmul(flat, d, transpose_a=True, name="grad/dense1/kernel")
        grads["dense1/bias"] = gops.sum(d, axis=0, name="grad/dense1/bias")
        d = gops.reshape(gops.matmul(d, p["dense1/kernel"], transpose_b=True), (batch, 8, 8, 64), name="grad/flatten")
        d = gops.max_pool_grad(a4, p2, d, 2, 2, name="grad/pool2/MaxPoolGrad")

        def conv_backward(layer: str, inp: Tensor, out: Tensor, d: Tensor) -> Tensor:
            """The kernel's and the bias's gradients of one conv + ReLU layer; returns its input's."""
            d = gops.relu_grad(d, out, name=f"grad/{layer}/Relu")
            grads[f"{layer}/kernel"] = gops.conv2d_backprop_filter(inp, FILTERS[layer], d, 1, "SAME",
                                                                   name=f"grad/{layer}/kernel")
            grads[f"{layer}/bias"] = gops.sum(d, axis=(0, 1, 2), name=f"grad/{layer}/bias")
            return gops.conv2d_backprop_input(inp.spec.shape, p[f"{layer}/kernel"], d, 1, "SAME",
                                              name=f"grad/{layer}/input")

        d = conv_backward("conv3", x3, a3, conv_backward("conv4", x4, a4, d))
        d = gops.max_pool_grad(a2, p1, d, 2, 2, name="grad/pool1/MaxPoolGrad")
        conv_backward("conv1", x1, a1, conv_backward("conv2", x2, a2, d))  # (the images' gradient goes unused)

        # RMSprop
        for name in PARAMS:
            grad = grads[name]
            new_ms = gops.add(ms[name] * rho, gops.square(grad) * (1 - rho), name=f"new_ms/{name}")
            step = gops.divide(grad * learning_rate, gops.sqrt(new_ms) + epsilon)
            gops.subtract(p[name], step, name=f"new/{name}")
        # host ops: XLA cannot compile these, so they stay outside the clusters
        gops.py_func(log_loss, [loss], np.int32, shape=(), name="logged")
        gops.as_string(loss, name="loss_summary")
    return g


def _shape(name: str) -> tuple[int, ...]:
    layer, kind = name.split("/")
    return FILTERS[layer] if kind == "kernel" else (FILTERS[layer][-1],)


def initial_parameters(seed: int = 0, dtype: Any = np.float32) -> dict[str, np.ndarray]:
    """He-style random kernels, zero biases, and RMSprop's mean squares at zero."""
    rng = np.random.default_rng(seed)
    values: dict[str, np.ndarray] = {}
    for name in PARAMS:
        shape = _shape(name)
        fan_in = int(np.prod(shape[:-1])) if len(shape) > 1 else 1
        values[name] = (rng.standard_normal(shape) * np.sqrt(2 / fan_in) if len(shape) > 1
                        else np.zeros(shape)).astype(dtype)
        values[f"ms/{name}"] = np.zeros(shape, dtype)
    return values


def synthetic_batch(batch: int = 32, seed: int = 0, dtype: Any = np.float32) -> dict[str, np.ndarray]:
    """CIFAR-shaped images in [0, 1) and labels that depend on them (so the loss can fall)."""
    rng = np.random.default_rng(seed)
    images = rng.random((batch, 32, 32, 3)).astype(dtype)
    labels = images[:, ::8, ::8, 0].reshape(batch, 16)[:, :CLASSES].argmax(axis=1).astype(np.int32)
    return {"images": images, "labels": labels}


def feeds(batch: int = 32, seed: int = 0, dtype: Any = np.float32) -> dict[str, np.ndarray]:
    return {**initial_parameters(seed, dtype), **synthetic_batch(batch, seed, dtype)}


def train(session: Any, steps: int, batch: int = 32, dtype: Any = np.float32) -> list[float]:
    """``steps`` RMSprop steps on one batch, feeding the new parameters back; returns the losses."""
    values = feeds(batch, dtype=dtype)
    losses = []
    for _ in range(steps):
        out = session.run(STEP_FETCHES, values)
        for i, name in enumerate(PARAMS):
            values[name], values[f"ms/{name}"] = out[i], out[len(PARAMS) + i]
        losses.append(float(out[2 * len(PARAMS)]))
    return losses
