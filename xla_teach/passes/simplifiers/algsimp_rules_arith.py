"""``algsimp`` rules for elementwise arithmetic: identities, ``power``, ``select``,
``compare`` and sinking broadcasts below elementwise ops.

Floating-point care: a rule that is not exact for every float (NaN, infinities, -0.0)
is restricted to integers, except ``x + 0 -> x`` / ``x - 0 -> x``, which XLA applies to
floats too (they only differ for ``x = -0.0``, where IEEE gives ``-0.0 + 0.0 = +0.0``).
"""

from __future__ import annotations

import numpy as np

from xla_teach.hlo.ir import HloInstruction
from xla_teach.hlo.opcodes import is_elementwise
from xla_teach.passes.rewrite_utils import (
    NOT_MOVED_ACROSS_REARRANGES,
    add_constant,
    add_instruction,
    broadcast_scalar,
    is_constant_equal,
    uniform_constant_value,
)
from xla_teach.passes.simplifiers.algsimp_rules_base import Rule, rule

_SIGNED_ZERO = "differs only for x = -0.0 (-0.0 + 0.0 is +0.0); XLA accepts this"


def _is_integral(instr: HloInstruction) -> bool:
    etype = instr.shape.element_type
    return etype.is_integral or etype.is_pred


def _filled(instr: HloInstruction, value: float | bool) -> HloInstruction:
    """A broadcast scalar constant with ``instr``'s type and dimensions."""
    comp = instr.parent
    assert comp is not None
    return broadcast_scalar(comp, add_constant(comp, value, instr.shape.element_type), instr.shape.dimensions)


# ---- add, subtract, multiply, divide --------------------------------------------------
@rule("x + 0 -> x, 0 + x -> x", "add", exactness=_SIGNED_ZERO)
def add_zero(instr: HloInstruction) -> HloInstruction | None:
    lhs, rhs = instr.operands
    if is_constant_equal(rhs, 0) or is_constant_equal(rhs, -0.0):
        return lhs
    if is_constant_equal(lhs, 0) or is_constant_equal(lhs, -0.0):
        return rhs
    return None


@rule("x - 0 -> x", "subtract")
def subtract_zero(instr: HloInstruction) -> HloInstruction | None:
    lhs, rhs = instr.operands
    return lhs if is_constant_equal(rhs, 0) else None


@rule("i - i -> 0 (integers)", "subtract")
def subtract_self(instr: HloInstruction) -> HloInstruction | None:
    lhs, rhs = instr.operands
    return _filled(instr, 0) if lhs is rhs and _is_integral(instr) else None


@rule("x * 1 -> x, 1 * x -> x", "multiply")
def multiply_one(instr: HloInstruction) -> HloInstruction | None:
    lhs, rhs = instr.operands
    if is_constant_equal(rhs, 1):
        return lhs
    if is_constant_equal(lhs, 1):
        return rhs
    return None


@rule("i * 0 -> 0 (integers; for floats NaN * 0 and inf * 0 are NaN)", "multiply")
def multiply_zero(instr: HloInstruction) -> HloInstruction | None:
    if not _is_integral(instr):
        return None
    for operand in instr.operands:
        if is_constant_equal(operand, 0):
            return operand
    return None


@rule("x / 1 -> x", "divide")
def divide_one(instr: HloInstruction) -> HloInstruction | None:
    lhs, rhs = instr.operands
    return lhs if is_constant_equal(rhs, 1) else None


@rule("x / 2^k -> x * 2^-k (floats, only when 2^-k is exact)", "divide")
def divide_power_of_two(instr: HloInstruction) -> HloInstruction | None:
    lhs, rhs = instr.operands
    etype = instr.shape.element_type
    value = uniform_constant_value(rhs)
    if not etype.is_float or value is None or not np.isfinite(value) or value == 0:
        return None
    mantissa, _ = np.frexp(np.float64(value))
    if abs(mantissa) != 0.5 or np.float64(value) == 1:
        return None
    inverse = np.asarray(1.0 / np.float64(value), dtype=etype.dtype)
    if inverse == 0 or not np.isfinite(inverse) or np.float64(inverse) * np.float64(value) != 1.0:
        return None  # 1/c is not representable: x * (1/c) would round differently
    comp = instr.parent
    assert comp is not None
    factor = broadcast_scalar(comp, add_constant(comp, inverse, etype), instr.shape.dimensions)
    return add_instruction(comp, "multiply", [lhs, factor])


# ---- unary involutions and idempotent ops ----------------------------------------------
@rule("negate(negate(x)) -> x", "negate")
def negate_negate(instr: HloInstruction) -> HloInstruction | None:
    operand = instr.operand(0)
    return operand.operand(0) if operand.opcode == "negate" else None


@rule("not(not(x)) -> x", "not")
def not_not(instr: HloInstruction) -> HloInstruction | None:
    operand = instr.operand(0)
    return operand.operand(0) if operand.opcode == "not" else None


@rule("abs(abs(x)) -> abs(x)", "abs")
def abs_abs(instr: HloInstruction) -> HloInstruction | None:
    operand = instr.operand(0)
    return operand if operand.opcode == "abs" else None


@rule("max(x, x) -> x, min(x, x) -> x, and(x, x) -> x, or(x, x) -> x", "maximum", "minimum", "and", "or")
def idempotent_self(instr: HloInstruction) -> HloInstruction | None:
    lhs, rhs = instr.operands
    return lhs if lhs is rhs else None


# ---- power --------------------------------------------------------------------------------
@rule("pow(x, 0) -> 1, pow(x, 1) -> x, pow(x, 2) -> x * x, pow(x, -1) -> 1 / x (floats)", "power",
      exactness="pow(x, -1) -> 1/x: a correctly rounded division may differ from libm pow by one ulp")
def power_small_exponent(instr: HloInstruction) -> HloInstruction | None:
    base, exponent = instr.operands
    comp = instr.parent
    assert comp is not None
    if is_constant_equal(exponent, 0):
        return _filled(instr, 1)  # IEEE: pow(x, 0) = 1 even for NaN; integers: 0^0 = 1
    if is_constant_equal(exponent, 1):
        return base
    if is_constant_equal(exponent, 2):
        return add_instruction(comp, "multiply", [base, base])
    if instr.shape.element_type.is_float and is_constant_equal(exponent, -1):
        return add_instruction(comp, "divide", [_filled(instr, 1), base])
    return None


# ---- select, compare --------------------------------------------------------------------
@rule("select(true, a, b) -> a, select(false, a, b) -> b, select(p, a, a) -> a", "select")
def select_constant_predicate(instr: HloInstruction) -> HloInstruction | None:
    pred, on_true, on_false = instr.operands
    if on_true is on_false:
        return on_true
    value = uniform_constant_value(pred)
    if value is None:
        return None
    return on_true if bool(value) else on_false


_COMPARE = {"EQ": np.equal, "NE": np.not_equal, "LT": np.less, "LE": np.less_equal, "GT": np.greater,
            "GE": np.greater_equal}


@rule("compare(c1, c2) -> constant (both sides constants; not TOTALORDER)", "compare")
def compare_constants(instr: HloInstruction) -> HloInstruction | None:
    if instr.attrs.get("type") == "TOTALORDER":
        return None
    lhs, rhs = (uniform_constant_value(o) for o in instr.operands)
    if lhs is None or rhs is None:
        return None
    with np.errstate(all="ignore"):
        result = bool(_COMPARE[instr.attr("direction")](lhs, rhs))
    return _filled(instr, result)


@rule("compare(i, i) -> true for EQ/LE/GE, false for NE/LT/GT (integers; x == x is false for NaN)", "compare")
def compare_self(instr: HloInstruction) -> HloInstruction | None:
    lhs, rhs = instr.operands
    if lhs is not rhs or not _is_integral(lhs):
        return None
    return _filled(instr, instr.attr("direction") in ("EQ", "LE", "GE"))


# ---- op(broadcast(a), broadcast(b)) -> broadcast(op(a, b)) ---------------------------------


@rule("op(broadcast(a), broadcast(b)) -> broadcast(op(a, b)) (elementwise op, same broadcast)",
      "*elementwise")
def sink_broadcast(instr: HloInstruction) -> HloInstruction | None:
    if not is_elementwise(instr.opcode) or instr.opcode in NOT_MOVED_ACROSS_REARRANGES or not instr.operands:
        return None
    first = instr.operand(0)
    if first.opcode != "broadcast":
        return None
    small = first.operand(0).shape.dimensions
    for operand in instr.operands:
        if (operand.opcode != "broadcast" or operand.dimensions != first.dimensions
                or operand.operand(0).shape.dimensions != small):
            return None
    if len(small) == instr.shape.rank:
        return None  # the broadcasts only relabel dimensions: nothing to gain
    comp = instr.parent
    assert comp is not None
    small_shape = instr.shape.with_dimensions(small)
    op = instr.clone_with_new_operands(small_shape, [o.operand(0) for o in instr.operands], name=instr.opcode)
    comp.add_instruction(op)
    return add_instruction(comp, "broadcast", [op], {"dimensions": first.dimensions},
                           result_dims=instr.shape.dimensions)


ARITH_RULES: tuple[Rule, ...] = (
    add_zero, subtract_zero, subtract_self, multiply_one, multiply_zero, divide_one, divide_power_of_two,
    negate_negate, not_not, abs_abs, idempotent_self, power_small_exponent, select_constant_predicate,
    compare_constants, compare_self, sink_broadcast,
)
