"""The graph IR, the NumPy-style builder and the eager executor (oracle: NumPy written out by hand)."""

from __future__ import annotations

import numpy as np
import pytest

import xla_teach.graph as xg
from xla_teach.graph import Graph, GraphError, Session
from xla_teach.graph import ops as gops
from xla_teach.tools.timeline import Timeline

from .graph_test_utils import mixed_graph


def test_names_follow_tensorflow_and_text_lists_nodes_in_topological_order() -> None:
    g = Graph()
    with g.as_default():
        x = gops.placeholder(np.float32, (2, 3), name="x")
        m1 = gops.exp(x)
        m2 = gops.exp(m1)
        gops.add(m2, 1.0)
    assert [n.name for n in g.nodes] == ["x", "Exp", "Exp_1", "Const", "Add"]
    assert g.to_text(show_specs=True).splitlines() == [
        "x = Placeholder[dtype=float32, shape=(2, 3)]()  -> float32[2,3]",
        "Exp = Exp(x)  -> float32[2,3]",
        "Exp_1 = Exp(Exp)  -> float32[2,3]",
        "Const = Const[value=float32(1.0)]()  -> float32[]",
        "Add = Add(Exp_1, Const)  -> float32[2,3]",
    ]


def test_binary_ops_refuse_mixed_dtypes_like_tensorflow() -> None:
    g = Graph()
    with g.as_default():
        x = gops.placeholder(np.float32, (2,), name="x")
        i = gops.placeholder(np.int32, (2,), name="i")
        with pytest.raises(GraphError, match="different dtypes"):
            gops.add(x, i)
        with pytest.raises(GraphError, match="cannot take inputs"):
            gops.matmul(x, gops.placeholder(np.float32, (3, 3)))


def test_ops_outside_a_default_graph_are_a_clear_error() -> None:
    with pytest.raises(GraphError, match="no default graph"):
        gops.placeholder(np.float32, (2,))


def test_eager_run_matches_numpy_and_records_one_event_per_op() -> None:
    g = mixed_graph()
    x = np.random.default_rng(0).uniform(-1, 1, (4, 3)).astype(np.float32)
    timeline = Timeline()
    d, u = Session(g).run(["d", "u"], {"x": x}, profiler=timeline)
    a = np.exp(x)
    expected = (a + np.tanh(a) * 2) ** 2
    np.testing.assert_allclose(d, expected, rtol=1e-6)
    np.testing.assert_array_equal(u, np.unique(np.maximum(x, 0)))
    ops = [e.name for e in timeline.thunk_events()]
    assert sorted(ops) == sorted(["a", "b", "p", "c", "d", "r", "u"])  # placeholders are fed, not run


def test_function_to_graph_records_a_python_function() -> None:
    def model(x, w):  # noqa: ANN001, ANN202
        return gops.softmax(x @ w), gops.argmax(x @ w, axis=1)

    g, (probs, label) = xg.function_to_graph(model, ((5, 4), np.float32), ((4, 3), np.float32))
    assert [n.op for n in g.nodes] == ["Placeholder", "Placeholder", "MatMul", "Softmax", "MatMul", "ArgMax"]
    rng = np.random.default_rng(1)
    x, w = rng.standard_normal((5, 4)).astype(np.float32), rng.standard_normal((4, 3)).astype(np.float32)
    p, lab = Session(g).run([probs, label], {"x": x, "w": w})
    z = x @ w
    np.testing.assert_allclose(p, np.exp(z) / np.exp(z).sum(1, keepdims=True), rtol=1e-5)
    np.testing.assert_array_equal(lab, z.argmax(1))


def test_feed_errors_name_the_placeholder() -> None:
    g = mixed_graph()
    sess = Session(g)
    with pytest.raises(xg.FeedError, match="You must feed a value for placeholder tensor 'x'"):
        sess.run("d", {})
    with pytest.raises(xg.FeedError, match="shape"):
        sess.run("d", {"x": np.zeros((2, 2), np.float32)})
    with pytest.raises(xg.FeedError, match="unknown placeholders: z"):
        sess.run("d", {"x": np.zeros((4, 3), np.float32), "z": 1})


def test_copy_is_independent_and_prints_the_same() -> None:
    g = mixed_graph()
    c = g.copy()
    assert c.to_text() == g.to_text()
    c.node("d").attrs["_XlaCluster"] = "cluster_9"
    assert "cluster_9" not in g.to_text()


def test_xla_kernels_per_op_agree_with_numpy_kernels() -> None:
    g = mixed_graph()
    x = np.random.default_rng(2).uniform(-1, 1, (4, 3)).astype(np.float32)
    numpy_d = Session(g).run("d", {"x": x})
    sess = Session(g, kernels="xla")
    xla_d = sess.run("d", {"x": x})
    np.testing.assert_allclose(xla_d, numpy_d, rtol=1e-5)
    assert sess.cache.compile_count() == 4  # a, b, c, d: one executable each (p is a host op)
