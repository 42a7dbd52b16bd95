"""Oracle for ``conversions``: convert, bitcast-convert and reduce-precision.

Conversions to integers are computed element by element with Python integers (``int()``
truncates toward zero exactly), so saturation is decided without any float rounding.
Bit reinterpretation is assembled from shifts and masks, not from ``ndarray.view``, so
the oracle states the byte order (low half first) instead of inheriting the host's.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import ml_dtypes
import numpy as np

from tests.hlo.corpus_oracles.common import BF16, F16, F32, F64, Oracle, f32, normal, wrapped


def float_to_int(x: np.ndarray, dtype: type) -> np.ndarray:
    """Truncate toward zero, saturate to the type's range (+-inf too), NaN -> 0."""
    info = np.iinfo(dtype)
    out = []
    for v in np.asarray(x, F64).ravel():
        if math.isnan(v):
            out.append(0)
        elif math.isinf(v):
            out.append(info.max if v > 0 else info.min)
        else:
            out.append(min(info.max, max(info.min, int(v))))
    return np.array(out, dtype).reshape(np.shape(x))


def exact_to(x: np.ndarray, dtype: np.dtype | type) -> np.ndarray:
    """Integers (exact in f64 up to 2**53, which covers the corpus) rounded once to a float type."""
    return np.asarray(x).astype(F64).astype(dtype)


def split_words(x: np.ndarray, word_bits: int, words: int) -> np.ndarray:
    """Each integer (given as unsigned Python-int-compatible array) split into ``words``
    words of ``word_bits`` bits, least significant first, as a new minor dimension."""
    x = np.asarray(x).astype(np.uint64)
    mask = np.uint64((1 << word_bits) - 1)
    parts = [(x >> np.uint64(word_bits * w)) & mask for w in range(words)]
    return np.stack(parts, axis=-1).astype(f"u{word_bits // 8}")


def f32_bits(x: np.ndarray) -> np.ndarray:
    """The IEEE bit patterns of f32 values, as uint32, read through :mod:`struct`."""
    import struct

    return np.array([struct.unpack("<I", struct.pack("<f", float(v)))[0] for v in np.asarray(x, F32).ravel()],
                    np.uint32).reshape(np.shape(x))


def conversions_inputs(rng: np.random.Generator, run: int) -> list[np.ndarray]:
    x = normal(rng, 16) * np.float32(100)
    x[:4] = [np.nan, np.inf, -np.inf, -0.0]
    p = rng.random(6) < 0.5
    k = rng.integers(-(2**15), 2**15, 6).astype(np.int16)
    return [x, p, k]


def conversions_expected(args: Sequence[np.ndarray]) -> dict[str, np.ndarray]:
    x, p, k = args
    f = f32([2.7, -2.5, -2.7, 0.5, 300, -129, 1e10, -1e10, np.inf, -np.inf, np.nan, -0.0, 255.9, 65535.5])
    i = [300, -129, 70000, -1, 2147483647, 128, 0, -2147483648]
    u = [4294967295, 2147483648, 16777217]
    n = f32([1.00390625, 1.01171875, 65520, 1e-08, 3.14159274, -7.5e-05, 65504])
    g = np.array([0.1, 1e300, 1.0000000596046448], F64)
    bits = f32([1, -2, 0.5, -0.0])
    byte_rows = [[0, 0, 128, 63], [0, 0, 0, 192], [255, 255, 255, 127]]
    from_bytes = np.array([sum(b << (8 * j) for j, b in enumerate(row)) for row in byte_rows], np.uint32)
    r = f32([70000, 1e-08, 1.00048828, 3.14159274, 65504, 65520, 6e-08, np.nan])
    k_unsigned = wrapped(k.tolist(), np.uint16)
    with np.errstate(all="ignore"):
        return {
            "f.s8": float_to_int(f, np.int8), "f.s32": float_to_int(f, np.int32),
            "f.s64": float_to_int(f, np.int64), "f.u8": float_to_int(f, np.uint8),
            "f.u16": float_to_int(f, np.uint16), "f.u32": float_to_int(f, np.uint32),
            "f.pred": f != 0,
            "i.s8": wrapped(i, np.int8), "i.u8": wrapped(i, np.uint8), "i.s16": wrapped(i, np.int16),
            "i.u32": wrapped(i, np.uint32), "i.s64": np.array(i, np.int64), "i.f16": exact_to(i, F16),
            "i.f32": exact_to(i, F32), "i.pred": np.array(i) != 0,
            "u.f32": exact_to(u, F32), "u.s64": np.array(u, np.int64),
            "n.bf16": n.astype(BF16), "n.f16": n.astype(F16), "n.f64": n.astype(F64),
            "g.f32": g.astype(F32),
            "bits.s32": wrapped(f32_bits(bits).tolist(), np.int32),
            "bits.u16": split_words(f32_bits(bits), 16, 2),
            "bytes.f32": np.frombuffer(b"".join(int(w).to_bytes(4, "little") for w in from_bytes), "<f4").astype(F32),
            "r.e5m10": r.astype(F16).astype(F32), "r.e8m7": r.astype(BF16).astype(F32),
            "r.e5m2": r.astype(ml_dtypes.float8_e5m2).astype(F32),
            "x.s32": float_to_int(x, np.int32), "x.u8": float_to_int(x, np.uint8), "x.bf16": x.astype(BF16),
            "x.f16": x.astype(F16), "x.e4m3": x.astype(ml_dtypes.float8_e4m3).astype(F32), "x.bits": f32_bits(x),
            "p.f32": np.where(p, 1, 0).astype(F32), "p.s8": np.where(p, 1, 0).astype(np.int8),
            "k.f64": k.astype(F64), "k.u16": k_unsigned, "k.bytes": split_words(k_unsigned, 8, 2),
        }


def reduce_precision_subnormals_inputs(rng: np.random.Generator, run: int) -> list[np.ndarray]:
    x = normal(rng, 8)
    x[:3] = [2**-16 / 1e-06, -0.005859375 / 0.004, 0.2]  # scaled, these land on subnormals of e5m10 / e4m3
    return [x]


def reduce_precision_subnormals_expected(args: Sequence[np.ndarray]) -> dict[str, np.ndarray]:
    (x,) = args
    scaled = {name: x * np.float32(factor) for name, factor in [("tiny", 1e-06), ("small", 3e-05), ("milli", 0.004)]}
    return {
        "x.e5m10": scaled["tiny"].astype(F16).astype(F32),
        "x.e5m2": scaled["small"].astype(ml_dtypes.float8_e5m2).astype(F32),
        "x.e4m3": scaled["milli"].astype(ml_dtypes.float8_e4m3).astype(F32),
    }


ORACLES = {
    "conversions": Oracle(conversions_inputs, conversions_expected),
    "reduce_precision_subnormals": Oracle(reduce_precision_subnormals_inputs, reduce_precision_subnormals_expected),
}
