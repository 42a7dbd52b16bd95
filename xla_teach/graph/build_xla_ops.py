"""BuildXlaOps: replace each cluster call by an ``_XlaCompile`` / ``_XlaRun`` pair
(``build_xla_ops_pass.cc``).

Before (after EncapsulateSubgraphs)::

    cluster_0 = cluster_0[_XlaCompiledKernel=True, ...](x, w)
    p = PyFunc(cluster_0:1)

After::

    cluster_0/xla_compile = _XlaCompile[function="cluster_0", must_compile=False](x, w)
    cluster_0/xla_run = _XlaRun[function="cluster_0"](x, w, cluster_0/xla_compile)
    p = PyFunc(cluster_0/xla_run:1)

At run time ``_XlaCompile`` looks the cluster up in the compilation cache under the
*shapes and dtypes* of its inputs, compiles it on a miss (through the normal XLA
pipeline) and outputs a compilation key (a string) and ``compilation_successful``;
``_XlaRun`` executes the executable the key names. TensorFlow's lazy mode also keeps
the original call as a fallback behind a Switch/Merge on ``compilation_successful``
(to run uncompiled until a cluster proves hot); xla_teach always compiles on first
sight, so the pair is all there is.
"""

from __future__ import annotations

import numpy as np

from xla_teach.graph.graph import Graph, TensorSpec
from xla_teach.graph.mark_for_compilation import CLUSTER_ATTR

KEY_SPEC = TensorSpec(np.dtype(str), ())
SUCCESS_SPEC = TensorSpec(np.dtype(bool), ())


class BuildXlaOps:
    name = "build_xla_ops"

    def run(self, graph: Graph) -> bool:
        calls = [n for n in graph.topological_order() if n.op in graph.functions
                 and n.attrs.get("_XlaCompiledKernel")]
        for call in calls:
            function = call.op
            compile_node = graph.add_node(
                "_XlaCompile", call.inputs, {"function": function, "must_compile": False, CLUSTER_ATTR: function},
                name=f"{function}/xla_compile", outputs=[KEY_SPEC, SUCCESS_SPEC])
            run_node = graph.add_node(
                "_XlaRun", [*call.inputs, compile_node.output(0)], {"function": function, CLUSTER_ATTR: function},
                name=f"{function}/xla_run", outputs=list(call.outputs))
            for i in range(len(call.outputs)):
                graph.replace_uses(call.output(i), run_node.output(i))
            graph.remove_node(call)
        return bool(calls)
