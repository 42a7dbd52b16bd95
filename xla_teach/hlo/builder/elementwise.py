"""Elementwise builder methods, named as XLA's ``XlaBuilder`` functions in snake_case
(``Add`` -> ``add``, ``Exp`` -> ``exp``, ``PopulationCount`` -> ``population_count``).

Aliases spelled like the HLO opcodes exist too (``exponential``, ``subtract``,
``maximum``, ``negate`` ...). Python keywords get a trailing underscore
(``and_``, ``or_``, ``not_``).

Binary methods accept a Python/NumPy scalar for either operand and broadcast
implicitly (see :meth:`BuilderBase._implicit_broadcast`); ``broadcast_dimensions``
is XLA's argument for adding a lower-rank operand to a higher-rank one.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from xla_teach.hlo.builder.base import BuilderBase, Scalar, XlaOp
from xla_teach.hlo.shape_inference import default_comparison_type
from xla_teach.hlo.types import PrimitiveType

Dims = Sequence[int] | None


def _type(element_type: PrimitiveType | str | np.dtype | type) -> PrimitiveType:
    """An element type given as a PrimitiveType, its name (``"f32"``) or a NumPy dtype."""
    if isinstance(element_type, PrimitiveType):
        return element_type
    if isinstance(element_type, str):
        return PrimitiveType.from_name(element_type)
    try:
        return PrimitiveType.from_dtype(element_type)  # type: ignore[arg-type]
    except TypeError:
        raise TypeError(f"an element type must be a PrimitiveType, a name like 'f32' or a NumPy dtype, "
                        f"got {element_type!r}") from None


class ElementwiseMixin(BuilderBase):
    """Unary, binary, compare, select, clamp and conversion ops."""

    # ---- unary ----------------------------------------------------------------------
    def _unary(self, opcode: str, operand: XlaOp, name: str | None) -> XlaOp:
        return self._emit(opcode, [operand], name=name)

    def abs(self, operand: XlaOp, *, name: str | None = None) -> XlaOp:
        return self._unary("abs", operand, name)

    def neg(self, operand: XlaOp, *, name: str | None = None) -> XlaOp:
        return self._unary("negate", operand, name)

    def sign(self, operand: XlaOp, *, name: str | None = None) -> XlaOp:
        return self._unary("sign", operand, name)

    def not_(self, operand: XlaOp, *, name: str | None = None) -> XlaOp:
        """Logical not on pred, bitwise not on integers."""
        return self._unary("not", operand, name)

    def floor(self, operand: XlaOp, *, name: str | None = None) -> XlaOp:
        return self._unary("floor", operand, name)

    def ceil(self, operand: XlaOp, *, name: str | None = None) -> XlaOp:
        return self._unary("ceil", operand, name)

    def round(self, operand: XlaOp, *, name: str | None = None) -> XlaOp:
        """Round half away from zero (XLA's ``Round``: opcode ``round-nearest-afz``)."""
        return self._unary("round-nearest-afz", operand, name)

    def round_nearest_even(self, operand: XlaOp, *, name: str | None = None) -> XlaOp:
        return self._unary("round-nearest-even", operand, name)

    def exp(self, operand: XlaOp, *, name: str | None = None) -> XlaOp:
        return self._unary("exponential", operand, name)

    def expm1(self, operand: XlaOp, *, name: str | None = None) -> XlaOp:
        return self._unary("exponential-minus-one", operand, name)

    def log(self, operand: XlaOp, *, name: str | None = None) -> XlaOp:
        return self._unary("log", operand, name)

    def log1p(self, operand: XlaOp, *, name: str | None = None) -> XlaOp:
        return self._unary("log-plus-one", operand, name)

    def logistic(self, operand: XlaOp, *, name: str | None = None) -> XlaOp:
        return self._unary("logistic", operand, name)

    def sqrt(self, operand: XlaOp, *, name: str | None = None) -> XlaOp:
        return self._unary("sqrt", operand, name)

    def rsqrt(self, operand: XlaOp, *, name: str | None = None) -> XlaOp:
        return self._unary("rsqrt", operand, name)

    def cbrt(self, operand: XlaOp, *, name: str | None = None) -> XlaOp:
        return self._unary("cbrt", operand, name)

    def sin(self, operand: XlaOp, *, name: str | None = None) -> XlaOp:
        return self._unary("sine", operand, name)

    def cos(self, operand: XlaOp, *, name: str | None = None) -> XlaOp:
        return self._unary("cosine", operand, name)

    def tan(self, operand: XlaOp, *, name: str | None = None) -> XlaOp:
        return self._unary("tan", operand, name)

    def tanh(self, operand: XlaOp, *, name: str | None = None) -> XlaOp:
        return self._unary("tanh", operand, name)

    def erf(self, operand: XlaOp, *, name: str | None = None) -> XlaOp:
        return self._unary("erf", operand, name)

    def is_finite(self, operand: XlaOp, *, name: str | None = None) -> XlaOp:
        """``pred`` per element: false for inf and NaN."""
        return self._unary("is-finite", operand, name)

    def population_count(self, operand: XlaOp, *, name: str | None = None) -> XlaOp:
        return self._unary("popcnt", operand, name)

    def clz(self, operand: XlaOp, *, name: str | None = None) -> XlaOp:
        return self._unary("count-leading-zeros", operand, name)

    # ---- binary ---------------------------------------------------------------------
    def add(self, lhs: XlaOp | Scalar, rhs: XlaOp | Scalar, broadcast_dimensions: Dims = None, *,
            name: str | None = None) -> XlaOp:
        return self._binary("add", lhs, rhs, broadcast_dimensions, name)

    def sub(self, lhs: XlaOp | Scalar, rhs: XlaOp | Scalar, broadcast_dimensions: Dims = None, *,
            name: str | None = None) -> XlaOp:
        return self._binary("subtract", lhs, rhs, broadcast_dimensions, name)

    def mul(self, lhs: XlaOp | Scalar, rhs: XlaOp | Scalar, broadcast_dimensions: Dims = None, *,
            name: str | None = None) -> XlaOp:
        return self._binary("multiply", lhs, rhs, broadcast_dimensions, name)

    def div(self, lhs: XlaOp | Scalar, rhs: XlaOp | Scalar, broadcast_dimensions: Dims = None, *,
            name: str | None = None) -> XlaOp:
        return self._binary("divide", lhs, rhs, broadcast_dimensions, name)

    def rem(self, lhs: XlaOp | Scalar, rhs: XlaOp | Scalar, broadcast_dimensions: Dims = None, *,
            name: str | None = None) -> XlaOp:
        return self._binary("remainder", lhs, rhs, broadcast_dimensions, name)

    def max(self, lhs: XlaOp | Scalar, rhs: XlaOp | Scalar, broadcast_dimensions: Dims = None, *,
            name: str | None = None) -> XlaOp:
        return self._binary("maximum", lhs, rhs, broadcast_dimensions, name)

    def min(self, lhs: XlaOp | Scalar, rhs: XlaOp | Scalar, broadcast_dimensions: Dims = None, *,
            name: str | None = None) -> XlaOp:
        return self._binary("minimum", lhs, rhs, broadcast_dimensions, name)

    def pow(self, lhs: XlaOp | Scalar, rhs: XlaOp | Scalar, broadcast_dimensions: Dims = None, *,
            name: str | None = None) -> XlaOp:
        return self._binary("power", lhs, rhs, broadcast_dimensions, name)

    def atan2(self, y: XlaOp | Scalar, x: XlaOp | Scalar, broadcast_dimensions: Dims = None, *,
              name: str | None = None) -> XlaOp:
        return self._binary("atan2", y, x, broadcast_dimensions, name)

    def and_(self, lhs: XlaOp | Scalar, rhs: XlaOp | Scalar, broadcast_dimensions: Dims = None, *,
             name: str | None = None) -> XlaOp:
        return self._binary("and", lhs, rhs, broadcast_dimensions, name)

    def or_(self, lhs: XlaOp | Scalar, rhs: XlaOp | Scalar, broadcast_dimensions: Dims = None, *,
            name: str | None = None) -> XlaOp:
        return self._binary("or", lhs, rhs, broadcast_dimensions, name)

    def xor(self, lhs: XlaOp | Scalar, rhs: XlaOp | Scalar, broadcast_dimensions: Dims = None, *,
            name: str | None = None) -> XlaOp:
        return self._binary("xor", lhs, rhs, broadcast_dimensions, name)

    def shift_left(self, lhs: XlaOp | Scalar, rhs: XlaOp | Scalar, broadcast_dimensions: Dims = None, *,
                   name: str | None = None) -> XlaOp:
        return self._binary("shift-left", lhs, rhs, broadcast_dimensions, name)

    def shift_right_arithmetic(self, lhs: XlaOp | Scalar, rhs: XlaOp | Scalar, broadcast_dimensions: Dims = None,
                               *, name: str | None = None) -> XlaOp:
        return self._binary("shift-right-arithmetic", lhs, rhs, broadcast_dimensions, name)

    def shift_right_logical(self, lhs: XlaOp | Scalar, rhs: XlaOp | Scalar, broadcast_dimensions: Dims = None, *,
                            name: str | None = None) -> XlaOp:
        return self._binary("shift-right-logical", lhs, rhs, broadcast_dimensions, name)

    # ---- compare, select, clamp -----------------------------------------------------
    def compare(self, lhs: XlaOp | Scalar, rhs: XlaOp | Scalar, direction: str, comparison_type: str | None = None,
                broadcast_dimensions: Dims = None, *, name: str | None = None) -> XlaOp:
        """``direction`` in EQ/NE/LT/LE/GT/GE; ``comparison_type`` (e.g. ``"TOTALORDER"``)
        only when it differs from the element type's default."""
        attrs = {"direction": direction, "type": comparison_type}
        op = self._binary("compare", lhs, rhs, broadcast_dimensions, name, attrs)
        # Like the parser, keep type=None when it is the element type's default.
        if comparison_type == default_comparison_type(op.instruction.operand(0).shape.element_type):
            op.instruction.attrs["type"] = None
        return op

    def eq(self, lhs: XlaOp | Scalar, rhs: XlaOp | Scalar, *, name: str | None = None) -> XlaOp:
        return self.compare(lhs, rhs, "EQ", name=name)

    def ne(self, lhs: XlaOp | Scalar, rhs: XlaOp | Scalar, *, name: str | None = None) -> XlaOp:
        return self.compare(lhs, rhs, "NE", name=name)

    def lt(self, lhs: XlaOp | Scalar, rhs: XlaOp | Scalar, *, name: str | None = None) -> XlaOp:
        return self.compare(lhs, rhs, "LT", name=name)

    def le(self, lhs: XlaOp | Scalar, rhs: XlaOp | Scalar, *, name: str | None = None) -> XlaOp:
        return self.compare(lhs, rhs, "LE", name=name)

    def gt(self, lhs: XlaOp | Scalar, rhs: XlaOp | Scalar, *, name: str | None = None) -> XlaOp:
        return self.compare(lhs, rhs, "GT", name=name)

    def ge(self, lhs: XlaOp | Scalar, rhs: XlaOp | Scalar, *, name: str | None = None) -> XlaOp:
        return self.compare(lhs, rhs, "GE", name=name)

    def select(self, pred: XlaOp, on_true: XlaOp | Scalar, on_false: XlaOp | Scalar, *,
               name: str | None = None) -> XlaOp:
        """``pred ? on_true : on_false`` per element; ``pred`` may be a scalar. A scalar
        branch (or Python number) is broadcast to the shape of the other operands."""
        on_true_op = self._as_op(on_true, on_false, "select")
        on_false_op = self._as_op(on_false, on_true, "select")
        arrays = [op for op in (pred, on_true_op, on_false_op) if op.shape.is_array]
        dims = max((op.dimensions for op in arrays), key=len, default=())
        if len(arrays) == 3 and dims:
            on_true_op, on_false_op = (self._broadcast_to(op, dims, ()) if op.rank == 0 else op
                                       for op in (on_true_op, on_false_op))
        return self._emit("select", [pred, on_true_op, on_false_op], name=name)

    def clamp(self, min_value: XlaOp | Scalar, operand: XlaOp, max_value: XlaOp | Scalar, *,
              name: str | None = None) -> XlaOp:
        """``min(max(operand, min_value), max_value)``; the bounds may be scalars."""
        low, high = self._as_op(min_value, operand, "clamp"), self._as_op(max_value, operand, "clamp")
        return self._emit("clamp", [low, operand, high], name=name)

    # ---- conversions ----------------------------------------------------------------
    def convert_element_type(self, operand: XlaOp, new_element_type: PrimitiveType | str, *,
                             name: str | None = None) -> XlaOp:
        return self._emit("convert", [operand], name=name, result_element_type=_type(new_element_type))

    def bitcast_convert_type(self, operand: XlaOp, new_element_type: PrimitiveType | str, *,
                             name: str | None = None) -> XlaOp:
        """Reinterpret the bits (a narrower type adds a minor dim, a wider one removes it)."""
        return self._emit("bitcast-convert", [operand], name=name, result_element_type=_type(new_element_type))

    def reduce_precision(self, operand: XlaOp, exponent_bits: int, mantissa_bits: int, *,
                         name: str | None = None) -> XlaOp:
        attrs = {"exponent_bits": int(exponent_bits), "mantissa_bits": int(mantissa_bits)}
        return self._emit("reduce-precision", [operand], attrs, name=name)

    # ---- aliases spelled like the HLO opcodes ---------------------------------------
    negate = neg
    subtract = sub
    multiply = mul
    divide = div
    remainder = rem
    maximum = max
    minimum = min
    power = pow
    exponential = exp
    exponential_minus_one = expm1
    log_plus_one = log1p
    sine = sin
    cosine = cos
    round_nearest_afz = round
    popcnt = population_count
    count_leading_zeros = clz
    convert = convert_element_type
    bitcast_convert = bitcast_convert_type
