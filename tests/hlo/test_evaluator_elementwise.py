"""Elementwise ops of the reference interpreter against the measured XLA semantics
(xla-operation-semantics.md §2-4) and independent pure-Python formulations."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tests.hlo.evaluator_util import BF16, assert_bits_equal, run_op

SIGNED = [np.int8, np.int16, np.int32, np.int64]
UNSIGNED = [np.uint8, np.uint16, np.uint32, np.uint64]
INTEGERS = SIGNED + UNSIGNED
FLOATS = [np.float16, BF16, np.float32, np.float64]


def f32(*values: float) -> np.ndarray:
    return np.array(values, np.float32)


def wrap(value: int, dtype: type) -> int:
    """Python int -> the two's complement value of ``dtype``."""
    bits = np.dtype(dtype).itemsize * 8
    value &= (1 << bits) - 1
    if np.dtype(dtype).kind == "i" and value >= 1 << (bits - 1):
        value -= 1 << bits
    return value


def random_ints(dtype: type, count: int, seed: int = 0) -> np.ndarray:
    info = np.iinfo(dtype)
    rng = np.random.default_rng(seed)
    values = rng.integers(info.min, info.max, size=count, dtype=dtype, endpoint=True)
    specials = np.array([info.min, info.max, 0, 1], dtype)
    if info.min < 0:
        specials = np.concatenate([specials, np.array([-1], dtype)])
    return np.concatenate([specials, values])


# ---- unary ----------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", SIGNED)
def test_abs_and_negate_of_int_min_wrap(dtype: type) -> None:
    x = np.array([np.iinfo(dtype).min, -3, 0, 7], dtype)
    np.testing.assert_array_equal(run_op("abs", x), np.array([np.iinfo(dtype).min, 3, 0, 7], dtype))
    np.testing.assert_array_equal(run_op("negate", x), np.array([np.iinfo(dtype).min, 3, 0, -7], dtype))


def test_abs_negative_zero_is_positive_zero() -> None:
    assert_bits_equal(run_op("abs", f32(-0.0, -2.5)), f32(0.0, 2.5))


def test_sign() -> None:
    assert_bits_equal(run_op("sign", f32(-0.0, 0.0, -3, 5, np.nan, -np.inf)), f32(-0.0, 0.0, -1, 1, np.nan, -1))
    np.testing.assert_array_equal(run_op("sign", np.array([-9, 0, 4], np.int32)), [-1, 0, 1])
    np.testing.assert_array_equal(run_op("sign", np.array([0, 200], np.uint8)), np.array([0, 1], np.uint8))


def test_rounding_ties() -> None:
    x = f32(0.5, 1.5, 2.5, -2.5, -0.5, 0.49999997, -0.4)
    assert_bits_equal(run_op("round-nearest-afz", x), f32(1, 2, 3, -3, -1, 0, -0.0))
    assert_bits_equal(run_op("round-nearest-even", x), f32(0, 2, 2, -2, -0.0, 0, -0.0))
    assert_bits_equal(run_op("floor", f32(-0.5)), f32(-1))
    assert_bits_equal(run_op("ceil", f32(-0.5)), f32(-0.0))


def test_float_unary_edge_cases() -> None:
    assert_bits_equal(run_op("sqrt", f32(-1, -0.0, 4)), f32(np.nan, -0.0, 2))
    assert_bits_equal(run_op("rsqrt", f32(0, 4)), f32(np.inf, 0.5))
    assert_bits_equal(run_op("log", f32(0, -1)), f32(-np.inf, np.nan))
    assert_bits_equal(run_op("log-plus-one", f32(-1)), f32(-np.inf))
    assert_bits_equal(run_op("cbrt", f32(-8)), f32(-2))
    assert_bits_equal(run_op("logistic", f32(-100, 0)), f32(0, 0.5))
    np.testing.assert_array_equal(run_op("is-finite", f32(1, np.inf, -np.inf, np.nan), result="pred[4]"),
                                  [True, False, False, False])


def test_transcendental_match_math_library() -> None:
    x = np.linspace(-3, 3, 25)
    for opcode, reference in [("exponential", math.exp), ("exponential-minus-one", math.expm1),
                              ("sine", math.sin), ("cosine", math.cos), ("tan", math.tan), ("tanh", math.tanh),
                              ("erf", math.erf)]:
        expected = np.array([reference(v) for v in x])
        np.testing.assert_allclose(run_op(opcode, x), expected, rtol=1e-14, atol=1e-15, err_msg=opcode)


def test_not() -> None:
    np.testing.assert_array_equal(run_op("not", np.array([5, 0, -1], np.int32)), [-6, -1, 0])
    np.testing.assert_array_equal(run_op("not", np.array([True, False])), [False, True])
    np.testing.assert_array_equal(run_op("not", np.array([0, 255], np.uint8)), np.array([255, 0], np.uint8))


@pytest.mark.parametrize("dtype", INTEGERS)
def test_popcnt_and_count_leading_zeros(dtype: type) -> None:
    x = random_ints(dtype, 50)
    bits = np.dtype(dtype).itemsize * 8
    unsigned = [int(v) & ((1 << bits) - 1) for v in x]
    np.testing.assert_array_equal(run_op("popcnt", x), np.array([bin(u).count("1") for u in unsigned], dtype))
    np.testing.assert_array_equal(run_op("count-leading-zeros", x),
                                  np.array([bits - u.bit_length() for u in unsigned], dtype))


def test_popcnt_clz_measured_values() -> None:
    assert run_op("popcnt", np.array(-1, np.int32)) == 32
    np.testing.assert_array_equal(run_op("count-leading-zeros", np.array([0, 1], np.int32)), [32, 31])
    np.testing.assert_array_equal(run_op("count-leading-zeros", np.array([0, 1], np.uint8)), [8, 7])


def test_narrow_float_unary_rounds_from_f32() -> None:
    for dtype in (np.float16, BF16):
        x = np.linspace(-4, 4, 33).astype(dtype)
        expected = np.exp(x.astype(np.float32)).astype(dtype)
        assert_bits_equal(run_op("exponential", x), expected)


# ---- binary ---------------------------------------------------------------------------
def test_integer_wraparound() -> None:
    s32_max = np.array(np.iinfo(np.int32).max, np.int32)
    assert run_op("add", s32_max, np.array(1, np.int32)) == np.iinfo(np.int32).min
    assert run_op("multiply", np.array(100, np.int8), np.array(100, np.int8)) == 16
    assert run_op("subtract", np.array(0, np.uint8), np.array(1, np.uint8)) == 255


def _reference_divide(a: int, b: int, dtype: type) -> tuple[int, int]:
    """(quotient, remainder) per the measured table, with Python ints."""
    if b == 0:
        return wrap(-1, dtype), a
    quotient = abs(a) // abs(b)
    if (a < 0) != (b < 0):
        quotient = -quotient
    return wrap(quotient, dtype), wrap(a - quotient * b, dtype)


@pytest.mark.parametrize("dtype", INTEGERS)
def test_integer_divide_and_remainder(dtype: type) -> None:
    a = random_ints(dtype, 40, seed=1)
    b = random_ints(dtype, 40, seed=2)
    b[:6] = 0  # division by zero
    b[6:10] = np.array([3, 2, 7, 1], dtype)
    expected = [_reference_divide(int(x), int(y), dtype) for x, y in zip(a, b, strict=True)]
    np.testing.assert_array_equal(run_op("divide", a, b), np.array([q for q, _ in expected], dtype))
    np.testing.assert_array_equal(run_op("remainder", a, b), np.array([r for _, r in expected], dtype))


def test_integer_division_measured_table() -> None:
    a, b = np.array([7, -7, 5, -7, -128, -128, 9], np.int8), np.array([0, 2, -3, 2, -1, -1, 0], np.int8)
    np.testing.assert_array_equal(run_op("divide", a, b), [-1, -3, -1, -3, -128, -128, -1])
    np.testing.assert_array_equal(run_op("remainder", a, b), [7, -1, 2, -1, 0, 0, 9])
    np.testing.assert_array_equal(run_op("divide", np.array([7], np.uint16), np.array([0], np.uint16)), [65535])


def test_float_divide_and_remainder() -> None:
    assert_bits_equal(run_op("divide", f32(1, -1, 0), f32(0, 0, 0)), f32(np.inf, -np.inf, np.nan))
    assert_bits_equal(run_op("remainder", f32(5.5, np.inf, 3, -7), f32(np.inf, 1, 0, 2)), f32(5.5, np.nan, np.nan, -1))


@pytest.mark.parametrize("dtype", INTEGERS)
def test_shifts_match_reference(dtype: type) -> None:
    bits = np.dtype(dtype).itemsize * 8
    a = random_ints(dtype, 30, seed=3)
    amounts = np.array(([0, 1, bits - 1, bits, bits + 1, 3 * bits] * 6)[: a.size], dtype)
    if np.dtype(dtype).kind == "i":
        amounts[-3:] = [-1, -bits, np.iinfo(dtype).min]
    left, logical, arithmetic = [], [], []
    for x, s in zip(a, amounts, strict=True):
        u = int(x) & ((1 << bits) - 1)
        amount = int(s) & ((1 << bits) - 1)  # the amount is read as unsigned
        sign_extended = u - (1 << bits) if u >> (bits - 1) else u
        left.append(wrap(u << amount, dtype) if amount < bits else 0)
        logical.append(wrap(u >> amount, dtype) if amount < bits else 0)
        arithmetic.append(wrap(sign_extended >> min(amount, bits - 1), dtype))
    np.testing.assert_array_equal(run_op("shift-left", a, amounts), np.array(left, dtype))
    np.testing.assert_array_equal(run_op("shift-right-logical", a, amounts), np.array(logical, dtype))
    np.testing.assert_array_equal(run_op("shift-right-arithmetic", a, amounts), np.array(arithmetic, dtype))


def test_shift_right_arithmetic_sign_extends_unsigned() -> None:
    a = np.array([0x80, 0xFF, 0x40], np.uint8)
    np.testing.assert_array_equal(run_op("shift-right-arithmetic", a, np.array([1, 9, 9], np.uint8)), [0xC0, 0xFF, 0])


def test_float_power() -> None:
    result = run_op("power", f32(0, -8, np.nan, 2, 1), f32(0, 1 / 3, 0, -1, np.nan))
    assert_bits_equal(result, f32(1, np.nan, 1, 0.5, 1))


@pytest.mark.parametrize("dtype", SIGNED + [np.uint8, np.uint64])
def test_integer_power(dtype: type) -> None:
    signed = np.dtype(dtype).kind == "i"
    bases = [0, 1, 2, 3, 7, 100] + ([-1, -2, -3] if signed else [])
    exponents = [0, 1, 2, 5, 13, 63] + ([-1, -2, -5] if signed else [])
    a = np.array([b for b in bases for _ in exponents], dtype)
    e = np.array([x for _ in bases for x in exponents], dtype)
    expected = []
    for base, exponent in zip(a.tolist(), e.tolist(), strict=True):
        if exponent >= 0:
            expected.append(wrap(base**exponent, dtype))
        else:
            expected.append(1 if base == 1 else (-1) ** (-exponent) if base == -1 else 0)
    np.testing.assert_array_equal(run_op("power", a, e), np.array(expected, dtype))


def test_integer_power_measured_values() -> None:
    result = run_op("power", np.array([-1, -1, 2, 0, 0], np.int32), np.array([-1, -2, -1, -1, 0], np.int32))
    np.testing.assert_array_equal(result, [-1, 1, 0, 0, 1])


@pytest.mark.parametrize("dtype", FLOATS)
def test_maximum_minimum_nan_and_signed_zero(dtype: type) -> None:
    a = np.array([-0.0, 0.0, np.nan, 1, -0.0, 3], dtype)
    b = np.array([0.0, -0.0, 1, np.nan, -0.0, 2], dtype)
    assert_bits_equal(run_op("maximum", a, b), np.array([0.0, 0.0, np.nan, np.nan, -0.0, 3], dtype))
    assert_bits_equal(run_op("minimum", a, b), np.array([-0.0, -0.0, np.nan, np.nan, -0.0, 2], dtype))


def test_logical_ops_on_pred_and_ints() -> None:
    t, f = np.array([True, True, False, False]), np.array([True, False, True, False])
    np.testing.assert_array_equal(run_op("and", t, f), [True, False, False, False])
    np.testing.assert_array_equal(run_op("or", t, f), [True, True, True, False])
    np.testing.assert_array_equal(run_op("xor", t, f), [False, True, True, False])
    np.testing.assert_array_equal(run_op("xor", np.array([12], np.int32), np.array([10], np.int32)), [6])


def test_atan2() -> None:
    np.testing.assert_allclose(run_op("atan2", f32(1, 0), f32(0, -1)), f32(np.pi / 2, np.pi))


@pytest.mark.parametrize("dtype", [np.float16, BF16])
def test_narrow_float_arithmetic_rounds_after_each_op(dtype: type) -> None:
    rng = np.random.default_rng(4)
    a = rng.normal(size=64).astype(dtype)
    b = rng.normal(size=64).astype(dtype)
    for opcode, fn in [("add", np.add), ("multiply", np.multiply), ("divide", np.divide), ("subtract", np.subtract)]:
        exact = fn(a.astype(np.float64), b.astype(np.float64))  # the real result, then one rounding
        assert_bits_equal(run_op(opcode, a, b), exact.astype(np.float32).astype(dtype))


# ---- compare / select / clamp ---------------------------------------------------------
def _compare(a: np.ndarray, b: np.ndarray, direction: str, comparison_type: str = "") -> np.ndarray:
    attrs = f"direction={direction}" + (f", type={comparison_type}" if comparison_type else "")
    return run_op("compare", a, b, result=f"pred[{a.size}]", attrs=attrs)


def test_compare_float_nan() -> None:
    a, b = f32(np.nan, 1, np.nan), f32(1, np.nan, np.nan)
    for direction in ("EQ", "LT", "LE", "GT", "GE"):
        np.testing.assert_array_equal(_compare(a, b, direction), [False] * 3)
    np.testing.assert_array_equal(_compare(a, b, "NE"), [True] * 3)


def test_compare_totalorder() -> None:
    ordered = f32(-np.nan, -np.inf, -1, -0.0, 0.0, 1, np.inf, np.nan)
    ordered[0] = -np.abs(ordered[0])  # make sure the first NaN has its sign bit set
    n = ordered.size
    a = np.repeat(ordered, n)
    b = np.tile(ordered, n)
    i, j = np.repeat(np.arange(n), n), np.tile(np.arange(n), n)
    np.testing.assert_array_equal(_compare(a, b, "LT", "TOTALORDER"), i < j)
    np.testing.assert_array_equal(_compare(a, b, "EQ", "TOTALORDER"), i == j)
    assert not _compare(f32(-0.0), f32(0.0), "LT")[0]  # FLOAT: -0 == +0


def test_compare_integers_and_pred() -> None:
    a, b = np.array([-1, 2], np.int32), np.array([1, 2], np.int32)
    np.testing.assert_array_equal(_compare(a, b, "LT"), [True, False])
    np.testing.assert_array_equal(_compare(a, b, "LT", "UNSIGNED"), [False, False])  # -1 is 0xffffffff
    np.testing.assert_array_equal(_compare(np.array([200], np.uint8), np.array([1], np.uint8), "GT"), [True])
    np.testing.assert_array_equal(_compare(np.array([False, True]), np.array([True, True]), "LT"), [True, False])


def test_select_with_scalar_and_array_predicate() -> None:
    on_true, on_false = np.array([1, 2, 3], np.int32), np.array([7, 8, 9], np.int32)
    np.testing.assert_array_equal(run_op("select", np.array([True, False, True]), on_true, on_false,
                                         result="s32[3]"), [1, 8, 3])
    np.testing.assert_array_equal(run_op("select", np.array(False), on_true, on_false, result="s32[3]"), [7, 8, 9])


def test_clamp() -> None:
    x = f32(-5, 0.5, 5, np.nan)
    result = run_op("clamp", np.array(0, np.float32), x, np.array(1, np.float32), result="f32[4]")
    assert_bits_equal(result, f32(0, 0.5, 1, np.nan))
    # lo > hi gives hi; a NaN bound gives NaN.
    assert_bits_equal(run_op("clamp", f32(3, np.nan), f32(2, 2), f32(1, 5)), f32(1, np.nan))
    np.testing.assert_array_equal(
        run_op("clamp", np.array(-3, np.int8), np.array([-100, 100, 0], np.int8), np.array(3, np.int8),
               result="s8[3]"), [-3, 3, 0])
