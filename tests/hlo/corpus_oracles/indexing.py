"""Oracle for ``indexing``: gather and scatter written as loops over every output / update
element following the operation-semantics definitions, and sorts from ``np.argsort``."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from tests.hlo.corpus_oracles.common import F32, Oracle, normal
from tests.hlo.corpus_oracles.elementwise import total_order_key


def _index_vectors(indices: np.ndarray, index_vector_dim: int) -> np.ndarray:
    """Indices with the index vector as the last dimension (a trailing 1 if it was implicit)."""
    if index_vector_dim == indices.ndim:
        indices = indices[..., None]
    return np.moveaxis(indices, index_vector_dim, -1)


def gather(operand: np.ndarray, indices: np.ndarray, offset_dims: Sequence[int], collapsed: Sequence[int],
           start_index_map: Sequence[int], index_vector_dim: int, slice_sizes: Sequence[int]) -> np.ndarray:
    vectors = _index_vectors(indices, index_vector_dim)
    batch_shape = vectors.shape[:-1]
    offset_sizes = [s for d, s in enumerate(slice_sizes) if d not in collapsed]
    out_rank = len(batch_shape) + len(offset_sizes)
    batch_dims = [d for d in range(out_rank) if d not in offset_dims]
    out_shape = [0] * out_rank
    for d, s in zip(batch_dims, batch_shape, strict=True):
        out_shape[d] = s
    for d, s in zip(offset_dims, offset_sizes, strict=True):
        out_shape[d] = s
    out = np.empty(out_shape, operand.dtype)
    for b in np.ndindex(*batch_shape):
        start = [0] * operand.ndim
        for k, d in enumerate(start_index_map):
            start[d] = int(vectors[b][k])
        start = [min(max(s, 0), operand.shape[d] - slice_sizes[d]) for d, s in enumerate(start)]  # clamp
        block = operand[tuple(slice(s, s + n) for s, n in zip(start, slice_sizes, strict=True))]
        block = block.reshape(offset_sizes)  # drop the collapsed (size-1) dims
        for o in np.ndindex(*offset_sizes):
            index = [0] * out_rank
            for d, v in zip(batch_dims, b, strict=True):
                index[d] = v
            for d, v in zip(offset_dims, o, strict=True):
                index[d] = v
            out[tuple(index)] = block[o]
    return out


def scatter_add(operand: np.ndarray, indices: np.ndarray, updates: np.ndarray, update_window_dims: Sequence[int],
                inserted: Sequence[int], scatter_to_operand: Sequence[int], index_vector_dim: int) -> np.ndarray:
    """Each update element is added at start + window offset; a window that does not fit in
    the operand at its start is skipped as a whole."""
    out = operand.astype(np.float64)
    vectors = _index_vectors(indices, index_vector_dim)
    scatter_dims = [d for d in range(updates.ndim) if d not in update_window_dims]
    window_dims = [d for d in range(operand.ndim) if d not in inserted]  # operand dims the window spans
    window_size = [1] * operand.ndim
    for d, u in zip(window_dims, update_window_dims, strict=True):
        window_size[d] = updates.shape[u]
    for u in np.ndindex(*updates.shape):
        vector = vectors[tuple(u[d] for d in scatter_dims)]
        start = [0] * operand.ndim
        for k, d in enumerate(scatter_to_operand):
            start[d] = int(vector[k])
        if any(s < 0 or s + w > n for s, w, n in zip(start, window_size, operand.shape, strict=True)):
            continue
        target = list(start)
        for d, ud in zip(window_dims, update_window_dims, strict=True):
            target[d] += u[ud]
        out[tuple(target)] += updates[u]
    return out.astype(operand.dtype)


def indexing_inputs(rng: np.random.Generator, run: int) -> list[np.ndarray]:
    return [normal(rng, (5, 4)), np.array([4, 9, -2], np.int32), normal(rng, 5), normal(rng, 4), normal(rng, (5, 3)),
            np.array([3, 3], np.int32) if run == 0 else np.array([1, 8], np.int32), normal(rng, (2, 3)),
            normal(rng, (3, 2, 3)), rng.integers(0, 4, 10).astype(np.int32), normal(rng, 10), normal(rng, (3, 5))]


def indexing_expected(args: Sequence[np.ndarray]) -> dict[str, np.ndarray]:
    x, rows, v, upd, m, mrows, mupd, wupd, keys, values, y = args
    order = np.argsort(keys, kind="stable")
    nans = np.array([3, np.nan, -1, 0, -0.0, -np.inf, 1], F32)
    return {
        "x.rows": gather(x, rows, [1], [0], [0], 1, [1, 4]),
        "x.blocks": gather(x, np.array([[1, 2], [7, -1]]), [1, 2], [], [0, 1], 1, [2, 2]),
        "x.points": gather(x, np.array([[0, 3, 1], [2, 0, 9]]), [], [0, 1], [1, 0], 0, [1, 1]),
        "v.scatter": scatter_add(v, np.array([[0], [2], [2], [9]]), upd, [], [0], [0], 1),
        "m.scatter": scatter_add(m, mrows, mupd, [1], [0], [0], 1),
        "m.windows": scatter_add(m, np.array([0, 4, 3]), wupd, [1, 2], [], [0], 1),
        "sorted.keys": keys[order], "sorted.values": values[order], "sorted.positions": order.astype(np.int32),
        "y.desc": -np.sort(-y, axis=1), "y.cols": np.sort(y, axis=0),
        "nans.sorted": nans[np.argsort(total_order_key(nans), kind="stable")],
    }


ORACLES = {"indexing": Oracle(indexing_inputs, indexing_expected, runs=2)}
