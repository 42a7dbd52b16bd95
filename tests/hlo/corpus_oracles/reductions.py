"""Oracle for ``reductions``: windows enumerated cell by cell with plain Python loops, so the
reduce-window / select-and-scatter geometry (padding, strides, dilation) is spelled out."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from itertools import product

import numpy as np

from tests.hlo.corpus_oracles.common import F32, Oracle, normal

Index = tuple[int, ...]


def windows(shape: Index, size: Index, stride: Index | None = None, pad: Sequence[tuple[int, int]] | None = None,
            lhs_dilate: Index | None = None, rhs_dilate: Index | None = None
            ) -> tuple[Index, Iterator[tuple[Index, list[Index | None]]]]:
    """(output shape, iterator of (output index, covered operand indices in row-major window
    order, None for padding cells and base-dilation holes))."""
    rank = len(shape)
    stride = stride or (1,) * rank
    pad = pad or [(0, 0)] * rank
    lhs_dilate, rhs_dilate = lhs_dilate or (1,) * rank, rhs_dilate or (1,) * rank
    out_shape = tuple(((n - 1) * ld + 1 + lo + hi - ((s - 1) * rd + 1)) // st + 1
                      for n, s, st, (lo, hi), ld, rd in zip(shape, size, stride, pad, lhs_dilate, rhs_dilate, strict=True))

    def cell(out: Index, k: Index) -> Index | None:
        index = []
        for d in range(rank):
            p = out[d] * stride[d] + k[d] * rhs_dilate[d] - pad[d][0]  # position in the dilated base
            if p < 0 or p % lhs_dilate[d] or p // lhs_dilate[d] >= shape[d]:
                return None
            index.append(p // lhs_dilate[d])
        return tuple(index)

    def walk() -> Iterator[tuple[Index, list[Index | None]]]:
        for out in product(*map(range, out_shape)):
            yield out, [cell(out, k) for k in product(*map(range, size))]

    return out_shape, walk()


def reduce_window(x: np.ndarray, init: float, fn: Callable[[float, float], float], size: Index,
                  **geometry: object) -> np.ndarray:
    out_shape, cells = windows(x.shape, size, **geometry)  # type: ignore[arg-type]
    out = np.empty(out_shape, x.dtype)
    for index, covered in cells:
        acc = init
        for c in covered:
            acc = fn(acc, init if c is None else x[c])
        out[index] = acc
    return out


def argmax_window(x: np.ndarray, size: Index, **geometry: object) -> tuple[np.ndarray, np.ndarray]:
    """Maximum and the lowest operand index (minor dim) holding it, per window."""
    out_shape, cells = windows(x.shape, size, **geometry)  # type: ignore[arg-type]
    values, indices = np.empty(out_shape, x.dtype), np.empty(out_shape, np.int32)
    for index, covered in cells:
        best = max((c for c in covered if c is not None), key=lambda c: (x[c], -c[-1]))
        values[index], indices[index] = x[best], best[-1]
    return values, indices


def select_and_scatter(operand: np.ndarray, source: np.ndarray, size: Index, **geometry: object) -> np.ndarray:
    """GE select (first maximum wins), add scatter, init 0; padding is never selected."""
    out = np.zeros_like(operand)
    _, cells = windows(operand.shape, size, **geometry)  # type: ignore[arg-type]
    for index, covered in cells:
        valid = [c for c in covered if c is not None]
        picked = valid[0]
        for c in valid[1:]:
            if not operand[picked] >= operand[c]:
                picked = c
        out[picked] += source[index]
    return out


def reductions_inputs(rng: np.random.Generator, run: int) -> list[np.ndarray]:
    k = rng.integers(0, 4, (3, 5)).astype(np.int32)  # many ties for argmax
    q = rng.integers(0, 3, 6).astype(np.int32)  # many ties for select-and-scatter
    return [normal(rng, (4, 6)), k, normal(rng, 8), normal(rng, (2, 3)), q,
            rng.integers(-9, 9, 4).astype(np.int32), normal(rng, 3)]


def reductions_expected(args: Sequence[np.ndarray]) -> dict[str, np.ndarray]:
    x, k, z, src, q, qsrc, zsrc = args
    x_argmax_i = np.argmax(x, axis=1).astype(np.int32)  # np.argmax returns the first maximum
    k_argmax_i = np.argmax(k, axis=1).astype(np.int32)
    return {
        "x.sum": x.sum(axis=1, dtype=np.float64).astype(F32), "x.max": x.max(axis=0),
        "x.total": np.array(x.sum(dtype=np.float64), F32), "k.sum": k.sum(axis=0).astype(np.int32),
        "x.argmax.v": x.max(axis=1), "x.argmax.i": x_argmax_i, "k.argmax.v": k.max(axis=1), "k.argmax.i": k_argmax_i,
        "x.minmax.min": x.min(axis=0), "x.minmax.max": (-x).max(axis=0),
        "x.pool": x.reshape(2, 2, 3, 2).max(axis=(1, 3)),
        "x.rwsum": reduce_window(x, 0.0, np.add, (2, 3), stride=(2, 1), pad=[(0, 1), (1, 1)]),
        "z.rhs": np.array([z[0] + z[2], z[3] + z[5]], F32),
        "z.lhs": reduce_window(z, 0.0, np.add, (3,), stride=(2,), pad=[(1, 1)], lhs_dilate=(2,)),
        "x.sas": select_and_scatter(x, src, (2, 2), stride=(2, 2)),
        "q.sas": select_and_scatter(q, qsrc, (3,)),
        "z.sas": select_and_scatter(z[:5], zsrc, (2,), stride=(2,), pad=[(1, 0)]),
    }


def variadic_reduce_window_inputs(rng: np.random.Generator, run: int) -> list[np.ndarray]:
    return [normal(rng, 8), rng.integers(0, 3, 9).astype(np.int32)]


def variadic_reduce_window_expected(args: Sequence[np.ndarray]) -> dict[str, np.ndarray]:
    z, k = args
    z_argmax = argmax_window(z, (3,), stride=(2,), pad=[(0, 1)])
    k_argmax = argmax_window(k.astype(F32), (3,))
    return {"z.argmax.v": z_argmax[0], "z.argmax.i": z_argmax[1], "k.argmax.v": k_argmax[0],
            "k.argmax.i": k_argmax[1]}


ORACLES = {
    "reductions": Oracle(reductions_inputs, reductions_expected),
    "variadic_reduce_window": Oracle(variadic_reduce_window_inputs, variadic_reduce_window_expected),
}
