"""MarkForCompilation: find the clusters of ops XLA will compile (``mark_for_compilation_pass.cc``).

The pass only *marks*: every node of a kept cluster gets ``_XlaCluster="cluster_N"``.

Before (``p`` is a ``PyFunc``, which XLA cannot compile)::

    x = Placeholder()
    a = Exp(x)
    b = Tanh(a)
    p = PyFunc(b)
    c = Add(a, p)
    d = Mul(c, c)

After (``--tf_xla_min_cluster_size=2``)::

    a = Exp[_XlaCluster="cluster_0"](x)
    b = Tanh[_XlaCluster="cluster_0"](a)
    p = PyFunc(b)
    c = Add[_XlaCluster="cluster_1"](a, p)
    d = Mul[_XlaCluster="cluster_1"](c, c)

``a`` and ``c`` are both compilable and ``a`` feeds ``c``, yet they are not merged:
the cluster would then run *before* ``p`` (it computes ``a``) and *after* it (it needs
``p`` for ``c``) -- a cycle ``cluster -> p -> cluster``. Three steps, as in TensorFlow:

1. **Candidates**: compilable ops (see the op registry), not vetoed by
   ``_XlaCompile=false``, ``--tf_xla_cluster_exclude_ops``, a string tensor, the
   ``--tf_xla_auto_jit`` level, or -- on the CPU -- a missing ``--tf_xla_cpu_global_jit``.
2. **Edge contraction**: every candidate starts as its own cluster; edges between
   clusters are contracted (producers in topological order, repeated until nothing
   changes) unless the merged cluster would exceed ``--tf_xla_max_cluster_size`` or
   another path between the two clusters exists (then merging would make a cycle;
   TensorFlow asks its ``GraphCycles`` structure the same question).
3. **Keep** a cluster if it has at least ``--tf_xla_min_cluster_size`` ops (``Const``
   and ``Identity`` count 0) or a node asked for it with ``_XlaCompile=true``.

Every node left out gets a one-line reason in :attr:`ClusteringResult.explanations`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from xla_teach.graph.graph import Graph, Node
from xla_teach.graph.op_registry import OPS
from xla_teach.graph.tf_flags import TfXlaFlags

CLUSTER_ATTR = "_XlaCluster"
COMPILE_ATTR = "_XlaCompile"


@dataclass(frozen=True)
class ClusteringOptions:
    auto_jit: int = 2  # effective level: <= 0 off, 1 likely-to-help ops, 2 all compilable ops
    cpu_global_jit: bool = True
    min_cluster_size: int = 4
    max_cluster_size: int = 2**31 - 1
    exclude_ops: frozenset[str] = frozenset()
    device: str = "cpu"

    @staticmethod
    def from_flags(flags: TfXlaFlags, session_level: int = 0, device: str = "cpu") -> ClusteringOptions:
        """``--tf_xla_auto_jit=0`` means "the session's level" (``session_level``), -1 means off."""
        level = flags.tf_xla_auto_jit if flags.tf_xla_auto_jit != 0 else session_level
        return ClusteringOptions(level, flags.tf_xla_cpu_global_jit, flags.tf_xla_min_cluster_size,
                                 flags.tf_xla_max_cluster_size, flags.exclude_ops, device)

    def describe(self) -> str:
        return (f"--tf_xla_auto_jit={self.auto_jit} --tf_xla_cpu_global_jit={str(self.cpu_global_jit).lower()} "
                f"--tf_xla_min_cluster_size={self.min_cluster_size} on {self.device}")


@dataclass
class ClusteringResult:
    clusters: dict[str, list[str]] = field(default_factory=dict)  # name -> member node names
    explanations: dict[str, str] = field(default_factory=dict)  # unclustered node -> why
    options: ClusteringOptions = field(default_factory=ClusteringOptions)

    def report(self) -> str:
        lines = [f"MarkForCompilation ({self.options.describe()}): {len(self.clusters)} cluster(s)"]
        for name, members in self.clusters.items():
            lines.append(f"  {name}: {', '.join(members)}")
        if self.explanations:
            lines.append("not clustered:")
            lines += [f"  {node}: {why}" for node, why in self.explanations.items()]
        return "\n".join(lines)


def _has_string(node: Node) -> bool:
    specs = [t.spec for t in node.inputs] + list(node.outputs)
    return any(s.dtype is not None and s.dtype.kind in "OUS" for s in specs)


class MarkForCompilation:
    """The clustering pass; ``run(graph)`` returns whether any node was marked."""

    name = "mark_for_compilation"

    def __init__(self, options: ClusteringOptions | None = None) -> None:
        self.options = options or ClusteringOptions()
        self.result = ClusteringResult(options=self.options)

    # ---- step 1: candidates -------------------------------------------------------------------
    def why_not_candidate(self, node: Node) -> str:
        """Why ``node`` cannot join a cluster ("" = it can)."""
        opt = self.options
        op = OPS.get(node.op)
        if op is None or not op.compilable:
            return f"{node.op}: {op.not_compilable if op else 'not a registered op'}"
        explicit = node.attrs.get(COMPILE_ATTR)
        if explicit is False:
            return "_XlaCompile=false on the node"
        if node.op in opt.exclude_ops:
            return f"{node.op} is listed in --tf_xla_cluster_exclude_ops"
        if _has_string(node):
            return "reads or produces a string tensor; strings have no XLA element type"
        if explicit is True:
            return ""
        if opt.auto_jit <= 0:
            return f"auto-clustering is off (--tf_xla_auto_jit={opt.auto_jit}) and the node has no _XlaCompile=true"
        if op.auto_jit_level > opt.auto_jit:
            return (f"{node.op} is clustered only at --tf_xla_auto_jit={op.auto_jit_level} (level {opt.auto_jit} "
                    "clusters the ops most likely to gain: elementwise, reductions, shapes)")
        if opt.device == "cpu" and not opt.cpu_global_jit:
            return ("Not using XLA:CPU for cluster because envvar TF_XLA_FLAGS=--tf_xla_cpu_global_jit was not "
                    "set (auto-clustering on the CPU needs it)")
        return ""

    # ---- the pass ------------------------------------------------------------------------------
    def run(self, graph: Graph) -> bool:
        self.result = ClusteringResult(options=self.options)
        order = graph.topological_order()
        for node in order:
            node.attrs.pop(CLUSTER_ATTR, None)
        candidates = []
        for node in order:
            reason = self.why_not_candidate(node)
            if reason:
                self.result.explanations[node.name] = reason
            else:
                candidates.append(node)
        groups = _EdgeContraction(graph, order, candidates, self.options.max_cluster_size).run()
        self._create_clusters(groups, order)
        return bool(self.result.clusters)

    # ---- step 3: keep big enough clusters, name them ---------------------------------------------
    def _create_clusters(self, groups: list[list[Node]], order: list[Node]) -> None:
        position = {id(n): i for i, n in enumerate(order)}
        groups.sort(key=lambda g: min(position[id(n)] for n in g))
        minimum = self.options.min_cluster_size
        kept: list[list[Node]] = []
        for group in groups:
            size = sum(0 if OPS[n.op].free else 1 for n in group)
            explicit = any(n.attrs.get(COMPILE_ATTR) is True for n in group)
            if size >= minimum or explicit:
                kept.append(group)
                continue
            names = ", ".join(n.name for n in group)
            for n in group:
                self.result.explanations[n.name] = (
                    f"its candidate cluster ({names}) has size {size} < --tf_xla_min_cluster_size={minimum} "
                    "(Const and Identity count 0)")
        for i, group in enumerate(kept):
            name = f"cluster_{i}"
            group.sort(key=lambda n: position[id(n)])
            for n in group:
                n.attrs[CLUSTER_ATTR] = name
            self.result.clusters[name] = [n.name for n in group]
        self.result.explanations = {n.name: self.result.explanations[n.name] for n in order
                                    if n.name in self.result.explanations}


class _EdgeContraction:
    """Union-find over candidate nodes, merging along edges while no cycle appears."""

    def __init__(self, graph: Graph, order: list[Node], candidates: list[Node], max_size: int) -> None:
        self.order = order
        self.max_size = max_size
        self.parent: dict[int, int] = {id(n): id(n) for n in candidates}
        self.members: dict[int, list[Node]] = {id(n): [n] for n in candidates}
        self.consumers: dict[int, list[Node]] = {id(n): [] for n in order}
        for node in order:
            for t in dict.fromkeys(t.node for t in node.inputs):
                self.consumers[id(t)].append(node)

    def find(self, key: int) -> int:
        while self.parent[key] != key:
            self.parent[key] = self.parent[self.parent[key]]
            key = self.parent[key]
        return key

    def rep(self, node: Node) -> int:
        """The cluster a node belongs to (a non-candidate is its own singleton)."""
        return self.find(id(node)) if id(node) in self.parent else id(node)

    def successors(self, rep: int, nodes: dict[int, Node]) -> set[int]:
        members = self.members.get(rep) or [nodes[rep]]
        return {self.rep(c) for m in members for c in self.consumers[id(m)]} - {rep}

    def creates_cycle(self, a: int, b: int) -> bool:
        """Is there a path a -> ... -> b through some third cluster or node?"""
        nodes = {id(n): n for n in self.order}
        stack = [s for s in self.successors(a, nodes) if s != b]
        seen = set(stack)
        while stack:
            current = stack.pop()
            for nxt in self.successors(current, nodes):
                if nxt == b:
                    return True
                if nxt not in seen and nxt != a:
                    seen.add(nxt)
                    stack.append(nxt)
        return False

    def run(self) -> list[list[Node]]:
        changed = True
        while changed:
            changed = False
            for node in self.order:
                if id(node) not in self.parent:
                    continue
                for consumer in self.consumers[id(node)]:
                    if id(consumer) not in self.parent:
                        continue
                    a, b = self.find(id(node)), self.find(id(consumer))
                    if a == b or len(self.members[a]) + len(self.members[b]) > self.max_size:
                        continue
                    if self.creates_cycle(a, b):
                        continue
                    self.parent[b] = a
                    self.members[a] += self.members.pop(b)
                    changed = True
        return list(self.members.values())
