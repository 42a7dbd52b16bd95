"""``gather`` and ``scatter`` (§9 of the semantics), plus :func:`combine_into`, the
ordered read-modify-write that scatter and select-and-scatter share.

Both ops pair *batch positions* of ``start_indices`` (every index dimension except
``index_vector_dim``) with a *start vector* read along ``index_vector_dim``; the start
vector is scattered into a full operand index with ``start_index_map`` /
``scatter_dims_to_operand_dims``, and batching dimensions take the batch position's own
coordinate. Then:

* gather clamps each start to ``[0, dim - slice_size]`` and copies the slice out;
* scatter *skips* every update window that does not fit entirely inside the operand and
  combines the others in with ``out = f(current, update)``, in row-major update order.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from xla_teach.hlo.evaluator.numeric import to_index_array
from xla_teach.hlo.evaluator.registry import Value, register

if TYPE_CHECKING:
    from xla_teach.hlo.evaluator.core import HloEvaluator
    from xla_teach.hlo.ir import HloComputation, HloInstruction


def combine_into(
    ev: HloEvaluator,
    comp: HloComputation,
    outputs: list[np.ndarray],
    positions: np.ndarray,
    updates: list[np.ndarray],
) -> list[np.ndarray]:
    """Return copies of the flat ``outputs`` after, for each i in order,
    ``out[positions[i]] = comp(out[positions[i]], updates[i])`` (N outputs, N updates).

    Updates are applied in *rounds*: round r applies every position's r-th update. Within a
    round all positions differ, so one vectorised call does the whole round, and every
    position still sees its updates in their original order -- exactly the sequential result.
    """
    outputs = [o.copy() for o in outputs]
    if positions.size == 0:
        return outputs
    # rank[i] = how many earlier updates target the same position as update i.
    order = np.argsort(positions, kind="stable")
    ordered = positions[order]
    group_start = np.r_[True, ordered[1:] != ordered[:-1]]
    first_of_group = np.maximum.accumulate(np.where(group_start, np.arange(ordered.size), 0))
    rank = np.empty(ordered.size, np.int64)
    rank[order] = np.arange(ordered.size) - first_of_group
    for r in range(int(rank.max()) + 1):
        chosen = np.nonzero(rank == r)[0]
        target = positions[chosen]
        current = [o[target] for o in outputs]
        combined = ev.apply_elementwise(comp, current + [u[chosen] for u in updates])
        for output, values in zip(outputs, combined, strict=True):
            output[target] = values
    return outputs


def _start_vectors(indices: np.ndarray, index_vector_dim: int) -> tuple[np.ndarray, tuple[int, ...], list[int]]:
    """(start vectors as int64 [B, K], batch shape, the indices dimension of each batch axis).

    If ``index_vector_dim == rank(indices)`` the start vectors have an implicit length 1.
    """
    indices = to_index_array(indices)
    if index_vector_dim == indices.ndim:
        indices = indices[..., np.newaxis]
    batch_dims = [d for d in range(indices.ndim) if d != index_vector_dim]
    moved = np.moveaxis(indices, index_vector_dim, -1)
    batch_shape = moved.shape[:-1]
    return moved.reshape(math.prod(batch_shape), moved.shape[-1]), batch_shape, batch_dims


def _full_starts(
    vectors: np.ndarray,
    batch_shape: tuple[int, ...],
    batch_dims: list[int],
    rank: int,
    index_map: Sequence[int],
    operand_batching_dims: Sequence[int],
    indices_batching_dims: Sequence[int],
) -> np.ndarray:
    """One full operand start index per batch position: [B, rank]."""
    starts = np.zeros((vectors.shape[0], rank), np.int64)
    starts[:, list(index_map)] = vectors
    coordinates = np.indices(batch_shape).reshape(len(batch_shape), vectors.shape[0])
    for operand_dim, indices_dim in zip(operand_batching_dims, indices_batching_dims, strict=True):
        starts[:, operand_dim] = coordinates[batch_dims.index(indices_dim)]
    return starts


# ---- gather ---------------------------------------------------------------------------
@register("gather")
def handle_gather(ev: HloEvaluator, instr: HloInstruction, operands: list[Value]) -> Value:
    operand, indices = operands
    slice_sizes = instr.attr("slice_sizes")
    collapsed = instr.attr("collapsed_slice_dims")
    operand_batching = instr.attr("operand_batching_dims")
    vectors, batch_shape, batch_dims = _start_vectors(indices, int(instr.attr("index_vector_dim")))
    starts = _full_starts(vectors, batch_shape, batch_dims, operand.ndim, instr.attr("start_index_map"),
                          operand_batching, instr.attr("start_indices_batching_dims"))
    # Gather never reads out of bounds: each start is clamped to [0, dim - slice_size].
    starts = np.clip(starts, 0, np.array(operand.shape) - np.array(slice_sizes))

    offset_operand_dims = [d for d in range(operand.ndim) if d not in collapsed and d not in operand_batching]
    offset_shape = tuple(slice_sizes[d] for d in offset_operand_dims)
    offsets = np.indices(offset_shape).reshape(len(offset_shape), math.prod(offset_shape))
    # Operand index of every (batch position, offset): [rank, B, W].
    full = np.repeat(starts.T[:, :, np.newaxis], offsets.shape[1], axis=2)
    for k, d in enumerate(offset_operand_dims):
        full[d] += offsets[k][np.newaxis, :]
    values = operand[tuple(full)].reshape(batch_shape + offset_shape)
    # Batch dimensions fill the output positions not listed in offset_dims, in order.
    offset_dims = list(instr.attr("offset_dims"))
    return np.moveaxis(values, list(range(len(batch_shape), values.ndim)), offset_dims).copy()


# ---- scatter --------------------------------------------------------------------------
@register("scatter")
def handle_scatter(ev: HloEvaluator, instr: HloInstruction, operands: list[Value]) -> Value:
    count = (len(operands) - 1) // 2
    targets, indices, updates = operands[:count], operands[count], operands[count + 1 :]
    operand_shape = targets[0].shape
    rank = len(operand_shape)
    window_dims = list(instr.attr("update_window_dims"))
    inserted = instr.attr("inserted_window_dims")
    input_batching = instr.attr("input_batching_dims")
    vectors, batch_shape, batch_dims = _start_vectors(indices, int(instr.attr("index_vector_dim")))
    starts = _full_starts(vectors, batch_shape, batch_dims, rank, instr.attr("scatter_dims_to_operand_dims"),
                          input_batching, instr.attr("scatter_indices_batching_dims"))

    update_shape = updates[0].shape
    window_operand_dims = [d for d in range(rank) if d not in inserted and d not in input_batching]
    window_size = np.ones(rank, np.int64)
    for k, d in enumerate(window_operand_dims):
        window_size[d] = update_shape[window_dims[k]]
    # XLA:CPU skips a whole window whose start is out of range, even if it overlaps.
    # (start <= dim - size rather than start + size <= dim, which wraps for starts near 2^63.)
    fits = np.all((starts >= 0) & (starts <= np.array(operand_shape, np.int64) - window_size), axis=1)

    # For every update element (row-major): its batch position and its operand index.
    coordinates = np.indices(update_shape).reshape(len(update_shape), math.prod(update_shape))
    scatter_dims = [d for d in range(len(update_shape)) if d not in window_dims]
    if scatter_dims:
        batch_position = np.ravel_multi_index(tuple(coordinates[scatter_dims]), batch_shape)
    else:
        batch_position = np.zeros(coordinates.shape[1], np.int64)
    target = starts[batch_position].T.copy()  # [rank, U]
    for k, d in enumerate(window_operand_dims):
        target[d] += coordinates[window_dims[k]]
    keep = fits[batch_position]
    if rank:
        positions = np.ravel_multi_index(tuple(target[:, keep]), operand_shape)
    else:
        positions = np.zeros(int(keep.sum()), np.int64)
    results = combine_into(
        ev, instr.to_apply, [t.reshape(-1) for t in targets], positions, [u.reshape(-1)[keep] for u in updates]
    )
    shaped = [r.reshape(operand_shape) for r in results]
    return shaped[0] if count == 1 else tuple(shaped)
