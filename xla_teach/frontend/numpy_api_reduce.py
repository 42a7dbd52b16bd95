"""``xnp`` part 3: reductions (HLO ``reduce``), cumulative sums (``reduce-window``)
and sorting (``sort``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from xla_teach.frontend import dtypes
from xla_teach.frontend import primitives as P
from xla_teach.frontend.numpy_api import (
    ArrayLike,
    api,
    astype,
    lift,
    multiply,
    ravel,
    sqrt,
    square,
    subtract,
    true_divide,
)
from xla_teach.frontend.numpy_api_shape import normalize_axes, normalize_axis, reshape
from xla_teach.frontend.tracer import Tracer, bind

Axis = int | Sequence[int] | None


def _keep(t: Tracer, out: Tracer, axes: tuple[int, ...], keepdims: bool) -> Tracer:
    if not keepdims:
        return out
    return reshape(out, [1 if i in axes else d for i, d in enumerate(t.shape)])


def _reduce(kind: str, x: ArrayLike, axis: Axis, keepdims: bool) -> Tracer:
    t = lift(x)
    axes = normalize_axes(axis, t.ndim)
    if not axes:
        return t
    out = bind(P.PRIMITIVES[f"reduce_{kind}"], t, axes=axes)
    return _keep(t, out, axes, keepdims)


def _accumulator(t: Tracer, dtype: Any) -> Tracer:
    """NumPy sums bools and small integers in a wider integer (here: int32)."""
    if dtype is not None:
        return astype(t, dtype)
    if t.dtype == np.bool_ or (dtypes.is_int(t.dtype) and np.dtype(t.dtype).itemsize < 4):
        return astype(t, np.int32 if t.dtype == np.bool_ or np.dtype(t.dtype).kind == "i" else np.uint32)
    return t


@api
def sum(x: ArrayLike, axis: Axis = None, dtype: Any = None, keepdims: bool = False) -> Tracer:  # noqa: A001
    return _reduce("sum", _accumulator(lift(x), dtype), axis, keepdims)


@api
def prod(x: ArrayLike, axis: Axis = None, dtype: Any = None, keepdims: bool = False) -> Tracer:
    return _reduce("prod", _accumulator(lift(x), dtype), axis, keepdims)


@api
def max(x: ArrayLike, axis: Axis = None, keepdims: bool = False) -> Tracer:  # noqa: A001
    t = lift(x)
    if t.size == 0:
        raise ValueError("zero-size array to reduction operation max which has no identity")
    return _reduce("max", t, axis, keepdims)


@api
def min(x: ArrayLike, axis: Axis = None, keepdims: bool = False) -> Tracer:  # noqa: A001
    t = lift(x)
    if t.size == 0:
        raise ValueError("zero-size array to reduction operation min which has no identity")
    return _reduce("min", t, axis, keepdims)


amax, amin = max, min


@api
def any(x: ArrayLike, axis: Axis = None, keepdims: bool = False) -> Tracer:  # noqa: A001
    return _reduce("or", astype(x, np.bool_), axis, keepdims)


@api
def all(x: ArrayLike, axis: Axis = None, keepdims: bool = False) -> Tracer:  # noqa: A001
    return _reduce("and", astype(x, np.bool_), axis, keepdims)


def _count(t: Tracer, axis: Axis) -> int:
    return int(np.prod([t.shape[a] for a in normalize_axes(axis, t.ndim)], dtype=np.int64))


@api
def mean(x: ArrayLike, axis: Axis = None, dtype: Any = None, keepdims: bool = False) -> Tracer:
    t = lift(x)
    if not dtypes.is_float(t.dtype):
        t = astype(t, dtypes.DEFAULT_FLOAT)
    if dtype is not None:
        t = astype(t, dtype)
    return true_divide(sum(t, axis, keepdims=keepdims), float(_count(t, axis)))


@api
def var(x: ArrayLike, axis: Axis = None, dtype: Any = None, ddof: int = 0, keepdims: bool = False) -> Tracer:
    t = lift(x)
    if not dtypes.is_float(t.dtype):
        t = astype(t, dtypes.DEFAULT_FLOAT)
    centered = subtract(t, mean(t, axis, dtype=dtype, keepdims=True))
    n = _count(t, axis)
    return true_divide(sum(square(centered), axis, keepdims=keepdims), float(n - ddof))


@api
def std(x: ArrayLike, axis: Axis = None, dtype: Any = None, ddof: int = 0, keepdims: bool = False) -> Tracer:
    return sqrt(var(x, axis, dtype=dtype, ddof=ddof, keepdims=keepdims))


def _argreduce(kind: str, x: ArrayLike, axis: int | None, keepdims: bool) -> Tracer:
    t = lift(x)
    if t.size == 0:
        raise ValueError(f"attempt to get arg{kind} of an empty sequence")
    if axis is None:
        flat = ravel(t)
        out = bind(P.argreduce_p, flat, axis=0, index_dtype=dtypes.DEFAULT_INT, kind=kind)
        return reshape(out, (1,) * t.ndim) if keepdims else out
    ax = normalize_axis(axis, t.ndim)
    out = bind(P.argreduce_p, t, axis=ax, index_dtype=dtypes.DEFAULT_INT, kind=kind)
    return _keep(t, out, (ax,), keepdims)


@api
def argmax(x: ArrayLike, axis: int | None = None, keepdims: bool = False) -> Tracer:
    """Index of the first maximum (NaN counts as the maximum, as in NumPy); int32."""
    return _argreduce("max", x, axis, keepdims)


@api
def argmin(x: ArrayLike, axis: int | None = None, keepdims: bool = False) -> Tracer:
    return _argreduce("min", x, axis, keepdims)


def _cumulative(kind: str, x: ArrayLike, axis: int | None, dtype: Any) -> Tracer:
    """A prefix reduction as XLA front ends lower it: ``reduce-window`` with a window
    as long as the axis and ``n - 1`` cells of low padding."""
    t = _accumulator(lift(x), dtype)
    if axis is None:
        t, axis = ravel(t), 0
    ax = normalize_axis(axis, t.ndim)
    n = t.shape[ax]
    if n == 0:
        return t
    window = tuple(n if i == ax else 1 for i in range(t.ndim))
    padding = tuple((n - 1, 0) if i == ax else (0, 0) for i in range(t.ndim))
    return bind(P.reduce_window_p, t, kind=kind, window=window, strides=(1,) * t.ndim, padding=padding)


@api
def cumsum(x: ArrayLike, axis: int | None = None, dtype: Any = None) -> Tracer:
    return _cumulative("sum", x, axis, dtype)


@api
def cumprod(x: ArrayLike, axis: int | None = None, dtype: Any = None) -> Tracer:
    return _cumulative("prod", x, axis, dtype)


def _sort_with_indices(t: Tracer, axis: int) -> tuple[Tracer, Tracer]:
    ax = normalize_axis(axis, t.ndim)
    iota = bind(P.iota_p, dtype=dtypes.DEFAULT_INT, shape=t.shape, dimension=ax)
    values, perm = bind(P.sort_p, t, iota, dimension=ax)
    return values, perm


@api
def sort(x: ArrayLike, axis: int | None = -1) -> Tracer:
    """Ascending, stable (an HLO ``sort`` of the values together with their indices,
    so the gradient can route each cotangent back to its position)."""
    t = lift(x)
    if axis is None:
        t, axis = ravel(t), 0
    if t.ndim == 0:
        return t
    return _sort_with_indices(t, axis)[0]


@api
def argsort(x: ArrayLike, axis: int | None = -1) -> Tracer:
    """Indices that sort ``x`` (stable: ties keep their order); int32."""
    t = lift(x)
    if axis is None:
        t, axis = ravel(t), 0
    return _sort_with_indices(t, axis)[1]


@api
def average(x: ArrayLike, axis: Axis = None, weights: ArrayLike = None) -> Tracer:
    if weights is None:
        return mean(x, axis)
    t, w = lift(x), lift(weights)
    return true_divide(sum(multiply(t, w), axis), sum(multiply(w, 1.0) if not dtypes.is_float(w.dtype) else w,
                                                      axis))
