"""A training example: softmax regression on synthetic data, one jitted step
(forward, gradient, optimizer update) per batch. The loss must go down and the
model must learn the task; each optimizer is checked the same way."""

from __future__ import annotations

import numpy as np
import pytest

import xla_teach
import xla_teach.nn as nn
import xla_teach.numpy as xnp
from xla_teach.frontend import optimizers


def make_data(n=512, features=8, classes=3, seed=0):
    """Gaussian blobs: class k is centered at a random point; linearly separable-ish."""
    rng = np.random.default_rng(seed)
    centers = rng.normal(size=(classes, features)) * 2.5
    labels = rng.integers(0, classes, size=n)
    x = centers[labels] + rng.normal(size=(n, features))
    return x.astype(np.float32), labels.astype(np.int32)


def loss_fn(params, x, labels):
    logits = x @ params["w"] + params["b"]
    return -xnp.mean(xnp.sum(nn.one_hot(labels, 3) * nn.log_softmax(logits), axis=-1))


def accuracy(params, x, labels):
    return np.mean(np.argmax(x @ params["w"] + params["b"], -1) == labels)


def train(optimizer, backend, steps=40, batch=64):
    x, labels = make_data()
    params = {"w": np.zeros((8, 3), np.float32), "b": np.zeros(3, np.float32)}
    state = optimizer.init(params)

    @xla_teach.jit
    def step(params, state, xb, yb):
        loss, grads = xla_teach.value_and_grad(loss_fn)(params, xb, yb)
        params, state = optimizer.update(grads, state, params)
        return params, state, loss

    step = xla_teach.jit(step._fn, backend=backend)
    losses = []
    for i in range(steps):
        lo = (i * batch) % len(x)
        params, state, loss = step(params, state, x[lo:lo + batch], labels[lo:lo + batch])
        losses.append(float(loss))
    return params, losses, step, (x, labels)


def test_softmax_regression_learns_on_cpu():
    params, losses, step, (x, labels) = train(optimizers.sgd(0.5), "cpu")
    assert losses[0] == pytest.approx(np.log(3), rel=1e-5)  # zero weights: uniform prediction
    assert np.mean(losses[-5:]) < 0.3 * losses[0]
    assert accuracy(params, x, labels) > 0.9
    assert step.cache_info().misses == 1 and step.cache_info().hits == 39  # one compilation for the whole run
    # The step is one module holding forward, backward and update.
    text = step.lower(params, optimizers.sgd(0.5).init(params), x[:64], labels[:64]).as_text()
    assert "transpose(jvp(loss_fn))" in text and text.count(" dot(") >= 2


@pytest.mark.parametrize("make", [lambda: optimizers.momentum(0.1), lambda: optimizers.rmsprop(0.05),
                                  lambda: optimizers.adam(0.1)], ids=["momentum", "rmsprop", "adam"])
def test_optimizers_reduce_the_loss(make):
    params, losses, _, (x, labels) = train(make(), "interpreter", steps=25)
    assert np.mean(losses[-5:]) < 0.5 * losses[0]
    assert accuracy(params, x, labels) > 0.85


def test_gradient_matches_the_closed_form():
    x, labels = make_data(n=16)
    params = {"w": np.random.default_rng(1).normal(size=(8, 3)).astype(np.float32), "b": np.zeros(3, np.float32)}
    grads = xla_teach.jit(xla_teach.grad(loss_fn), backend="interpreter")(params, x, labels)
    logits = x @ params["w"]
    p = np.exp(logits - logits.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    delta = (p - np.eye(3)[labels]) / len(x)
    np.testing.assert_allclose(grads["w"], x.T @ delta, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(grads["b"], delta.sum(0), rtol=1e-4, atol=1e-6)
