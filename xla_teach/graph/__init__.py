"""Graphs of named ops, run op by op or auto-clustered for XLA (TensorFlow's ``tf_xla_auto_jit``).

The second way into XLA, TensorFlow's: instead of ``jit``-ing a function,
the framework itself finds the subgraphs XLA can compile and runs the rest op by
op. One idea per module, in the order a graph flows through them:

* :mod:`~xla_teach.graph.graph` -- ``Graph``, ``Node``, ``Tensor``, ``GraphFunction``;
* :mod:`~xla_teach.graph.ops` -- build graphs with NumPy's names (``gops.matmul``);
* :mod:`~xla_teach.graph.op_registry` -- what each op computes; which ops XLA cannot compile;
* :mod:`~xla_teach.graph.nn_kernels` -- convolutions and poolings (and their gradients), eager and XLA;
* :mod:`~xla_teach.graph.tf_flags` -- ``TF_XLA_FLAGS`` (``--tf_xla_auto_jit=2`` ...);
* :mod:`~xla_teach.graph.mark_for_compilation` -- pass 1: choose clusters;
* :mod:`~xla_teach.graph.encapsulate_subgraphs` -- pass 2: clusters become functions;
* :mod:`~xla_teach.graph.build_xla_ops` -- pass 3: calls become ``_XlaCompile``/``_XlaRun``;
* :mod:`~xla_teach.graph.xla_ops` -- lowering a cluster to HLO; the per-shape compilation cache;
* :mod:`~xla_teach.graph.executor` -- the op-by-op executor (one kernel + one timeline event per op);
* :mod:`~xla_teach.graph.session` -- ``Session``: prune, cluster, run;
* :mod:`~xla_teach.graph.graph_dump` -- GraphDef text and Graphviz with clusters as boxes;
* :mod:`~xla_teach.graph.mnist_example` -- an MNIST-style training step as a graph;
* :mod:`~xla_teach.graph.cifar_example` -- the auto-clustering tutorial's CIFAR-10 CNN step as a graph.
"""

from xla_teach.graph import ops  # noqa: F401
from xla_teach.graph.build_xla_ops import BuildXlaOps  # noqa: F401
from xla_teach.graph.encapsulate_subgraphs import EncapsulateSubgraphs  # noqa: F401
from xla_teach.graph.executor import FeedError, GraphExecutor, kernel_launches  # noqa: F401
from xla_teach.graph.graph import Graph, GraphError, GraphFunction, Node, Tensor, TensorSpec  # noqa: F401
from xla_teach.graph.graph_dump import dump_graph, graph_to_dot, graph_to_pbtxt  # noqa: F401
from xla_teach.graph.mark_for_compilation import (  # noqa: F401
    ClusteringOptions,
    ClusteringResult,
    MarkForCompilation,
)
from xla_teach.graph.ops import function_to_graph  # noqa: F401
from xla_teach.graph.session import Session, compare_eager_and_clustered  # noqa: F401
from xla_teach.graph.tf_flags import TfXlaFlags, parse_tf_xla_flags  # noqa: F401
from xla_teach.graph.xla_ops import XlaCompilationCache, lower_function  # noqa: F401
