"""Shape inference for elementwise ops: unary, binary, compare, select, clamp, conversions.

At HLO level elementwise operands have **identical dimensions and element types**
(the builder inserts explicit ``broadcast`` instructions before we get here). The
only exceptions: ``select``'s predicate and ``clamp``'s bounds may be scalars.

Which element types each op accepts follows XLA's ``ShapeInference``:

* float only: ``exponential``, ``log``, ``sqrt``, ``tanh``, ``floor``, ``is-finite`` ... and ``atan2``
* signed (signed ints and floats): ``abs``, ``sign``
* integers only: ``popcnt``, ``count-leading-zeros``, the three shifts
* pred or integers: ``not``, ``and``, ``or``, ``xor``
* numbers (not pred): ``negate``
* any array type: ``add``, ``subtract``, ``multiply``, ``divide``, ``maximum`` ...
"""

from __future__ import annotations

from collections.abc import Callable

from xla_teach.hlo.errors import shape_text
from xla_teach.hlo.opcodes import COMPARISON_DIRECTIONS, COMPARISON_TYPES
from xla_teach.hlo.shape import Shape
from xla_teach.hlo.shape_inference.context import OpContext
from xla_teach.hlo.types import PrimitiveType

Rule = Callable[[OpContext], Shape]


# ---------------------------------------------------------------------------------------
# Element type classes
# ---------------------------------------------------------------------------------------
def _is_float(t: PrimitiveType) -> bool:
    return t.is_float


def _is_signed(t: PrimitiveType) -> bool:
    return t.is_signed_int or t.is_float


def _is_integral(t: PrimitiveType) -> bool:
    return t.is_integral


def _is_pred_or_integral(t: PrimitiveType) -> bool:
    return t.is_pred or t.is_integral


def _is_number(t: PrimitiveType) -> bool:
    return t.is_integral or t.is_float


def _any_type(t: PrimitiveType) -> bool:
    return True


_TYPE_CLASSES: dict[Callable[[PrimitiveType], bool], str] = {
    _is_float: "a floating-point type",
    _is_signed: "a signed integer or floating-point type",
    _is_integral: "an integer type",
    _is_pred_or_integral: "pred or an integer type",
    _is_number: "an integer or floating-point type",
    _any_type: "an array type",
}

_FLOAT_UNARY = ("cbrt", "ceil", "cosine", "erf", "exponential", "exponential-minus-one", "floor", "log",
                "log-plus-one", "logistic", "round-nearest-afz", "round-nearest-even", "rsqrt", "sine", "sqrt",
                "tan", "tanh")
UNARY_TYPE_RULES: dict[str, Callable[[PrimitiveType], bool]] = {
    **{op: _is_float for op in _FLOAT_UNARY},
    "abs": _is_signed,
    "sign": _is_signed,
    "negate": _is_number,
    "not": _is_pred_or_integral,
    "popcnt": _is_integral,
    "count-leading-zeros": _is_integral,
    "is-finite": _is_float,
}

BINARY_TYPE_RULES: dict[str, Callable[[PrimitiveType], bool]] = {
    **{op: _any_type for op in ("add", "subtract", "multiply", "divide", "remainder", "power", "maximum",
                                "minimum")},
    "atan2": _is_float,
    **{op: _is_pred_or_integral for op in ("and", "or", "xor")},
    **{op: _is_integral for op in ("shift-left", "shift-right-arithmetic", "shift-right-logical")},
}


def _check_type(ctx: OpContext, accepts: Callable[[PrimitiveType], bool], shape: Shape) -> None:
    if not accepts(shape.element_type):
        raise ctx.fail(f"element type {shape.element_type.value} is not allowed; "
                       f"{ctx.opcode} needs {_TYPE_CLASSES[accepts]} (operand {shape_text(shape)})")


def _same_array_shapes(ctx: OpContext, a: Shape, b: Shape, roles: str = "operand shapes") -> None:
    """Identical dimensions and element types (layouts may differ)."""
    if a.dimensions != b.dimensions:
        raise ctx.fail(f"{roles} {shape_text(a)} and {shape_text(b)} are incompatible "
                       "(elementwise ops need identical dimensions)")
    if a.element_type is not b.element_type:
        raise ctx.fail(f"{roles} {shape_text(a)} and {shape_text(b)} have different element types "
                       "(convert one of them first)")


# ---------------------------------------------------------------------------------------
# Rules
# ---------------------------------------------------------------------------------------
def infer_unary(ctx: OpContext) -> Shape:
    ctx.expect_operand_count(1)
    operand = ctx.array_operand(0)
    _check_type(ctx, UNARY_TYPE_RULES[ctx.opcode], operand)
    if ctx.opcode == "is-finite":
        return operand.with_element_type(PrimitiveType.PRED)
    return operand


def infer_binary(ctx: OpContext) -> Shape:
    ctx.expect_operand_count(2)
    lhs, rhs = ctx.array_operand(0), ctx.array_operand(1)
    _same_array_shapes(ctx, lhs, rhs)
    _check_type(ctx, BINARY_TYPE_RULES[ctx.opcode], lhs)
    return lhs


def default_comparison_type(element_type: PrimitiveType) -> str:
    """FLOAT for floats, SIGNED for signed ints, UNSIGNED for unsigned ints and pred."""
    if element_type.is_float:
        return "FLOAT"
    return "SIGNED" if element_type.is_signed_int else "UNSIGNED"


def _comparison_type_fits(comparison_type: str, element_type: PrimitiveType) -> bool:
    if comparison_type in ("FLOAT", "TOTALORDER"):
        return element_type.is_float
    if comparison_type == "SIGNED":
        return element_type.is_signed_int
    return element_type.is_unsigned_int or element_type.is_pred


def infer_compare(ctx: OpContext) -> Shape:
    """Same shapes in, ``pred`` of the same dims out; direction and type checked."""
    ctx.expect_operand_count(2)
    lhs, rhs = ctx.array_operand(0), ctx.array_operand(1)
    _same_array_shapes(ctx, lhs, rhs)
    direction = ctx.attr("direction")
    if direction not in COMPARISON_DIRECTIONS:
        raise ctx.fail(f"direction={direction} is not one of {', '.join(COMPARISON_DIRECTIONS)}")
    comparison_type = ctx.attrs.get("type")
    if comparison_type is not None:
        if comparison_type not in COMPARISON_TYPES:
            raise ctx.fail(f"type={comparison_type} is not one of {', '.join(COMPARISON_TYPES)}")
        if not _comparison_type_fits(comparison_type, lhs.element_type):
            raise ctx.fail(f"type={comparison_type} does not fit element type {lhs.element_type.value}")
    return lhs.with_element_type(PrimitiveType.PRED)


def infer_select(ctx: OpContext) -> Shape:
    """``select(pred, on_true, on_false)``: pred is ``pred`` with the branches' dims or a
    scalar; the branches are arrays of identical shapes (XLA removed the old tuple-select:
    select each element and ``tuple`` the results)."""
    ctx.expect_operand_count(3)
    pred, on_true, on_false = ctx.operands
    if not pred.is_array or pred.element_type is not PrimitiveType.PRED:
        raise ctx.fail(f"the predicate must be a pred array, got {shape_text(pred)}")
    if not on_true.compatible(on_false):
        raise ctx.fail(f"on_true {shape_text(on_true)} and on_false {shape_text(on_false)} must have the same shape")
    if on_true.is_tuple:
        raise ctx.fail(f"cannot select between tuples {shape_text(on_true)} (XLA removed tuple-select): "
                       "select each get-tuple-element and tuple the results")
    if not on_true.is_array:
        raise ctx.fail(f"cannot select between {shape_text(on_true)} values")
    if not pred.is_scalar and pred.dimensions != on_true.dimensions:
        raise ctx.fail(f"predicate {shape_text(pred)} must be a scalar or have the dimensions of "
                       f"{shape_text(on_true)}")
    return on_true


def infer_clamp(ctx: OpContext) -> Shape:
    """``clamp(min, x, max)``: min and max are scalars or have x's dims; one element type."""
    ctx.expect_operand_count(3)
    low, operand, high = (ctx.array_operand(i) for i in range(3))
    for role, bound in (("min", low), ("max", high)):
        if bound.element_type is not operand.element_type:
            raise ctx.fail(f"{role} {shape_text(bound)} and operand {shape_text(operand)} have different "
                           "element types")
        if not bound.is_scalar and bound.dimensions != operand.dimensions:
            raise ctx.fail(f"{role} {shape_text(bound)} must be a scalar or have the dimensions of the "
                           f"operand {shape_text(operand)}")
    return operand


def infer_convert(ctx: OpContext) -> Shape:
    """Same dimensions, the requested element type (any array type to any other)."""
    ctx.expect_operand_count(1)
    operand = ctx.array_operand(0)
    new_type = ctx.wanted_element_type(required=True)
    assert new_type is not None
    if not new_type.is_array_type:
        raise ctx.fail(f"cannot convert to {new_type.value}")
    return operand.with_element_type(new_type)


def infer_bitcast_convert(ctx: OpContext) -> Shape:
    """Reinterpret the bits. Equal widths keep the dims; a narrower result type adds a
    minor-most dim of size ``ratio``; a wider one needs the operand's last dim == ratio
    and removes it (``f32[2] -> u16[2,2]``, ``u16[2,2] -> f32[2]``)."""
    ctx.expect_operand_count(1)
    operand = ctx.array_operand(0)
    new_type = ctx.wanted_element_type(required=True)
    assert new_type is not None
    old_type = operand.element_type
    if PrimitiveType.PRED in (old_type, new_type) or not new_type.is_array_type:
        raise ctx.fail(f"cannot bitcast-convert {old_type.value} to {new_type.value} "
                       "(pred has no defined bit pattern)")
    old_bits, new_bits = old_type.bit_width, new_type.bit_width
    if old_bits == new_bits:
        return operand.with_element_type(new_type)
    if max(old_bits, new_bits) % min(old_bits, new_bits) != 0:
        raise ctx.fail(f"bit widths {old_bits} ({old_type.value}) and {new_bits} ({new_type.value}) do not divide")
    if old_bits > new_bits:
        ratio = old_bits // new_bits
        return Shape.array(new_type, operand.dimensions + (ratio,))
    ratio = new_bits // old_bits
    if operand.rank == 0 or operand.dimensions[-1] != ratio:
        raise ctx.fail(f"bitcast-convert {shape_text(operand)} to {new_type.value}: the last dimension must be "
                       f"the bit-width ratio {ratio}")
    return Shape.array(new_type, operand.dimensions[:-1])


def infer_reduce_precision(ctx: OpContext) -> Shape:
    ctx.expect_operand_count(1)
    operand = ctx.array_operand(0)
    _check_type(ctx, _is_float, operand)
    exponent_bits, mantissa_bits = ctx.int_attr("exponent_bits"), ctx.int_attr("mantissa_bits")
    if exponent_bits < 1 or mantissa_bits < 0:
        raise ctx.fail(f"exponent_bits={exponent_bits} must be >= 1 and mantissa_bits={mantissa_bits} >= 0")
    return operand


ELEMENTWISE_RULES: dict[str, Rule] = {
    **{op: infer_unary for op in UNARY_TYPE_RULES},
    **{op: infer_binary for op in BINARY_TYPE_RULES},
    "compare": infer_compare,
    "select": infer_select,
    "clamp": infer_clamp,
    "convert": infer_convert,
    "bitcast-convert": infer_bitcast_convert,
    "reduce-precision": infer_reduce_precision,
}
