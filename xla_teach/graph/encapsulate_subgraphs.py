"""EncapsulateSubgraphs: turn each cluster into a function called from the graph
(``encapsulate_subgraphs_pass.cc``).

Before (after MarkForCompilation)::

    x = Placeholder()
    a = Exp[_XlaCluster="cluster_0"](x)
    b = Tanh[_XlaCluster="cluster_0"](a)
    p = PyFunc(b)

After::

    x = Placeholder()
    cluster_0 = cluster_0[_XlaCompiledKernel=True, _XlaHasReferenceVars=False, _XlaNumConstantArgs=0,
                          _XlaNumResourceArgs=0](x)
    p = PyFunc(cluster_0)

    function cluster_0 {
      x_0_arg = _Arg[index=0](x)            # one _Arg per tensor flowing in
      a = Exp(x_0_arg)
      b = Tanh(a)
      b_0_retval = _Retval[index=0](b)      # one _Retval per tensor used outside
    }

The call node's op type is the function's name, as in TensorFlow. A tensor becomes a
function output when a node outside the cluster reads it, when it is fetched, or
when nothing reads it at all (a graph output). Old tensor names keep working:
``graph.tensor("b")`` now answers ``cluster_0:0``. TensorFlow also sorts
compile-time-constant arguments first and resource (variable) arguments last and
counts them in ``_XlaNumConstantArgs`` / ``_XlaNumResourceArgs``; xla_teach graphs
have neither, so both are 0.
"""

from __future__ import annotations

from collections.abc import Iterable

from xla_teach.graph.graph import Graph, GraphFunction, Node, Tensor
from xla_teach.graph.mark_for_compilation import CLUSTER_ATTR

# TensorFlow's attributes on the call; ``_XlaHasReferenceVars`` says whether the cluster reads TF1 reference
# variables (xla_teach graphs have none).
CALL_ATTRS = {"_XlaCompiledKernel": True, "_XlaHasReferenceVars": False, "_XlaNumConstantArgs": 0,
              "_XlaNumResourceArgs": 0}


class EncapsulateSubgraphs:
    name = "encapsulate_subgraphs"

    def __init__(self, fetches: Iterable[str] = ()) -> None:
        self.fetches = set(fetches)

    def run(self, graph: Graph) -> bool:
        order = graph.topological_order()
        clusters: dict[str, list[Node]] = {}
        for node in order:
            if node.attrs.get(CLUSTER_ATTR):
                clusters.setdefault(node.attrs[CLUSTER_ATTR], []).append(node)
        for name, members in clusters.items():
            self._encapsulate(graph, name, members)
        return bool(clusters)

    def _encapsulate(self, graph: Graph, name: str, members: list[Node]) -> None:
        inside = {id(n) for n in members}
        inputs: list[Tensor] = list(dict.fromkeys(t for n in members for t in n.inputs if id(t.node) not in inside))
        outputs = [t for n in members for t in (n.output(i) for i in range(len(n.outputs)))
                   if self._is_output(graph, t, inside)]

        body = Graph(name)
        new_of: dict[Tensor, Tensor] = {}
        for i, t in enumerate(inputs):
            arg = body.add_node("_Arg", [], {"index": i, "T": t.dtype}, name=f"{t.node.name}_{t.index}_arg",
                                outputs=[t.spec])
            new_of[t] = arg.output(0)
        for n in members:
            copy = body.add_node(n.op, [new_of[t] for t in n.inputs], dict(n.attrs), name=n.name,
                                 outputs=n.outputs)
            for i in range(len(n.outputs)):
                new_of[n.output(i)] = copy.output(i)
        for i, t in enumerate(outputs):
            body.add_node("_Retval", [new_of[t]], {"index": i, "T": t.dtype},
                          name=f"{t.node.name}_{t.index}_retval", outputs=[])
        graph.functions[name] = GraphFunction(name, body, dict(CALL_ATTRS))

        call = graph.add_node(name, inputs, dict(CALL_ATTRS), name=name, outputs=[t.spec for t in outputs])
        for i, t in enumerate(outputs):
            graph.replace_uses(t, call.output(i))
        for n in reversed(members):
            graph.remove_node(n)

    def _is_output(self, graph: Graph, t: Tensor, inside: set[int]) -> bool:
        readers = [c for c, i in graph.consumers(t.node) if c.inputs[i] == t]
        if t.name in self.fetches or not graph.consumers(t.node):
            return True
        return any(id(r) not in inside for r in readers)
