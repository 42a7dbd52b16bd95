"""Oracle for ``contractions``: dots as ``np.einsum`` with explicit subscripts, convolutions
as a direct sum over every output position and window cell (dilation and padding applied
to copies of the operands first), in float64."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import product

import numpy as np

from tests.hlo.corpus_oracles.common import F32, F64, Oracle, normal
from tests.hlo.corpus_oracles.data_movement import hlo_pad


def einsum32(spec: str, *operands: np.ndarray) -> np.ndarray:
    return np.einsum(spec, *(o.astype(F64) for o in operands)).astype(F32)


def convolution(lhs: np.ndarray, rhs: np.ndarray, labels: str, size: Sequence[int],
                stride: Sequence[int] | None = None, pad: Sequence[tuple[int, int]] | None = None,
                lhs_dilate: Sequence[int] | None = None, rhs_dilate: Sequence[int] | None = None,
                feature_groups: int = 1, batch_groups: int = 1) -> np.ndarray:
    """XLA convolution, ``labels`` like ``b01f_01io->b01f``.

    1. Bring the input to [N, C, spatial...] and the kernel to [O, I, spatial...].
    2. Dilate the input (lhs_dilate - 1 zeros between elements) and pad it (negative = crop);
       dilate the kernel (rhs_dilate - 1 zeros between taps).
    3. out[n, o, p] = sum over i, k of input[n', g*I + i, p*stride + k] * kernel[o, i, k], where
       with feature groups g = o // (O/G) and n' = n; with batch groups the batch is split
       into B contiguous groups, g = o // (O/B) picks the input group (n' = g*N/B + n), i = c.
    """
    in_labels, rest = labels.split("_")
    kernel_labels, out_labels = rest.split("->")
    spatial = len(size)
    digits = [str(d) for d in range(spatial)]
    x = np.transpose(lhs, [in_labels.index(c) for c in ["b", "f", *digits]]).astype(F64)
    k = np.transpose(rhs, [kernel_labels.index(c) for c in ["o", "i", *digits]]).astype(F64)
    stride, pad = stride or [1] * spatial, pad or [(0, 0)] * spatial
    lhs_dilate, rhs_dilate = lhs_dilate or [1] * spatial, rhs_dilate or [1] * spatial
    x = hlo_pad(x, 0.0, [(0, 0, 0), (0, 0, 0)] + [(lo, hi, d - 1) for (lo, hi), d in zip(pad, lhs_dilate, strict=True)])
    k = hlo_pad(k, 0.0, [(0, 0, 0), (0, 0, 0)] + [(0, 0, d - 1) for d in rhs_dilate])
    n, c = x.shape[:2]
    o, i = k.shape[:2]
    window = k.shape[2:]
    out_spatial = [(x.shape[2 + d] - window[d]) // stride[d] + 1 for d in range(spatial)]
    out = np.zeros((n // batch_groups, o, *out_spatial))
    for p in product(*map(range, out_spatial)):
        cells = tuple(slice(p[d] * stride[d], p[d] * stride[d] + window[d]) for d in range(spatial))
        patch = x[(slice(None), slice(None), *cells)]  # [N, C, window...]
        for oo in range(o):
            if batch_groups > 1:
                g, per = oo // (o // batch_groups), n // batch_groups
                rows, channels = patch[g * per:(g + 1) * per], slice(None)
            else:
                g = oo // (o // feature_groups)
                rows, channels = patch, slice(g * i, (g + 1) * i)
            out[(slice(None), oo, *p)] = np.sum(rows[:, channels] * k[oo], axis=tuple(range(1, 2 + spatial)))
    return np.transpose(out, np.argsort([out_labels.index(c) for c in ["b", "f", *digits]])).astype(F32)


_SHAPES = [(2, 3), (3, 4), (2, 3, 4), (2, 4, 5), (3, 2, 4), (4, 2, 5), (3,), (2,), (4, 3)]


def contractions_inputs(rng: np.random.Generator, run: int) -> list[np.ndarray]:
    floats = [normal(rng, s) for s in _SHAPES]
    ints = [rng.integers(-20, 20, s).astype(np.int32) for s in [(3, 4), (4, 2)]]
    convs = [normal(rng, s) for s in [(1, 5, 5, 2), (3, 3, 2, 3), (2, 2, 6), (3, 2, 3), (2, 4, 3, 3), (6, 2, 2, 2),
                                      (4, 5, 3), (2, 3, 4)]]
    return floats + ints + convs


def contractions_expected(args: Sequence[np.ndarray]) -> dict[str, np.ndarray]:
    a, b, bl, br, gl, gr, u, w, cr, ia, ib, img, k, sig, sk, gin, gk, bin_, bk = args
    return {
        "ab": einsum32("ij,jk->ik", a, b), "batched": einsum32("bij,bjk->bik", bl, br),
        "general": einsum32("ibc,cbk->bik", gl, gr), "outer": einsum32("i,j->ij", u, w),
        "matvec": einsum32("ij,j->i", a, u), "two": einsum32("bij,ji->b", bl, cr),
        "int": (ia.astype(np.int64) @ ib.astype(np.int64)).astype(np.int32),
        "conv": convolution(img, k, "b01f_01io->b01f", (3, 3), stride=(2, 2), pad=[(1, 1), (1, 1)]),
        "crop": convolution(img, k, "b01f_01io->b01f", (3, 3), pad=[(-1, 1), (0, 0)], rhs_dilate=(1, 2)),
        "dilated": convolution(sig, sk, "bf0_oi0->bf0", (3,), pad=[(2, 2)], lhs_dilate=(2,), rhs_dilate=(2,)),
        "grouped": convolution(gin, gk, "bf01_oi01->bf01", (2, 2), feature_groups=2),
        "bgroup": convolution(bin_, bk, "b0f_0io->b0f", (2,), batch_groups=2),
    }


ORACLES = {"contractions": Oracle(contractions_inputs, contractions_expected, tolerance={
    name: (1e-5, 1e-5) for name in ["ab", "batched", "general", "outer", "matvec", "two", "conv", "crop", "dilated",
                                    "grouped", "bgroup"]})}
