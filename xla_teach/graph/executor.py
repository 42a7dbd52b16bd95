"""The graph executor: run a graph op by op (TensorFlow's executor, in a few lines).

For each node, in topological order, the executor looks up the node's kernel and
calls it on the input values:

* ``Placeholder`` -- the fed value (checked against the placeholder's dtype and shape);
* an ordinary op -- its NumPy definition from the op registry, called with
  ``m = numpy`` (``kernels="numpy"``, the default: precompiled library loops, one
  call per op), or the op compiled on its own by XLA for these shapes
  (``kernels="xla"``: one small executable per op and shape, compiled once, like
  TensorFlow's ``--tf_xla_compile_on_demand``); host ops always run in NumPy;
* ``_XlaCompile`` / ``_XlaRun`` -- the compilation cache (:mod:`~xla_teach.graph.xla_ops`);
* a call of a library function (a cluster after EncapsulateSubgraphs, before
  BuildXlaOps) -- the function's graph, op by op.

With a ``profiler`` (e.g. :class:`xla_teach.tools.timeline.Timeline`) every kernel is
one event named after the node, with the op type as its category; an ``_XlaRun``
event also contains the compiled executable's own kernel events.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from xla_teach.graph.graph import Graph, GraphError, GraphFunction, Node, Tensor
from xla_teach.graph.op_registry import OPS, public_attrs
from xla_teach.graph.xla_ops import XlaCompilationCache

KERNEL_MODES = ("numpy", "xla")
WRAPPER_KINDS = frozenset({"run", "_XlaCompile", "_XlaRun", "call"})  # events that contain others


class FeedError(GraphError):
    """A missing, unknown or badly shaped feed."""


def needed_nodes(graph: Graph, fetches: Sequence[Tensor]) -> list[Node]:
    """The nodes ``fetches`` depend on, producers first (TensorFlow prunes the same way)."""
    needed: set[int] = set()
    stack = [t.node for t in fetches]
    while stack:
        node = stack.pop()
        if id(node) not in needed:
            needed.add(id(node))
            stack.extend(t.node for t in node.inputs)
    return [n for n in graph.topological_order() if id(n) in needed]


class GraphExecutor:
    """Runs ``graph``; ``run(fetches, feeds)`` returns the fetched values as NumPy arrays."""

    def __init__(self, graph: Graph, backend: str = "cpu", kernels: str = "numpy",
                 cache: XlaCompilationCache | None = None) -> None:
        if kernels not in KERNEL_MODES:
            raise ValueError(f"kernels must be one of {KERNEL_MODES}, not {kernels!r}")
        self.graph = graph
        self.backend = backend
        self.kernels = kernels
        self.cache = cache or XlaCompilationCache(backend)
        self._one_op_functions: dict[int, GraphFunction] = {}

    def run(self, fetches: Sequence[Tensor | str], feeds: dict[str, Any] | None = None,
            profiler: Any = None) -> list[np.ndarray]:
        targets = [self.graph.tensor(f) for f in fetches]
        feeds = dict(feeds or {})
        unknown = set(feeds) - {n.name for n in self.graph.nodes if n.op == "Placeholder"}
        if unknown:
            raise FeedError(f"feeds for unknown placeholders: {', '.join(sorted(unknown))}")
        values: dict[tuple[int, int], Any] = {}
        for node in needed_nodes(self.graph, targets):
            inputs = [values[(id(t.node), t.index)] for t in node.inputs]
            outputs = self._run_node(node, inputs, feeds, profiler)
            for i, value in enumerate(outputs):
                values[(id(node), i)] = value
        return [values[(id(t.node), t.index)] for t in targets]

    # ---- one node -----------------------------------------------------------------------------
    def _run_node(self, node: Node, inputs: list[Any], feeds: dict[str, Any], profiler: Any) -> list[Any]:
        if node.op == "Placeholder":
            return [self._feed(node, feeds)]
        start = time.perf_counter()
        outputs = self._kernel(node, inputs, profiler)
        if profiler is not None:
            nbytes = sum(np.asarray(v).nbytes for v in [*inputs, *outputs] if isinstance(v, np.ndarray))
            kind = "call" if node.op in self.graph.functions else node.op
            profiler.record(node.name, kind, start, time.perf_counter(), nbytes)
        return outputs

    def _kernel(self, node: Node, inputs: list[Any], profiler: Any) -> list[Any]:
        if node.op == "_XlaCompile":
            key = self.cache.compile(self.graph.functions[node.attrs["function"]], inputs)
            return [np.asarray(key), np.asarray(True)]
        if node.op == "_XlaRun":
            return self.cache.run(str(inputs[-1]), inputs[:-1], profiler)
        if node.op in self.graph.functions:
            return self._call(self.graph.functions[node.op], inputs, profiler)
        op = OPS.get(node.op)
        if op is None:
            raise GraphError(f"{node.name}: no kernel for op type {node.op!r}")
        attrs = public_attrs(node.attrs)
        if op.compute is None:
            result = op.host(*inputs, **attrs)  # type: ignore[misc]
        elif self.kernels == "xla":
            return self._run_one_op_executable(node, inputs, profiler)
        else:
            with np.errstate(all="ignore"):
                result = op.compute(np, *inputs, **attrs)
        results = result if isinstance(result, tuple) else (result,)
        return [np.asarray(r) for r in results]

    def _feed(self, node: Node, feeds: dict[str, Any]) -> np.ndarray:
        if node.name not in feeds:
            raise FeedError(f"You must feed a value for placeholder tensor '{node.name}' with dtype "
                            f"{node.outputs[0]}")
        value = np.asarray(feeds[node.name])
        spec = node.outputs[0]
        if spec.dtype is not None and value.dtype != spec.dtype:
            raise FeedError(f"feed for '{node.name}' has dtype {value.dtype}, the placeholder wants {spec.dtype}")
        if spec.shape is not None and (len(spec.shape) != value.ndim or any(
                d is not None and d != v for d, v in zip(spec.shape, value.shape, strict=True))):
            raise FeedError(f"feed for '{node.name}' has shape {value.shape}, the placeholder wants {spec}")
        return value

    def _call(self, function: GraphFunction, inputs: list[Any], profiler: Any) -> list[Any]:
        inner = GraphExecutor(function.graph, self.backend, self.kernels, self.cache)
        values: dict[tuple[int, int], Any] = {}
        for node in function.graph.topological_order():
            if node.op == "_Arg":
                values[(id(node), 0)] = inputs[node.attrs["index"]]
            elif node.op != "_Retval":
                args = [values[(id(t.node), t.index)] for t in node.inputs]
                for i, v in enumerate(inner._run_node(node, args, {}, profiler)):
                    values[(id(node), i)] = v
        return [values[(id(r.inputs[0].node), r.inputs[0].index)] for r in function.retvals]

    def _run_one_op_executable(self, node: Node, inputs: list[Any], profiler: Any) -> list[Any]:
        """``kernels="xla"``: the node's op alone as a function, compiled once per node and shapes."""
        function = self._one_op_functions.get(id(node))
        if function is None:
            function = _one_op_function(node, f"{node.op}_{len(self._one_op_functions)}")
            self._one_op_functions[id(node)] = function
        compile_key = self.cache.compile(function, inputs)
        return self.cache.run(compile_key, inputs, profiler=None)


def _one_op_function(node: Node, name: str) -> GraphFunction:
    body = Graph(name)
    args = [body.add_node("_Arg", [], {"index": i}, name=f"arg{i}", outputs=[t.spec]).output(0)
            for i, t in enumerate(node.inputs)]
    op = body.add_node(node.op, args, public_attrs(node.attrs), name=node.op, outputs=node.outputs)
    for i in range(len(node.outputs)):
        body.add_node("_Retval", [op.output(i)], {"index": i}, name=f"retval{i}", outputs=[])
    return GraphFunction(name, body)


def kernel_launches(timeline: Any, track: str | None = None) -> int:
    """Kernels a traced run launched: eager op kernels plus compiled XLA kernels
    (the ``_XlaCompile``/``_XlaRun`` wrapper events and run spans are not counted)."""
    return sum(1 for e in timeline.events if e.kind not in WRAPPER_KINDS and (track is None or e.track == track))
