"""Oracle for ``data_movement``: written with NumPy slicing, np.pad and explicit clamping."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from tests.hlo.corpus_oracles.common import F32, Oracle, normal, wrapped


def clamp_start(start: int, dim: int, size: int) -> int:
    """dynamic-slice / dynamic-update-slice: start clamped to [0, dim - size]."""
    return min(max(int(start), 0), dim - size)


def hlo_pad(x: np.ndarray, value: float, config: Sequence[tuple[int, int, int]]) -> np.ndarray:
    """XLA pad: per dimension ``(low, high, interior)``; interior first, then edges, where a
    negative edge removes elements."""
    out = x
    for dim, (low, high, interior) in enumerate(config):
        n = out.shape[dim]
        spread_shape = list(out.shape)
        spread_shape[dim] = n + (n - 1) * interior if n else 0
        spread = np.full(spread_shape, value, x.dtype)
        index = [slice(None)] * out.ndim
        index[dim] = slice(None, None, interior + 1)
        spread[tuple(index)] = out
        widths = [(0, 0)] * out.ndim
        widths[dim] = (max(low, 0), max(high, 0))
        out = np.pad(spread, widths, constant_values=value)
        index[dim] = slice(max(-low, 0), out.shape[dim] - max(-high, 0))
        out = out[tuple(index)]
    return out


# (i, j) per run: in range, the largest in-range start, and out of range on both sides.
_STARTS = [(0, 0), (1, 1), (7, -3)]


def data_movement_inputs(rng: np.random.Generator, run: int) -> list[np.ndarray]:
    i, j = _STARTS[run]
    return [normal(rng, (2, 3, 4)), np.array(rng.standard_normal(), F32), normal(rng, 3), np.array(i, np.int32),
            np.array(j, np.int32), normal(rng, (2, 2)), normal(rng, (2, 6)), normal(rng, (3, 4))]


def data_movement_expected(args: Sequence[np.ndarray]) -> dict[str, np.ndarray]:
    x, s, v, i, j, u, w, y = args
    reshaped = x.reshape(4, 6)
    i0, j0 = clamp_start(i, 3, 2), clamp_start(j, 4, 3)  # x.dslice: dims (3, 4), sizes (2, 3)
    j1, i1 = clamp_start(j, 3, 2), clamp_start(i, 4, 2)  # x.dclamp: start -2 -> 0 on dim 0
    i2, j2 = clamp_start(i, 4, 2), clamp_start(j, 6, 2)  # x.dus: update [2,2] into [4,6]
    updated = reshaped.copy()
    updated[i2:i2 + 2, j2:j2 + 2] = u
    row = np.broadcast_to(np.arange(4, dtype=np.int32), (3, 4))
    return {
        "iota.row": row, "iota.col": np.broadcast_to(np.arange(3, dtype=F32)[:, None], (3, 4)),
        "iota.wrap": wrapped(range(140), np.int8),
        "s.broadcast": np.full((2, 3), s, F32), "v.broadcast": np.broadcast_to(v[None, :, None], (2, 3, 4)),
        "x.reshape": reshaped, "x.transpose": np.moveaxis(x, 2, 0), "x.slice": x[1:2, 0:3:2, 1:4:2],
        "x.dslice": x[:, i0:i0 + 2, j0:j0 + 3], "x.dclamp": x[0:1, j1:j1 + 2, i1:i1 + 2], "x.dus": updated,
        "x.concat": np.concatenate([reshaped, w, reshaped]), "iota.concat": np.concatenate([row, row], axis=1),
        "y.pad": hlo_pad(y, -1, [(-1, 2, 1), (1, -1, 0)]), "y.crop": hlo_pad(y, -1, [(-1, -1, 1), (-1, -1, 0)]),
        "y.reverse": y[::-1, ::-1], "x.reverse": x[:, ::-1, :], "y.copy": y, "y.cm": y, "y.bitcast": y.T,
        "x.flat": x.ravel(),
    }


ORACLES = {"data_movement": Oracle(data_movement_inputs, data_movement_expected, runs=len(_STARTS))}
