"""Training steps for the CPU benchmark: softmax regression and a 2-layer MLP, each as an
``xla_teach.jit``-compiled step (loss, gradients by ``value_and_grad``, SGD update in one module)
and as hand-written NumPy with hand-derived gradients. Each ``*_programs()`` returns
``(xla_teach_step, numpy_step, compile_seconds)``; the two steps are checked to agree first.

Shapes are those of the digits tutorial (64 features = 8x8 images, 10 classes) with a batch of
4096 and a 512-wide hidden layer: the matrix products go to the same OpenBLAS NumPy uses, so what
differs is everything around them -- softmax, relu, the gradient's elementwise work -- which
xla_teach fuses into a few passes over memory and NumPy runs one temporary array at a time."""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np

import xla_teach
import xla_teach.numpy as xnp

BATCH, FEATURES, HIDDEN, CLASSES, LR = 4096, 64, 512, 10, 0.1


def _data(seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((BATCH, FEATURES), dtype=np.float32)
    labels = rng.integers(0, CLASSES, BATCH)
    return x, np.eye(CLASSES, dtype=np.float32)[labels]


def _xt_log_softmax(z):  # type: ignore[no-untyped-def]
    z = z - xnp.max(z, axis=1, keepdims=True)
    return z - xnp.log(xnp.sum(xnp.exp(z), axis=1, keepdims=True))


def _np_softmax(z: np.ndarray) -> np.ndarray:
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def softmax_regression_programs() -> tuple[Callable[[], object], Callable[[], object], float]:
    x, y = _data()
    w = np.zeros((FEATURES, CLASSES), np.float32)
    b = np.zeros(CLASSES, np.float32)

    def loss(w, b, x, y):  # type: ignore[no-untyped-def]
        return -xnp.mean(xnp.sum(y * _xt_log_softmax(x @ w + b), axis=1))

    @xla_teach.jit
    def step(w, b, x, y):  # type: ignore[no-untyped-def]
        value, (gw, gb) = xla_teach.value_and_grad(loss, argnums=(0, 1))(w, b, x, y)
        return w - LR * gw, b - LR * gb, value

    def numpy_step(w: np.ndarray, b: np.ndarray, x: np.ndarray, y: np.ndarray):  # type: ignore[no-untyped-def]
        p = _np_softmax(x @ w + b)
        d = (p - y) / BATCH
        return w - LR * (x.T @ d), b - LR * d.sum(axis=0), -np.mean(np.sum(y * np.log(p), axis=1))

    start = time.perf_counter()
    w1, b1, l1 = step(w, b, x, y)  # the first call traces and compiles
    seconds = time.perf_counter() - start
    w2, b2, l2 = numpy_step(w, b, x, y)
    np.testing.assert_allclose(np.asarray(w1), w2, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(float(l1), float(l2), rtol=1e-5)
    return (lambda: step(w, b, x, y)), (lambda: numpy_step(w, b, x, y)), seconds


def mlp_step_programs() -> tuple[Callable[[], object], Callable[[], object], float]:
    x, y = _data(1)
    rng = np.random.default_rng(2)
    w1 = (rng.standard_normal((FEATURES, HIDDEN)) * 0.05).astype(np.float32)
    b1 = np.zeros(HIDDEN, np.float32)
    w2 = (rng.standard_normal((HIDDEN, CLASSES)) * 0.05).astype(np.float32)
    b2 = np.zeros(CLASSES, np.float32)
    params = (w1, b1, w2, b2)

    def loss(params, x, y):  # type: ignore[no-untyped-def]
        w1, b1, w2, b2 = params
        h = xnp.maximum(x @ w1 + b1, 0.0)
        return -xnp.mean(xnp.sum(y * _xt_log_softmax(h @ w2 + b2), axis=1))

    def step(params, x, y):  # type: ignore[no-untyped-def]
        value, grads = xla_teach.value_and_grad(loss)(params, x, y)
        return tuple(p - LR * g for p, g in zip(params, grads, strict=True)), value

    jitted = xla_teach.jit(step)
    start = time.perf_counter()
    (new_params, value) = jitted(params, x, y)
    compile_seconds = time.perf_counter() - start

    def numpy_step(params, x, y):  # type: ignore[no-untyped-def]
        w1, b1, w2, b2 = params
        pre = x @ w1 + b1
        h = np.maximum(pre, 0)
        p = _np_softmax(h @ w2 + b2)
        d2 = (p - y) / BATCH
        dh = (d2 @ w2.T) * (pre > 0)
        grads = (x.T @ dh, dh.sum(axis=0), h.T @ d2, d2.sum(axis=0))
        loss_value = -np.mean(np.sum(y * np.log(p), axis=1))
        return tuple(q - LR * g for q, g in zip(params, grads, strict=True)), loss_value

    want_params, want_value = numpy_step(params, x, y)
    np.testing.assert_allclose(float(value), float(want_value), rtol=1e-5)
    for got, want in zip(new_params, want_params, strict=True):
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-3, atol=1e-5)
    return (lambda: jitted(params, x, y)), (lambda: numpy_step(params, x, y)), compile_seconds
