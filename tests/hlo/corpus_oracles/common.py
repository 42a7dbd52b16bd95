"""Shared pieces of the corpus oracles: the :class:`Oracle` record and small NumPy helpers."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import ml_dtypes
import numpy as np

BF16 = np.dtype(ml_dtypes.bfloat16)
F16, F32, F64 = np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64)

InputsFn = Callable[[np.random.Generator, int], list[np.ndarray]]
ExpectedFn = Callable[[Sequence[np.ndarray]], dict[str, np.ndarray]]


@dataclass(frozen=True)
class Oracle:
    """How to check one corpus module.

    ``inputs(rng, run)`` gives the ENTRY arguments for run number ``run`` (``runs`` runs in
    all, e.g. one per branch of a conditional); ``expected(args)`` gives every ROOT tuple
    element by instruction name. ``tolerance`` overrides ``(rtol, atol)`` per name.
    """

    inputs: InputsFn
    expected: ExpectedFn
    runs: int = 1
    tolerance: dict[str, tuple[float, float]] = field(default_factory=dict)


def no_inputs(rng: np.random.Generator, run: int) -> list[np.ndarray]:
    return []


def via_f64(fn: Callable[[np.ndarray], np.ndarray], *xs: np.ndarray) -> np.ndarray:
    """``fn`` computed in float64 and rounded once to the first argument's float type."""
    with np.errstate(all="ignore"):
        return np.asarray(fn(*(np.asarray(x, F64) for x in xs))).astype(np.asarray(xs[0]).dtype)


def wrapped(values: Sequence[int], dtype: np.dtype | type) -> np.ndarray:
    """Python integers reduced modulo 2**bits into ``dtype`` (two's complement wrap)."""
    dtype = np.dtype(dtype)
    bits = dtype.itemsize * 8
    unsigned = np.array([int(v) % (1 << bits) for v in values], dtype=f"u{dtype.itemsize}")
    return unsigned.view(dtype)


def f32(values: Sequence[float]) -> np.ndarray:
    return np.array(values, F32)


def normal(rng: np.random.Generator, shape: int | tuple[int, ...], dtype: np.dtype | type = F32) -> np.ndarray:
    return rng.standard_normal(shape).astype(dtype)


def ints(rng: np.random.Generator, shape: int | tuple[int, ...], dtype: np.dtype | type, low: int = -50,
         high: int = 50) -> np.ndarray:
    return rng.integers(low, high, shape).astype(dtype)
