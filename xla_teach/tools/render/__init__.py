"""Draw HLO as a graph: Graphviz DOT text, and SVG/PNG through Graphviz's ``dot``.

::

    from xla_teach.tools.render import hlo_to_dot, render_svg
    dot_text = hlo_to_dot(module)                 # the ENTRY computation
    svg = render_svg(module, collapse_fusions=True)

What the picture shows (the conventions of XLA's ``--xla_dump_hlo_as_dot``):

* one box per instruction, coloured by kind of op (see :mod:`render_style`);
  data flows downwards, from operands to users;
* edges are labelled with the shape that flows along them, and with the operand
  number (at the arrow head) when the user has several operands;
* a ``fusion`` is drawn as a gray cluster holding its fused computation: the
  fusion's operands feed the fused ``Parameter`` boxes, the fused root feeds the
  fusion's users. ``collapse_fusions=True`` draws each fusion as one box instead;
* ``while`` / ``conditional`` / ``call`` bodies are drawn as clusters beside the
  instruction that calls them (dashed edge);
* parameters are orange, the ROOT feeds a brown ``ROOT`` circle and has a thick
  border, scalar constants are written into their users' labels.

Large graphs stay legible: above ``max_nodes`` boxes, fusions are collapsed
first; if that is not enough only the ``max_nodes`` instructions nearest the
root (or nearest ``center=`` an instruction name) are drawn, and each cut edge
becomes a small "N operands not shown" note.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field

from xla_teach.hlo.ir import HloComputation, HloInstruction, HloModule
from xla_teach.hlo.opcodes import CONTROL_FLOW_OPCODES
from xla_teach.tools.render import style
from xla_teach.tools.render.graphviz import (
    GraphvizNotFound,
    RenderError,
    have_dot,
    run_dot,
    svg_for_inline,
    to_png,
    to_svg,
)

__all__ = ["DEFAULT_MAX_NODES", "GraphvizNotFound", "RenderError", "have_dot", "hlo_to_dot", "render_png",
           "render_svg", "run_dot", "svg_for_inline", "to_png", "to_svg"]

DEFAULT_MAX_NODES = 250
_CONTROL_FLOW = CONTROL_FLOW_OPCODES


# ---- the graph model -----------------------------------------------------------------
@dataclass
class _Node:
    id: str
    instr: HloInstruction | None  # None for notes ("3 operands not shown") and the ROOT circle
    label: str = ""
    attrs: dict[str, str] = field(default_factory=dict)
    inlined: dict[int, HloInstruction] = field(default_factory=dict)  # operand index -> scalar constant


@dataclass
class _Cluster:
    id: str
    label: str
    fill: str
    stroke: str
    items: list[_Node | _Cluster] = field(default_factory=list)


@dataclass
class _Edge:
    src: str
    dst: str
    attrs: dict[str, str]


class _GraphBuilder:
    """Turns one computation (and what it calls) into nodes, clusters and edges."""

    def __init__(self, *, collapse_fusions: bool, inline_constants: bool, expand_calls: bool, max_depth: int,
                 edge_shapes: bool, highlight: frozenset[str]) -> None:
        self.collapse_fusions = collapse_fusions
        self.inline_constants = inline_constants
        self.expand_calls = expand_calls
        self.max_depth = max_depth
        self.edge_shapes = edge_shapes
        self.highlight = highlight
        self.nodes: dict[int, _Node] = {}  # id(instr) -> node
        self.expanded: dict[int, HloComputation] = {}  # id(fusion instr) -> its drawn fused computation
        self.fusion_instrs: list[HloInstruction] = []  # the fusions drawn as clusters
        self.edges: list[_Edge] = []
        self.top = _Cluster("G", "", "", "")
        self._count = 0

    def new_id(self, prefix: str) -> str:
        self._count += 1
        return f"{prefix}{self._count}"

    # -- which instructions become boxes ------------------------------------------------
    def expands_fusion(self, depth: int) -> bool:
        return not self.collapse_fusions and depth < self.max_depth

    def is_inlined(self, instr: HloInstruction, depth: int) -> bool:
        if not (self.inline_constants and style.is_inlined_constant(instr)):
            return False
        # A constant feeding a drawn fusion cluster stays a box: the fused parameter it feeds has no label slot.
        return not any(u.opcode == "fusion" and self.expands_fusion(depth) for u in instr.users)

    # -- building ---------------------------------------------------------------------
    def add_computation(self, comp: HloComputation, depth: int, container: _Cluster,
                        visible: set[int] | None = None) -> None:
        for instr in comp.post_order():
            if visible is not None and id(instr) not in visible:
                continue
            if self.is_inlined(instr, depth):
                continue
            if instr.opcode == "fusion" and self.expands_fusion(depth):
                self._add_fusion_cluster(instr, depth, container)
                continue
            node = self._add_node(instr, container)
            if instr.opcode in _CONTROL_FLOW and self.expand_calls and depth < self.max_depth:
                self._add_called_clusters(instr, node, depth, container)

    def _add_node(self, instr: HloInstruction, container: _Cluster) -> _Node:
        colors = style.colors_for(instr)
        attrs = {"style": "filled", "fillcolor": colors.fill, "color": colors.stroke, "fontcolor": colors.font,
                 "tooltip": instr.name}
        if instr.is_root():
            attrs["penwidth"] = "2.5"
        if instr.name in self.highlight:
            attrs.update(color="#d32f2f", penwidth="3")
        node = _Node(self.new_id("n"), instr, attrs=attrs)
        self.nodes[id(instr)] = node
        container.items.append(node)
        return node

    def _add_fusion_cluster(self, fusion: HloInstruction, depth: int, container: _Cluster) -> None:
        label = (f"Fused expression for <b>{style.esc(fusion.name)}</b><br/>kind={style.esc(fusion.fusion_kind)}"
                 f"<br/>{style.esc(style.shape_text(fusion))}")
        color = "#d32f2f" if fusion.name in self.highlight else style.CLUSTER_STROKE
        cluster = _Cluster(self.new_id("cluster_"), label, style.CLUSTER_FILL, color)
        container.items.append(cluster)
        self.expanded[id(fusion)] = fusion.fused_computation
        self.fusion_instrs.append(fusion)
        self.add_computation(fusion.fused_computation, depth + 1, cluster)

    def _add_called_clusters(self, instr: HloInstruction, node: _Node, depth: int, container: _Cluster) -> None:
        roles = {"while": ["condition", "body"], "call": ["calls"]}.get(instr.opcode, [])
        for i, comp in enumerate(instr.called_computations()):
            role = roles[i] if i < len(roles) else f"branch {i}"
            label = f"{role} of <b>{style.esc(instr.name)}</b>: {style.esc(comp.name)}"
            cluster = _Cluster(self.new_id("cluster_"), label, style.CALL_CLUSTER_FILL, "#9e9e9e")
            container.items.append(cluster)
            self.add_computation(comp, depth + 1, cluster)
            params = comp.parameter_instructions
            target = self.nodes.get(id(params[0])) if params else None
            if target is not None:
                self.edges.append(_Edge(node.id, target.id, {"style": "dashed", "lhead": cluster.id,
                                                             "arrowhead": "none", "tooltip": f"{instr.name} calls"}))

    # -- where a value comes out of / goes into the picture -----------------------------
    def out_node(self, instr: HloInstruction) -> _Node | None:
        comp = self.expanded.get(id(instr))
        if comp is not None:
            return self.out_node(comp.root)
        return self.nodes.get(id(instr))

    def in_node(self, instr: HloInstruction, operand_index: int) -> _Node | None:
        comp = self.expanded.get(id(instr))
        if comp is not None:
            try:
                return self.nodes.get(id(comp.parameter(operand_index)))
            except IndexError:
                return None
        return self.nodes.get(id(instr))

    def add_edges(self) -> None:
        """Operand -> user edges for every drawn instruction, in every drawn computation."""
        hidden: dict[str, int] = {}
        consumers = [n.instr for n in list(self.nodes.values()) if n.instr is not None] + self.fusion_instrs
        for instr in consumers:
            for i, op in enumerate(instr.operands):
                dst = self.in_node(instr, i)
                if dst is None:
                    continue
                src = self.out_node(op)
                if src is None:
                    if op.opcode == "constant" and style.is_inlined_constant(op) and id(instr) not in self.expanded:
                        dst.inlined[i] = op  # drawn inside the user's label
                    else:
                        hidden[dst.id] = hidden.get(dst.id, 0) + 1  # cut off by max_nodes / center
                    continue
                attrs = {"tooltip": f"{op.name} -> {instr.name}"}
                if self.edge_shapes:
                    attrs["label"] = style.shape_text(op, limit=40)
                if instr.operand_count > 1 and id(instr) not in self.expanded:
                    attrs["headlabel"] = str(i)
                self.edges.append(_Edge(src.id, dst.id, attrs))
        self._add_hidden_notes(hidden)

    def _add_hidden_notes(self, hidden: dict[str, int]) -> None:
        for dst, count in hidden.items():
            note = _Node(self.new_id("n"), None, label=f"{count} operand{'s' if count > 1 else ''} not shown",
                         attrs={"shape": "plaintext", "fontcolor": "#757575", "tooltip": " "})
            self.top.items.append(note)
            self.edges.append(_Edge(note.id, dst, {"style": "dotted", "color": "#9e9e9e"}))


# ---- choosing what to draw ------------------------------------------------------------
def _drawn_size(comp: HloComputation, expand_fusions: bool, depth: int = 0, max_depth: int = 3) -> int:
    total = 0
    for instr in comp.instructions:
        if instr.opcode == "fusion" and expand_fusions and depth < max_depth:
            total += _drawn_size(instr.fused_computation, expand_fusions, depth + 1, max_depth)
        else:
            total += 1
    return total


def _neighbourhood(comp: HloComputation, start: list[HloInstruction], budget: int, both_ways: bool) -> set[int]:
    """The ``budget`` instructions nearest ``start`` (breadth-first over operands, and
    over users too when centring on one instruction)."""
    chosen: set[int] = set()
    queue = deque(start)
    while queue and len(chosen) < budget:
        instr = queue.popleft()
        if id(instr) in chosen:
            continue
        chosen.add(id(instr))
        queue.extend(instr.operands)
        if both_ways:
            queue.extend(instr.users)
    return chosen


def _as_computation(obj: HloModule | HloComputation | str) -> tuple[HloComputation, str]:
    if isinstance(obj, str):
        from xla_teach.hlo.text.parser import parse_hlo

        obj = parse_hlo(obj)
    if isinstance(obj, HloModule):
        return obj.entry, obj.name
    if isinstance(obj, HloComputation):
        return obj, obj.parent.name if obj.parent is not None else ""
    raise RenderError(f"cannot draw a {type(obj).__name__}: pass an HloModule, an HloComputation or HLO text")


def hlo_to_dot(obj: HloModule | HloComputation | str, *, title: str | None = None, collapse_fusions: bool = False,
               max_nodes: int | None = DEFAULT_MAX_NODES, center: str | None = None, inline_constants: bool = True,
               expand_calls: bool = True, max_depth: int = 3, edge_shapes: bool = True, legend: bool = False,
               highlight: Iterable[str] = ()) -> str:
    """Graphviz DOT text for a module's ENTRY computation (or one computation).

    ``obj``: an :class:`HloModule`, an :class:`HloComputation` or HLO text.
    ``title``: first line of the graph's caption (default: the module name).
    ``collapse_fusions``: draw each fusion as one gray box instead of a cluster.
    ``max_nodes``: above this many boxes, collapse fusions, then keep only the
    instructions nearest the root (``None``: no limit).
    ``center``: draw the ``max_nodes`` instructions around this instruction name.
    ``inline_constants``: write scalar constants into their users' labels (XLA does).
    ``expand_calls``: draw while/conditional/call bodies as clusters.
    ``max_depth``: how deep nested fusions and bodies are expanded.
    ``highlight``: instruction names drawn with a red border (e.g. new after a pass).
    """
    comp, module_name = _as_computation(obj)
    notes: list[str] = []
    if max_nodes is not None and max_nodes < 1:
        raise RenderError(f"max_nodes must be at least 1, got {max_nodes}")
    if max_nodes is not None and not collapse_fusions and _drawn_size(comp, True, 0, max_depth) > max_nodes:
        collapse_fusions = True
        notes.append("fusions collapsed (graph too large)")
    visible: set[int] | None = None
    if center is not None:
        try:
            start = [comp.instruction(center)]
        except KeyError:
            raise RenderError(f"center: no instruction named '{center}' in computation {comp.name}") from None
        visible = _neighbourhood(comp, start, max_nodes or len(comp.instructions), both_ways=True)
        notes.append(f"{len(visible)} instructions around {center}")
    elif max_nodes is not None and len(comp.instructions) > max_nodes:
        visible = _neighbourhood(comp, [comp.root], max_nodes, both_ways=False)
        notes.append(f"showing {len(visible)} of {len(comp.instructions)} instructions nearest the root")
    builder = _GraphBuilder(collapse_fusions=collapse_fusions, inline_constants=inline_constants,
                            expand_calls=expand_calls, max_depth=max_depth, edge_shapes=edge_shapes,
                            highlight=frozenset(highlight))
    builder.add_computation(comp, 0, builder.top, visible)
    builder.add_edges()
    root = builder.out_node(comp.root)
    if root is not None:
        marker = _Node("root_marker", None, label="ROOT", attrs={
            "shape": "circle", "style": "filled", "fillcolor": style.ROOT_MARKER.fill,
            "color": style.ROOT_MARKER.stroke, "tooltip": " "})
        builder.top.items.append(marker)
        builder.edges.append(_Edge(root.id, marker.id, {"tooltip": " "}))
    caption = [f"<b>{style.esc(title or module_name or comp.name)}</b>", f"Computation {style.esc(comp.name)}"]
    if comp.parent is not None and comp is comp.parent.entry_computation:
        caption.append("ENTRY computation")
    caption += [style.esc(n) for n in notes]
    return _serialize(builder, "<br/>".join(caption), legend)


# ---- DOT text -------------------------------------------------------------------------
def _quote(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _attr_list(attrs: dict[str, str]) -> str:
    return ", ".join(f"{k}={_quote(v)}" for k, v in attrs.items())


def _node_line(node: _Node) -> str:
    label = node.label if node.instr is None else style.node_label(node.instr, node.inlined)
    label_text = f"<{label}>" if node.instr is not None else _quote(label)
    extra = _attr_list(node.attrs)
    return f"{node.id} [label={label_text}{', ' + extra if extra else ''}];"


def _cluster_lines(cluster: _Cluster, indent: str) -> list[str]:
    lines = [f"{indent}subgraph {cluster.id} {{",
             f'{indent}  style="rounded,filled,bold"; fillcolor="{cluster.fill}"; color="{cluster.stroke}";',
             f"{indent}  label=<{cluster.label}>; labelloc=t; tooltip=\" \";"]
    for item in cluster.items:
        if isinstance(item, _Cluster):
            lines += _cluster_lines(item, indent + "  ")
        else:
            lines.append(indent + "  " + _node_line(item))
    lines.append(f"{indent}}}  // {cluster.id}")
    return lines


def _serialize(builder: _GraphBuilder, caption: str, legend: bool) -> str:
    lines = [
        "digraph G {",
        "rankdir = TB;",
        "compound = true;",
        f"label = <{caption}>;",
        "labelloc = t;",
        'tooltip = " ";',
        'fontname = "Helvetica";',
        'node [shape=rect, fontname="Helvetica", fontsize=11];',
        'edge [fontname="Helvetica", fontsize=9, fontcolor="#616161", arrowhead=empty, labeldistance=2];',
    ]
    for item in builder.top.items:
        lines += _cluster_lines(item, "") if isinstance(item, _Cluster) else [_node_line(item)]
    if legend:
        lines += style.legend_dot_lines()
    for edge in builder.edges:
        extra = _attr_list(edge.attrs)
        lines.append(f"{edge.src} -> {edge.dst}" + (f" [{extra}]" if extra else "") + ";")
    lines.append("}")
    return "\n".join(lines) + "\n"


def render_svg(obj: HloModule | HloComputation | str, **options: object) -> str:
    """``to_svg(hlo_to_dot(obj, **options))``."""
    return to_svg(hlo_to_dot(obj, **options))  # type: ignore[arg-type]


def render_png(obj: HloModule | HloComputation | str, **options: object) -> bytes:
    """``to_png(hlo_to_dot(obj, **options))``."""
    return to_png(hlo_to_dot(obj, **options))  # type: ignore[arg-type]
