"""Helpers for front-end tests: run a function through jit and compare with NumPy."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

import xla_teach


def run(fn: Callable[..., Any], *args: Any, backend: str = "interpreter", **jit_kwargs: Any) -> Any:
    """``jit(fn)(*args)`` on ``backend`` (the interpreter by default: fast to compile)."""
    return xla_teach.jit(fn, backend=backend, **jit_kwargs)(*args)


def assert_matches(fn: Callable[..., Any], ref: Callable[..., Any], *args: Any, backend: str = "interpreter",
                   rtol: float = 1e-5, atol: float = 1e-6, check_dtype: bool = True) -> None:
    """``jit(fn)(*args)`` equals ``ref(*args)`` (NumPy), values, shapes and dtypes."""
    got = run(fn, *args, backend=backend)
    want = ref(*args)
    got_leaves = xla_teach.frontend.pytree.tree_leaves(got)
    want_leaves = xla_teach.frontend.pytree.tree_leaves(want)
    assert len(got_leaves) == len(want_leaves)
    for g, w in zip(got_leaves, want_leaves, strict=True):
        w = np.asarray(w)
        assert np.shape(g) == w.shape, (np.shape(g), w.shape)
        if check_dtype:
            assert np.asarray(g).dtype == w.dtype, (np.asarray(g).dtype, w.dtype)
        np.testing.assert_allclose(np.asarray(g, dtype=np.float64) if w.dtype != np.bool_ else g,
                                   w.astype(np.float64) if w.dtype != np.bool_ else w, rtol=rtol, atol=atol)


def numerical_grad(f: Callable[[np.ndarray], float], x: np.ndarray, eps: float = 1e-3) -> np.ndarray:
    """Central finite differences of a scalar function, in float64."""
    x = np.asarray(x, dtype=np.float64)
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        up, down = x.copy(), x.copy()
        up[i] += eps
        down[i] -= eps
        g[i] = (f(up) - f(down)) / (2 * eps)
    return g


def check_grad(fn: Callable[..., Any], *args: np.ndarray, argnum: int = 0, backend: str = "interpreter",
               rtol: float = 2e-2, atol: float = 2e-2, eps: float = 1e-3) -> None:
    """``grad(fn)`` agrees with finite differences of ``fn`` compiled in float64."""
    got = xla_teach.jit(xla_teach.grad(fn, argnums=argnum), backend=backend)(*args)
    f64 = xla_teach.jit(fn, backend="interpreter")

    def scalar(x: np.ndarray) -> float:
        call = list(args)
        call[argnum] = x
        return float(f64(*call))

    want = numerical_grad(scalar, args[argnum], eps)
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)
