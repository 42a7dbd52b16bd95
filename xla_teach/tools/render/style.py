"""How an HLO graph looks: the colour of each kind of op, and what a node says.

The colours are XLA's (``hlo_graph_dumper.cc``'s ``ColorScheme``), so a graph drawn
by xla_teach reads like the ``.dot`` files ``--xla_dump_hlo_as_dot`` writes:

==================  ===========  ============================================
category            colour       ops
==================  ===========  ============================================
parameter           orange       ``parameter``
constant            blue         ``constant``, ``iota`` (drawn when not inlined)
elementwise         white        ``add``, ``exp``, ``compare``, ``convert`` ...
reduction           purple       ``reduce``, ``reduce-window``, ``select-and-scatter``
contraction         dark blue    ``dot``, ``convolution``
data movement       green        ``broadcast``, ``transpose``, ``slice``, ``copy`` ...
indexing            green        ``gather``, ``scatter``
tuple               white        ``tuple``, ``get-tuple-element``, ``bitcast``
control flow        dark green   ``while``, ``conditional``, ``call``
fusion              gray         a ``fusion`` drawn collapsed (one node)
special             brown        ``custom-call``, ``rng``, collectives
==================  ===========  ============================================

Scalar constants are not drawn as nodes: like XLA, their value is written into
each user's label (``operand 1 = f32[] 0``), which keeps graphs small.
"""

from __future__ import annotations

import html
from dataclasses import dataclass

from xla_teach.hlo.ir import HloComputation, HloInstruction
from xla_teach.hlo.opcodes import CONTROL_FLOW_OPCODES, CROSS_DEVICE_OPCODES, ELEMENTWISE_KINDS, AttrKind, OpKind


@dataclass(frozen=True)
class NodeColors:
    fill: str
    stroke: str
    font: str = "black"


# XLA's ColorScheme, name -> (fill, stroke, font).
COLORS: dict[str, NodeColors] = {
    "blue": NodeColors("#bbdefb", "#8aacc8"),
    "brown": NodeColors("#bcaaa4", "#8c7b75"),
    "dark_blue": NodeColors("#1565c0", "#003c8f", "white"),
    "dark_green": NodeColors("#2e7d32", "#005005", "white"),
    "gray": NodeColors("#cfd8dc", "#9ea7aa"),
    "green": NodeColors("#c8e6c9", "#97b498"),
    "orange": NodeColors("#ffe0b2", "#cbae82"),
    "purple": NodeColors("#e1bee7", "#af8eb5"),
    "red": NodeColors("#ffcdd2", "#cb9ca1"),
    "white": NodeColors("white", "#9e9e9e"),
    "yellow": NodeColors("#fff9c4", "#cbc693"),
}

# Category -> colour name. The legend and the tests read this table.
CATEGORY_COLORS: dict[str, str] = {
    "parameter": "orange",
    "constant": "blue",
    "elementwise": "white",
    "reduction": "purple",
    "contraction": "dark_blue",
    "data movement": "green",
    "indexing": "green",
    "tuple": "white",
    "control flow": "dark_green",
    "fusion": "gray",
    "sort": "purple",
    "collective": "red",  # where devices exchange values (xla_teach's own colour: XLA draws them brown)
    "special": "brown",
}

CLUSTER_FILL = "#f5f5f5"  # the light gray box around a fused computation, as XLA draws it
CLUSTER_STROKE = "#c2c2c2"
CALL_CLUSTER_FILL = "#fafafa"
ROOT_MARKER = COLORS["brown"]


def legend_entries() -> list[tuple[str, NodeColors]]:
    """One entry per colour, naming every category drawn in it ("data movement, indexing"): XLA's
    scheme gives some categories the same colour, and a legend must not show one colour twice."""
    names: dict[str, list[str]] = {}
    for cat, color_name in CATEGORY_COLORS.items():
        names.setdefault(color_name, []).append(cat)
    return [(", ".join(cats), COLORS[color_name]) for color_name, cats in names.items()]


def legend_dot_lines() -> list[str]:
    """A DOT cluster with one sample box per colour, in one row."""
    lines = ["subgraph cluster_legend {", '  label="legend"; style="rounded"; color="#c2c2c2";', "  rank=same;"]
    for i, (label, colors) in enumerate(legend_entries()):
        lines.append(f'  legend{i} [label="{label}", style="filled", fillcolor="{colors.fill}", '
                     f'color="{colors.stroke}", fontcolor="{colors.font}"];')
    lines.append("}")
    return lines


def category(instr: HloInstruction) -> str:
    """Which colour group ``instr`` belongs to (a key of :data:`CATEGORY_COLORS`)."""
    op = instr.opcode
    if op == "parameter":
        return "parameter"
    if op in ("constant", "iota"):
        return "constant"
    if op == "fusion":
        return "fusion"
    if op == "bitcast":
        return "tuple"  # XLA draws bitcasts (free re-interpretations) white, like tuples
    if op.removesuffix("-start").removesuffix("-done") in CROSS_DEVICE_OPCODES - {"partition-id", "replica-id"}:
        return "collective"
    kind = instr.info.kind
    if kind in ELEMENTWISE_KINDS:
        return "elementwise"
    return {
        OpKind.REDUCTION: "reduction",
        OpKind.CONTRACTION: "contraction",
        OpKind.DATA_MOVEMENT: "data movement",
        OpKind.INDEXING: "indexing",
        OpKind.TUPLE: "tuple",
        OpKind.CONTROL: "control flow",
        OpKind.SORT: "sort",
    }.get(kind, "special")


def colors_for(instr: HloInstruction) -> NodeColors:
    return COLORS[CATEGORY_COLORS[category(instr)]]


def esc(text: str) -> str:
    """Escape text for a Graphviz HTML-like label (``<b>...</b>``)."""
    return html.escape(text, quote=False)


def shape_text(instr: HloInstruction, limit: int = 60) -> str:
    """The result shape without layout (``f32[1024]``), cut short for long tuples."""
    text = instr.shape.to_text(print_layout=False)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def is_inlined_constant(instr: HloInstruction) -> bool:
    """Scalar constants that are not a root are written into their users' labels."""
    return (instr.opcode == "constant" and not instr.shape.is_tuple and not instr.shape.dimensions
            and not instr.is_root())


def constant_value_text(instr: HloInstruction) -> str:
    from xla_teach.hlo.literal import literal_element_count, value_literal_to_text

    try:
        if literal_element_count(instr.literal) > 10:  # what dumps print for large constants
            return "{...}"
        return value_literal_to_text(instr.literal, instr.shape)  # arrays and tuples
    except Exception:  # an odd literal must never stop a drawing
        return "?"


def trivial_subcomputation(comp: HloComputation) -> str | None:
    """``"add"`` for a reducer like ``ROOT r = add(p0, p1)``, else None (XLA prints
    "Subcomputation: add" for these instead of drawing them)."""
    root = comp.root_instruction
    params = comp.parameter_instructions
    if root is None or len(comp.instructions) != 3 or len(params) != 2:
        return None
    if root.info.kind is OpKind.BINARY and set(root.operands) == set(params):
        return root.opcode
    return None


_COMPUTATION_KINDS = (AttrKind.COMPUTATION, AttrKind.COMPUTATION_LIST)


def attribute_lines(instr: HloInstruction, max_len: int = 48) -> list[str]:
    """The attributes worth showing in a node (``dimensions={0}``, ``window={...}``,
    ``kind=kLoop``), without called computations, metadata or backend config."""
    from xla_teach.hlo.text.printer import PrintOptions, attributes_text

    skip = {spec.name for spec in instr.info.attrs if spec.kind in _COMPUTATION_KINDS}
    skip |= {"parameter_number", "literal", "index"}
    opts = PrintOptions(print_metadata=False, print_backend_config=False, print_large_constants=False)
    lines = []
    for item in attributes_text(instr, opts):
        key = item.partition("=")[0]
        if key in skip or key in ("sharding", "frontend_attributes", "control-predecessors"):
            continue
        lines.append(item if len(item) <= max_len else item[: max_len - 3] + "...")
    return lines


def op_name(instr: HloInstruction) -> str:
    return str(instr.metadata.fields.get("op_name", "")) if instr.metadata else ""


def node_label(instr: HloInstruction, inlined: dict[int, HloInstruction]) -> str:
    """The HTML-like label of one node: name (or ``Parameter N`` and the argument's pytree path,
    ``params['w1']``), opcode when the name does not already say it, attributes, called reducers,
    shape, inlined constants."""
    if instr.opcode == "parameter":
        lines = [f"<b>Parameter {instr.parameter_number}</b>"]
        path = op_name(instr)
        if path and "/" not in path:  # a front end's pytree path (params['w1']), not a scope
            lines.append(f"<i>{esc(path)}</i>")
    else:
        lines = [f"<b>{esc(instr.name)}</b>"]
        if not instr.name.startswith(instr.opcode):
            lines.append(esc(instr.opcode))
    if instr.opcode == "get-tuple-element":
        lines.append(f"index={instr.tuple_index}")
    if instr.opcode == "constant":  # arrays and tuples: {1, 2}, ( {1, 2}, 3 )
        lines.append(esc(constant_value_text(instr))[:48])
    for comp in _reducer_computations(instr):
        trivial = trivial_subcomputation(comp)
        lines.append(f"Subcomputation: <b>{esc(trivial or comp.name)}</b>")
    lines.extend(esc(a) for a in attribute_lines(instr))
    lines.append(esc(shape_text(instr)))
    for index, const in sorted(inlined.items()):
        lines.append(f"<b>operand {index}</b> = {esc(shape_text(const))} {esc(constant_value_text(const))}")
    return "<br/>".join(lines)


def _reducer_computations(instr: HloInstruction) -> list[HloComputation]:
    """Computations applied per element (reducers, comparators), named in the label
    rather than drawn: fusion bodies and control-flow bodies are drawn as clusters."""
    if instr.opcode == "fusion" or instr.opcode in CONTROL_FLOW_OPCODES:
        return []
    return instr.called_computations()
