"""Oracles for the integer corpus modules ``int_divide_remainder``, ``int_shifts`` and
``int_unary_arith``: every value computed with Python's unbounded integers, then wrapped to
the type's width (two's complement), so wrap-around is explicit rather than NumPy's."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from tests.hlo.corpus_oracles.common import Oracle, wrapped

SIGNED = {"s8": np.int8, "s16": np.int16, "s32": np.int32, "s64": np.int64}
UNSIGNED = {"u8": np.uint8, "u16": np.uint16, "u32": np.uint32, "u64": np.uint64}
TYPES = SIGNED | UNSIGNED


def bits_of(dtype: type) -> int:
    return np.dtype(dtype).itemsize * 8


def signed_value(v: int, bits: int) -> int:
    """The two's complement value of the low ``bits`` bits of ``v``."""
    v %= 1 << bits
    return v - (1 << bits) if v >> (bits - 1) else v


@dataclass(frozen=True)
class Limits:
    """The constants the corpus writes per type: MIN, MAX, the width W and HALF = 2**(W-1)."""

    min: int
    max: int
    w: int
    half: int

    @staticmethod
    def of(dtype: type) -> Limits:
        info, w = np.iinfo(dtype), bits_of(dtype)
        return Limits(int(info.min), int(info.max), w, 1 << (w - 1))


def elementwise(fn: Callable[..., int], dtype: type, *columns: Sequence[int]) -> np.ndarray:
    return wrapped([fn(*row) for row in zip(*columns, strict=True)], dtype)


def as_ints(x: np.ndarray) -> list[int]:
    return [int(v) for v in np.asarray(x).ravel()]


# ---- divide / remainder ------------------------------------------------------------------
def divide(a: int, b: int, dtype: type) -> int:
    """Truncating division; x/0 = all bits set (-1 or the unsigned max); MIN/-1 = MIN (wraps)."""
    if b == 0:
        return -1
    quotient = abs(a) // abs(b)
    return quotient if (a < 0) == (b < 0) else -quotient


def remainder(a: int, b: int, dtype: type) -> int:
    """Sign of the dividend; x%0 = x; MIN % -1 = 0."""
    if b == 0:
        return a
    return a - b * divide(a, b, dtype)


# The constant operands of each corpus module, per signed / unsigned type.
def div_constants(t: Limits) -> tuple[list[int], list[int]]:
    if t.min < 0:
        return ([7, -7, 5, -7, t.min, t.min, 3, 0, t.max, -1, 5, t.min],
                [2, 2, -3, -2, -1, 1, 0, 0, -1, t.min, t.max, t.min])
    return [7, 5, t.max, t.max, 3, 0, 1, t.max, 200, t.max - 1], [2, 3, 0, 1, 0, 0, t.max, t.max, 7, t.max]
DIV_PARAMS = [("s32", 0), ("u16", 2), ("s8", 4), ("u64", 6)]  # (type, parameter number of x; y follows)


def int_divide_remainder_inputs(rng: np.random.Generator, run: int) -> list[np.ndarray]:
    args: list[np.ndarray] = []
    for name, _ in DIV_PARAMS:
        dtype = TYPES[name]
        info = np.iinfo(dtype)
        x = rng.integers(info.min, info.max, 19, dtype=dtype, endpoint=True)
        y = rng.integers(-9 if info.min else 0, 10, 19).astype(dtype)
        x[:3], y[:3] = [info.min, info.max, 5], [info.max if info.min == 0 else -1, 0, 0]  # edge pairs
        args += [x, y]
    return args


def int_divide_remainder_expected(args: Sequence[np.ndarray]) -> dict[str, np.ndarray]:
    want = {}
    for name, dtype in TYPES.items():
        a, b = div_constants(Limits.of(dtype))
        want[f"div.{name}"] = elementwise(lambda p, q: divide(p, q, dtype), dtype, a, b)  # noqa: B023
        want[f"rem.{name}"] = elementwise(lambda p, q: remainder(p, q, dtype), dtype, a, b)  # noqa: B023
    for name, number in DIV_PARAMS:
        dtype = TYPES[name]
        x, y = as_ints(args[number]), as_ints(args[number + 1])
        want[f"pdiv.{name}"] = elementwise(lambda p, q: divide(p, q, dtype), dtype, x, y)  # noqa: B023
        want[f"prem.{name}"] = elementwise(lambda p, q: remainder(p, q, dtype), dtype, x, y)  # noqa: B023
    return want


# ---- shifts ------------------------------------------------------------------------------
def shifts(v: int, s: int, bits: int) -> tuple[int, int, int]:
    """(shift-left, shift-right-logical, shift-right-arithmetic) of the ``bits``-bit values.
    The amount is read as unsigned; amounts >= the width give 0, 0 and all sign bits. The
    arithmetic shift reads the value as signed even for unsigned types."""
    unsigned, amount = v % (1 << bits), s % (1 << bits)
    as_signed = signed_value(v, bits)
    if amount >= bits:
        return 0, 0, -1 if as_signed < 0 else 0
    return unsigned << amount, unsigned >> amount, as_signed >> amount


def shift_constants(t: Limits) -> tuple[list[int], list[int]]:
    if t.min < 0:
        return ([1, -1, t.min, 90, 1, t.min, -1, t.max, 3, t.min, 90, 1],
                [0, 1, t.w - 1, t.w, t.w + 1, 1, -1, 3, 2 * t.w, t.w, t.w - 1, -1])
    return ([1, t.max, t.half, 90, 1, t.half, t.max, t.half - 1, 3, t.half, 90, 1],
            [0, 1, t.w - 1, t.w, t.w + 1, 1, t.max, 3, 2 * t.w, t.w, t.w - 1, t.max])
SHIFT_PARAMS = [("s32", 0), ("u8", 2)]


def _shift_results(prefix: str, name: str, v: list[int], s: list[int]) -> dict[str, np.ndarray]:
    dtype = TYPES[name]
    results = [shifts(a, b, bits_of(dtype)) for a, b in zip(v, s, strict=True)]
    return {f"{prefix}{op}.{name}": wrapped([r[k] for r in results], dtype)
            for k, op in enumerate(["shl", "shrl", "shra"])}


def int_shifts_inputs(rng: np.random.Generator, run: int) -> list[np.ndarray]:
    args: list[np.ndarray] = []
    for name, _ in SHIFT_PARAMS:
        dtype = TYPES[name]
        info, w = np.iinfo(dtype), bits_of(dtype)
        x = rng.integers(info.min, info.max, 23, dtype=dtype, endpoint=True)
        y = rng.integers(0, 2 * w + 2, 23).astype(dtype)  # in range, at and past the width
        y[0] = -1 if info.min else info.max  # "negative" amount
        args += [x, y]
    return args


def int_shifts_expected(args: Sequence[np.ndarray]) -> dict[str, np.ndarray]:
    want = {}
    for name, dtype in TYPES.items():
        want |= _shift_results("", name, *shift_constants(Limits.of(dtype)))
    for name, number in SHIFT_PARAMS:
        want |= _shift_results("p", name, as_ints(args[number]), as_ints(args[number + 1]))
    return want


# ---- unary and wrapping arithmetic -------------------------------------------------------
def unary_constants(t: Limits) -> tuple[list[int], list[int]]:
    if t.min < 0:
        return [0, 1, -1, t.min, t.max, 5, -6, 100], [t.max, t.max, t.min, -1, 1, 100, 7, 100]
    return [0, 1, t.max, t.half, 5, 100, 3, 200], [t.max, 1, 1, t.half, 7, 100, 5, 200]
UNARY_PARAMS = [("s16", 0), ("u32", 2), ("s64", 4)]


def popcnt(v: int, bits: int) -> int:
    return bin(v % (1 << bits)).count("1")


def clz(v: int, bits: int) -> int:
    return bits - (v % (1 << bits)).bit_length()


def int_unary_arith_inputs(rng: np.random.Generator, run: int) -> list[np.ndarray]:
    args: list[np.ndarray] = []
    for name, _ in UNARY_PARAMS:
        dtype = TYPES[name]
        info = np.iinfo(dtype)
        x = rng.integers(info.min, info.max, 21, dtype=dtype, endpoint=True)
        x[:2] = [0, info.max]
        args += [x, rng.integers(info.min, info.max, 21, dtype=dtype, endpoint=True)]
    return args


def int_unary_arith_expected(args: Sequence[np.ndarray]) -> dict[str, np.ndarray]:
    want = {}
    for name, dtype in TYPES.items():
        w = bits_of(dtype)
        v, u = unary_constants(Limits.of(dtype))
        one = {
            "negate": lambda a: -a, "not": lambda a: ~a,
            "popcnt": lambda a: popcnt(a, w), "clz": lambda a: clz(a, w),  # noqa: B023
        }
        if name in SIGNED:
            one |= {"abs": abs, "sign": lambda a: (a > 0) - (a < 0)}
        two = {"add": lambda a, b: a + b, "subtract": lambda a, b: a - b, "multiply": lambda a, b: a * b}
        if name in UNSIGNED:
            two |= {"max": max, "min": min}
        want |= {f"{op}.{name}": elementwise(fn, dtype, v) for op, fn in one.items()}
        want |= {f"{op}.{name}": elementwise(fn, dtype, v, u) for op, fn in two.items()}
    for name, number in UNARY_PARAMS:
        dtype = TYPES[name]
        w = bits_of(dtype)
        x, y = as_ints(args[number]), as_ints(args[number + 1])
        want[f"pmul.{name}"] = elementwise(lambda a, b: a * b, dtype, x, y)
        want[f"padd.{name}"] = elementwise(lambda a, b: a + b, dtype, x, y)
        want[f"ppop.{name}"] = elementwise(lambda a: popcnt(a, w), dtype, x)  # noqa: B023
        want[f"pclz.{name}"] = elementwise(lambda a: clz(a, w), dtype, x)  # noqa: B023
    return want


ORACLES = {
    "int_divide_remainder": Oracle(int_divide_remainder_inputs, int_divide_remainder_expected),
    "int_shifts": Oracle(int_shifts_inputs, int_shifts_expected),
    "int_unary_arith": Oracle(int_unary_arith_inputs, int_unary_arith_expected),
}
