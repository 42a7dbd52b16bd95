"""HLO -> Graphviz: structure checked on Graphviz's own reading of the DOT text.

Each drawing is laid out by ``dot -Tjson`` and compared with the module it came from:
which instructions are boxes, which boxes sit in which fusion cluster, what the edges
carry. Tests that need the ``dot`` program are skipped without it.
"""

from __future__ import annotations

import json
import shutil

import pytest

from tests.tools.dump_test_utils import XLA_DUMP
from xla_teach.hlo.text.parser import parse_hlo
from xla_teach.tools import render
from xla_teach.tools.render import GraphvizNotFound, RenderError, hlo_to_dot, run_dot
from xla_teach.tools.render.html_report import render_to_file
from xla_teach.tools.render.style import COLORS

needs_dot = pytest.mark.skipif(not render.have_dot(), reason="Graphviz dot not installed")

AFTER_OPT = XLA_DUMP / "module_0000.jit_f.cpu_after_optimizations.txt"
needs_samples = pytest.mark.skipif(not AFTER_OPT.is_file(), reason=f"the real XLA dump {AFTER_OPT} is not here")

WHILE_HLO = """
HloModule loop

%cond (cp: (s32[], f32[4])) -> pred[] {
  %cp = (s32[], f32[4]) parameter(0)
  %ci = s32[] get-tuple-element(%cp), index=0
  %n = s32[] constant(10)
  ROOT %lt = pred[] compare(%ci, %n), direction=LT
}

%body (p: (s32[], f32[4])) -> (s32[], f32[4]) {
  %p = (s32[], f32[4]) parameter(0)
  %i = s32[] get-tuple-element(%p), index=0
  %one = s32[] constant(1)
  %next = s32[] add(%i, %one)
  %v = f32[4] get-tuple-element(%p), index=1
  %w = f32[4] exponential(%v)
  ROOT %t = (s32[], f32[4]) tuple(%next, %w)
}

ENTRY %main (x: f32[4]) -> f32[4] {
  %x = f32[4] parameter(0)
  %zero = s32[] constant(0)
  %init = (s32[], f32[4]) tuple(%zero, %x)
  %loop = (s32[], f32[4]) while(%init), condition=%cond, body=%body
  %c = f32[4] constant({1, 2, 3, 4})
  %r = f32[4] get-tuple-element(%loop), index=1
  %d = f32[4,4] broadcast(%r), dimensions={1}
  %dot = f32[4] dot(%d, %c), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT %out = f32[4] add(%dot, %c)
}
"""


def chain_hlo(n: int) -> str:
    lines = ["HloModule chain", "", "ENTRY %main (x: f32[8]) -> f32[8] {", "  %x = f32[8] parameter(0)"]
    prev = "x"
    for i in range(n):
        root = "ROOT " if i == n - 1 else ""
        lines.append(f"  {root}%a{i} = f32[8] add(%{prev}, %x)")
        prev = f"a{i}"
    return "\n".join(lines + ["}"])


def layout(dot_text: str) -> dict:
    """Graphviz's view of the graph: boxes by tooltip (= instruction name), clusters, edges."""
    data = json.loads(run_dot(dot_text, "json0"))
    objects = data.get("objects", [])
    boxes = {o["tooltip"]: o for o in objects if "nodes" not in o and o.get("tooltip", " ").strip()}
    clusters = {o["label"]: {objects[i]["tooltip"] for i in o.get("nodes", [])}
                for o in objects if "nodes" in o and o["name"].startswith("cluster")}
    edges = [(objects[e["tail"]].get("tooltip"), objects[e["head"]].get("tooltip"), e) for e in data.get("edges", [])]
    return {"boxes": boxes, "clusters": clusters, "edges": edges, "label": data.get("label", ""), "raw": data}


@needs_samples
@needs_dot
def test_fusions_are_clusters_holding_their_fused_computation():
    module = parse_hlo(AFTER_OPT.read_text())
    g = layout(hlo_to_dot(module))
    fusions = [i for i in module.entry.instructions if i.opcode == "fusion"]
    assert len(fusions) == 3
    for fusion in fusions:
        [members] = [m for label, m in g["clusters"].items() if f"<b>{fusion.name}</b>" in label]
        # Every fused instruction is a box in the cluster, except scalar constants written into labels.
        expected = {i.name for i in fusion.fused_computation.instructions
                    if not (i.opcode == "constant" and not i.shape.dimensions)}
        assert members == expected
        assert fusion.name not in g["boxes"], "an expanded fusion is its cluster, not a box"
    # The fusion's operands feed the fused parameters.
    mult = module.entry.instruction("multiply_add_fusion")
    for k, operand in enumerate(mult.operands):
        param = mult.fused_computation.parameter(k).name
        assert (operand.name, param) in {(a, b) for a, b, _ in g["edges"]}


@needs_dot
def test_edges_carry_operand_shapes_and_numbers():
    module = parse_hlo(WHILE_HLO)
    g = layout(hlo_to_dot(module))
    by_name = {i.name: i for c in module.computations for i in c.instructions}
    data_edges = [(a, b, e) for a, b, e in g["edges"] if a in by_name and b in by_name and e.get("style") != "dashed"]
    assert len(data_edges) >= 8
    for a, b, e in data_edges:
        assert e["label"] == by_name[a].shape.to_text(print_layout=False)
        user = by_name[b]
        if user.operand_count > 1:
            assert user.operands[int(e["headlabel"])].name == a


@needs_dot
def test_colours_and_markers():
    module = parse_hlo(WHILE_HLO)
    g = layout(hlo_to_dot(module))
    boxes = g["boxes"]
    assert boxes["x"]["fillcolor"] == COLORS["orange"].fill and "Parameter 0" in boxes["x"]["label"]
    assert boxes["dot"]["fillcolor"] == COLORS["dark_blue"].fill
    assert boxes["d"]["fillcolor"] == COLORS["green"].fill  # broadcast: data movement
    assert boxes["loop"]["fillcolor"] == COLORS["dark_green"].fill
    assert boxes["c"]["fillcolor"] == COLORS["blue"].fill  # a non-scalar constant stays a box
    assert boxes["out"].get("penwidth") == "2.5"  # the root
    root_marker = [o for o in g["raw"]["objects"] if o.get("label") == "ROOT"]
    assert len(root_marker) == 1
    assert ("out", " ") in {(a, b) for a, b, _ in g["edges"]}
    # Scalar constants are written into the users' labels instead of being boxes.
    assert "zero" not in boxes and "operand 0" in boxes["init"]["label"]


@needs_dot
def test_while_body_and_condition_are_clusters():
    g = layout(hlo_to_dot(parse_hlo(WHILE_HLO)))
    body = [m for label, m in g["clusters"].items() if label.startswith("body of <b>loop</b>")]
    cond = [m for label, m in g["clusters"].items() if label.startswith("condition of <b>loop</b>")]
    assert body and {"next", "w", "t"} <= body[0]
    assert cond and "lt" in cond[0]
    flat = layout(hlo_to_dot(parse_hlo(WHILE_HLO), expand_calls=False))
    assert not flat["clusters"] and "w" not in flat["boxes"]


@needs_samples
@needs_dot
def test_collapse_fusions_draws_one_gray_box_per_fusion():
    module = parse_hlo(AFTER_OPT.read_text())
    g = layout(hlo_to_dot(module, collapse_fusions=True))
    assert not g["clusters"]
    for fusion in (i for i in module.entry.instructions if i.opcode == "fusion"):
        assert g["boxes"][fusion.name]["fillcolor"] == COLORS["gray"].fill
        assert "kind=kLoop" in g["boxes"][fusion.name]["label"]


@needs_dot
def test_max_nodes_keeps_the_instructions_nearest_the_root():
    module = parse_hlo(chain_hlo(60))
    g = layout(hlo_to_dot(module, max_nodes=10))
    drawn = {name for name in g["boxes"] if name.startswith("a") or name == "x"}
    # Breadth-first from the root a59: x (an operand of every add) is one step away.
    assert drawn == {"x"} | {f"a{i}" for i in range(51, 60)}
    notes = [o for o in g["raw"]["objects"] if "not shown" in o.get("label", "")]
    assert notes, "cut edges are announced"
    assert "showing 10 of 61" in g["label"]


@needs_dot
def test_center_draws_the_neighbourhood_of_one_instruction():
    g = layout(hlo_to_dot(parse_hlo(chain_hlo(60)), center="a30", max_nodes=5))
    assert {"a30", "a29", "a31"} <= set(g["boxes"]) and "a0" not in g["boxes"]


@needs_samples
def test_large_graphs_collapse_fusions_first():
    module = parse_hlo(AFTER_OPT.read_text())
    small = hlo_to_dot(module, max_nodes=8)
    assert "subgraph cluster" not in small and "fusions collapsed" in small
    assert "subgraph cluster" in hlo_to_dot(module, max_nodes=None)


def test_every_sample_module_draws():
    """Every real XLA dump in tests/data/xla_samples becomes DOT text Graphviz accepts."""
    for path in sorted(XLA_DUMP.parent.glob("*/*_optimizations.txt")):
        text = hlo_to_dot(parse_hlo(path.read_text()))
        assert text.startswith("digraph G {")
        if render.have_dot():
            run_dot(text, "svg")


@needs_dot
def test_svg_and_png_output(tmp_path):
    module = parse_hlo(WHILE_HLO)
    assert render.render_svg(module).lstrip().startswith("<?xml")
    assert render.render_png(module)[:8] == b"\x89PNG\r\n\x1a\n"
    for ext in ("dot", "svg", "png", "html"):
        path = render_to_file(module, tmp_path / f"g.{ext}")
        assert path.stat().st_size > 100
    with pytest.raises(FileExistsError, match="not overwriting"):
        render_to_file(module, tmp_path / "g.svg")
    render_to_file(module, tmp_path / "g.svg", overwrite=True)


def test_clear_errors(monkeypatch, tmp_path):
    module = parse_hlo(WHILE_HLO)
    with pytest.raises(RenderError, match="HloModule"):
        hlo_to_dot(42)  # type: ignore[arg-type]
    with pytest.raises(RenderError, match="no instruction named 'nope'"):
        hlo_to_dot(module, center="nope")
    with pytest.raises(RenderError, match="unknown graph format"):
        render_to_file(module, tmp_path / "g.jpeg")
    with pytest.raises(RenderError, match="rejected"):
        if not render.have_dot():
            raise RenderError("rejected")
        run_dot("digraph { a -> }", "svg")
    monkeypatch.setattr(shutil, "which", lambda name: None)
    with pytest.raises(GraphvizNotFound, match="apt-get install graphviz"):
        render.to_svg(hlo_to_dot(module))


def test_html_labels_are_escaped():
    module = parse_hlo(WHILE_HLO)
    text = hlo_to_dot(module, title="a<b>&c")
    assert "a&lt;b&gt;&amp;c" in text


def test_legend_shows_each_colour_once_naming_every_category_in_it() -> None:
    from xla_teach.tools.render.style import CATEGORY_COLORS, legend_entries

    entries = legend_entries()
    fills = [c.fill for _, c in entries]
    assert len(fills) == len(set(fills))
    named = [cat for label, _ in entries for cat in label.split(", ")]
    assert sorted(named) == sorted(CATEGORY_COLORS)
    assert ("data movement, indexing" in [label for label, _ in entries])
