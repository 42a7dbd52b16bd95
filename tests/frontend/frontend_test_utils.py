"""Helpers for front-end tests: run a function through jit and compare with NumPy."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

import xla_teach
from xla_teach.hlo.evaluator.error_bounds import (
    Bounded,
    BoundsUnavailable,
    error_bounds,
    outside_bound,
    unknown_bound,
)


def run(fn: Callable[..., Any], *args: Any, backend: str = "interpreter", **jit_kwargs: Any) -> Any:
    """``jit(fn)(*args)`` on ``backend`` (the interpreter by default: fast to compile)."""
    return xla_teach.jit(fn, backend=backend, **jit_kwargs)(*args)


def assert_matches(fn: Callable[..., Any], ref: Callable[..., Any], *args: Any, backend: str = "interpreter",
                   rtol: float = 1e-5, atol: float = 1e-6, check_dtype: bool = True) -> None:
    """``jit(fn)(*args)`` equals ``ref(*args)`` (NumPy): shapes, dtypes and values.

    Values are compared through the traced module's rounding-error bounds
    (:mod:`xla_teach.hlo.evaluator.error_bounds`): the compiled result must lie within the bound
    of the exact (f64) value of the module -- whatever order this machine's BLAS sums in -- and
    NumPy's result must lie within that bound plus ``rtol``/``atol`` (NumPy's own rounding and,
    where ``ref`` is another formula, the difference between the formulas). Elements whose bound
    is unknown, and modules the analysis refuses, are compared with NumPy at ``rtol``/``atol``."""
    got = run(fn, *args, backend=backend)
    want = ref(*args)
    got_leaves = xla_teach.frontend.pytree.tree_leaves(got)
    want_leaves = xla_teach.frontend.pytree.tree_leaves(want)
    assert len(got_leaves) == len(want_leaves)
    bounds = _bounds(fn, args, len(got_leaves))
    for i, (g, w) in enumerate(zip(got_leaves, want_leaves, strict=True)):
        w, g = np.asarray(w), np.asarray(g)
        assert g.shape == w.shape, (g.shape, w.shape)
        if check_dtype:
            assert g.dtype == w.dtype, (g.dtype, w.dtype)
        if bounds is not None and g.dtype.kind == "f" and w.dtype.kind == "f":
            _assert_within(g, w, bounds[i], rtol, atol, f"output {i}")
            continue
        np.testing.assert_allclose(g.astype(np.float64) if w.dtype != np.bool_ else g,
                                   w.astype(np.float64) if w.dtype != np.bool_ else w, rtol=rtol, atol=atol)


def _bounds(fn: Callable[..., Any], args: tuple[Any, ...], outputs: int) -> list[Bounded] | None:
    """The bounds of ``fn``'s traced module on ``args``, or None where they do not apply (an op
    the analysis refuses, or arguments that are not one parameter each)."""
    module = xla_teach.jit(fn, backend="interpreter").lower(*args).module
    leaves = [np.asarray(a) for a in xla_teach.frontend.pytree.tree_leaves(args)]
    if module.entry.num_parameters != len(leaves):
        return None
    try:
        bounds = error_bounds(module, leaves)
    except BoundsUnavailable:
        return None
    return bounds if len(bounds) == outputs else None


def _assert_within(got: np.ndarray, want: np.ndarray, bounded: Bounded, rtol: float, atol: float,
                   what: str) -> None:
    known = ~unknown_bound(bounded)
    bad = outside_bound(got, bounded)
    assert not bad.any(), (f"{what}: {int(bad.sum())} of {bad.size} elements outside the rounding-error bound; "
                           f"first at {tuple(np.argwhere(bad)[0])}: got {got[bad][0]!r}, exact "
                           f"{bounded.value[bad][0]!r}, bound {bounded.bound[bad][0]!r}")
    value, w = bounded.value[known], want[known].astype(np.float64)
    with np.errstate(invalid="ignore"):
        far = ~((w == value) | (np.isnan(w) & np.isnan(value))
                | (np.abs(w - value) <= bounded.bound[known] + atol + rtol * np.abs(value)))
    assert not far.any(), (f"{what}: NumPy's result differs from the module's exact value at {int(far.sum())} "
                           f"elements: NumPy {w[far][0]!r}, exact {value[far][0]!r}")
    np.testing.assert_allclose(got[~known].astype(np.float64), want[~known].astype(np.float64), rtol=rtol, atol=atol)


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
