"""Shared graphs for the graph tests: the mixed example and a random graph generator."""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from xla_teach.graph import Graph
from xla_teach.graph import ops as gops


def double(v: np.ndarray) -> np.ndarray:
    return v * 2


def mixed_graph() -> Graph:
    """x -> a=Exp -> b=Tanh -> p=PyFunc ; c=Add(a, p) ; d=Mul(c, c) ; plus a Unique branch."""
    g = Graph("mixed")
    with g.as_default():
        x = gops.placeholder(np.float32, (4, 3), name="x")
        a = gops.exp(x, name="a")
        b = gops.tanh(a, name="b")
        p = gops.py_func(double, [b], np.float32, shape=(4, 3), name="p")
        c = gops.add(a, p, name="c")
        gops.multiply(c, c, name="d")
        gops.unique(gops.relu(x, name="r"), name="u")
    return g


UNARY = ["Neg", "Tanh", "Sigmoid", "Relu", "Square", "Abs"]
BINARY = ["Add", "Sub", "Mul", "Maximum", "Minimum"]
HOST = ["PyFunc", "StringRoundTrip"]
SHAPE = (3, 4)


@st.composite
def random_graphs(draw: st.DrawFn, max_ops: int = 14, host_ops: bool = True) -> tuple[Graph, list[str]]:
    """A random DAG over two f32[3,4] placeholders mixing compilable and host ops;
    returns the graph and the names of the nodes nothing reads (the fetches)."""
    g = Graph("random")
    kinds = UNARY + BINARY + ["SumKeep"] + (HOST if host_ops else [])
    with g.as_default():
        tensors = [gops.placeholder(np.float32, SHAPE, name="x"), gops.placeholder(np.float32, SHAPE, name="y")]
        for _ in range(draw(st.integers(1, max_ops))):
            kind = draw(st.sampled_from(kinds))
            a = tensors[draw(st.integers(0, len(tensors) - 1))]
            if kind in BINARY:
                b = tensors[draw(st.integers(0, len(tensors) - 1))]
                out = g.add_node(kind, [a, b]).output(0)
            elif kind == "SumKeep":  # Sum over axis 1, broadcast back by an Add
                out = gops.add(a, gops.sum(a, axis=1, keepdims=True))
            elif kind == "PyFunc":
                out = gops.py_func(double, [a], np.float32, shape=SHAPE)
            elif kind == "StringRoundTrip":
                out = gops.string_to_number(gops.as_string(a))
            else:
                out = g.add_node(kind, [a]).output(0)
            tensors.append(out)
    consumed = {t.node.name for n in g.nodes for t in n.inputs}
    fetches = [n.name for n in g.nodes if n.name not in consumed and n.op != "Placeholder"]
    return g, fetches


def random_feeds(seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {"x": rng.uniform(-1, 1, SHAPE).astype(np.float32), "y": rng.uniform(-1, 1, SHAPE).astype(np.float32)}
