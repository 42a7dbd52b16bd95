"""The graph IR: named operations connected by tensors (TensorFlow's ``Graph``).

A :class:`Node` is one operation: a unique ``name`` (``"dense/MatMul"``), an op
type (``"MatMul"``), input :class:`Tensor` s and attributes. A :class:`Tensor` is
one output of a node, written ``name:index`` (``"MatMul"`` for output 0, as
TensorFlow writes it). Unlike HLO, a node knows nothing about how it runs: the op
registry (:mod:`~xla_teach.graph.op_registry`) has a NumPy kernel for every op
and an XLA lowering for the compilable ones.

A tiny graph, as :meth:`Graph.to_text` prints it::

    x = Placeholder[dtype=float32, shape=(4, 3)]()
    w = Const[value=float32(3, 2)]()
    MatMul = MatMul(x, w)
    Relu = Relu(MatMul)
    PyFunc = PyFunc[func=log_it](Relu)

Passes rewrite graphs (MarkForCompilation adds ``_XlaCluster`` attributes,
EncapsulateSubgraphs moves clusters into :class:`GraphFunction` s); when a
rewrite replaces a tensor, :attr:`Graph.aliases` remembers where its value now
comes from, so ``session.run("Relu")`` still finds it.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from xla_teach.graph.op_registry import infer_outputs
from xla_teach.graph.tensor_spec import UNKNOWN, GraphError, TensorSpec

__all__ = ["UNKNOWN", "Graph", "GraphError", "GraphFunction", "Node", "Tensor", "TensorSpec", "default_graph"]


@dataclass(eq=False)
class Node:
    """One operation of a graph."""

    name: str
    op: str
    inputs: list[Tensor]
    attrs: dict[str, Any]
    outputs: list[TensorSpec] = field(default_factory=list)
    graph: Graph | None = None

    def output(self, index: int = 0) -> Tensor:
        if not 0 <= index < len(self.outputs):
            raise GraphError(f"node {self.name} ({self.op}) has {len(self.outputs)} outputs, not {index + 1}")
        return Tensor(self, index)

    @property
    def cluster(self) -> str | None:
        """The ``_XlaCluster`` MarkForCompilation gave this node (None: unclustered)."""
        return self.attrs.get("_XlaCluster")

    def __repr__(self) -> str:
        return f"<Node {self.name} = {self.op}({', '.join(t.name for t in self.inputs)})>"


@dataclass(frozen=True)
class Tensor:
    """Output ``index`` of ``node``. Arithmetic operators add nodes (see :mod:`~xla_teach.graph.ops`)."""

    node: Node
    index: int = 0

    @property
    def name(self) -> str:
        return self.node.name if self.index == 0 else f"{self.node.name}:{self.index}"

    @property
    def spec(self) -> TensorSpec:
        return self.node.outputs[self.index]

    @property
    def dtype(self) -> np.dtype | None:
        return self.spec.dtype

    @property
    def shape(self) -> tuple[int | None, ...] | None:
        return self.spec.shape

    def __repr__(self) -> str:
        return f"<Tensor {self.name} {self.spec}>"

    # NumPy-style operators (+ - * / @, unary -, <, >, .T) are attached by ops.py, where the
    # functions they call are defined (as jax.numpy attaches its array methods to JAX's arrays).


@dataclass
class GraphFunction:
    """A function in the graph's library (TensorFlow's ``FunctionDef``): a graph whose
    inputs are ``_Arg`` nodes and whose outputs are ``_Retval`` nodes, both numbered
    by their ``index`` attribute. EncapsulateSubgraphs makes one per cluster."""

    name: str
    graph: Graph
    attrs: dict[str, Any] = field(default_factory=dict)

    @property
    def args(self) -> list[Node]:
        return sorted((n for n in self.graph.nodes if n.op == "_Arg"), key=lambda n: n.attrs["index"])

    @property
    def retvals(self) -> list[Node]:
        return sorted((n for n in self.graph.nodes if n.op == "_Retval"), key=lambda n: n.attrs["index"])


class Graph:
    """A dataflow graph: nodes in insertion order, a function library, tensor aliases."""

    def __init__(self, name: str = "graph") -> None:
        self.name = name
        self.nodes: list[Node] = []
        self.functions: dict[str, GraphFunction] = {}
        self.aliases: dict[str, Tensor] = {}  # old tensor name -> where its value lives now
        self._by_name: dict[str, Node] = {}
        self._name_counts: dict[str, int] = {}

    # ---- building ------------------------------------------------------------------------------
    def unique_name(self, base: str) -> str:
        """TensorFlow's scheme: ``MatMul``, then ``MatMul_1``, ``MatMul_2`` ..."""
        base = re.sub(r"[^A-Za-z0-9_./\-]", "_", base) or "node"
        if base not in self._by_name and base not in self._name_counts:
            self._name_counts[base] = 0
            return base
        count = self._name_counts.get(base, 0)
        while True:
            count += 1
            candidate = f"{base}_{count}"
            if candidate not in self._by_name:
                self._name_counts[base] = count
                return candidate

    def add_node(self, op: str, inputs: Sequence[Tensor] = (), attrs: dict[str, Any] | None = None,
                 name: str | None = None, outputs: Sequence[TensorSpec] | None = None) -> Node:
        """Add a node; output specs are inferred by the op registry unless given."""
        for t in inputs:
            if not isinstance(t, Tensor):
                raise GraphError(f"inputs of {op} must be graph tensors, got {type(t).__name__}")
            if t.node.graph is not self:
                raise GraphError(f"{op}: input {t.name} belongs to another graph")
        node_name = self.unique_name(name or op)
        node = Node(node_name, op, list(inputs), dict(attrs or {}), graph=self)
        if outputs is None:
            outputs = infer_outputs(node)
        node.outputs = list(outputs)
        self.nodes.append(node)
        self._by_name[node_name] = node
        return node

    def remove_node(self, node: Node) -> None:
        users = [c.name for c, _ in self.consumers(node)]
        if users:
            raise GraphError(f"cannot remove {node.name}: still used by {', '.join(users)}")
        self.nodes.remove(node)
        del self._by_name[node.name]
        node.graph = None

    def replace_uses(self, old: Tensor, new: Tensor) -> None:
        """Every input reading ``old`` now reads ``new``; fetches of ``old`` are redirected too."""
        for node in self.nodes:
            node.inputs = [new if t == old else t for t in node.inputs]
        self.aliases[old.name] = new
        for name, target in list(self.aliases.items()):
            if target == old:
                self.aliases[name] = new

    # ---- queries -------------------------------------------------------------------------------
    def node(self, name: str) -> Node:
        try:
            return self._by_name[name]
        except KeyError:
            raise GraphError(f"no node named {name!r} in {self.name}") from None

    def tensor(self, name: str | Tensor) -> Tensor:
        """``"MatMul"`` / ``"MatMul:1"`` (following aliases left by rewrites) as a Tensor."""
        if isinstance(name, Tensor):
            if name.node.graph is self:
                return name
            name = name.name
        if name in self.aliases:
            return self.aliases[name]
        node_name, _, index = name.partition(":")
        return self.node(node_name).output(int(index) if index else 0)

    def consumers(self, node: Node) -> list[tuple[Node, int]]:
        """``(consumer, input index)`` for every input that reads an output of ``node``."""
        return [(n, i) for n in self.nodes for i, t in enumerate(n.inputs) if t.node is node]

    def topological_order(self) -> list[Node]:
        """Producers before consumers (stable: ties keep insertion order)."""
        order: list[Node] = []
        state: dict[int, int] = {}  # 1 = visiting, 2 = done
        for start in self.nodes:
            stack: list[tuple[Node, bool]] = [(start, False)]
            while stack:
                node, expanded = stack.pop()
                if state.get(id(node)) == 2:
                    continue
                if expanded:
                    state[id(node)] = 2
                    order.append(node)
                    continue
                if state.get(id(node)) == 1:
                    raise GraphError(f"the graph has a cycle through {node.name}")
                state[id(node)] = 1
                stack.append((node, True))
                for t in reversed(node.inputs):
                    if state.get(id(t.node)) != 2:
                        if state.get(id(t.node)) == 1:
                            raise GraphError(f"the graph has a cycle through {t.node.name}")
                        stack.append((t.node, False))
        return order

    def copy(self) -> Graph:
        """A copy with new nodes (attribute dicts copied, attribute values shared)."""
        other = Graph(self.name)
        new_of: dict[int, Node] = {}
        for node in self.topological_order():
            inputs = [Tensor(new_of[id(t.node)], t.index) for t in node.inputs]
            copy = Node(node.name, node.op, inputs, dict(node.attrs), list(node.outputs), other)
            other._by_name[copy.name] = copy
            new_of[id(node)] = copy
        other.nodes = [new_of[id(n)] for n in self.nodes]
        other._name_counts = dict(self._name_counts)
        other.functions = {k: GraphFunction(f.name, f.graph.copy(), dict(f.attrs)) for k, f in self.functions.items()}
        other.aliases = {k: Tensor(new_of[id(t.node)], t.index) for k, t in self.aliases.items()
                         if id(t.node) in new_of}
        return other

    # ---- printing ------------------------------------------------------------------------------
    def to_text(self, show_specs: bool = False) -> str:
        """One line per node in topological order; functions of the library follow."""
        lines = [format_node(n, show_specs) for n in self.topological_order()]
        for fn in self.functions.values():
            attrs = "".join(f", {k}={_attr_text(v)}" for k, v in sorted(fn.attrs.items()))
            lines.append("")
            lines.append(f"function {fn.name}{'[' + attrs[2:] + ']' if attrs else ''} {{")
            lines += ["  " + format_node(n, show_specs) for n in fn.graph.topological_order()]
            lines.append("}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.to_text()

    def __repr__(self) -> str:
        return f"<Graph {self.name}: {len(self.nodes)} nodes, {len(self.functions)} functions>"

    # ---- the default graph ----------------------------------------------------------------------
    @contextlib.contextmanager
    def as_default(self) -> Iterator[Graph]:
        """Inside the block, ``xla_teach.graph.ops`` functions add nodes to this graph."""
        _DEFAULT.append(self)
        try:
            yield self
        finally:
            _DEFAULT.pop()


_DEFAULT: list[Graph] = []


def default_graph() -> Graph:
    if not _DEFAULT:
        raise GraphError("no default graph: build ops inside `with graph.as_default():` "
                         "(or use xla_teach.graph.function_to_graph)")
    return _DEFAULT[-1]


def _attr_text(value: Any) -> str:
    if isinstance(value, np.ndarray):
        if value.ndim == 0:
            return f"{value.dtype.name}({value.item()!r})"
        if value.size > 4:
            return f"{value.dtype.name}{list(value.shape)}"
        return f"{value.dtype.name}{np.array2string(value, separator=',')}".replace("\n", "")
    if isinstance(value, np.dtype) or (isinstance(value, type) and issubclass(value, np.generic)):
        return np.dtype(value).name
    if callable(value):
        return getattr(value, "__name__", "callable")
    if isinstance(value, str):
        return f'"{value}"'
    return str(value)


def format_node(node: Node, show_specs: bool = False) -> str:
    """``name = Op[attr=value, ...](input, ...)`` (attributes sorted; ``_`` attributes last)."""
    keys = sorted(node.attrs, key=lambda k: (k.startswith("_"), k))
    attrs = ", ".join(f"{k}={_attr_text(node.attrs[k])}" for k in keys)
    text = f"{node.name} = {node.op}{'[' + attrs + ']' if attrs else ''}({', '.join(t.name for t in node.inputs)})"
    if show_specs:
        text += "  -> " + ", ".join(str(s) for s in node.outputs)
    return text
