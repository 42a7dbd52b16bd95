"""Elementwise unary opcodes: ``abs negate sign not floor ... erf popcnt count-leading-zeros``.

Each opcode is one small function ``f(x) -> result`` over a whole array, collected in
:data:`UNARY_FUNCTIONS`; the single registered handler looks the opcode up there. The
same functions serve the fast paths of :mod:`fast_paths` (a ``map`` whose computation is
one unary op), so both paths share one implementation.

Edge cases follow XLA:CPU (tests/hlo/ pins each): integers wrap (``abs(INT_MIN) =
INT_MIN``), ``sign`` keeps the sign of zero, ``round-nearest-afz`` rounds ties away from
zero, ``count-leading-zeros(0)`` is the bit width. Float ops on f16/bf16 compute in f32
and round back (:func:`numeric.float_op`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from xla_teach.hlo.evaluator.numeric import (
    F64,
    bit_width,
    float_op,
    is_float,
    is_unsigned,
    to_float_dtype,
    unsigned_of,
    widen,
)
from xla_teach.hlo.evaluator.registry import Value, register

if TYPE_CHECKING:
    from xla_teach.hlo.evaluator.core import HloEvaluator
    from xla_teach.hlo.ir import HloInstruction

UnaryFn = Callable[[np.ndarray], np.ndarray]
UNARY_FUNCTIONS: dict[str, UnaryFn] = {}


def _unary(opcode: str) -> Callable[[UnaryFn], UnaryFn]:
    def decorate(fn: UnaryFn) -> UnaryFn:
        UNARY_FUNCTIONS[opcode] = fn
        return fn

    return decorate


def _float_only(opcode: str, fn: Callable[[np.ndarray], np.ndarray]) -> UnaryFn:
    """A float function applied with the f16/bf16 rule; integer operands are an error."""

    def apply(x: np.ndarray) -> np.ndarray:
        if not is_float(x.dtype):
            raise TypeError(f"{opcode} needs a floating-point operand, got {x.dtype}")
        return float_op(fn, x)

    return apply


# ---- sign and magnitude ---------------------------------------------------------------
@_unary("abs")
def abs_(x: np.ndarray) -> np.ndarray:
    """|x|; ints wrap (abs(INT_MIN) = INT_MIN), abs(-0.0) = +0."""
    if is_float(x.dtype):
        return float_op(np.abs, x)
    if is_unsigned(x.dtype) or x.dtype == np.bool_:
        return x.copy()
    return np.abs(x)


@_unary("negate")
def negate(x: np.ndarray) -> np.ndarray:
    """-x; ints wrap (negate(INT_MIN) = INT_MIN), unsigned: 0 - x modulo 2**n."""
    if is_float(x.dtype):
        return float_op(np.negative, x)
    return np.negative(x)


@_unary("sign")
def sign(x: np.ndarray) -> np.ndarray:
    """-1/0/+1 for integers; floats give +-1, keep the sign of zero, NaN stays NaN."""
    if not is_float(x.dtype):
        return np.sign(x)

    def float_sign(v: np.ndarray) -> np.ndarray:
        keep = np.isnan(v) | (v == 0)  # NaN and +-0 are their own sign
        return np.where(keep, v, np.copysign(np.ones_like(v), v))

    return float_op(float_sign, x)


@_unary("not")
def not_(x: np.ndarray) -> np.ndarray:
    """Logical not for pred, bitwise not for integers (not(5) = -6)."""
    if is_float(x.dtype):
        raise TypeError(f"not needs a pred or integer operand, got {x.dtype}")
    return np.invert(x)


# ---- rounding -------------------------------------------------------------------------
def _round_half_away_from_zero(v: np.ndarray) -> np.ndarray:
    # x - trunc(x) is exact, so ties are detected exactly (adding 0.5 first would round).
    truncated = np.trunc(v)
    away = np.abs(v - truncated) >= 0.5
    rounded = np.where(away, truncated + np.copysign(np.ones_like(v), v), truncated)
    return np.copysign(rounded, v)  # round(-0.4) = -0.0


UNARY_FUNCTIONS["floor"] = _float_only("floor", np.floor)
UNARY_FUNCTIONS["ceil"] = _float_only("ceil", np.ceil)
UNARY_FUNCTIONS["round-nearest-even"] = _float_only("round-nearest-even", np.rint)
UNARY_FUNCTIONS["round-nearest-afz"] = _float_only("round-nearest-afz", _round_half_away_from_zero)


# ---- transcendental -------------------------------------------------------------------
def _logistic(v: np.ndarray) -> np.ndarray:
    return 1 / (1 + np.exp(-v))


def _rsqrt(v: np.ndarray) -> np.ndarray:
    return 1 / np.sqrt(v)


UNARY_FUNCTIONS["exponential"] = _float_only("exponential", np.exp)
UNARY_FUNCTIONS["exponential-minus-one"] = _float_only("exponential-minus-one", np.expm1)
UNARY_FUNCTIONS["log"] = _float_only("log", np.log)
UNARY_FUNCTIONS["log-plus-one"] = _float_only("log-plus-one", np.log1p)
UNARY_FUNCTIONS["logistic"] = _float_only("logistic", _logistic)
UNARY_FUNCTIONS["sqrt"] = _float_only("sqrt", np.sqrt)
UNARY_FUNCTIONS["rsqrt"] = _float_only("rsqrt", _rsqrt)
UNARY_FUNCTIONS["cbrt"] = _float_only("cbrt", np.cbrt)
UNARY_FUNCTIONS["sine"] = _float_only("sine", np.sin)
UNARY_FUNCTIONS["cosine"] = _float_only("cosine", np.cos)
UNARY_FUNCTIONS["tan"] = _float_only("tan", np.tan)
UNARY_FUNCTIONS["tanh"] = _float_only("tanh", np.tanh)

_erf_f64 = np.vectorize(math.erf, otypes=[F64])


@_unary("erf")
def erf(x: np.ndarray) -> np.ndarray:
    """The error function, via ``math.erf`` in f64, rounded to the operand's type."""
    if not is_float(x.dtype):
        raise TypeError(f"erf needs a floating-point operand, got {x.dtype}")
    return to_float_dtype(_erf_f64(widen(x).astype(F64)), x.dtype)


@_unary("is-finite")
def is_finite(x: np.ndarray) -> np.ndarray:
    """pred: false for +-inf and NaN."""
    if not is_float(x.dtype):
        raise TypeError(f"is-finite needs a floating-point operand, got {x.dtype}")
    return np.isfinite(widen(x))


# ---- bit counting ---------------------------------------------------------------------
@_unary("popcnt")
def popcnt(x: np.ndarray) -> np.ndarray:
    """Number of set bits of the two's complement pattern (popcnt(-1 as s32) = 32)."""
    bits = np.asarray(x).view(unsigned_of(x.dtype))
    return np.bitwise_count(bits).astype(x.dtype)


@_unary("count-leading-zeros")
def count_leading_zeros(x: np.ndarray) -> np.ndarray:
    """Zero bits above the highest set bit; the bit width for 0 (s32: 0 -> 32, 1 -> 31)."""
    width = bit_width(x.dtype)
    bits = np.asarray(x).view(unsigned_of(x.dtype))
    significant = np.zeros(bits.shape, np.int64)  # bit length: how many shifts leave a nonzero
    for shift in range(width):
        significant += (bits >> np.array(shift, bits.dtype)) != 0
    return (width - significant).astype(x.dtype)


# ---- the handler ----------------------------------------------------------------------
@register(*UNARY_FUNCTIONS)
def handle_unary(ev: HloEvaluator, instr: HloInstruction, operands: list[Value]) -> Value:
    """Every elementwise unary opcode: look up its function and apply it."""
    return UNARY_FUNCTIONS[instr.opcode](operands[0])
