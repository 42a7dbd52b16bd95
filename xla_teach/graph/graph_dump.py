"""Graph dumps: GraphDef-style text and Graphviz pictures with clusters as coloured boxes.

With ``TF_XLA_FLAGS=--tf_xla_clustering_debug`` and ``TF_DUMP_GRAPH_PREFIX=DIR`` the
session writes, as TensorFlow does, the graph at each step of auto-clustering::

    DIR/before_mark_for_compilation.pbtxt         (+ .dot)
    DIR/mark_for_compilation.pbtxt                nodes carry _XlaCluster="cluster_N"
    DIR/mark_for_compilation_annotated.pbtxt      names prefixed "cluster_N/" or "unclustered/"
    DIR/encapsulate_subgraphs_after.pbtxt         clusters replaced by function calls (+ the library)
    DIR/build_xla_ops.pbtxt                       calls replaced by _XlaCompile/_XlaRun

A name that already exists gets ``_1``, ``_2`` ... appended: nothing is overwritten.
The ``.pbtxt`` is the protobuf text format of a ``GraphDef`` (node / name / op /
input / attr), simplified: tensors inside ``Const`` show dtype and shape, and
values only when small.
"""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

import numpy as np

from xla_teach.graph.graph import Graph, Node
from xla_teach.graph.mark_for_compilation import CLUSTER_ATTR
from xla_teach.graph.op_registry import OPS

_DT = {"float32": "DT_FLOAT", "float64": "DT_DOUBLE", "float16": "DT_HALF", "bfloat16": "DT_BFLOAT16",
       "int32": "DT_INT32", "int64": "DT_INT64", "int8": "DT_INT8", "int16": "DT_INT16", "uint8": "DT_UINT8",
       "bool": "DT_BOOL"}
PALETTE = ["#c6e2ff", "#d5f5c8", "#ffe4b5", "#e6d5f7", "#ffd1dc", "#d0f0f0", "#fff3b0", "#e0e0e0"]


def _dtype_name(dtype: Any) -> str:
    dt = np.dtype(dtype)
    return "DT_STRING" if dt.kind in "OUS" else _DT.get(dt.name, f"DT_{dt.name.upper()}")


def _attr_value(key: str, value: Any, indent: str) -> list[str]:
    inner = indent + "  "
    if isinstance(value, bool):
        return [f"{inner}b: {str(value).lower()}"]
    if isinstance(value, (int, np.integer)):
        return [f"{inner}i: {int(value)}"]
    if isinstance(value, float):
        return [f"{inner}f: {value}"]
    if isinstance(value, str):
        return [f'{inner}s: "{value}"']
    if isinstance(value, np.dtype):
        return [f"{inner}type: {_dtype_name(value)}"]
    if isinstance(value, np.ndarray):
        dims = " ".join(f"dim {{ size: {d} }}" for d in value.shape)
        lines = [f"{inner}tensor {{ dtype: {_dtype_name(value.dtype)} tensor_shape {{ {dims} }}"]
        if value.size <= 8 and value.dtype.kind in "biuf":
            lines[0] += " " + " ".join(f"value: {v}" for v in value.reshape(-1).tolist())
        return [lines[0] + " }"]
    if isinstance(value, tuple) and key == "shape":
        return [f"{inner}shape {{ " + " ".join(f"dim {{ size: {-1 if d is None else d} }}" for d in value) + " }"]
    if isinstance(value, (tuple, list)):
        return [f"{inner}list {{ " + " ".join(f"i: {int(v)}" for v in value) + " }"]
    if value is None:
        return [f"{inner}list {{ }}"]
    if callable(value):
        return [f'{inner}func {{ name: "{getattr(value, "__name__", "callable")}" }}']
    return [f'{inner}s: "{value}"']


def _node_def(node: Node, indent: str, rename: dict[str, str] | None = None) -> list[str]:
    rename = rename or {}

    def ref(name: str) -> str:
        base, sep, index = name.partition(":")
        return rename.get(base, base) + (sep + index if sep else "")

    lines = [f"{indent}node {{", f'{indent}  name: "{ref(node.name)}"', f'{indent}  op: "{node.op}"']
    lines += [f'{indent}  input: "{ref(t.name)}"' for t in node.inputs]
    for key in sorted(node.attrs):
        lines += [f"{indent}  attr {{", f'{indent}    key: "{key}"', f"{indent}    value {{"]
        lines += _attr_value(key, node.attrs[key], indent + "    ")
        lines += [f"{indent}    }}", f"{indent}  }}"]
    lines.append(f"{indent}}}")
    return lines


def graph_to_pbtxt(graph: Graph, annotate_clusters: bool = False) -> str:
    """The graph as GraphDef text; ``annotate_clusters`` prefixes names with their cluster."""
    rename = {}
    if annotate_clusters:
        rename = {n.name: f"{n.attrs.get(CLUSTER_ATTR) or 'unclustered'}/{n.name}" for n in graph.nodes}
    lines: list[str] = []
    for node in graph.topological_order():
        lines += _node_def(node, "", rename)
    if graph.functions:
        lines.append("library {")
        for fn in graph.functions.values():
            lines += ["  function {", "    signature {", f'      name: "{fn.name}"']
            lines += [f'      input_arg {{ name: "{a.name}" type: {_dtype_name(a.outputs[0].dtype or "float32")} }}'
                      for a in fn.args]
            lines += [f'      output_arg {{ name: "{r.name}" }}' for r in fn.retvals]
            lines.append("    }")
            for node in fn.graph.topological_order():
                lines += _node_def(node, "    ")
            lines.append("  }")
        lines.append("}")
    lines.append("versions {\n  producer: 1\n}")
    return "\n".join(lines) + "\n"


def _cluster_of(graph: Graph, node: Node) -> str | None:
    if node.attrs.get(CLUSTER_ATTR):
        return str(node.attrs[CLUSTER_ATTR])
    return node.op if node.op in graph.functions else None


def _style(graph: Graph, node: Node) -> str:
    op = OPS.get(node.op)
    if node.op == "Placeholder":
        return 'fillcolor="#ffb74d"'
    if node.op in ("_XlaCompile", "_XlaRun") or node.op in graph.functions:
        return 'fillcolor="#90caf9", penwidth=2'
    if op is not None and not op.compilable:
        return 'fillcolor="#ef9a9a"'
    return 'fillcolor="white"'


def graph_to_dot(graph: Graph, title: str = "") -> str:
    """Graphviz source: one box per node, each cluster a coloured box holding its nodes,
    not-compilable ops red, placeholders orange, edges labelled with the tensor spec."""
    ids = {id(n): f"n{i}" for i, n in enumerate(graph.nodes)}
    lines = ["digraph G {", "  rankdir=TB; compound=true;",
             f'  label="{html.escape(title or graph.name)}"; labelloc=t; fontname="Helvetica";',
             '  node [shape=box, style="rounded,filled", fontname="Helvetica", fontsize=11];',
             '  edge [fontname="Helvetica", fontsize=9, color="#555555"];']
    clusters: dict[str, list[Node]] = {}
    loose: list[Node] = []
    for node in graph.nodes:
        cluster = _cluster_of(graph, node)
        (clusters.setdefault(cluster, []) if cluster else loose).append(node)

    def box(node: Node) -> str:
        label = f"{html.escape(node.name)}\\n{html.escape(node.op)}"
        return f'{ids[id(node)]} [label="{label}", {_style(graph, node)}];'

    for i, (name, members) in enumerate(sorted(clusters.items())):
        colour = PALETTE[i % len(PALETTE)]
        lines += [f"  subgraph cluster_{i} {{", f'    label="{name}"; style="filled,rounded"; '
                  f'fillcolor="{colour}"; color="#1565c0"; penwidth=2;']
        lines += [f"    {box(n)}" for n in members]
        lines.append("  }")
    lines += [f"  {box(n)}" for n in loose]
    for node in graph.nodes:
        for t in node.inputs:
            lines.append(f'  {ids[id(t.node)]} -> {ids[id(node)]} [label="{html.escape(str(t.spec))}"];')
    lines.append("}")
    return "\n".join(lines) + "\n"


def _free_path(folder: Path, name: str, suffix: str) -> Path:
    path = folder / f"{name}{suffix}"
    n = 0
    while path.exists():
        n += 1
        path = folder / f"{name}_{n}{suffix}"
    return path


def dump_graph(graph: Graph, name: str, prefix: str | Path, annotate_clusters: bool = False) -> list[Path]:
    """Write ``<prefix>/<name>.pbtxt`` and ``.dot`` (suffixed ``_N`` when taken); returns the paths."""
    folder = Path(prefix)
    if folder.exists() and not folder.is_dir():
        raise ValueError(f"TF_DUMP_GRAPH_PREFIX={prefix} is a file, not a directory")
    folder.mkdir(parents=True, exist_ok=True)
    text_path = _free_path(folder, name, ".pbtxt")
    dot_path = _free_path(folder, text_path.stem, ".dot")
    text_path.write_text(graph_to_pbtxt(graph, annotate_clusters))
    dot_path.write_text(graph_to_dot(graph, name))
    return [text_path, dot_path]
