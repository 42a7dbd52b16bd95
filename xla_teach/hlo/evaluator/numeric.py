"""Number-format helpers shared by the evaluator's handlers.

**How f16 and bf16 are computed.** NumPy has a slow float16 and ``ml_dtypes`` gives
bfloat16, but neither should do our arithmetic directly. The rule used everywhere is the
one XLA's CPU backend uses: *widen* f16/bf16 operands to f32, compute in f32, and round
the result back to f16/bf16 (round to nearest even) after **every** operation. For
``+ - * /`` and ``sqrt`` this gives exactly the correctly rounded f16/bf16 result, because
f32 has more than twice as many significand bits. f32 and f64 are computed natively.

**Exact conversions.** ``ml_dtypes`` converts f64 to bf16 through f32, which rounds twice
(``1 + 2**-8 + 2**-40`` becomes 1.0 instead of 1.0078125). :func:`to_float_dtype` instead
rounds f64 values to bf16/f16 precision with :func:`reduce_precision` first, so every
conversion the evaluator does rounds exactly once.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import ml_dtypes
import numpy as np

F16 = np.dtype(np.float16)
BF16 = np.dtype(ml_dtypes.bfloat16)
F32 = np.dtype(np.float32)
F64 = np.dtype(np.float64)
PRED = np.dtype(np.bool_)

NARROW_FLOATS = (F16, BF16)
FLOAT_DTYPES = (F16, BF16, F32, F64)

# (exponent bits, mantissa bits) of each float format.
FLOAT_FORMATS: dict[np.dtype, tuple[int, int]] = {F16: (5, 10), BF16: (8, 7), F32: (8, 23), F64: (11, 52)}


# ---------------------------------------------------------------------------------------
# dtype classification
# ---------------------------------------------------------------------------------------
def is_float(dtype: np.dtype) -> bool:
    return dtype in FLOAT_DTYPES


def is_integer(dtype: np.dtype) -> bool:
    """Signed or unsigned integer (not pred)."""
    return dtype.kind in "iu"


def is_signed(dtype: np.dtype) -> bool:
    return dtype.kind == "i"


def is_unsigned(dtype: np.dtype) -> bool:
    return dtype.kind == "u"


def bit_width(dtype: np.dtype) -> int:
    return dtype.itemsize * 8


@functools.cache
def unsigned_of(dtype: np.dtype) -> np.dtype:
    """The unsigned integer type of the same width (used to reinterpret bits)."""
    return np.dtype(f"u{dtype.itemsize}")


@functools.cache
def signed_of(dtype: np.dtype) -> np.dtype:
    """The signed integer type of the same width."""
    return np.dtype(f"i{dtype.itemsize}")


def all_ones(dtype: np.dtype) -> np.ndarray:
    """The integer with every bit set: -1 for signed types, the maximum for unsigned."""
    return ~np.zeros((), dtype)


# ---------------------------------------------------------------------------------------
# f16 / bf16 arithmetic: widen, compute, narrow
# ---------------------------------------------------------------------------------------
def widen(x: np.ndarray) -> np.ndarray:
    """f16/bf16 -> f32 (exact); anything else unchanged."""
    return x.astype(F32) if x.dtype in NARROW_FLOATS else x


def float_op(fn: Callable[..., np.ndarray], *operands: np.ndarray) -> np.ndarray:
    """Apply ``fn`` to float operands with the f16/bf16 rule: widen, compute, round back."""
    dtype = operands[0].dtype
    result = np.asarray(fn(*(widen(np.asarray(x)) for x in operands)))
    return to_float_dtype(result, dtype) if result.dtype != dtype else result


def to_float_dtype(x: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Round a float array to float type ``dtype`` (nearest even, exactly once)."""
    x = np.asarray(x)
    if x.dtype == F64 and dtype in NARROW_FLOATS:
        exponent_bits, mantissa_bits = FLOAT_FORMATS[dtype]
        x = reduce_precision(x, exponent_bits, mantissa_bits)  # now exactly representable
    return x.astype(dtype)


# ---------------------------------------------------------------------------------------
# reduce-precision: round to a float format with E exponent and M mantissa bits
# ---------------------------------------------------------------------------------------
def reduce_precision(x: np.ndarray, exponent_bits: int, mantissa_bits: int) -> np.ndarray:
    """Round each element to the nearest value of a binary float format with
    ``exponent_bits`` exponent and ``mantissa_bits`` explicit mantissa bits (IEEE-like:
    bias ``2**(E-1)-1``, gradual underflow), ties to even; the result keeps ``x``'s dtype.

    Overflow gives +-inf, values below half the smallest subnormal give +-0 (the target's
    subnormals are kept), NaN stays NaN. ``(5, 10)`` is exactly a round trip through f16 and
    ``(8, 7)`` through bf16.

    The computation runs on f64 values: with ``e = floor(log2|x|)`` (at least the target's
    smallest normal exponent), the representable neighbours of ``x`` are the multiples of
    ``2**(e - M)``, so ``rint(x / 2**(e-M)) * 2**(e-M)`` rounds to nearest even.
    """
    x = np.asarray(x)
    source_exponent_bits, source_mantissa_bits = FLOAT_FORMATS[x.dtype]
    exponent_bits = min(exponent_bits, source_exponent_bits)
    mantissa_bits = min(mantissa_bits, source_mantissa_bits)
    if (exponent_bits, mantissa_bits) == (source_exponent_bits, source_mantissa_bits):
        return x.copy()
    with np.errstate(all="ignore"):
        v = x.astype(F64)
        max_exponent = 2 ** (exponent_bits - 1) - 1  # also the exponent bias
        min_exponent = 1 - max_exponent
        _, frexp_exponent = np.frexp(v)  # v = f * 2**frexp_exponent with 0.5 <= |f| < 1
        exponent = np.maximum(frexp_exponent - 1, min_exponent)
        quantum_exponent = exponent - mantissa_bits
        scaled = np.ldexp(v, -quantum_exponent)  # exact: a power-of-two scaling
        rounded = np.rint(scaled)
        if mantissa_bits == 0:
            # With no mantissa bits "even" means an even biased exponent: a tie 1.5 * 2**e
            # rounds down to 2**e when e + bias is even, else up to 2**(e+1).
            tie = np.abs(scaled) == 1.5
            biased_even = (exponent + max_exponent) % 2 == 0
            rounded = np.where(tie, np.copysign(np.where(biased_even, 1.0, 2.0), scaled), rounded)
        result = np.ldexp(rounded, quantum_exponent)
        max_finite = np.ldexp(2.0 - 2.0 ** -mantissa_bits, max_exponent)
        result = np.where(np.abs(result) > max_finite, np.copysign(np.inf, v), result)
        result = np.where(np.isfinite(v), result, v)  # inf and NaN pass through
    return result.astype(x.dtype)


# ---------------------------------------------------------------------------------------
# convert
# ---------------------------------------------------------------------------------------
def convert_array(x: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """XLA's ``convert`` from ``x.dtype`` to ``dtype`` (as XLA:CPU does; tests/hlo/ pins each case).

    * anything -> pred: nonzero is true (NaN is true, -0.0 false);
    * float -> integer: truncate toward zero, saturate out-of-range and +-inf, NaN -> 0;
    * integer -> integer: keep the low bits (two's complement wrap);
    * -> float: round to nearest even, overflow -> +-inf.
    """
    x = np.asarray(x)
    dtype = np.dtype(dtype)
    if x.dtype == dtype:
        return x.copy()
    if dtype == PRED:
        return widen(x) != 0
    if x.dtype == PRED:
        return x.astype(np.uint8).astype(dtype) if dtype == BF16 else x.astype(dtype)
    if is_float(x.dtype) and is_integer(dtype):
        return _float_to_int(x, dtype)
    if is_float(dtype):
        if is_integer(x.dtype):
            return to_float_dtype(x.astype(F64), dtype)  # exact below 2**53
        return to_float_dtype(widen(x), dtype)
    return x.astype(dtype)  # integer -> integer wraps, as in C


def _float_to_int(x: np.ndarray, dtype: np.dtype) -> np.ndarray:
    info = np.iinfo(dtype)
    with np.errstate(all="ignore"):
        v = np.trunc(x.astype(F64))  # every f16/bf16/f32 value is exact in f64
        too_low = v <= float(info.min)
        too_high = v >= float(info.max)  # float(max) may round up to 2**63 / 2**64
        in_range = ~(too_low | too_high | np.isnan(v))
        result = np.where(in_range, v, 0.0).astype(dtype)
    result = np.where(too_low, np.array(info.min, dtype), result)
    return np.where(too_high, np.array(info.max, dtype), result)


# ---------------------------------------------------------------------------------------
# Total order of floats (compare type=TOTALORDER, topk)
# ---------------------------------------------------------------------------------------
def total_order_key(x: np.ndarray) -> np.ndarray:
    """Signed integers that order like XLA's TOTALORDER on floats:
    -NaN < -inf < -finite < -0 < +0 < +finite < +inf < +NaN.

    A float's bits read as a signed integer already order the non-negative floats; for
    negative floats (sign bit set) flipping all other bits reverses their order.
    """
    bits = np.asarray(x).view(signed_of(x.dtype))  # same width: works on any strides
    magnitude_mask = np.iinfo(bits.dtype).max
    return np.where(bits < 0, bits ^ magnitude_mask, bits)


def to_index_array(x: np.ndarray) -> np.ndarray:
    """Integer index values as int64 (huge u64 values saturate instead of wrapping)."""
    x = np.asarray(x)
    if x.dtype == np.uint64:
        x = np.minimum(x, np.uint64(2**62))
    return x.astype(np.int64)
