"""``xnp`` part 3: reductions (HLO ``reduce``), cumulative sums (``reduce-window``)
and sorting (``sort``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from xla_teach.frontend import dtypes
from xla_teach.frontend import primitives as P
from xla_teach.frontend.errors import data_dependent_shape_error
from xla_teach.frontend.numpy_api import (
    ArrayLike,
    api,
    arange,
    astype,
    eager_call,
    floor_divide,
    full,
    greater_equal,
    lift,
    minimum,
    multiply,
    not_equal,
    ravel,
    remainder,
    sqrt,
    square,
    subtract,
    true_divide,
    where,
)
from xla_teach.frontend.numpy_api_shape import normalize_axes, normalize_axis, reshape, transpose
from xla_teach.frontend.tracer import Tracer, bind, current_context

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


def _mean_dtypes(t: Tracer, dtype: Any) -> tuple[np.dtype, np.dtype]:
    """(accumulator, result) dtypes of ``mean``/``var``/``std``. As in NumPy, ``dtype`` is
    both (``mean(int32, dtype=int32)`` truncates); by default integers and bools give
    float32 (NumPy: float64). ``float16``/``bfloat16`` accumulate in float32 and return
    their own dtype, as in NumPy and JAX (a float16 sum overflows at 65504)."""
    if dtype is not None:
        result = dtypes.canonicalize(dtype)
    else:
        result = t.dtype if dtypes.is_float(t.dtype) else dtypes.DEFAULT_FLOAT
    return _upcast_half(result), result


def _upcast_half(dtype: np.dtype) -> np.dtype:
    """float32 for the 16-bit floats, else ``dtype``."""
    return dtypes.float32 if dtypes.is_float(dtype) and np.dtype(dtype).itemsize < 4 else np.dtype(dtype)


def _mean_in(t: Tracer, axis: Axis, keepdims: bool) -> Tracer:
    """The mean of ``t`` in ``t``'s own dtype (NumPy's unsafe cast: integers truncate)."""
    return astype(true_divide(sum(t, axis, keepdims=keepdims), float(_count(t, axis))), t.dtype)


@api
def mean(x: ArrayLike, axis: Axis = None, dtype: Any = None, keepdims: bool = False) -> Tracer:
    """Arithmetic mean; ``dtype`` is the accumulator and result dtype (see :func:`_mean_dtypes`)."""
    t = lift(x)
    acc, result = _mean_dtypes(t, dtype)
    return astype(_mean_in(astype(t, acc), axis, keepdims), result)


def _var_in(t: Tracer, axis: Axis, ddof: int, keepdims: bool) -> Tracer:
    """``sum((t - mean)**2) / (n - ddof)``, computed in ``t``'s dtype (the division is true)."""
    centered = subtract(t, _mean_in(t, axis, keepdims=True))
    return true_divide(sum(square(centered), axis, keepdims=keepdims), float(_count(t, axis) - ddof))


@api
def var(x: ArrayLike, axis: Axis = None, dtype: Any = None, ddof: int = 0, keepdims: bool = False) -> Tracer:
    """Variance; dtypes as for :func:`mean`."""
    t = lift(x)
    acc, result = _mean_dtypes(t, dtype)
    return astype(_var_in(astype(t, acc), axis, ddof, keepdims), result)


@api
def std(x: ArrayLike, axis: Axis = None, dtype: Any = None, ddof: int = 0, keepdims: bool = False) -> Tracer:
    """Standard deviation; dtypes as for :func:`mean`."""
    t = lift(x)
    acc, result = _mean_dtypes(t, dtype)
    return astype(sqrt(_var_in(astype(t, acc), axis, ddof, keepdims)), result)


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


def _weights_layout(x_shape: Sequence[int], w_shape: Sequence[int], axis: Axis) -> tuple[tuple[int, ...],
                                                                                   tuple[int, ...]] | None:
    """NumPy's rule for ``average`` weights shaped unlike ``x``: they must have the shape of
    ``x`` along ``axis``; returns the transposition and the reshape that line them up with
    ``x`` (None when the shapes are equal and nothing is needed)."""
    x_shape, w_shape = tuple(x_shape), tuple(w_shape)
    if x_shape == w_shape:
        return None
    if axis is None:
        raise TypeError(f"average: axis must be specified when shapes of a {x_shape} and weights {w_shape} differ")
    axes = normalize_axes(axis, len(x_shape))
    if w_shape != tuple(x_shape[a] for a in axes):
        raise ValueError(f"average: shape of weights {w_shape} must be the shape of a {x_shape} along axis "
                         f"{axis}, {tuple(x_shape[a] for a in axes)}")
    perm = tuple(int(i) for i in np.argsort(axes))
    return perm, tuple(d if i in axes else 1 for i, d in enumerate(x_shape))


def _check_weight_sums(x: ArrayLike, weights: ArrayLike, axis: Axis) -> None:
    """NumPy's ZeroDivisionError for weights that sum to zero; only concrete (NumPy)
    weights can be checked -- traced ones give inf/NaN there, as in JAX."""
    if isinstance(weights, Tracer):
        return
    w = np.asarray(weights)
    layout = _weights_layout(x.shape if isinstance(x, Tracer) else np.shape(x), w.shape, axis)
    if layout is not None:
        w = w.transpose(layout[0]).reshape(layout[1])
    if np.any(np.sum(w.astype(np.float64), axis=None if axis is None else normalize_axes(axis, w.ndim)) == 0):
        raise ZeroDivisionError("average: weights sum to zero, can't be normalized")


@api
def _weighted_average(x: ArrayLike, axis: Axis, weights: ArrayLike) -> Tracer:
    t, w = lift(x), lift(weights)
    layout = _weights_layout(t.shape, w.shape, axis)
    if layout is not None:
        w = reshape(transpose(w, layout[0]), layout[1])
    result = dtypes.result_type((t.dtype, False), (w.dtype, False))[0]
    if not dtypes.is_float(result):
        result = dtypes.DEFAULT_FLOAT
    acc = _upcast_half(result)
    t, w = astype(t, acc), astype(w, acc)
    return astype(true_divide(sum(multiply(t, w), axis), sum(w, axis)), result)


def average(x: ArrayLike, axis: Axis = None, weights: ArrayLike = None) -> Tracer:
    """NumPy's ``average``: ``sum(x * w) / sum(w)`` over ``axis``. ``weights`` have the
    shape of ``x``, or (with ``axis``) the shape of ``x`` along ``axis``. Weights that sum
    to zero raise ZeroDivisionError when they are NumPy arrays (traced: inf/NaN, as JAX)."""
    if weights is None:
        return mean(x, axis)
    if isinstance(weights, (list, tuple)):
        weights = np.asarray(weights)
    if isinstance(x, (list, tuple)):
        x = np.asarray(x)
    _check_weight_sums(x, weights, axis)
    return _weighted_average(x, axis, weights)


# ---- data-dependent shapes: not compilable --------------------------------------------------------
def nonzero(x: ArrayLike, *, size: int | None = None, fill_value: int = 0) -> Any:
    """Indices of the nonzero elements. Compilable only with a static ``size``: the first
    ``size`` indices, padded with ``fill_value``."""
    if current_context() is None and size is None:
        return tuple(np.nonzero(np.asarray(x)))
    if size is None:
        raise data_dependent_shape_error(
            "xnp.nonzero", "pass a static size: xnp.nonzero(x, size=N, fill_value=0) returns exactly N indices "
            "per dimension; or keep the full shape with xnp.where(mask, x, 0)")
    if current_context() is None:
        return eager_call(lambda a: nonzero(a, size=size, fill_value=fill_value), (np.asarray(x),), {})
    t = lift(x)
    mask = ravel(not_equal(t, 0))
    count = sum(astype(mask, np.int32))
    position = subtract(cumsum(astype(mask, np.int32)), 1)
    # Zeros and the nonzeros past the first ``size`` all go to an extra slot ``size``, sliced
    # off below (``.at[]`` clamps out-of-range indices, so they could not just be dropped).
    target = where(mask, minimum(position, size), size)
    flat = bind(P.iota_p, dtype=np.int32, shape=(t.size,), dimension=0)
    out = full((size + 1,), 0, np.int32).at[target].set(flat)[:size]
    padding = greater_equal(arange(size), count)
    coords = []
    for dim in reversed(t.shape):
        coords.append(where(padding, fill_value, remainder(out, dim)))
        out = floor_divide(out, dim)
    return tuple(reversed(coords))


def argwhere(x: ArrayLike) -> Any:
    if current_context() is None:
        return np.argwhere(np.asarray(x))
    raise data_dependent_shape_error("xnp.argwhere", "use xnp.nonzero(x, size=N) with a static N, or "
                                     "xnp.where(mask, x, fill) to keep the full shape")


def flatnonzero(x: ArrayLike) -> Any:
    if current_context() is None:
        return np.flatnonzero(np.asarray(x))
    raise data_dependent_shape_error("xnp.flatnonzero", "use xnp.nonzero(xnp.ravel(x), size=N) with a static N")


def unique(x: ArrayLike, **kwargs: Any) -> Any:
    """Sorted unique values. The number of distinct values depends on the data, so
    this cannot be compiled; eagerly (outside jit) it is NumPy's ``unique``."""
    if current_context() is None:
        return np.unique(np.asarray(x), **kwargs)
    raise data_dependent_shape_error(
        "xnp.unique", "compute a fixed-size result instead, e.g. xnp.sort(x) and a mask of first occurrences "
        "(sorted[1:] != sorted[:-1]), or a histogram with x.at[...].add(1) over a known range of values")
