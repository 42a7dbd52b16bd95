"""The HLO text parser: reads what XLA prints (and what our printer writes).

Grammar, informally (see ``docs/hlo-text-format.md``)::

    module       := 'HloModule' name (',' key=value)* stack_tables? computation+
    computation  := ['ENTRY'] name [signature] '{' instruction+ '}'
    instruction  := ['ROOT'] name '=' [shape] opcode '(' operands ')' (',' attr=value)*

Details handled the way XLA's parser handles them: a missing ``ENTRY`` makes the
last computation the entry, a missing ``ROOT`` makes the last instruction the
root, ``%`` before names is optional, operands may carry an inline shape
(``add(f32[] %a, f32[] %b)``), an operand ``%t#1`` is element 1 of the tuple ``%t`` (newer
XLA prints a ``call``'s results so; it becomes a ``get-tuple-element`` placed before its first
user), ``/*index=5*/`` comments are skipped, a shape
without a layout gets the default one, and a name used again in another
computation is renamed with a ``.N`` suffix. Attributes xla_teach does not
interpret are kept verbatim and printed back.

Structural checks (do the shapes agree?) are the verifier's job, not the parser's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from xla_teach.hlo.input_output_alias import HloInputOutputAliasConfig
from xla_teach.hlo.ir import HloComputation, HloInstruction, HloModule
from xla_teach.hlo.opcodes import OPCODES, AttrKind, op_info
from xla_teach.hlo.shape import Layout, Shape
from xla_teach.hlo.sharding import parse_sharding
from xla_teach.hlo.text.attribute_parser import (
    ComputationRef,
    parse_attribute_value,
    parse_frontend_attributes,
    parse_literal,
    parse_metadata,
)
from xla_teach.hlo.text.lexer import Cursor, HloParseError
from xla_teach.hlo.types import PrimitiveType

__all__ = ["HloParseError", "parse_hlo", "parse_shape"]

_TYPE_NAMES = {t.value for t in PrimitiveType if t.is_array_type}
# XLA element types xla_teach does not implement, named in the parse error.
_UNSUPPORTED_TYPES = {
    "c64": "complex64", "c128": "complex128", "f4e2m1fn": "a 4-bit float",
    **{t: "an 8-bit float" for t in ("f8e4m3fn", "f8e5m2", "f8e4m3fnuz", "f8e5m2fnuz", "f8e4m3b11fnuz", "f8e3m4",
                                     "f8e4m3", "f8e8m0fnu")},
    **{f"{s}{n}": f"a {n}-bit integer" for s in "su" for n in (1, 2, 4)},
}
_KNOWN_ATTRIBUTES = {a.name for info in OPCODES.values() for a in info.attrs}
_STACK_TABLES = ("FileNames", "FunctionNames", "FileLocations", "StackFrames")
# Limits that turn absurd input into a parse error instead of a crash deeper down:
# nested tuple shapes are parsed recursively (Python's stack is ~1000 frames), NumPy
# arrays have at most 64 dimensions, and XLA counts elements in an int64.
_MAX_TUPLE_DEPTH = 100
_MAX_RANK = 64
_MAX_INT64 = 2**63 - 1


@dataclass
class _PendingRefs:
    """Names to resolve after parsing: computation attributes and control predecessors."""

    computations: list[tuple[HloInstruction, str, int]] = field(default_factory=list)
    control: list[tuple[HloInstruction, list[str], int]] = field(default_factory=list)


def parse_hlo(text: str) -> HloModule:
    """Parse an HLO module from its text; raises :class:`HloParseError` with a caret."""
    return _Parser(text).module()


def parse_shape(text: str) -> Shape:
    """Parse a shape such as ``f32[2,3]{1,0}`` or ``(f32[], s32[4])``."""
    parser = _Parser(text)
    shape = parser.shape()
    if not parser.cursor.at_end():
        raise parser.cursor.error(f"unexpected {parser.cursor.describe_next()} after the shape")
    return shape


class _Parser:
    def __init__(self, text: str) -> None:
        self.cursor = Cursor(text)
        self.pending = _PendingRefs()
        self.tuple_elements: list[HloInstruction] = []  # get-tuple-elements that `%t#i` operands made

    # ---- module ---------------------------------------------------------------------
    def module(self) -> HloModule:
        c = self.cursor
        if not c.keyword("HloModule"):
            raise c.error(f"expected 'HloModule' at the start of the text but found {c.describe_next()}")
        module = HloModule(c.name("a module name"))
        while c.accept(","):
            self._header_attribute(module)
        self._stack_frame_tables(module)
        computations: dict[str, HloComputation] = {}
        entry: HloComputation | None = None
        while not c.at_end():
            start = c.pos
            comp, is_entry = self.computation()
            if comp.name in computations:
                raise c.error(f"computation '{comp.name}' is defined twice", start)
            if is_entry and entry is not None:
                raise c.error("more than one ENTRY computation", start)
            computations[comp.name] = comp
            entry = comp if is_entry else entry
        if not computations:
            raise c.error("the module has no computations")
        self._resolve(computations)
        entry = entry or list(computations.values())[-1]
        for comp in computations.values():
            module.add_computation(comp, is_entry=comp is entry)
        return module

    def _header_attribute(self, module: HloModule) -> None:
        c = self.cursor
        key = c.name("a module attribute")
        c.expect("=", f"after '{key}'")
        start = c.pos
        value = c.raw_value()
        if key == "is_scheduled":
            if value not in ("true", "false"):
                raise c.error("is_scheduled must be true or false", start)
            module.is_scheduled = value == "true"
        elif key == "input_output_alias":
            module.input_output_alias = self._alias_config(value, start)
        elif key == "entry_computation_layout":
            module.entry_computation_layout = self._entry_layout(value, start)
        else:
            module.header_attributes[key] = value

    def _alias_config(self, value: str, offset: int) -> HloInputOutputAliasConfig:
        try:
            return HloInputOutputAliasConfig.parse(value)
        except HloParseError as err:
            raise self.cursor.error(f"bad input_output_alias: {err.reason}", offset + err.offset) from None

    def _entry_layout(self, value: str, offset: int) -> tuple[tuple[Shape, ...], Shape]:
        inner = _Parser(value[1:-1] if value.startswith("{") else value)
        try:
            params, result = inner._signature_shapes()
        except HloParseError as err:
            raise self.cursor.error(f"bad entry_computation_layout: {err.reason}", offset + err.offset) from None
        return tuple(params), result

    def _signature_shapes(self) -> tuple[list[Shape], Shape]:
        c = self.cursor
        c.expect("(")
        params: list[Shape] = []
        while not c.accept(")"):
            if params:
                c.expect(",")
            params.append(self.shape())
        c.expect("->")
        return params, self.shape()

    def _stack_frame_tables(self, module: HloModule) -> None:
        c = self.cursor
        while c.peek_name() in _STACK_TABLES:
            header = c.name()
            rows: list[str] = []
            while True:
                c.skip_space()
                if not c.text[c.pos : c.pos + 1].isdigit():
                    break
                start = c.pos
                c.integer()
                c.skip_space()
                if c.peek('"'):
                    c.string()
                else:
                    c.raw_value()
                rows.append(c.text[start : c.pos])
            module.stack_frame_tables.append((header, rows))

    # ---- computations ---------------------------------------------------------------
    def computation(self) -> tuple[HloComputation, bool]:
        c = self.cursor
        is_entry = c.keyword("ENTRY")
        comp = HloComputation(c.name("a computation name"))
        signature: tuple[list[tuple[str, Shape]], Shape] | None = None
        c.skip_space()
        sig_pos = c.pos
        if c.peek("("):
            signature = self._signature()
        c.expect("{", f"to open computation '{comp.name}'")
        scope: dict[str, HloInstruction] = {}
        root: HloInstruction | None = None
        while not c.accept("}"):
            if c.at_end():
                raise c.error(f"computation '{comp.name}' is not closed with '}}'")
            start = c.pos
            is_root, instr = self.instruction(scope)
            if instr.name in scope:
                raise c.error(f"instruction name '{instr.name}' is used twice in '{comp.name}'", start)
            for element in self.tuple_elements:  # the `%t#i` operands this instruction introduced
                element.parent = comp
                comp.instructions.append(element)
            self.tuple_elements = []
            scope[instr.name] = instr
            instr.parent = comp
            comp.instructions.append(instr)
            if is_root:
                if root is not None:
                    raise c.error(f"computation '{comp.name}' has more than one ROOT", start)
                root = instr
        if c.accept(","):
            key = c.name()
            if key != "execution_thread":
                raise c.error(f"unexpected computation attribute '{key}'")
            c.expect("=")
            comp.execution_thread = c.string()
        if not comp.instructions:
            raise c.error(f"computation '{comp.name}' has no instructions")
        comp.root_instruction = root or comp.instructions[-1]
        self._resolve_control(scope)
        if signature is not None:
            self._check_signature(comp, signature, sig_pos)
        return comp, is_entry

    def _signature(self) -> tuple[list[tuple[str, Shape]], Shape]:
        c = self.cursor
        c.expect("(")
        params: list[tuple[str, Shape]] = []
        while not c.accept(")"):
            if params:
                c.expect(",", "between parameters")
            name = c.name("a parameter name")
            c.expect(":", f"after parameter '{name}'")
            params.append((name, self.shape()))
        c.expect("->", "after the parameter list")
        return params, self.shape()

    def _check_signature(self, comp: HloComputation, signature: tuple, offset: int) -> None:
        params, result = signature
        if len(params) != comp.num_parameters:
            raise self.cursor.error(
                f"signature of '{comp.name}' lists {len(params)} parameters but the body has "
                f"{comp.num_parameters}", offset)
        if not result.compatible(comp.root.shape):
            raise self.cursor.error(
                f"signature of '{comp.name}' returns {result.to_text()} but its root "
                f"'{comp.root.name}' is {comp.root.shape.to_text()}", offset)

    # ---- instructions ---------------------------------------------------------------
    def instruction(self, scope: dict[str, HloInstruction]) -> tuple[bool, HloInstruction]:
        c = self.cursor
        is_root = c.keyword("ROOT")
        name = c.name("an instruction name")
        c.expect("=", f"after instruction name '{name}'")
        shape = self.shape() if self._at_shape() else None
        c.skip_space()
        opcode_pos = c.pos
        opcode = c.name("an opcode")
        try:
            info = op_info(opcode)
        except ValueError as err:
            raise c.error(str(err), opcode_pos) from None
        if shape is None:
            raise c.error(f"'{name}': the result shape before '{opcode}' is required", opcode_pos)
        attrs: dict = {}
        c.expect("(", f"after opcode '{opcode}'")
        operands: list[HloInstruction] = []
        if opcode == "parameter":
            attrs["parameter_number"] = c.integer("a parameter number")
            c.expect(")")
        elif opcode == "constant":
            attrs["literal"], elided = parse_literal(c, shape)
            if elided:
                attrs["literal_elided"] = True
            c.expect(")", "after the literal")
        else:
            operands = self._operands(scope)
        if info.arity is not None and len(operands) != info.arity:
            raise c.error(f"'{opcode}' takes {info.arity} operand(s) but {len(operands)} were given", opcode_pos)
        instr = HloInstruction(opcode, shape, operands, attrs, name)
        while c.accept(","):
            self._attribute(instr)
        self._finish_attributes(instr, opcode_pos)
        return is_root, instr

    def _at_shape(self) -> bool:
        c = self.cursor
        if c.peek("("):
            return True
        word = c.peek_name()
        # A word directly followed by '[' is a shape (an unknown type is reported by shape()).
        return word is not None and c.text.startswith("[", c.pos + len(word))

    def _operands(self, scope: dict[str, HloInstruction]) -> list[HloInstruction]:
        c = self.cursor
        operands: list[HloInstruction] = []
        while not c.accept(")"):
            if operands:
                c.expect(",", "between operands")
            if self._at_shape():
                self.shape()  # old printers write the operand's shape first
            c.skip_space()
            start = c.pos
            name = c.name("an operand name")
            if c.peek("("):
                raise c.error("nested instructions as operands are not supported; name the operand", start)
            if name not in scope:
                raise c.error(f"operand '{name}' is not defined earlier in this computation", start)
            if c.text.startswith("#", c.pos):  # `%t#i`: element i of the tuple t
                c.pos += 1
                operands.append(self._tuple_element(scope, name, c.integer("a tuple index after '#'"), start))
                continue
            operands.append(scope[name])
        return operands

    def _tuple_element(self, scope: dict[str, HloInstruction], name: str, index: int,
                       offset: int) -> HloInstruction:
        """The ``get-tuple-element`` that ``%name#index`` stands for: one per tuple and index in a
        computation (kept in ``scope`` under that spelling, which no instruction name can have)."""
        key = f"{name}#{index}"
        if key in scope:
            return scope[key]
        tuple_ = scope[name]
        if not tuple_.shape.is_tuple or not 0 <= index < len(tuple_.shape.tuple_shapes):
            raise self.cursor.error(f"operand '{key}': '{name}' is {tuple_.shape.to_text()}, which has no "
                                    f"tuple element {index}", offset)
        element_name = f"{name}.element{index}"
        while element_name in scope:
            element_name += "_"
        element = HloInstruction("get-tuple-element", tuple_.shape.tuple_shapes[index], [tuple_], {"index": index},
                                 element_name)
        scope[key] = scope[element_name] = element
        self.tuple_elements.append(element)
        return element

    def _attribute(self, instr: HloInstruction) -> None:
        c = self.cursor
        key = c.name("an attribute name")
        c.expect("=", f"after attribute '{key}'")
        c.skip_space()
        value_pos = c.pos
        value = c.raw_value()
        try:
            if key == "metadata":
                instr.metadata = parse_metadata(value)
            elif key == "frontend_attributes":
                instr.frontend_attributes = parse_frontend_attributes(value)
            elif key == "backend_config":
                instr.backend_config = value
            elif key == "sharding":
                instr.sharding = parse_sharding(value)
            elif key == "control-predecessors":
                names = [n.strip().lstrip("%") for n in value.strip("{}").split(",") if n.strip()]
                self.pending.control.append((instr, names, value_pos))
            elif instr.info.attr(key) is not None:
                spec = instr.info.attr(key)
                if key in instr.attrs:
                    raise ValueError(f"attribute '{key}' is given twice")
                parsed = parse_attribute_value(spec.kind, value)
                instr.attrs[key] = parsed
                if spec.kind in (AttrKind.COMPUTATION, AttrKind.COMPUTATION_LIST):
                    self.pending.computations.append((instr, key, value_pos))
            elif key in _KNOWN_ATTRIBUTES:
                raise ValueError(f"{instr.opcode} does not take this attribute")
            else:
                instr.raw_attrs[key] = value
        except HloParseError as err:
            # The sub-parsers read `value` on its own: move the error into the module text.
            raise c.error(f"bad value for attribute '{key}' of {instr.opcode}: {err.reason}",
                          value_pos + err.offset) from None
        except ValueError as err:
            raise c.error(f"bad value for attribute '{key}' of {instr.opcode}: {err}", value_pos) from None

    def _finish_attributes(self, instr: HloInstruction, offset: int) -> None:
        for spec in instr.info.attrs:
            if spec.required and spec.name not in instr.attrs:
                raise self.cursor.error(
                    f"'{instr.name}': {instr.opcode} needs the attribute '{spec.name}'", offset)
        if instr.opcode == "compare" and "order" in instr.raw_attrs:
            self._comparison_order(instr, offset)
        if instr.opcode == "compare" and instr.attrs.get("type") == _default_comparison_type(instr):
            instr.attrs["type"] = None

    def _comparison_order(self, instr: HloInstruction, offset: int) -> None:
        """JAX 0.11 writes a float comparison's order as ``order=TOTAL`` (-NaN < -inf < ... < -0 <
        +0 < ... < +NaN, XLA's ``type=TOTALORDER``) or ``order=PARTIAL`` (IEEE: NaN compares false,
        ``type=FLOAT``); for integers both are their one order. It is read into ``type``, which is
        what the rest of xla_teach reads (and prints)."""
        order = instr.raw_attrs.pop("order").strip()
        if order not in ("TOTAL", "PARTIAL"):
            raise self.cursor.error(f"'{instr.name}': compare's order must be TOTAL or PARTIAL, not '{order}'", offset)
        if not (instr.operands and instr.operand(0).shape.element_type.is_float):
            return
        implied = "TOTALORDER" if order == "TOTAL" else "FLOAT"
        given = instr.attrs.get("type")
        if given not in (None, implied):
            raise self.cursor.error(f"'{instr.name}': order={order} contradicts type={given}", offset)
        instr.attrs["type"] = implied

    # ---- name resolution ------------------------------------------------------------
    def _resolve_control(self, scope: dict[str, HloInstruction]) -> None:
        remaining = []
        for instr, names, offset in self.pending.control:
            if instr.name not in scope or scope[instr.name] is not instr:
                remaining.append((instr, names, offset))
                continue
            for name in names:
                if name not in scope:
                    raise self.cursor.error(f"control predecessor '{name}' is not in this computation", offset)
                instr.control_predecessors.append(scope[name])
        self.pending.control = remaining

    def _resolve(self, computations: dict[str, HloComputation]) -> None:
        def lookup(name: str, offset: int) -> HloComputation:
            if name not in computations:
                raise self.cursor.error(f"computation '{name}' is not defined in this module", offset)
            return computations[name]

        for instr, key, offset in self.pending.computations:
            value = instr.attrs[key]
            if isinstance(value, ComputationRef):
                instr.attrs[key] = lookup(value, offset)
            else:
                instr.attrs[key] = tuple(lookup(ref, offset) for ref in value)

    # ---- shapes ---------------------------------------------------------------------
    def shape(self, depth: int = 0) -> Shape:
        """One shape; ``depth`` counts the tuple parentheses around it."""
        c = self.cursor
        c.skip_space()
        start = c.pos
        if c.accept("("):
            if depth == _MAX_TUPLE_DEPTH:
                raise c.error(f"tuple shape nested too deeply (more than {_MAX_TUPLE_DEPTH} levels)", start)
            elements: list[Shape] = []
            while not c.accept(")"):
                if elements:
                    c.expect(",", "between tuple elements")
                elements.append(self.shape(depth + 1))
            return Shape.make_tuple(elements)
        type_name = c.name("a shape")
        if type_name == "token":
            c.expect("[")
            c.expect("]")
            return Shape.token()
        if type_name not in _TYPE_NAMES:
            if type_name in _UNSUPPORTED_TYPES:
                raise c.error(f"element type '{type_name}' ({_UNSUPPORTED_TYPES[type_name]}) is not supported by "
                              "xla_teach", start)
            raise c.error(f"'{type_name}' is not an element type", start)
        c.expect("[", f"after element type '{type_name}'")
        dims: list[int] = []
        dynamic: list[bool] = []
        while not c.accept("]"):
            if dims:
                c.expect(",", "between dimensions")
            is_dynamic = c.accept("<=")
            if c.accept("?"):
                raise c.error("unbounded dynamic dimensions ('?') are not supported")
            if len(dims) == _MAX_RANK:
                raise c.error(f"too many dimensions: at most {_MAX_RANK} are supported", start)
            dim_pos = c.pos
            dims.append(c.integer("a dimension size"))
            if dims[-1] > _MAX_INT64:
                raise c.error(f"dimension size out of range: {dims[-1]} does not fit in int64", dim_pos)
            dynamic.append(is_dynamic)
        if math.prod(dims) > _MAX_INT64:
            text = f"{type_name}[{','.join(str(d) for d in dims)}]"
            raise c.error(f"dimension sizes out of range: {text} has more than 2^63-1 elements", start)
        layout = None
        if self._at_layout():
            layout = self._layout(len(dims))
        try:
            shape = Shape.array(type_name, dims, layout)
        except ValueError as err:
            raise c.error(str(err), start) from None
        if any(dynamic):
            shape = Shape(shape.element_type, shape.dimensions, shape.layout, (), tuple(dynamic))
        return shape

    def _at_layout(self) -> bool:
        """A ``{`` starts a layout only if a digit, ``-``, ``:`` or ``}`` follows (else it opens a body)."""
        c = self.cursor
        if not c.peek("{"):
            return False
        probe = Cursor(c.text)
        probe.pos = c.pos + 1
        probe.skip_space()
        nxt = c.text[probe.pos : probe.pos + 1]
        return nxt.isdigit() or nxt in ("-", ":", "}")

    def _layout(self, rank: int) -> Layout:
        c = self.cursor
        c.expect("{")
        order: list[int] = []
        extras = ""
        while not c.peek("}") and not c.peek(":"):
            if order:
                c.expect(",", "between layout dimensions")
            order.append(c.integer("a layout dimension"))
        if c.accept(":"):
            start = c.pos
            depth = 0
            while c.pos < len(c.text) and not (c.text[c.pos] == "}" and depth == 0):
                depth += {"(": 1, ")": -1}.get(c.text[c.pos], 0)
                c.pos += 1
            extras = c.text[start : c.pos].strip()
        c.expect("}", "to close the layout")
        if rank == 0 and not order:
            return Layout(())
        return Layout(tuple(order), extras)


def _default_comparison_type(instr: HloInstruction) -> str:
    etype = instr.operand(0).shape.element_type if instr.operands else PrimitiveType.F32
    if etype.is_float:
        return "FLOAT"
    if etype.is_signed_int:
        return "SIGNED"
    return "UNSIGNED"

