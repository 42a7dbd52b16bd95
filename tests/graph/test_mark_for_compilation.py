"""MarkForCompilation: golden clusters, the reasons given, the flags it honours, and
(property test) that no cluster ever creates a cycle."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from xla_teach.graph import ClusteringOptions, Graph, MarkForCompilation
from xla_teach.graph import ops as gops
from xla_teach.graph.graph import GraphError
from xla_teach.graph.op_registry import OPS

from .graph_test_utils import mixed_graph, random_graphs

GOLDEN_MIXED = """\
x = Placeholder[dtype=float32, shape=(4, 3)]()
a = Exp[_XlaCluster="cluster_0"](x)
b = Tanh[_XlaCluster="cluster_0"](a)
p = PyFunc[Tout=float32, func=double, shape=(4, 3)](b)
c = Add[_XlaCluster="cluster_1"](a, p)
d = Mul[_XlaCluster="cluster_1"](c, c)
r = Relu(x)
u = Unique(r)"""


def _mark(g: Graph, **options: object) -> MarkForCompilation:
    mark = MarkForCompilation(ClusteringOptions(**options))  # type: ignore[arg-type]
    mark.run(g)
    return mark


def test_golden_clusters_of_a_mixed_graph() -> None:
    g = mixed_graph()
    mark = _mark(g, min_cluster_size=2)
    assert g.to_text() == GOLDEN_MIXED
    why = mark.result.explanations
    assert set(why) == {"x", "p", "r", "u"}
    assert why["p"].startswith("PyFunc: runs arbitrary Python")
    assert "data-dependent shape" in why["u"]
    assert "size 1 < --tf_xla_min_cluster_size=2" in why["r"]


def test_default_min_cluster_size_4_drops_small_clusters() -> None:
    g = mixed_graph()
    mark = _mark(g)  # min_cluster_size=4: both clusters have 2 ops
    assert mark.result.clusters == {}
    assert all(n.cluster is None for n in g.nodes)
    assert "size 2 < --tf_xla_min_cluster_size=4" in mark.result.explanations["a"]


def test_const_and_identity_count_zero_towards_the_size() -> None:
    g = Graph()
    with g.as_default():
        x = gops.placeholder(np.float32, (2,), name="x")
        y = gops.identity(gops.add(x, gops.constant(np.ones(2, np.float32), name="one"), name="add"), name="id")
        gops.exp(y, name="e")
    assert _mark(g, min_cluster_size=3).result.clusters == {}  # add + exp = 2 < 3
    assert _mark(g, min_cluster_size=2).result.clusters == {"cluster_0": ["one", "add", "id", "e"]}


def test_cpu_needs_tf_xla_cpu_global_jit_and_gpu_does_not() -> None:
    why = _mark(mixed_graph(), min_cluster_size=1, cpu_global_jit=False).result.explanations["a"]
    assert "--tf_xla_cpu_global_jit was not set" in why
    assert _mark(mixed_graph(), min_cluster_size=1, cpu_global_jit=False, device="gpu").result.clusters


def test_auto_jit_level_1_leaves_matmul_out_and_level_off_clusters_nothing() -> None:
    g, _ = _matmul_graph()
    assert _mark(g, auto_jit=1, min_cluster_size=1).result.clusters == {"cluster_0": ["relu", "neg"]}
    assert "only at --tf_xla_auto_jit=2" in _mark(g, auto_jit=1).result.explanations["mm"]
    assert _mark(g, auto_jit=2, min_cluster_size=1).result.clusters == {"cluster_0": ["mm", "relu", "neg"]}
    off = _mark(g, auto_jit=-1, min_cluster_size=1)
    assert off.result.clusters == {} and "auto-clustering is off" in off.result.explanations["mm"]


def _matmul_graph() -> tuple[Graph, None]:
    g = Graph()
    with g.as_default():
        x = gops.placeholder(np.float32, (2, 2), name="x")
        gops.negative(gops.relu(gops.matmul(x, x, name="mm"), name="relu"), name="neg")
    return g, None


def test_xla_compile_attribute_forces_or_vetoes() -> None:
    g, _ = _matmul_graph()
    g.node("relu").attrs["_XlaCompile"] = False
    mark = _mark(g, min_cluster_size=1)
    assert mark.result.explanations["relu"] == "_XlaCompile=false on the node"
    assert mark.result.clusters == {"cluster_0": ["mm"], "cluster_1": ["neg"]}
    g2, _ = _matmul_graph()
    for name in ("mm", "relu"):
        g2.node(name).attrs["_XlaCompile"] = True  # tf.xla.experimental.jit_scope: kept even when small / off
    assert _mark(g2, auto_jit=0).result.clusters == {"cluster_0": ["mm", "relu"]}


def test_exclude_ops_and_string_tensors() -> None:
    g = Graph()
    with g.as_default():
        x = gops.placeholder(np.float32, (3,), name="x")
        s = gops.identity(gops.as_string(gops.exp(x, name="e"), name="s"), name="sid")
        gops.tanh(gops.string_to_number(s, name="num"), name="t")
    mark = _mark(g, min_cluster_size=1, exclude_ops=frozenset({"Tanh"}))
    why = mark.result.explanations
    assert "strings have no XLA element type" in why["sid"]  # Identity is compilable, but not on strings
    assert why["t"] == "Tanh is listed in --tf_xla_cluster_exclude_ops"
    assert mark.result.clusters == {"cluster_0": ["e"]}


def test_max_cluster_size_splits_a_chain() -> None:
    g = Graph()
    with g.as_default():
        t = gops.placeholder(np.float32, (3,), name="x")
        for i in range(6):
            t = gops.tanh(t, name=f"t{i}")
    clusters = _mark(g, min_cluster_size=1, max_cluster_size=4).result.clusters
    assert all(len(m) <= 4 for m in clusters.values())
    assert sorted(n for m in clusters.values() for n in m) == [f"t{i}" for i in range(6)]


# ---- properties on random graphs --------------------------------------------------------------------
def _cluster_graph_is_acyclic(g: Graph) -> bool:
    """Contract every cluster to one node and look for a cycle."""
    def key(node):  # noqa: ANN001, ANN202
        return node.cluster or node.name
    edges: dict[str, set[str]] = {}
    for node in g.nodes:
        for t in node.inputs:
            if key(t.node) != key(node):
                edges.setdefault(key(t.node), set()).add(key(node))
    state: dict[str, int] = {}

    def visit(k: str) -> bool:
        state[k] = 1
        for nxt in edges.get(k, ()):
            if state.get(nxt) == 1 or (state.get(nxt) is None and not visit(nxt)):
                return False
        state[k] = 2
        return True
    return all(state.get(k) == 2 or visit(k) for k in list(edges))


def _paths_avoiding(g: Graph, src: str, dst: str) -> bool:
    """Is there a path from cluster ``src`` to cluster ``dst`` through another node or cluster?"""
    def key(node):  # noqa: ANN001, ANN202
        return node.cluster or node.name
    succ: dict[str, set[str]] = {}
    for node in g.nodes:
        for t in node.inputs:
            if key(t.node) != key(node):
                succ.setdefault(key(t.node), set()).add(key(node))
    stack = [s for s in succ.get(src, ()) if s != dst]
    seen = set(stack)
    while stack:
        k = stack.pop()
        for nxt in succ.get(k, ()):
            if nxt == dst:
                return True
            if nxt not in seen:
                seen.add(nxt)
                stack.append(nxt)
    return False


@settings(max_examples=150, deadline=None)
@given(random_graphs(max_ops=25), st.integers(1, 5))
def test_no_cluster_creates_a_cycle(case: tuple[Graph, list[str]], min_size: int) -> None:
    g, _ = case
    _mark(g, min_cluster_size=min_size)
    assert _cluster_graph_is_acyclic(g)
    for node in g.nodes:  # only compilable ops are clustered
        if node.cluster:
            assert OPS[node.op].compilable


@settings(max_examples=100, deadline=None)
@given(random_graphs(max_ops=20))
def test_clusters_are_maximal(case: tuple[Graph, list[str]]) -> None:
    """With no size limits, two clusters joined by an edge stay apart only because merging
    them would create a cycle (TensorFlow's final "nothing more can be contracted" check)."""
    g, _ = case
    _mark(g, min_cluster_size=1)
    for node in g.nodes:
        for t in node.inputs:
            a, b = t.node.cluster, node.cluster
            if a and b and a != b:
                assert _paths_avoiding(g, a, b), f"{a} -> {b} could have been merged"


def test_a_cycle_in_the_input_graph_is_reported() -> None:
    g = mixed_graph()
    g.node("a").inputs = [g.node("d").output(0)]
    try:
        g.topological_order()
    except GraphError as err:
        assert "cycle" in str(err)
    else:
        raise AssertionError("expected a GraphError")
