"""``Session``: run a graph, auto-clustered when ``TF_XLA_FLAGS`` (or ``auto_jit=``) asks.

::

    sess = Session(graph)                                  # reads TF_XLA_FLAGS now
    loss, acc = sess.run(["loss", "accuracy"], {"x": x, "labels": y})

For every distinct set of fetches (as TensorFlow's ``DirectSession`` does) the
session builds an *execution plan* once:

1. prune the graph to what the fetches need;
2. if auto-clustering is on: ``MarkForCompilation`` -> ``EncapsulateSubgraphs`` ->
   ``BuildXlaOps`` (each one a pass over the graph, dumped to
   ``$TF_DUMP_GRAPH_PREFIX`` with ``--tf_xla_clustering_debug``);
3. run the plan with the op-by-op :class:`~xla_teach.graph.executor.GraphExecutor`.

Clusters compile at their first launch (``sess.cache`` keeps executables per input
shape; ``sess.cache.summary()`` shows launches and recompilations).
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from xla_teach.backends.backend_info import backend_info
from xla_teach.graph.build_xla_ops import BuildXlaOps
from xla_teach.graph.encapsulate_subgraphs import EncapsulateSubgraphs
from xla_teach.graph.executor import FeedError, GraphExecutor, needed_nodes
from xla_teach.graph.graph import Graph, Tensor
from xla_teach.graph.graph_dump import dump_graph
from xla_teach.graph.mark_for_compilation import ClusteringOptions, ClusteringResult, MarkForCompilation
from xla_teach.graph.tf_flags import DUMP_ENV, TfXlaFlags, parse_tf_xla_flags
from xla_teach.graph.xla_ops import XlaCompilationCache


@dataclass
class ExecutionPlan:
    graph: Graph  # pruned and (maybe) clustered
    clustering: ClusteringResult
    dumped: list[Path] = field(default_factory=list)


def prune(graph: Graph, fetches: Sequence[Tensor]) -> Graph:
    """A copy of ``graph`` holding only the nodes ``fetches`` need."""
    keep = {n.name for n in needed_nodes(graph, fetches)}
    pruned = graph.copy()
    for node in reversed(pruned.topological_order()):
        if node.name not in keep:
            pruned.remove_node(node)
    return pruned


class Session:
    """Runs ``graph``; ``auto_jit`` is the session-level jit level used when
    ``--tf_xla_auto_jit`` is 0 (TensorFlow's ``ConfigProto`` ``global_jit_level``)."""

    def __init__(self, graph: Graph, backend: str = "cpu", auto_jit: int = 0, tf_xla_flags: str | None = None,
                 kernels: str = "numpy", dump_prefix: str | None = None) -> None:
        self.graph = graph
        self.backend = backend
        self.kernels = kernels
        self.flags: TfXlaFlags = parse_tf_xla_flags(tf_xla_flags)
        device = "gpu" if backend_info(backend).device == "gpu" else "cpu"
        self.options = ClusteringOptions.from_flags(self.flags, auto_jit, device)
        self.dump_prefix = dump_prefix if dump_prefix is not None else os.environ.get(DUMP_ENV, "")
        self.cache = XlaCompilationCache(backend)
        self._plans: dict[tuple[str, ...], ExecutionPlan] = {}

    @property
    def auto_clustering(self) -> bool:
        return self.options.auto_jit > 0

    # ---- plans ------------------------------------------------------------------------------
    def plan(self, fetches: Sequence[str | Tensor]) -> ExecutionPlan:
        names = tuple(self.graph.tensor(f).name for f in fetches)
        if names not in self._plans:
            self._plans[names] = self._build_plan(names)
        return self._plans[names]

    def _build_plan(self, fetches: tuple[str, ...]) -> ExecutionPlan:
        graph = prune(self.graph, [self.graph.tensor(f) for f in fetches])
        dumped: list[Path] = []
        self._dump(graph, "before_mark_for_compilation", dumped)
        mark = MarkForCompilation(self.options)
        mark.run(graph)
        self._dump(graph, "mark_for_compilation", dumped)
        self._dump(graph, "mark_for_compilation_annotated", dumped, annotate=True)
        if mark.result.clusters:
            EncapsulateSubgraphs(fetches).run(graph)
            self._dump(graph, "encapsulate_subgraphs_after", dumped)
            BuildXlaOps().run(graph)
            self._dump(graph, "build_xla_ops", dumped)
        return ExecutionPlan(graph, mark.result, dumped)

    def _dump(self, graph: Graph, name: str, dumped: list[Path], annotate: bool = False) -> None:
        if not self.flags.tf_xla_clustering_debug:
            return
        if not self.dump_prefix:
            warnings.warn(f"Failed to dump {name} because dump location is not specified through "
                          f"{DUMP_ENV} environment variable.", stacklevel=4)
            return
        dumped += dump_graph(graph, name, self.dump_prefix, annotate)

    # ---- running ----------------------------------------------------------------------------
    def run(self, fetches: str | Tensor | Sequence[str | Tensor], feed_dict: dict[str, Any] | None = None,
            profiler: Any = None) -> Any:
        """Fetch one tensor (returns an array) or a list of tensors (returns a list)."""
        single = isinstance(fetches, (str, Tensor))
        fetch_list = [fetches] if single else list(fetches)  # type: ignore[list-item]
        plan = self.plan(fetch_list)  # type: ignore[arg-type]
        executor = GraphExecutor(plan.graph, self.backend, self.kernels, self.cache)
        targets = [plan.graph.tensor(self.graph.tensor(f).name) for f in fetch_list]  # type: ignore[arg-type]
        feeds = {(k.node.name if isinstance(k, Tensor) else k): v for k, v in (feed_dict or {}).items()}
        unknown = set(feeds) - {n.name for n in self.graph.nodes if n.op == "Placeholder"}
        if unknown:
            raise FeedError(f"feeds for unknown placeholders: {', '.join(sorted(unknown))}")
        placeholders = {n.name for n in plan.graph.nodes if n.op == "Placeholder"}
        feeds = {k: v for k, v in feeds.items() if k in placeholders}  # feeds the fetches do not need
        if profiler is not None and hasattr(profiler, "run"):
            with profiler.run("step"):
                values = executor.run(targets, feeds, profiler)
        else:
            values = executor.run(targets, feeds, profiler)
        values = [np.asarray(v) for v in values]
        return values[0] if single else values


def compare_eager_and_clustered(graph: Graph, fetches: Sequence[str], feeds: dict[str, Any], steps: int = 3,
                                auto_jit: int = 2, backend: str = "cpu") -> tuple[Any, list[Any], list[Any]]:
    """Run ``steps`` times eagerly and auto-clustered into one Chrome-trace timeline
    (tracks ``eager`` and ``auto_jit=N``); returns (timeline, eager values, clustered values)."""
    from xla_teach.tools.timeline import Timeline

    timeline = Timeline()
    eager = Session(graph, backend, tf_xla_flags="--tf_xla_auto_jit=-1")
    clustered = Session(graph, backend, tf_xla_flags=f"--tf_xla_auto_jit={auto_jit} --tf_xla_cpu_global_jit")
    eager_values: list[Any] = []
    clustered_values: list[Any] = []
    for session, track, out in ((eager, "eager", eager_values), (clustered, f"auto_jit={auto_jit}", clustered_values)):
        session.run(list(fetches), feeds)  # warm up: compile clusters outside the trace
        with timeline.on_track(track):
            for _ in range(steps):
                out[:] = session.run(list(fetches), feeds, profiler=timeline)
    return timeline, eager_values, clustered_values
