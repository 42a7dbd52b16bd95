"""NumPy indexing on traced arrays, and the functional update ``x.at[index]``.

How each kind of index lowers to HLO:

* ``x[1:5:2]``, ``x[3]``, ``x[None]``, ``x[..., 0]`` -- static: ``slice`` (plus
  ``reverse`` for negative steps) and a ``reshape`` that drops integer-indexed dims
  and inserts ``None`` dims;
* ``x[i]`` with a traced integer ``i`` -- ``dynamic-slice`` (XLA clamps the start so
  the slice stays in bounds; NumPy would raise an IndexError);
* ``x[idx]`` with integer arrays -- ``gather`` (NumPy's "advanced indexing", including
  its rule for where the broadcast index dims go; out-of-range indices are clamped);
* a boolean mask ``x[mask]`` -- its result's length depends on the data: a traced
  mask raises :class:`CompilationError`; a concrete NumPy mask is turned into integer
  indices while tracing.

``x.at[index].set(v)`` (and ``add``, ``multiply``, ``min``, ``max``, ``get``)
returns an updated copy: ``dynamic-update-slice`` for boxes (ints and unit-step
slices), else a ``scatter``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from xla_teach.frontend import dtypes
from xla_teach.frontend import primitives as P
from xla_teach.frontend.errors import CompilationError, data_dependent_shape_error
from xla_teach.frontend.numpy_api import (
    ArrayLike,
    add,
    api,
    astype,
    broadcast_shapes,
    broadcast_to,
    less,
    lift,
    maximum,
    minimum,
    multiply,
    promote,
    ravel,
    where,
)
from xla_teach.frontend.numpy_api_shape import concatenate, expand_dims, normalize_axis, reshape
from xla_teach.frontend.tracer import Tracer, bind, current_context, eval_shape


def _is_int_scalar(v: Any) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def _is_array_index(v: Any) -> bool:
    """An integer-array index (a gather); scalars -- Python, NumPy or traced -- are not."""
    if isinstance(v, Tracer):
        return v.ndim > 0
    return isinstance(v, (np.ndarray, list))


_VALID_INDICES = ("only integers, slices (`:`), ellipsis (`...`), numpy.newaxis (`None`) and integer or "
                  "boolean arrays are valid indices")


def _check_index_item(item: Any) -> Any:
    """``item`` if NumPy would accept it as one entry of an index (objects with
    ``__index__`` become ints), else an IndexError as NumPy raises."""
    if item is None or item is Ellipsis or isinstance(item, (slice, Tracer, np.ndarray)) or _is_int_scalar(item):
        return item
    if isinstance(item, np.generic) or not hasattr(type(item), "__index__"):
        raise IndexError(f"{_VALID_INDICES}; got {type(item).__name__} {item!r}")
    return int(item.__index__())


def _expand(index: Any, ndim: int) -> list[Any]:
    """The index as a list with one entry per array dim, plus ``None`` entries;
    Ellipsis expanded, concrete boolean masks turned into integer arrays."""
    if not isinstance(index, tuple):
        index = (index,)
    entries: list[Any] = []
    for item in index:
        if isinstance(item, list):
            item = np.asarray(item) if item else np.zeros(0, np.int32)  # NumPy: [] is an empty integer index
        if not isinstance(item, (bool, np.bool_)):
            item = _check_index_item(item)
        if isinstance(item, Tracer) and item.dtype == np.bool_:
            raise data_dependent_shape_error(
                "boolean mask indexing x[mask]", "keep the shape with xnp.where(mask, x, 0) (then e.g. "
                "xnp.sum(...) over it), or use xnp.nonzero(mask, size=N) for a fixed number of indices")
        if isinstance(item, (bool, np.bool_)):
            raise NotImplementedError("indexing with a Python bool is not supported")
        if isinstance(item, np.ndarray) and item.dtype == np.bool_:
            entries.extend(np.nonzero(item))  # a concrete mask: its nonzero indices are known now
            continue
        if isinstance(item, np.ndarray) and item.dtype.kind not in "iu":
            raise IndexError(f"arrays used as indices must be of integer type, got {item.dtype}")
        if isinstance(item, Tracer) and not dtypes.is_int(item.dtype):
            raise IndexError(f"arrays used as indices must be of integer type, got {item.dtype}")
        if isinstance(item, slice):
            for bound in (item.start, item.stop, item.step):
                if isinstance(bound, Tracer):
                    raise CompilationError(
                        "slicing with a traced bound x[i:j]", "the length of the slice would depend on a traced "
                        "value (XLA shapes are static)", "use xnp.dynamic_slice(x, start_indices, slice_sizes) "
                        "with a traced start and a static size")
        entries.append(item)
    n_ellipsis = sum(1 for e in entries if e is Ellipsis)
    if n_ellipsis > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    used = sum(1 for e in entries if e is not None and e is not Ellipsis)
    if used > ndim:
        raise IndexError(f"too many indices for array: array is {ndim}-dimensional, but {used} were indexed")
    fill = [slice(None)] * (ndim - used)
    if n_ellipsis:
        i = entries.index(Ellipsis)
        entries = entries[:i] + fill + entries[i + 1:]
    else:
        entries = entries + fill
    return entries


def _slice_dims(t: Tracer, entries: list[Any]) -> Tracer:
    """Apply the static slices (one ``slice`` op, then ``reverse`` for negative steps)."""
    dims = [e for e in entries if e is not None]
    starts, limits, strides, flips = [], [], [], []
    for axis, (e, n) in enumerate(zip(dims, t.shape, strict=True)):
        if isinstance(e, slice):
            start, stop, step = e.indices(n)
            if step > 0:
                count = max(0, -(-(stop - start) // step))
                starts.append(start)
                limits.append(start + (count - 1) * step + 1 if count else start)
                strides.append(step)
            else:  # take the elements in increasing order, then reverse
                count = max(0, -(-(start - stop) // -step))
                low = start + (count - 1) * step if count else 0
                starts.append(low)
                limits.append(start + 1 if count else 0)
                strides.append(-step)
                flips.append(axis)
        else:
            starts.append(0)
            limits.append(n)
            strides.append(1)
    if starts != [0] * t.ndim or limits != list(t.shape) or strides != [1] * t.ndim:
        t = bind(P.slice_p, t, start=tuple(starts), limit=tuple(limits), strides=tuple(strides))
    if flips:
        t = bind(P.reverse_p, t, dimensions=tuple(flips))
    return t


def _normalize_index(index: Tracer, n: int) -> Tracer:
    """Negative indices count from the end (``i + n`` where ``i < 0``), as in NumPy."""
    if np.dtype(index.dtype).kind == "u":
        return index
    return where(less(index, 0), add(index, n), index)


def getitem(x: ArrayLike, index: Any) -> Tracer:
    t = lift(x)
    entries = _expand(index, t.ndim)
    if not any(_is_array_index(e) for e in entries):
        return _basic_getitem(t, entries)
    return _advanced_getitem(t, entries)


def _basic_getitem(t: Tracer, entries: list[Any]) -> Tracer:
    dims = [e for e in entries if e is not None]
    # Static ints become one-element slices; traced ints one dynamic-slice for them all.
    static = [slice(*_int_range(e, n)) if _is_int_scalar(e) else (slice(None) if isinstance(e, Tracer) else e)
              for e, n in zip(dims, t.shape, strict=True)]
    t = _slice_dims(t, static)
    traced = [i for i, e in enumerate(dims) if isinstance(e, Tracer)]
    if traced:
        starts = []
        for i, e in enumerate(dims):
            if isinstance(e, Tracer):
                if e.ndim:
                    raise IndexError("a traced index must be a scalar here")
                starts.append(astype(_normalize_index(e, t.shape[i]), np.int32))
            else:
                starts.append(np.int32(0))
        sizes = tuple(1 if i in traced else d for i, d in enumerate(t.shape))
        t = bind(P.dynamic_slice_p, t, *starts, sizes=sizes)
    out_shape: list[int] = []
    k = 0
    for e in entries:
        if e is None:
            out_shape.append(1)
            continue
        if not (_is_int_scalar(e) or isinstance(e, Tracer)):
            out_shape.append(t.shape[k])
        k += 1
    return reshape(t, out_shape) if tuple(out_shape) != t.shape else t


def _int_range(i: Any, n: int) -> tuple[int, int]:
    i = int(i)
    if not -n <= i < n:
        raise IndexError(f"index {i} is out of bounds for an axis of size {n}")
    i %= n
    return i, i + 1


def _advanced_getitem(t: Tracer, entries: list[Any]) -> Tracer:
    if any(e is None for e in entries):
        raise NotImplementedError("mixing None (newaxis) with integer-array indices is not supported; "
                                  "index first, then add the axis with xnp.expand_dims")
    t = _slice_dims(t, [e if isinstance(e, slice) else slice(None) for e in entries])
    advanced = [i for i, e in enumerate(entries) if not isinstance(e, slice)]
    index_arrays = []
    for axis in advanced:
        e = entries[axis]
        if isinstance(e, Tracer):
            index_arrays.append(_normalize_index(e, t.shape[axis]))
        else:
            array = np.asarray(e)
            if ((array < -t.shape[axis]) | (array >= t.shape[axis])).any():
                raise IndexError(f"index {array.min() if (array < 0).any() else array.max()} is out of bounds "
                                 f"for axis {axis} with size {t.shape[axis]}")
            index_arrays.append(lift(np.where(array < 0, array + t.shape[axis], array).astype(np.int32)))
    batch_shape = broadcast_shapes(*[a.shape for a in index_arrays])
    columns = [reshape(broadcast_to(astype(a, np.int32), batch_shape), batch_shape + (1,)) for a in index_arrays]
    indices = columns[0] if len(columns) == 1 else concatenate(columns, -1)
    contiguous = advanced == list(range(advanced[0], advanced[-1] + 1))
    rest = [i for i in range(t.ndim) if i not in advanced]
    nb = len(batch_shape)
    if contiguous:
        before = [i for i in rest if i < advanced[0]]
        offset_dims = [rest.index(i) for i in before] + [nb + rest.index(i) for i in rest if i > advanced[0]]
    else:
        offset_dims = [nb + k for k in range(len(rest))]
    slice_sizes = tuple(1 if i in advanced else d for i, d in enumerate(t.shape))
    return bind(P.gather_p, t, indices, offset_dims=tuple(offset_dims), collapsed_slice_dims=tuple(advanced),
                start_index_map=tuple(advanced), slice_sizes=slice_sizes)


# ---- functional updates -------------------------------------------------------------------------
_COMBINE = {"add": add, "mul": multiply, "min": minimum, "max": maximum}


def _box(t: Tracer, entries: list[Any]) -> tuple[list[Any], tuple[int, ...]] | None:
    """``(starts, sizes)`` when the index selects a box (ints and unit-step slices)."""
    if any(e is None or _is_array_index(e) for e in entries):
        return None
    starts: list[Any] = []
    sizes: list[int] = []
    for e, n in zip(entries, t.shape, strict=True):
        if isinstance(e, slice):
            start, stop, step = e.indices(n)
            if step != 1:
                return None
            starts.append(np.int32(start))
            sizes.append(max(0, stop - start))
        elif isinstance(e, Tracer):
            if e.ndim:
                return None
            starts.append(astype(_normalize_index(e, n), np.int32))
            sizes.append(1)
        else:
            starts.append(np.int32(_int_range(e, n)[0]))
            sizes.append(1)
    return starts, tuple(sizes)


def scatter_update(x: ArrayLike, index: Any, values: ArrayLike, mode: str) -> Tracer:
    """``x`` with ``x[index]`` replaced by (``mode="set"``) or combined with ``values``."""
    t = lift(x)
    v = lift(values)
    if v.dtype != t.dtype:
        v = astype(v, t.dtype)
    v = broadcast_to(v, eval_shape(getitem, t, index).shape)
    entries = _expand(index, t.ndim)
    box = _box(t, entries)
    if box is not None:
        starts, sizes = box
        update = reshape(v, sizes)
        if mode != "set":
            current = bind(P.dynamic_slice_p, t, *starts, sizes=sizes)
            update = _COMBINE[mode](current, update)
        return bind(P.dynamic_update_slice_p, t, update, *starts)
    # General case: find which flat positions x[index] reads (by indexing an iota the same
    # way), then scatter the values into the flattened array at those positions.
    positions = reshape(bind(P.iota_p, dtype=np.int32, shape=(t.size,), dimension=0), t.shape)
    flat_positions = reshape(getitem(positions, index), (-1, 1))
    flat = reshape(t, (t.size,))
    updated = bind(P.scatter_p, flat, flat_positions, reshape(v, (-1,)), mode=mode, update_window_dims=(),
                   inserted_window_dims=(0,), scatter_dims_to_operand_dims=(0,))
    return reshape(updated, t.shape)


class _IndexUpdateRef:
    def __init__(self, array: Any, index: Any) -> None:
        self.array = array
        self.index = index

    def _apply(self, mode: str, values: ArrayLike) -> Tracer:
        if current_context() is None:
            from xla_teach.frontend.numpy_api import eager_call

            return eager_call(lambda a, i, v: scatter_update(a, i, v, mode), (self.array, self.index, values), {})
        return scatter_update(self.array, self.index, values, mode)

    def get(self) -> Tracer:
        if current_context() is None:
            from xla_teach.frontend.numpy_api import eager_call

            return eager_call(getitem, (self.array, self.index), {})
        return getitem(self.array, self.index)

    def set(self, values: ArrayLike) -> Tracer:
        return self._apply("set", values)

    def add(self, values: ArrayLike) -> Tracer:
        return self._apply("add", values)

    def multiply(self, values: ArrayLike) -> Tracer:
        return self._apply("mul", values)

    mul = multiply

    def min(self, values: ArrayLike) -> Tracer:
        return self._apply("min", values)

    def max(self, values: ArrayLike) -> Tracer:
        return self._apply("max", values)


class AtIndexer:
    """``x.at[index]``: JAX's functional-update helper (arrays are immutable in XLA)."""

    def __init__(self, array: Any) -> None:
        self.array = array

    def __getitem__(self, index: Any) -> _IndexUpdateRef:
        return _IndexUpdateRef(self.array, index)


def at(x: ArrayLike) -> AtIndexer:
    """``xnp.at(x)[index].set(v)`` works for NumPy arrays too (they have no ``.at``)."""
    return AtIndexer(x)


# ---- take, take_along_axis, dynamic slices --------------------------------------------------------
@api
def take(x: ArrayLike, indices: ArrayLike, axis: int | None = None) -> Tracer:
    t = lift(x)
    if axis is None:
        t, axis = reshape(t, (t.size,)), 0
    axis = normalize_axis(axis, t.ndim)
    idx = indices if isinstance(indices, Tracer) else np.asarray(indices)
    if isinstance(idx, np.ndarray) and idx.ndim == 0:
        idx = idx.reshape(1)
        return reshape(getitem(t, (slice(None),) * axis + (idx,)), t.shape[:axis] + t.shape[axis + 1:])
    return getitem(t, (slice(None),) * axis + (idx,))


@api
def take_along_axis(x: ArrayLike, indices: ArrayLike, axis: int) -> Tracer:
    t, idx = lift(x), lift(indices)
    if t.ndim != idx.ndim:
        raise ValueError(f"take_along_axis: indices (rank {idx.ndim}) must have the same rank as the array "
                         f"(rank {t.ndim})")
    axis = normalize_axis(axis, t.ndim)
    shape = broadcast_shapes(tuple(1 if i == axis else d for i, d in enumerate(t.shape)), idx.shape)
    entries: list[Any] = []
    for d in range(t.ndim):
        if d == axis:
            entries.append(broadcast_to(idx, shape))
        elif t.shape[d] == 1:
            entries.append(broadcast_to(lift(np.zeros((), np.int32)), shape))
        else:
            entries.append(bind(P.iota_p, dtype=np.int32, shape=shape, dimension=d))
    return getitem(t, tuple(entries))


@api
def dynamic_slice(x: ArrayLike, start_indices: Any, slice_sizes: Any) -> Tracer:
    """XLA's ``DynamicSlice``: a static-size window at traced start indices (clamped into bounds)."""
    t = lift(x)
    starts = [astype(lift(s), np.int32) for s in start_indices]
    if len(starts) != t.ndim or len(slice_sizes) != t.ndim:
        raise ValueError(f"dynamic_slice needs {t.ndim} start indices and slice sizes")
    return bind(P.dynamic_slice_p, t, *starts, sizes=tuple(int(s) for s in slice_sizes))


@api
def dynamic_update_slice(x: ArrayLike, update: ArrayLike, start_indices: Any) -> Tracer:
    """XLA's ``DynamicUpdateSlice``: ``x`` with ``update`` written at traced start indices."""
    t, u = promote(x, update)
    starts = [astype(lift(s), np.int32) for s in start_indices]
    return bind(P.dynamic_update_slice_p, t, u, *starts)


# ---- repeat: a broadcast, or a gather when the counts differ ----------------------------------
def repeat(x: ArrayLike, repeats: int | Sequence[int] | np.ndarray, axis: int | None = None) -> Tracer:
    """NumPy's ``repeat``. ``repeats`` is one count, or one count per element along ``axis``;
    the counts decide the result's shape, so they must be concrete (Python ints, a list, a
    NumPy array), not traced."""
    if isinstance(repeats, Tracer):
        raise data_dependent_shape_error("xnp.repeat with traced repeats", "pass the repeat counts as a Python "
                                         "int/list or NumPy array, or mark the argument static with jit(..., "
                                         "static_argnums=...)")
    reps = np.asarray(repeats)
    if reps.ndim > 1 or not (np.issubdtype(reps.dtype, np.integer) or reps.size == 0):
        raise TypeError(f"xnp.repeat: repeats must be an int or a 1-D sequence of ints, got {repeats!r}")
    if (reps < 0).any():
        raise ValueError(f"xnp.repeat: negative dimensions are not allowed (repeats={reps.tolist()})")
    return _repeat(x, int(reps) if reps.ndim == 0 else tuple(int(r) for r in reps), axis)


@api
def _repeat(x: ArrayLike, repeats: int | tuple[int, ...], axis: int | None) -> Tracer:
    t = lift(x)
    if axis is None:
        t, axis = ravel(t), 0
    axis = normalize_axis(axis, t.ndim)
    if isinstance(repeats, tuple):
        if len(repeats) == 1:
            repeats = repeats[0]
        elif len(repeats) != t.shape[axis]:
            raise ValueError(f"xnp.repeat: {len(repeats)} repeat counts for axis {axis} of size {t.shape[axis]} "
                             f"(shape {t.shape}); give one count, or one per element")
        elif len(set(repeats)) == 1:
            repeats = repeats[0]
        else:  # per-element counts: gather with a constant index vector
            index = np.repeat(np.arange(t.shape[axis], dtype=np.int32), repeats)
            return take(t, index, axis=axis)
    shape = t.shape[:axis + 1] + (int(repeats),) + t.shape[axis + 1:]
    expanded = broadcast_to(expand_dims(t, axis + 1), shape)
    return reshape(expanded, t.shape[:axis] + (t.shape[axis] * int(repeats),) + t.shape[axis + 1:])
