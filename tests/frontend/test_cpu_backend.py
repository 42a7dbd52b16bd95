"""A cross-section of the front end compiled for the CPU backend (LLVM), against NumPy."""

from __future__ import annotations

import numpy as np
import pytest

import xla_teach
import xla_teach.nn as nn
import xla_teach.numpy as xnp
from tests.frontend.frontend_test_utils import assert_matches

rng = np.random.default_rng(5)
X = rng.normal(size=(4, 6)).astype(np.float32)

CASES = {
    "elementwise": (lambda x: xnp.exp(x) * xnp.tanh(x) - xnp.abs(x) / (1 + x ** 2),
                    lambda x: np.exp(x) * np.tanh(x) - np.abs(x) / (1 + x ** 2)),
    "reductions": (lambda x: (x.sum(0), x.max(1), xnp.mean(x), xnp.argmax(x, 1), xnp.any(x > 2)),
                   lambda x: (x.sum(0), x.max(1), np.mean(x), np.argmax(x, 1).astype(np.int32), np.any(x > 2))),
    "matmul_einsum": (lambda x: (x @ x.T, xnp.einsum("ij,kj->ik", x, x * 2)),
                      lambda x: (x @ x.T, np.einsum("ij,kj->ik", x, x * 2))),
    "shapes": (lambda x: (x.reshape(3, 8).T, xnp.concatenate([x, -x], 1), xnp.pad(x, 1), xnp.flip(x, 0)),
               lambda x: (x.reshape(3, 8).T, np.concatenate([x, -x], 1), np.pad(x, 1), np.flip(x, 0))),
    "indexing": (lambda x: (x[1:3, ::2], x[[3, 0]], x[:, [5, 1]], x.at[[0, 2], 1].add(10.0)),
                 lambda x: (x[1:3, ::2], x[[3, 0]], x[:, [5, 1]],
                            np.where((np.arange(4)[:, None] % 2 == 0) & (np.arange(6) == 1), x + 10, x))),
    "sort_cumsum": (lambda x: (xnp.sort(x, 1), xnp.argsort(x, 0), xnp.cumsum(x, 1)),
                    lambda x: (np.sort(x, 1), np.argsort(x, 0, kind="stable").astype(np.int32), np.cumsum(x, 1))),
    "softmax": (lambda x: nn.softmax(x), lambda x: np.exp(x) / np.exp(x).sum(-1, keepdims=True)),
}


@pytest.mark.parametrize("name", list(CASES))
def test_cpu_matches_numpy(name):
    fn, ref = CASES[name]
    assert_matches(fn, ref, X, backend="cpu", rtol=1e-5, atol=1e-5)


def test_cpu_control_flow():
    def f(x):
        y = xnp.fori_loop(0, 4, lambda i, v: v * 0.5 + x, x)
        z = xnp.cond(xnp.sum(x) > 0, lambda: y * 2, lambda: y - 1)
        _, ys = xnp.scan(lambda c, r: (c + r, c), xnp.zeros(6), x)
        return z, ys

    def ref(x):
        y = x
        for _ in range(4):
            y = y * 0.5 + x
        z = y * 2 if x.sum() > 0 else y - 1
        return z, np.concatenate([np.zeros((1, 6), np.float32), np.cumsum(x, 0)[:-1]])

    assert_matches(f, ref, X, backend="cpu", rtol=1e-5, atol=1e-5)


def test_cpu_conv_pool_and_gradients_agree_with_the_interpreter():
    x = rng.normal(size=(2, 6, 6, 3)).astype(np.float32)
    w = rng.normal(size=(3, 3, 3, 4)).astype(np.float32)

    def loss(x, w):
        h = nn.relu(nn.conv2d(x, w, 1, "SAME"))
        return xnp.sum(nn.max_pool(h, 2) ** 2) + xnp.sum(nn.avg_pool(h, 3, 3))

    g = xla_teach.grad(loss, argnums=(0, 1))
    cpu = xla_teach.jit(g, backend="cpu")(x, w)
    interp = xla_teach.jit(g, backend="interpreter")(x, w)
    for a, b in zip(cpu, interp, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4)
