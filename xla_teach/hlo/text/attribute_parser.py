"""Reading attribute values and literals out of HLO text.

The parser first cuts an attribute's value out of the text (``Cursor.raw_value``)
and then interprets it according to the attribute's :class:`AttrKind` from the
opcode table. Computation references stay names here; the parser resolves them
once every computation is known.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from xla_teach.hlo.attributes import (
    ConvDimensionNumbers,
    OpMetadata,
    SliceDim,
    Window,
    padding_from_text,
)
from xla_teach.hlo.literal import LiteralValue
from xla_teach.hlo.opcodes import AttrKind
from xla_teach.hlo.shape import Shape
from xla_teach.hlo.text.lexer import NUMBER_RE, Cursor
from xla_teach.hlo.types import PrimitiveType

_INT_TEXT_RE = re.compile(r"-?\d+")


class ComputationRef(str):
    """A computation name waiting to be resolved (``to_apply=%add``)."""


def _braced_items(value: str, what: str) -> list[str]:
    value = value.strip()
    if not (value.startswith("{") and value.endswith("}")):
        raise ValueError(f"{what} must be written in braces, e.g. {{0,1}}, not '{value}'")
    body = value[1:-1].strip()
    return [item.strip() for item in body.split(",")] if body else []


def _to_int(text: str, what: str = "") -> int:
    """``int(text)``, with a message that says which value was not an integer."""
    if not _INT_TEXT_RE.fullmatch(text):
        where = f" in {what}" if what else ""
        raise ValueError(f"expected an integer{where}, got '{text}'")
    return int(text)


def _check_ints(text: str, what: str) -> None:
    """Check that every number in ``2x3`` or ``0_1x1_0`` style text is an integer."""
    for piece in re.split(r"[x_]", text):
        _to_int(piece, what)


def parse_attribute_value(kind: AttrKind, value: str) -> Any:
    """Interpret ``value`` (the raw text) as an attribute of ``kind``; ValueError if malformed."""
    if kind is AttrKind.INT:
        return _to_int(value)
    if kind is AttrKind.INT_LIST:
        return tuple(_to_int(v, "the list") for v in _braced_items(value, "an integer list"))
    if kind is AttrKind.BOOL:
        if value not in ("true", "false"):
            raise ValueError(f"expected true or false, not '{value}'")
        return value == "true"
    if kind is AttrKind.WORD:
        return value
    if kind is AttrKind.WORD_LIST:
        return tuple(_braced_items(value, "a list"))
    if kind is AttrKind.STRING:
        cursor = Cursor(value)
        return cursor.string()
    if kind is AttrKind.COMPUTATION:
        return ComputationRef(value.lstrip("%"))
    if kind is AttrKind.COMPUTATION_LIST:
        return tuple(ComputationRef(v.lstrip("%")) for v in _braced_items(value, "a computation list"))
    if kind is AttrKind.WINDOW:
        return parse_window(value)
    if kind is AttrKind.SLICE:
        return parse_slice(value)
    if kind is AttrKind.PADDING:
        _check_ints(value, "padding")
        return padding_from_text(value)
    if kind is AttrKind.DIM_LABELS:
        return ConvDimensionNumbers.from_text(value)
    return value  # RAW


_WINDOW_FIELDS = ("size", "stride", "pad", "lhs_dilate", "rhs_dilate", "rhs_reversal")


def parse_window(value: str) -> Window:
    value = value.strip()
    if not (value.startswith("{") and value.endswith("}")):
        raise ValueError("window must be written in braces: {size=2x2 stride=1x1}")
    fields: dict[str, str] = {}
    for item in value[1:-1].split():
        key, sep, text = item.partition("=")
        if not sep:
            raise ValueError(f"window field '{item}' is not key=value")
        fields[key] = text
        if key in _WINDOW_FIELDS:  # Window.from_fields reports unknown fields
            _check_ints(text, f"window {key}")
    return Window.from_fields(fields)


_SLICE_RE = re.compile(r"\[\s*(-?\d+)\s*:\s*(-?\d+)\s*(?::\s*(-?\d+)\s*)?\]")


def parse_slice(value: str) -> tuple[SliceDim, ...]:
    dims = []
    for item in _braced_items(value, "slice"):
        match = _SLICE_RE.fullmatch(item)
        if not match:
            raise ValueError(f"slice entry '{item}' is not [start:limit] or [start:limit:stride]")
        start, limit, stride = match.groups()
        dims.append(SliceDim(int(start), int(limit), int(stride) if stride else 1))
    return tuple(dims)


# The OpMetadata fields XLA's parser accepts (``ParseMetadata`` in hlo_parser.cc; older XLA
# also printed ``preserve_layout``). XLA rejects any other name, and so do we.
_METADATA_INT_FIELDS = ("source_line", "source_end_line", "source_column", "source_end_column",
                        "stack_frame_id")
_METADATA_FIELDS = ("op_type", "op_name", "source_file", *_METADATA_INT_FIELDS, "profile_type",
                    "deduplicated_name", "preserve_layout", "scheduling_name")


def parse_metadata(value: str) -> OpMetadata:
    """``{op_name="a" source_line=3}``: quoted values stay strings, bare numbers become ints.

    Errors are raised at offsets into ``value``; the caller moves them into the module text.
    """
    cursor = Cursor(value)
    cursor.expect("{")
    fields: dict[str, str | int] = {}
    while not cursor.accept("}"):
        cursor.skip_space()
        key_pos = cursor.pos
        key = cursor.name("a metadata field name")
        if key not in _METADATA_FIELDS:
            raise cursor.error(f"unknown metadata field '{key}' (known fields: {', '.join(_METADATA_FIELDS)})",
                               key_pos)
        if key in fields:
            raise cursor.error(f"metadata field '{key}' is given twice", key_pos)
        cursor.expect("=", f"after metadata field '{key}'")
        cursor.skip_space()
        value_pos = cursor.pos
        if cursor.peek('"') or cursor.peek("'"):
            fields[key] = cursor.string()
        else:
            raw = cursor.raw_value()
            fields[key] = int(raw) if _INT_TEXT_RE.fullmatch(raw) else raw
        if key in _METADATA_INT_FIELDS and not isinstance(fields[key], int):
            raise cursor.error(f"metadata field '{key}' must be an integer, not '{value[value_pos:cursor.pos]}'",
                               value_pos)
        cursor.accept(",")
    return OpMetadata(fields)


def parse_frontend_attributes(value: str) -> dict[str, str]:
    cursor = Cursor(value)
    cursor.expect("{")
    result: dict[str, str] = {}
    while not cursor.accept("}"):
        cursor.skip_space()
        key = cursor.string() if cursor.peek('"') else cursor.name("an attribute name")
        cursor.expect("=")
        cursor.skip_space()
        result[key] = cursor.string() if (cursor.peek('"') or cursor.peek("'")) else cursor.raw_value()
        cursor.accept(",")
    return result


# ---------------------------------------------------------------------------------------
# Literals
# ---------------------------------------------------------------------------------------
_NAN_RE = re.compile(r"-?nan(?:\(0x[0-9a-fA-F]+\))?")
_UINT = {16: np.uint16, 32: np.uint32, 64: np.uint64}
_MANTISSA = {PrimitiveType.F16: 10, PrimitiveType.BF16: 7, PrimitiveType.F32: 23, PrimitiveType.F64: 52}


def _nan_value(token: str, ptype: PrimitiveType) -> np.generic:
    width = ptype.bit_width
    mantissa = _MANTISSA[ptype]
    payload = 1 << (mantissa - 1)
    if "(" in token:
        payload = int(token[token.index("(") + 1 : -1], 16)
    exponent = ((1 << (width - 1 - mantissa)) - 1) << mantissa
    bits = exponent | payload | ((1 << (width - 1)) if token.startswith("-") else 0)
    return np.array(bits, dtype=_UINT[width]).view(ptype.dtype)[()]


def _scalar_token(cursor: Cursor) -> str:
    cursor.skip_space()
    for pattern in (_NAN_RE, re.compile(r"-?inf\b"), re.compile(r"true\b|false\b"), NUMBER_RE):
        match = pattern.match(cursor.text, cursor.pos)
        if match and match.group(0) not in ("", "-"):
            cursor.pos = match.end()
            return match.group(0)
    raise cursor.error(f"expected a literal value but found {cursor.describe_next()}")


def _convert_scalar(token: str, ptype: PrimitiveType, cursor: Cursor, offset: int) -> Any:
    if token in ("true", "false"):
        if ptype is not PrimitiveType.PRED and not ptype.is_integral:
            raise cursor.error(f"'{token}' is not a valid {ptype.value} value", offset)
        return token == "true"
    if ptype is PrimitiveType.PRED:
        if token not in ("0", "1"):
            raise cursor.error(f"pred literals are true/false or 1/0, not '{token}'", offset)
        return token == "1"
    if ptype.is_float:
        if _NAN_RE.fullmatch(token):
            return _nan_value(token, ptype)
        return float(token)
    if "inf" in token or "nan" in token or not re.fullmatch(r"-?\d+", token):
        raise cursor.error(f"'{token}' is not a valid {ptype.value} value", offset)
    value = int(token)
    info = np.iinfo(ptype.dtype)
    if not info.min <= value <= info.max:
        raise cursor.error(f"{value} does not fit in {ptype.value}", offset)
    return value


def parse_literal(cursor: Cursor, shape: Shape) -> tuple[LiteralValue, bool]:
    """Read the literal of a ``constant``; returns (value, elided) where elided means ``{...}``.

    An array shape gives a NumPy array; a tuple shape a Python tuple of them (nested for
    nested tuples), written ``( {1, 2}, 3 )`` as XLA's ``ParseTupleLiteral`` reads it.
    ``{...}`` (what dumps print for large constants, and for every tuple constant) reads
    as zeros of the shape.
    """
    _check_literal_shape(cursor, shape, shape)
    if cursor.accept("{...}"):
        return _zeros(shape), True
    return _parse_value(cursor, shape), False


def _check_literal_shape(cursor: Cursor, shape: Shape, whole: Shape) -> None:
    if shape.is_tuple:
        for element in shape.tuple_shapes:
            _check_literal_shape(cursor, element, whole)
    elif not shape.is_array:
        raise cursor.error(f"constants of shape {whole.to_text(print_layout=False)} are not supported "
                           f"(arrays and tuples of arrays only, not {shape.to_text(print_layout=False)})")


def _zeros(shape: Shape) -> LiteralValue:
    if shape.is_tuple:
        return tuple(_zeros(s) for s in shape.tuple_shapes)
    return np.zeros(shape.dimensions, dtype=shape.element_type.dtype)


def _parse_value(cursor: Cursor, shape: Shape) -> LiteralValue:
    if shape.is_tuple:
        return _parse_tuple_literal(cursor, shape)
    return _parse_array_literal(cursor, shape)


def _parse_tuple_literal(cursor: Cursor, shape: Shape) -> tuple[LiteralValue, ...]:
    """``( literal, literal, ... )`` with one literal per element of the tuple shape."""
    wanted = len(shape.tuple_shapes)
    text = shape.to_text(print_layout=False)
    cursor.expect("(", f"(a literal of tuple shape {text} is written '( ..., ... )')")
    elements: list[LiteralValue] = []
    while not cursor.accept(")"):
        if elements:
            cursor.expect(",", "between tuple literal elements")
        cursor.skip_space()
        if len(elements) == wanted:
            raise cursor.error(f"tuple literal has more than {wanted} elements, shape {text} has {wanted}")
        elements.append(_parse_value(cursor, shape.tuple_shapes[len(elements)]))
    if len(elements) != wanted:  # point at the ')' where an element is missing
        raise cursor.error(f"tuple literal has {len(elements)} elements, shape {text} needs {wanted}", cursor.pos - 1)
    return tuple(elements)


def _parse_array_literal(cursor: Cursor, shape: Shape) -> np.ndarray:
    ptype = shape.element_type
    values: list[Any] = []

    def read(level: int) -> None:
        cursor.skip_space()
        if level == shape.rank:
            offset = cursor.pos
            values.append(_convert_scalar(_scalar_token(cursor), ptype, cursor, offset))
            return
        start = cursor.pos
        cursor.expect("{", f"(literal of {shape.to_text()} needs rank-{shape.rank} nesting)")
        count = 0
        while not cursor.accept("}"):
            if count:
                cursor.expect(",", "between literal elements")
            read(level + 1)
            count += 1
        if count != shape.dimensions[level]:
            raise cursor.error(
                f"literal has {count} elements in dimension {level}, shape {shape.to_text()} needs "
                f"{shape.dimensions[level]}", start)

    read(0)
    with np.errstate(over="ignore"):
        if ptype.is_float:
            # NaNs were built bit-exactly (sign, payload); place them after the cast.
            plain = [0.0 if isinstance(v, np.generic) else float(v) for v in values]
            array = np.array(plain, dtype=np.float64).astype(ptype.dtype)
            for i, v in enumerate(values):
                if isinstance(v, np.generic):
                    array[i] = v
        else:
            array = np.array(values, dtype=ptype.dtype) if values else np.zeros(0, ptype.dtype)
    return array.reshape(shape.dimensions)
