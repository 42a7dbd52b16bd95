"""Elementwise binary opcodes: arithmetic, min/max, bitwise logic and shifts.

Each opcode is one function ``f(lhs, rhs) -> result`` over whole arrays of one element
type, collected in :data:`BINARY_FUNCTIONS`. The fast paths of reductions, scatters and
sorts call these very functions, so a fast path and the general path (which evaluates the
reducer computation element by element) share one definition of every op.

Edge cases are those measured on XLA:CPU (XLA's operation semantics as measured on XLA:CPU; tests/hlo/ pins each case):

* integers wrap; ``x / 0`` is all ones (-1 signed, max unsigned), ``x % 0 = x``,
  ``INT_MIN / -1 = INT_MIN`` and ``INT_MIN % -1 = 0``; division truncates toward zero;
* float ``remainder`` is C ``fmod``; ``power`` is C ``pow`` for floats, exact with wrap for
  integers with a negative exponent giving 0 (except bases 1 and -1);
* ``maximum``/``minimum`` propagate NaN and order signed zeros (``max(-0, +0) = +0``);
* shift amounts are read as unsigned; amounts >= the bit width give 0 (or all sign bits
  for ``shift-right-arithmetic``, which sign-extends even unsigned types).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from xla_teach.hlo.evaluator.numeric import (
    all_ones,
    bit_width,
    float_op,
    is_float,
    is_signed,
    signed_of,
    unsigned_of,
)
from xla_teach.hlo.evaluator.registry import Value, register

if TYPE_CHECKING:
    from xla_teach.hlo.evaluator.core import HloEvaluator
    from xla_teach.hlo.ir import HloInstruction

BinaryFn = Callable[[np.ndarray, np.ndarray], np.ndarray]
BINARY_FUNCTIONS: dict[str, BinaryFn] = {}


def _binary(opcode: str) -> Callable[[BinaryFn], BinaryFn]:
    def decorate(fn: BinaryFn) -> BinaryFn:
        BINARY_FUNCTIONS[opcode] = fn
        return fn

    return decorate


def _arithmetic(ufunc: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> BinaryFn:
    """Floats with the f16/bf16 rule; integers natively (NumPy integer arithmetic wraps)."""

    def apply(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        if is_float(a.dtype):
            return float_op(ufunc, a, b)
        return ufunc(a, b)

    return apply


BINARY_FUNCTIONS["add"] = _arithmetic(np.add)
BINARY_FUNCTIONS["subtract"] = _arithmetic(np.subtract)
BINARY_FUNCTIONS["multiply"] = _arithmetic(np.multiply)
BINARY_FUNCTIONS["atan2"] = _arithmetic(np.arctan2)
BINARY_FUNCTIONS["and"] = np.bitwise_and  # logical on pred, bitwise on integers
BINARY_FUNCTIONS["or"] = np.bitwise_or
BINARY_FUNCTIONS["xor"] = np.bitwise_xor


# ---- division -------------------------------------------------------------------------
def _safe_divisor(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(divisor with the two special cases replaced by 1, mask of division by zero)."""
    by_zero = b == 0
    special = by_zero
    if is_signed(a.dtype):
        special = special | ((a == np.iinfo(a.dtype).min) & (b == -1))
    return np.where(special, np.ones_like(b), b), by_zero


@_binary("divide")
def divide(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Floats: IEEE (x/0 = +-inf, 0/0 = NaN). Integers: truncate toward zero."""
    if is_float(a.dtype):
        return float_op(np.divide, a, b)
    divisor, by_zero = _safe_divisor(a, b)
    # a - fmod(a, d) is an exact multiple of d, so floor division of it truncates.
    # INT_MIN / -1 became INT_MIN / 1 = INT_MIN, the measured result.
    quotient = (a - np.fmod(a, divisor)) // divisor
    return np.where(by_zero, all_ones(a.dtype), quotient)


@_binary("remainder")
def remainder(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """C ``fmod``: the sign follows the dividend (5 % -3 = 2, -7 % 2 = -1); x % 0 = x."""
    if is_float(a.dtype):
        return float_op(np.fmod, a, b)
    divisor, by_zero = _safe_divisor(a, b)
    return np.where(by_zero, a, np.fmod(a, divisor))  # INT_MIN % 1 = 0, as measured


# ---- power ----------------------------------------------------------------------------
@_binary("power")
def power(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Floats: C ``pow``. Integers: exact modulo 2**n by repeated squaring;
    negative exponents give 0 except ``1**-n = 1`` and ``(-1)**-n = +-1``."""
    if is_float(a.dtype):
        return float_op(np.power, a, b)
    a, b = np.broadcast_arrays(a, b)
    unsigned = unsigned_of(a.dtype)  # unsigned arithmetic wraps by definition
    base = a.astype(unsigned)
    exponent = np.where(b < 0, np.zeros_like(b), b).astype(unsigned)
    result = np.ones(a.shape, unsigned)
    one = np.array(1, unsigned)
    while np.any(exponent):
        result = np.where(exponent & one, result * base, result)
        base = base * base
        exponent = exponent >> one
    result = result.astype(a.dtype)
    if is_signed(a.dtype):
        odd = (b & 1) == 1
        minus_one_power = np.where(odd, -np.ones_like(a), np.ones_like(a))
        negative_power = np.where(a == 1, np.ones_like(a), np.where(a == -1, minus_one_power, np.zeros_like(a)))
        result = np.where(b < 0, negative_power, result)
    return result


# ---- maximum / minimum ----------------------------------------------------------------
def _float_extremum(pick: Callable[[np.ndarray, np.ndarray], np.ndarray], zero_is_negative: BinaryFn) -> BinaryFn:
    def compute(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        result = pick(a, b)  # np.maximum/np.minimum propagate NaN
        both_zero = (a == 0) & (b == 0)
        signed_zero = np.where(zero_is_negative(np.signbit(a), np.signbit(b)), -0.0, 0.0).astype(result.dtype)
        return np.where(both_zero, signed_zero, result)

    def apply(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        if is_float(a.dtype):
            return float_op(compute, a, b)
        return pick(a, b)

    return apply


# max(-0, +0) = +0: the result is -0 only when both are -0; min(-0, +0) = -0.
BINARY_FUNCTIONS["maximum"] = _float_extremum(np.maximum, np.logical_and)
BINARY_FUNCTIONS["minimum"] = _float_extremum(np.minimum, np.logical_or)
maximum = BINARY_FUNCTIONS["maximum"]
minimum = BINARY_FUNCTIONS["minimum"]


# ---- shifts ---------------------------------------------------------------------------
def _shift_amount(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(amount reduced below the width, mask of amounts >= width); b is read as unsigned."""
    if is_float(a.dtype) or a.dtype == np.bool_:
        raise TypeError(f"shifts need integer operands, got {a.dtype}")
    amount = np.asarray(b).view(unsigned_of(b.dtype))
    too_far = amount >= bit_width(a.dtype)
    return np.where(too_far, 0, amount).astype(unsigned_of(a.dtype)), too_far


@_binary("shift-left")
def shift_left(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    amount, too_far = _shift_amount(a, b)
    bits = np.asarray(a).view(unsigned_of(a.dtype))
    shifted = np.where(too_far, np.zeros_like(bits), bits << amount)
    return shifted.view(a.dtype)


@_binary("shift-right-logical")
def shift_right_logical(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    amount, too_far = _shift_amount(a, b)
    bits = np.asarray(a).view(unsigned_of(a.dtype))
    shifted = np.where(too_far, np.zeros_like(bits), bits >> amount)
    return shifted.view(a.dtype)


@_binary("shift-right-arithmetic")
def shift_right_arithmetic(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Sign-extending shift, also on unsigned types (u8 0x80 >>a 1 = 0xC0)."""
    amount, too_far = _shift_amount(a, b)
    signed = np.asarray(a).view(signed_of(a.dtype))  # NumPy's >> on signed ints is arithmetic
    amount = amount.astype(signed.dtype)
    all_sign_bits = signed >> np.array(bit_width(a.dtype) - 1, signed.dtype)
    shifted = np.where(too_far, all_sign_bits, signed >> amount)
    return shifted.view(a.dtype)


# ---- the handler ----------------------------------------------------------------------
@register(*BINARY_FUNCTIONS)
def handle_binary(ev: HloEvaluator, instr: HloInstruction, operands: list[Value]) -> Value:
    """Every elementwise binary opcode: look up its function and apply it."""
    return BINARY_FUNCTIONS[instr.opcode](operands[0], operands[1])
