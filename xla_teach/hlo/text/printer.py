"""The HLO text printer: writes modules the way XLA's ``HloModule::ToString`` does.

Long form (the default, what dumps contain)::

    HloModule m, entry_computation_layout={(f32[4]{0})->f32[4]{0}}

    ENTRY %main (x: f32[4]) -> f32[4] {
      %x = f32[4]{0} parameter(0)
      ROOT %neg = f32[4]{0} negate(%x)
    }

Short form (``long_form=False``) drops ``%`` and the signatures. Attribute order
per opcode comes from the opcode table; generic attributes follow in XLA's order:
sharding, frontend_attributes, control-predecessors, metadata, backend_config.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from xla_teach.hlo.attributes import padding_to_text, quote_string, slice_to_text
from xla_teach.hlo.entry_layout import entry_layout_shapes
from xla_teach.hlo.literal import value_literal_to_text
from xla_teach.hlo.opcodes import AttrKind

if TYPE_CHECKING:
    from xla_teach.hlo.ir import HloComputation, HloInstruction, HloModule

LARGE_CONSTANT_ELEMENTS = 10  # dumps elide constants with more elements unless asked not to


@dataclass(frozen=True)
class PrintOptions:
    long_form: bool = True  # "%" before names, computation signatures
    print_metadata: bool = True
    short_metadata: bool = False  # metadata with the source file's name only, and no other fields
    print_backend_config: bool = True
    print_large_constants: bool = True  # False: constants with > 10 elements print as {...}
    print_operand_shapes: bool = False  # old style: add(f32[] %a, f32[] %b)


def _options(kwargs: dict[str, Any]) -> PrintOptions:
    opts = kwargs.pop("options", None) or PrintOptions()
    if kwargs:
        opts = PrintOptions(**{**opts.__dict__, **kwargs})
    return opts


def _ref(name: str, opts: PrintOptions) -> str:
    return ("%" if opts.long_form else "") + name


def _attr_value_text(kind: AttrKind, value: Any, opts: PrintOptions) -> str:
    if kind is AttrKind.INT:
        return str(int(value))
    if kind is AttrKind.INT_LIST:
        return "{" + ",".join(str(int(v)) for v in value) + "}"
    if kind is AttrKind.BOOL:
        return "true" if value else "false"
    if kind is AttrKind.WORD:
        return str(value)
    if kind is AttrKind.WORD_LIST:
        return "{" + ",".join(str(v) for v in value) + "}"
    if kind is AttrKind.STRING:
        return quote_string(str(value))
    if kind is AttrKind.COMPUTATION:
        return _ref(value.name, opts)
    if kind is AttrKind.COMPUTATION_LIST:
        return "{" + ", ".join(_ref(c.name, opts) for c in value) + "}"
    if kind is AttrKind.WINDOW:
        return value.to_text()
    if kind is AttrKind.SLICE:
        return slice_to_text(value)
    if kind is AttrKind.PADDING:
        return padding_to_text(value)
    if kind is AttrKind.DIM_LABELS:
        return value.to_text()
    return str(value)  # RAW


def _operands_text(instr: HloInstruction, opts: PrintOptions) -> str:
    if instr.opcode == "parameter":
        return str(instr.parameter_number)
    if instr.opcode == "constant":
        literal = instr.attrs.get("literal")
        if instr.attrs.get("literal_elided") or (
            # as XLA: "Do not show large constants or tuples" unless asked to
            not opts.print_large_constants and literal is not None
            and (instr.shape.is_tuple or literal.size > LARGE_CONSTANT_ELEMENTS)
        ):
            return "{...}"
        return value_literal_to_text(literal, instr.shape)
    parts = []
    for i, op in enumerate(instr.operands):
        prefix = f"/*index={i}*/" if i > 0 and i % 5 == 0 else ""
        shape = op.shape.to_text() + " " if opts.print_operand_shapes else ""
        parts.append(prefix + shape + _ref(op.name, opts))
    return ", ".join(parts)


def attributes_text(instr: HloInstruction, opts: PrintOptions | None = None) -> list[str]:
    """The ``name=value`` items printed after the operand list, in XLA's order."""
    opts = opts or PrintOptions()
    items: list[str] = []
    for spec in instr.info.attrs:
        if spec.name not in instr.attrs:
            continue
        value = instr.attrs[spec.name]
        if value is None or (not spec.required and not spec.print_default and value == spec.default):
            continue
        items.append(f"{spec.name}={_attr_value_text(spec.kind, value, opts)}")
    if instr.sharding:
        items.append(f"sharding={instr.sharding}")
    if instr.frontend_attributes:
        body = ",".join(f"{k}={quote_string(v)}" for k, v in instr.frontend_attributes.items())
        items.append("frontend_attributes={" + body + "}")
    for key, raw in instr.raw_attrs.items():
        items.append(f"{key}={raw}")
    if instr.control_predecessors:
        preds = ", ".join(_ref(p.name, opts) for p in instr.control_predecessors)
        items.append("control-predecessors={" + preds + "}")
    if opts.print_metadata and instr.metadata is not None and not instr.metadata.is_empty():
        items.append("metadata=" + instr.metadata.to_text(short=opts.short_metadata))
    if opts.print_backend_config and instr.backend_config:
        items.append("backend_config=" + instr.backend_config)
    return items


def instruction_to_text(instr: HloInstruction, **kwargs: Any) -> str:
    """One instruction line without indentation, e.g. ``%a = f32[2]{0} add(%x, %y)``."""
    opts = _options(kwargs)
    root = "ROOT " if instr.is_root() else ""
    head = f"{root}{_ref(instr.name, opts)} = {instr.shape.to_text()} {instr.opcode}"
    text = f"{head}({_operands_text(instr, opts)})"
    attrs = attributes_text(instr, opts)
    if attrs:
        text += ", " + ", ".join(attrs)
    return text


def instruction_order(comp: HloComputation) -> list[HloInstruction]:
    """Scheduled modules print in schedule (list) order, others in post-order."""
    module = comp.parent
    if module is not None and module.is_scheduled:
        return list(comp.instructions)
    return comp.post_order()


def computation_to_text(comp: HloComputation, **kwargs: Any) -> str:
    opts = _options(kwargs)
    is_entry = comp.parent is not None and comp.parent.entry_computation is comp
    head = ("ENTRY " if is_entry else "") + _ref(comp.name, opts)
    if opts.long_form:
        params = ", ".join(f"{p.name}: {p.shape.to_text(print_layout=False)}" for p in comp.parameter_instructions)
        result = comp.root.shape.to_text(print_layout=False) if comp.root_instruction else "()"
        head += f" ({params}) -> {result}"
    lines = [head + " {"]
    for instr in instruction_order(comp):
        lines.append("  " + instruction_to_text(instr, options=opts))
    closing = "}"
    if comp.execution_thread:
        closing += f", execution_thread={quote_string(comp.execution_thread)}"
    lines.append(closing)
    return "\n".join(lines)


def entry_computation_layout_text(module: HloModule) -> str:
    params, result = entry_layout_shapes(module)
    return "{(" + ", ".join(p.to_text() for p in params) + ")->" + result.to_text() + "}"


def module_header_text(module: HloModule) -> str:
    items = [f"HloModule {module.name}"]
    if module.is_scheduled:
        items.append("is_scheduled=true")
    if module.input_output_alias:
        items.append("input_output_alias=" + module.input_output_alias.to_text())
    if module.entry_computation is not None and module.entry_computation.root_instruction is not None:
        items.append("entry_computation_layout=" + entry_computation_layout_text(module))
    for key, raw in module.header_attributes.items():
        items.append(f"{key}={raw}")
    return ", ".join(items)


def module_to_text(module: HloModule, **kwargs: Any) -> str:
    """The whole module as XLA prints it (ends with a blank line, like XLA's dumps)."""
    return module_text_and_computations(module, **kwargs)[0]


def module_text_and_computations(module: HloModule, **kwargs: Any) -> tuple[str, dict[str, str]]:
    """The module's text, and each computation's own part of it by name (a pass pipeline
    compares these parts to see which computations a pass changed)."""
    opts = _options(kwargs)
    out = [module_header_text(module), "\n\n"]
    if module.stack_frame_tables:
        for header, rows in module.stack_frame_tables:
            out.append(header + "\n")
            out.extend(row + "\n" for row in rows)
            out.append("\n")
        out.append("\n")
    parts: dict[str, str] = {}
    for comp in module.computation_post_order():
        parts[comp.name] = computation_to_text(comp, options=opts)
        out.append(parts[comp.name])
        out.append("\n\n")
    return "".join(out), parts
