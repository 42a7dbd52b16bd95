"""Printing literals (the values inside ``constant(...)``) exactly as XLA does.

Floats print with the fewest digits that still read back to the same value
(f32: ``%.6g``, else ``%.9g``; f64: 15 then 17 digits; f16: 5; bf16: 4).
Arrays nest in braces: ``{1, 2}`` for rank 1 and ``{ { 1, 2 }, { 3, 4 } }`` for
rank 2 -- XLA prints a multi-line form and squeezes its whitespace into single
spaces, and we do the same. Predicates print ``true``/``false`` as scalars but
``1``/``0`` inside arrays.

A tuple constant's value is a Python tuple of arrays (nested for nested tuple shapes),
printed on one line as XLA's ``LiteralBase::PrintWithoutShapeOneline`` does:
``( {1, 2}, 3 )``, ``( ( 1 ), true )``, and ``(  )`` (two spaces) for the empty tuple.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, TypeAlias

import numpy as np

from xla_teach.hlo.types import PrimitiveType

if TYPE_CHECKING:
    from xla_teach.hlo.shape import Shape

LiteralValue: TypeAlias = np.ndarray | tuple["LiteralValue", ...]  # an array, or a tuple of them

_FLOAT_DIGITS = {
    PrimitiveType.F16: (5, 5),
    PrimitiveType.BF16: (4, 4),
    PrimitiveType.F32: (6, 9),
    PrimitiveType.F64: (15, 17),
}
_MANTISSA_BITS = {PrimitiveType.F16: 10, PrimitiveType.BF16: 7, PrimitiveType.F32: 23, PrimitiveType.F64: 52}
_UINT_OF_WIDTH = {16: np.uint16, 32: np.uint32, 64: np.uint64}


def _nan_to_text(value: np.generic, ptype: PrimitiveType) -> str:
    bits = int(np.array(value, dtype=ptype.dtype).view(_UINT_OF_WIDTH[ptype.bit_width]))
    mantissa_bits = _MANTISSA_BITS[ptype]
    sign = bits >> (ptype.bit_width - 1)
    payload = bits & ((1 << mantissa_bits) - 1)
    text = "-nan" if sign else "nan"
    if payload != 1 << (mantissa_bits - 1):
        text += f"(0x{payload:x})"
    return text


def float_to_text(value: float | np.generic, ptype: PrimitiveType) -> str:
    """Shortest-round-trip text of one float of type ``ptype``."""
    v = float(value)
    if math.isnan(v):
        return _nan_to_text(value if isinstance(value, np.generic) else ptype.dtype.type(v), ptype)
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    short, long = _FLOAT_DIGITS[ptype]
    text = f"{v:.{short}g}"
    if ptype.dtype.type(float(text)) != ptype.dtype.type(v):
        text = f"{v:.{long}g}"
    return text


def scalar_to_text(value: object, ptype: PrimitiveType, in_array: bool = False) -> str:
    if ptype is PrimitiveType.PRED:
        truth = bool(value)
        if in_array:
            return "1" if truth else "0"
        return "true" if truth else "false"
    if ptype.is_float:
        return float_to_text(value, ptype)  # type: ignore[arg-type]
    return str(int(value))  # type: ignore[call-overload]


def literal_to_text(array: np.ndarray, ptype: PrimitiveType) -> str:
    """The text inside ``constant(...)`` for an array of element type ``ptype``."""
    array = np.asarray(array)
    rank = array.ndim
    if rank == 0:
        return scalar_to_text(array[()], ptype)
    pieces: list[str] = []

    def brace(text: str, remaining: tuple[int, ...], depth: int, index: int) -> str:
        if rank == 1:
            return text
        if len(remaining) == 1:
            if text == "{":
                return "  {" + ("" if remaining[0] <= 1 else " ")
            return ("" if remaining[0] <= 1 else " ") + "}"
        if text == "{":
            if rank > 3 and 0 < depth < rank:
                return "{ " + f"/*i{depth - 1}={index}*/\n"
            return "{\n"
        return "\n}"

    def recurse(sub: np.ndarray, depth: int, index: int) -> None:
        if sub.ndim == 0:
            pieces.append(scalar_to_text(sub[()], ptype, in_array=True))
            return
        pieces.append(brace("{", sub.shape, depth, index))
        for i in range(sub.shape[0]):
            recurse(sub[i], depth + 1, i)
            if i < sub.shape[0] - 1:
                pieces.append(",")
                pieces.append("\n" if sub.ndim > 1 else " ")
        pieces.append(brace("}", sub.shape, depth, index))

    recurse(array, 0, 0)
    return " ".join("".join(pieces).split())


def tuple_literal_to_text(value: tuple[LiteralValue, ...], shape: Shape) -> str:
    """The text inside ``constant(...)`` for a tuple constant: ``( {1, 2}, 3 )``.

    XLA opens with ``"( "``, joins the elements with ``", "`` and closes with ``" )"``, so
    the empty tuple prints ``(  )``. Elements print without their shapes."""
    pieces = [tuple_literal_to_text(v, s) if s.is_tuple else literal_to_text(v, s.element_type)  # type: ignore[arg-type]
              for v, s in zip(value, shape.tuple_shapes, strict=True)]
    return "( " + ", ".join(pieces) + " )"


def value_literal_to_text(value: LiteralValue, shape: Shape) -> str:
    """The text inside ``constant(...)`` for a constant of ``shape`` (array or tuple)."""
    if shape.is_tuple:
        return tuple_literal_to_text(value, shape)  # type: ignore[arg-type]
    return literal_to_text(value, shape.element_type)  # type: ignore[arg-type]


def literal_at(value: LiteralValue, index: tuple[int, ...] = ()) -> np.ndarray:
    """The array at shape index ``index`` of a literal (``()`` for an array constant itself):
    how buffer assignment's per-leaf values find their bytes in a tuple constant."""
    for i in index:
        if not isinstance(value, tuple):
            raise ValueError(f"shape index {index} goes past an array leaf of the literal")
        value = value[i]
    if isinstance(value, tuple):
        raise ValueError(f"shape index {index} names a tuple, not an array, of the literal")
    return value


def literal_element_count(value: LiteralValue) -> int:
    """Number of array elements in a literal, summed over a tuple's leaves."""
    if isinstance(value, tuple):
        return sum(literal_element_count(v) for v in value)
    return int(np.asarray(value).size)


def literal_shape_problem(value: object, shape: Shape) -> str | None:
    """Why ``value`` cannot be the literal of a constant of ``shape``, or None if it can.

    An array shape needs a NumPy array of the same dimensions and dtype; a tuple shape a
    Python tuple with one such literal per element (nested the same way)."""
    text = shape.to_text(print_layout=False)
    if shape.is_tuple:
        wanted = len(shape.tuple_shapes)
        if not isinstance(value, tuple):
            return f"a constant of tuple shape {text} needs a tuple literal, not {type(value).__name__}"
        if len(value) != wanted:
            return f"tuple literal has {len(value)} elements but the shape {text} has {wanted}"
        for index, (element, element_shape) in enumerate(zip(value, shape.tuple_shapes, strict=True)):
            problem = literal_shape_problem(element, element_shape)
            if problem is not None:
                return f"tuple literal element {index}: {problem}"
        return None
    if not shape.is_array:
        return f"constants of shape {text} are not supported (arrays and tuples of arrays only)"
    if not isinstance(value, np.ndarray):
        return f"a constant of shape {text} needs a NumPy array literal, not {type(value).__name__}"
    if value.shape != shape.dimensions or value.dtype != shape.dtype:
        return (f"literal {value.dtype}{list(value.shape)} does not match the declared shape "
                f"{text} ({shape.dtype}{list(shape.dimensions)})")
    return None
