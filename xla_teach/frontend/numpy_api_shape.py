"""``xnp`` part 2: functions that move data around without computing
(reshape, transpose, concatenate, pad, flip, ...). Each lowers to HLO's
``reshape``, ``transpose``, ``concatenate``, ``pad``, ``reverse`` or ``slice``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from xla_teach.frontend import primitives as P
from xla_teach.frontend.numpy_api import ArrayLike, api, lift, promote
from xla_teach.frontend.tracer import Tracer, bind


def _axis_int(axis: Any, what: str = "axis") -> int:
    """``axis`` as a Python int; like NumPy, floats, bools and tuples are a TypeError."""
    if isinstance(axis, (bool, np.bool_)) or not hasattr(type(axis), "__index__"):
        raise TypeError(f"{what} must be an integer, got {type(axis).__name__} {axis!r} "
                        f"('{type(axis).__name__}' object cannot be interpreted as an integer)")
    return int(axis.__index__())


def normalize_axis(axis: int, ndim: int, what: str = "axis") -> int:
    axis = _axis_int(axis, what)
    if not -ndim <= axis < max(ndim, 1) or (ndim == 0 and axis not in (0, -1)):
        raise ValueError(f"{what} {axis} is out of bounds for an array of rank {ndim}")
    return axis % ndim if ndim else 0


def normalize_axes(axis: int | Sequence[int] | None, ndim: int) -> tuple[int, ...]:
    if axis is None:
        return tuple(range(ndim))
    axes = tuple(axis) if isinstance(axis, (tuple, list)) else (axis,)
    out = tuple(normalize_axis(a, ndim) for a in axes)
    if len(set(out)) != len(out):
        raise ValueError(f"repeated axis in {axes}")
    return out


@api
def reshape(x: ArrayLike, shape: Any) -> Tracer:
    """NumPy's ``reshape`` (row-major, one dimension may be -1)."""
    t = lift(x)
    shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(int(d) for d in shape)
    if shape.count(-1) > 1:
        raise ValueError("can only specify one unknown dimension (-1)")
    if -1 in shape:
        known = int(np.prod([d for d in shape if d != -1], dtype=np.int64))
        if known == 0 or t.size % known:
            raise ValueError(f"cannot reshape array of size {t.size} into shape {shape}")
        shape = tuple(t.size // known if d == -1 else d for d in shape)
    if int(np.prod(shape, dtype=np.int64)) != t.size:
        raise ValueError(f"cannot reshape array of size {t.size} into shape {shape}")
    if shape == t.shape:
        return t
    out = bind(P.reshape_p, t, new_sizes=shape)
    out.weak_type = t.weak_type
    return out


@api
def transpose(x: ArrayLike, axes: Sequence[int] | None = None) -> Tracer:
    t = lift(x)
    perm = tuple(reversed(range(t.ndim))) if axes is None else tuple(normalize_axis(a, t.ndim) for a in axes)
    if sorted(perm) != list(range(t.ndim)):
        raise ValueError(f"axes {axes} are not a permutation of the {t.ndim} dimensions")
    if perm == tuple(range(t.ndim)):
        return t
    return bind(P.transpose_p, t, permutation=perm)


@api
def swapaxes(x: ArrayLike, axis1: int, axis2: int) -> Tracer:
    t = lift(x)
    perm = list(range(t.ndim))
    a, b = normalize_axis(axis1, t.ndim), normalize_axis(axis2, t.ndim)
    perm[a], perm[b] = perm[b], perm[a]
    return transpose(t, perm)


@api
def moveaxis(x: ArrayLike, source: int | Sequence[int], destination: int | Sequence[int]) -> Tracer:
    """NumPy's ``moveaxis``: one axis or a sequence of axes to new positions."""
    t = lift(x)
    src, dst = normalize_axes(source, t.ndim), normalize_axes(destination, t.ndim)
    if len(src) != len(dst):
        raise ValueError("moveaxis: `source` and `destination` arguments must have the same number of elements")
    perm = [d for d in range(t.ndim) if d not in src]
    for d, s in sorted(zip(dst, src, strict=True)):
        perm.insert(d, s)
    return transpose(t, perm)


@api
def expand_dims(x: ArrayLike, axis: int | Sequence[int]) -> Tracer:
    t = lift(x)
    axes = tuple(axis) if isinstance(axis, (tuple, list)) else (axis,)
    out_ndim = t.ndim + len(axes)
    axes = sorted(normalize_axis(a, out_ndim) for a in axes)
    shape = list(t.shape)
    for a in axes:
        shape.insert(a, 1)
    return reshape(t, shape)


@api
def squeeze(x: ArrayLike, axis: int | Sequence[int] | None = None) -> Tracer:
    t = lift(x)
    if axis is None:
        axes = tuple(i for i, d in enumerate(t.shape) if d == 1)
    else:
        axes = normalize_axes(axis, t.ndim)
        for a in axes:
            if t.shape[a] != 1:
                raise ValueError(f"cannot squeeze axis {a}: its size is {t.shape[a]}, not 1")
    return reshape(t, [d for i, d in enumerate(t.shape) if i not in axes])


@api
def concatenate(arrays: Sequence[ArrayLike], axis: int = 0) -> Tracer:
    if not arrays:
        raise ValueError("need at least one array to concatenate")
    ts = promote(*arrays)
    if axis is None:
        from xla_teach.frontend.numpy_api import ravel

        ts, axis = [ravel(t) for t in ts], 0
    ndim = ts[0].ndim
    if ndim == 0:
        raise ValueError("zero-dimensional arrays cannot be concatenated")
    axis = normalize_axis(axis, ndim)
    for t in ts[1:]:
        if t.ndim != ndim or any(a != b for i, (a, b) in enumerate(zip(t.shape, ts[0].shape, strict=True))
                                 if i != axis):
            raise ValueError(f"concatenate: shapes {[t.shape for t in ts]} differ outside axis {axis}")
    if len(ts) == 1:
        return ts[0]
    return bind(P.concatenate_p, *ts, dimension=axis)


@api
def stack(arrays: Sequence[ArrayLike], axis: int = 0) -> Tracer:
    ts = promote(*arrays)
    shapes = {t.shape for t in ts}
    if len(shapes) != 1:
        raise ValueError(f"stack: all arrays must have the same shape, got {[t.shape for t in ts]}")
    axis = normalize_axis(axis, ts[0].ndim + 1)
    return concatenate([expand_dims(t, axis) for t in ts], axis)


@api
def vstack(arrays: Sequence[ArrayLike]) -> Tracer:
    ts = [lift(a) for a in arrays]
    return concatenate([reshape(t, (1, -1)) if t.ndim < 2 else t for t in ts], 0)


@api
def hstack(arrays: Sequence[ArrayLike]) -> Tracer:
    ts = [lift(a) for a in arrays]
    return concatenate(ts, 0 if ts[0].ndim == 1 else 1)


@api
def pad(x: ArrayLike, pad_width: Any, mode: str = "constant", constant_values: ArrayLike = 0) -> Tracer:
    """NumPy's ``pad`` with ``mode="constant"`` (HLO ``pad``; edge/reflect modes are not provided)."""
    if mode != "constant":
        raise NotImplementedError(f"pad mode {mode!r} is not provided (only 'constant')")
    t = lift(x)
    widths = np.broadcast_to(np.asarray(pad_width, dtype=np.int64), (t.ndim, 2))
    if (widths < 0).any():
        raise ValueError("pad widths must be non-negative")
    value = promote(t, constant_values)[1]
    if value.ndim:
        raise ValueError("constant_values must be a scalar")
    from xla_teach.frontend.numpy_api import astype

    value = astype(value, t.dtype)
    return bind(P.pad_p, t, value, config=tuple((int(lo), int(hi), 0) for lo, hi in widths))


@api
def flip(x: ArrayLike, axis: int | Sequence[int] | None = None) -> Tracer:
    t = lift(x)
    return bind(P.reverse_p, t, dimensions=normalize_axes(axis, t.ndim))


@api
def fliplr(x: ArrayLike) -> Tracer:
    return flip(x, 1)


@api
def flipud(x: ArrayLike) -> Tracer:
    return flip(x, 0)


def static_slice(t: Tracer, axis: int, start: int, stop: int, step: int = 1) -> Tracer:
    starts, limits, strides = [0] * t.ndim, list(t.shape), [1] * t.ndim
    starts[axis], limits[axis], strides[axis] = start, stop, step
    return bind(P.slice_p, t, start=tuple(starts), limit=tuple(limits), strides=tuple(strides))


@api
def split(x: ArrayLike, indices_or_sections: int | Sequence[int], axis: int = 0) -> list[Tracer]:
    t = lift(x)
    axis = normalize_axis(axis, t.ndim)
    n = t.shape[axis]
    if not isinstance(indices_or_sections, (Sequence, np.ndarray)) or np.ndim(indices_or_sections) == 0:
        sections = _axis_int(indices_or_sections, "split: the number of sections")
        if sections <= 0:
            raise ValueError(f"split: number sections must be larger than 0 (got {sections})")
        if n % sections:
            raise ValueError(f"array split does not result in an equal division ({n} into {sections})")
        cuts = [n // sections * i for i in range(1, sections)]
    else:
        cuts = [_axis_int(c, "split: each split index") for c in indices_or_sections]
    bounds = [0, *cuts, n]
    return [_piece(t, axis, lo, hi) for lo, hi in zip(bounds[:-1], bounds[1:], strict=True)]


def _piece(t: Tracer, axis: int, lo: int, hi: int) -> Tracer:
    """``t[lo:hi]`` along ``axis`` with Python's slice rules (negative indices count from
    the end, out-of-range ones are clipped, ``hi < lo`` gives an empty piece), as NumPy's split."""
    start, stop, _ = slice(lo, hi).indices(t.shape[axis])
    return static_slice(t, axis, start, max(start, stop))


@api
def tile(x: ArrayLike, reps: int | Sequence[int]) -> Tracer:
    t = lift(x)
    reps = (reps,) if isinstance(reps, int) else tuple(reps)
    ndim = max(t.ndim, len(reps))
    t = reshape(t, (1,) * (ndim - t.ndim) + t.shape)
    reps = (1,) * (ndim - len(reps)) + reps
    from xla_teach.frontend.numpy_api import broadcast_to

    expanded = broadcast_to(reshape(t, [s for d in t.shape for s in (1, d)]),
                            [s for r, d in zip(reps, t.shape, strict=True) for s in (r, d)])
    return reshape(expanded, [r * d for r, d in zip(reps, t.shape, strict=True)])
