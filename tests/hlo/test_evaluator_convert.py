"""convert, bitcast-convert, reduce-precision and iota (xla-operation-semantics.md §1, §5)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from tests.hlo.evaluator_util import BF16, assert_bits_equal, run_op, shape_text
from xla_teach.hlo.evaluator.numeric import convert_array, reduce_precision


def convert(x: np.ndarray, dtype: type) -> np.ndarray:
    return run_op("convert", x, result=shape_text(dtype, np.asarray(x).shape))


# ---- float -> int ---------------------------------------------------------------------
def test_float_to_int_truncates_saturates_and_maps_nan_to_zero() -> None:
    x = np.array([2.7, -2.5, 1e10, -1e10, np.inf, -np.inf, np.nan, -0.9], np.float32)
    np.testing.assert_array_equal(convert(x, np.int32), [2, -2, 2**31 - 1, -(2**31), 2**31 - 1, -(2**31), 0, 0])
    np.testing.assert_array_equal(convert(x, np.uint8), [2, 0, 255, 0, 255, 0, 0, 0])
    np.testing.assert_array_equal(convert(x, np.uint32), [2, 0, 2**32 - 1, 0, 2**32 - 1, 0, 0, 0])
    np.testing.assert_array_equal(convert(x, np.int64), [2, -2, 10**10, -(10**10), 2**63 - 1, -(2**63), 0, 0])


def test_float_to_64_bit_int_bounds() -> None:
    x = np.array([2.0**63, -(2.0**63), 2.0**64, 2.0**63 - 1024, 1.8e19], np.float64)
    np.testing.assert_array_equal(convert(x, np.int64), [2**63 - 1, -(2**63), 2**63 - 1, 2**63 - 1024, 2**63 - 1])
    np.testing.assert_array_equal(convert(x, np.uint64), np.array([2**63, 0, 2**64 - 1, 2**63 - 1024,
                                                                   18000000000000000000], np.uint64))


@pytest.mark.parametrize("source", [np.float16, BF16, np.float64])
def test_narrow_and_wide_floats_to_int(source: type) -> None:
    x = np.array([3.75, -3.75, 300, np.nan, -np.inf], source)
    np.testing.assert_array_equal(convert(x, np.int8), [3, -3, 127, 0, -128])


# ---- int -> int, -> float, -> pred -----------------------------------------------------
def test_int_to_int_wraps_and_extends() -> None:
    np.testing.assert_array_equal(convert(np.array([300, -129, 127], np.int32), np.int8), [44, 127, 127])
    np.testing.assert_array_equal(convert(np.array([-1], np.int8), np.uint16), [65535])
    np.testing.assert_array_equal(convert(np.array([255], np.uint8), np.int32), [255])
    np.testing.assert_array_equal(convert(np.array([-1], np.int8), np.int64), [-1])


def test_to_float_rounding_and_overflow() -> None:
    bf16 = convert(np.array([1.00390625, 1.01171875], np.float32), BF16)
    assert_bits_equal(bf16, np.array([1.0, 1.015625], BF16))
    assert_bits_equal(convert(np.array([65520.0, 65519.0], np.float32), np.float16), np.array([np.inf, 65504], np.float16))
    assert_bits_equal(convert(np.array([70000], np.int32), np.float16), np.array([np.inf], np.float16))
    assert convert(np.array([2**32 - 1], np.uint32), np.float32)[0] == np.float32(4294967296.0)
    assert convert(np.array([2**53 + 1], np.int64), np.float32)[0] == np.float32(9007199254740992.0)
    assert_bits_equal(convert(np.array([1e-50], np.float64), np.float32), np.array([0.0], np.float32))


def test_f64_to_bf16_rounds_once() -> None:
    # Through f32 this would round twice: 1 + 2**-8 + 2**-40 -> 1 + 2**-8 (a tie) -> 1.0.
    x = np.array([1 + 2**-8 + 2**-40, 1 + 2**-8, -(1 + 3 * 2**-8)], np.float64)
    assert_bits_equal(convert(x, BF16), np.array([1 + 2**-7, 1.0, -(1 + 2**-6)], BF16))
    assert_bits_equal(convert(np.array([2**30 + 2**22 + 1], np.int32), BF16), np.array([2**30 + 2**23], BF16))


def test_bf16_f16_round_trip_through_f32() -> None:
    rng = np.random.default_rng(0)
    x = rng.normal(scale=100, size=200).astype(np.float32)
    assert_bits_equal(convert(x, BF16), x.astype(BF16))
    assert_bits_equal(convert(x.astype(BF16), np.float16), x.astype(BF16).astype(np.float32).astype(np.float16))


def test_to_pred_is_a_nonzero_test() -> None:
    x = np.array([np.nan, -0.0, 0.0, 0.1, -np.inf], np.float32)
    np.testing.assert_array_equal(convert(x, np.bool_), [True, False, False, True, True])
    np.testing.assert_array_equal(convert(np.array([0, 2, -1], np.int8), np.bool_), [False, True, True])
    assert_bits_equal(convert(np.array([True, False]), np.float32), np.array([1.0, 0.0], np.float32))
    assert_bits_equal(convert(np.array([True, False]), BF16), np.array([1.0, 0.0], BF16))


# ---- bitcast-convert ------------------------------------------------------------------
def test_bitcast_convert_same_width() -> None:
    result = run_op("bitcast-convert", np.array([1.0, -2.0], np.float32), result="s32[2]")
    np.testing.assert_array_equal(result, [1065353216, np.array(-2.0, np.float32).view(np.int32)])


def test_bitcast_convert_to_narrower_adds_minor_dim_low_half_first() -> None:
    result = run_op("bitcast-convert", np.array([1.0, 2.0], np.float32), result="u16[2,2]")
    np.testing.assert_array_equal(result, np.array([[0x0000, 0x3F80], [0x0000, 0x4000]], np.uint16))


def test_bitcast_convert_to_wider_consumes_minor_dim() -> None:
    halves = np.array([[0x0000, 0x3F80], [0x0000, 0x4000]], np.uint16)
    assert_bits_equal(run_op("bitcast-convert", halves, result="f32[2]"), np.array([1.0, 2.0], np.float32))
    words = np.array([[1, 0], [0, 1]], np.uint32)
    np.testing.assert_array_equal(run_op("bitcast-convert", words, result="u64[2]"), np.array([1, 2**32], np.uint64))
    assert run_op("bitcast-convert", np.array([1, 0, 0, 0], np.uint8), result="u32[]") == 1


# ---- reduce-precision -----------------------------------------------------------------
def test_reduce_precision_measured_values() -> None:
    x = np.array([70000, 1e-8, np.nan, -np.inf, 1.0], np.float32)
    result = run_op("reduce-precision", x, attrs="exponent_bits=5, mantissa_bits=10")
    assert_bits_equal(result, np.array([np.inf, 0, np.nan, -np.inf, 1.0], np.float32))


def _random_f32_bits(count: int) -> np.ndarray:
    rng = np.random.default_rng(5)
    return rng.integers(0, 2**32, size=count, dtype=np.uint64).astype(np.uint32).view(np.float32)


@pytest.mark.parametrize(("exponent_bits", "mantissa_bits", "dtype"), [(5, 10, np.float16), (8, 7, BF16)])
def test_reduce_precision_equals_a_round_trip(exponent_bits: int, mantissa_bits: int, dtype: type) -> None:
    # f16 keeps subnormals: include the tiny range explicitly.
    x = np.concatenate([_random_f32_bits(4000), np.linspace(-1e-4, 1e-4, 999, dtype=np.float32)])
    with np.errstate(all="ignore"):
        expected = x.astype(dtype).astype(np.float32)
        assert_bits_equal(reduce_precision(x, exponent_bits, mantissa_bits), expected)


def test_reduce_precision_of_f64_to_bf16_format() -> None:
    x = np.array([1 + 2**-8 + 2**-40, 3.0e38, 3.5e38, 1e-45], np.float64)
    expected = np.array([1 + 2**-7, float(np.float32(3.0e38).astype(BF16)), np.inf, 0.0])
    assert_bits_equal(reduce_precision(x, 8, 7), expected)


def test_reduce_precision_zero_mantissa_bits_ties_to_even_encoding() -> None:
    # With M=0 only powers of two remain; 1.5 = tie between 1 (biased exponent odd with E=8)
    # and 2 (even), 3 = tie between 2 (even) and 4 (odd).
    x = np.array([1.5, 3.0, 1.25, 1.75], np.float32)
    assert_bits_equal(reduce_precision(x, 8, 0), np.array([2.0, 2.0, 1.0, 2.0], np.float32))


def test_convert_helper_f32_to_bf16_matches_ml_dtypes() -> None:
    x = np.array([0.1, 1e5, -3.3], np.float32)
    assert_bits_equal(convert_array(x, np.dtype(ml_dtypes.bfloat16)), x.astype(ml_dtypes.bfloat16))


# ---- iota -----------------------------------------------------------------------------
def _iota(result: str, dimension: int) -> np.ndarray:
    from tests.hlo.evaluator_util import run_hlo

    return run_hlo(f"HloModule t\nENTRY e {{\n  ROOT i = {result} iota(), iota_dimension={dimension}\n}}\n")


def test_iota() -> None:
    np.testing.assert_array_equal(_iota("s32[2,3]", 1), [[0, 1, 2], [0, 1, 2]])
    np.testing.assert_array_equal(_iota("s32[2,3]", 0), [[0, 0, 0], [1, 1, 1]])
    assert_bits_equal(_iota("f32[3]", 0), np.array([0, 1, 2], np.float32))
    wrapped = _iota("s8[200]", 0)
    assert wrapped[127] == 127 and wrapped[128] == -128 and wrapped[199] == -57
    assert _iota("bf16[300]", 0)[257] == 256  # 257 is not a bf16: round to even
