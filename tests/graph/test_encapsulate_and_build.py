"""EncapsulateSubgraphs and BuildXlaOps: golden graph text after each pass."""

from __future__ import annotations

import numpy as np

from xla_teach.graph import BuildXlaOps, ClusteringOptions, EncapsulateSubgraphs, MarkForCompilation, Session
from xla_teach.graph.executor import GraphExecutor

from .graph_test_utils import mixed_graph

CALL = "_XlaCompiledKernel=True, _XlaHasReferenceVars=False, _XlaNumConstantArgs=0, _XlaNumResourceArgs=0"
FUNCTIONS = f"""
function cluster_0[{CALL}] {{
  x_0_arg = _Arg[T=float32, index=0]()
  a = Exp[_XlaCluster="cluster_0"](x_0_arg)
  b = Tanh[_XlaCluster="cluster_0"](a)
  a_0_retval = _Retval[T=float32, index=0](a)
  b_0_retval = _Retval[T=float32, index=1](b)
}}

function cluster_1[{CALL}] {{
  cluster_0_0_arg = _Arg[T=float32, index=0]()
  p_0_arg = _Arg[T=float32, index=1]()
  c = Add[_XlaCluster="cluster_1"](cluster_0_0_arg, p_0_arg)
  d = Mul[_XlaCluster="cluster_1"](c, c)
  d_0_retval = _Retval[T=float32, index=0](d)
}}"""

GOLDEN_ENCAPSULATED = f"""\
x = Placeholder[dtype=float32, shape=(4, 3)]()
cluster_0 = cluster_0[{CALL}](x)
p = PyFunc[Tout=float32, func=double, shape=(4, 3)](cluster_0:1)
r = Relu(x)
u = Unique(r)
cluster_1 = cluster_1[{CALL}](cluster_0, p)
{FUNCTIONS}"""

GOLDEN_BUILT = f"""\
x = Placeholder[dtype=float32, shape=(4, 3)]()
cluster_0/xla_compile = _XlaCompile[function="cluster_0", must_compile=False, _XlaCluster="cluster_0"](x)
cluster_0/xla_run = _XlaRun[function="cluster_0", _XlaCluster="cluster_0"](x, cluster_0/xla_compile)
p = PyFunc[Tout=float32, func=double, shape=(4, 3)](cluster_0/xla_run:1)
r = Relu(x)
u = Unique(r)
cluster_1/xla_compile = _XlaCompile[function="cluster_1", must_compile=False, _XlaCluster="cluster_1"](cluster_0/xla_run, p)
cluster_1/xla_run = _XlaRun[function="cluster_1", _XlaCluster="cluster_1"](cluster_0/xla_run, p, cluster_1/xla_compile)
{FUNCTIONS}"""


def _marked():  # noqa: ANN202
    g = mixed_graph()
    MarkForCompilation(ClusteringOptions(min_cluster_size=2)).run(g)
    return g


def test_encapsulate_subgraphs_golden() -> None:
    g = _marked()
    assert EncapsulateSubgraphs().run(g)
    assert g.to_text() == GOLDEN_ENCAPSULATED
    assert g.tensor("b").name == "cluster_0:1"  # old names still resolve
    assert g.tensor("d").name == "cluster_1"


def test_build_xla_ops_golden() -> None:
    g = _marked()
    EncapsulateSubgraphs().run(g)
    assert BuildXlaOps().run(g)
    assert g.to_text() == GOLDEN_BUILT
    assert g.tensor("d").name == "cluster_1/xla_run"


def test_passes_report_no_change_without_clusters() -> None:
    g = mixed_graph()
    assert not MarkForCompilation(ClusteringOptions(min_cluster_size=10)).run(g)
    before = g.to_text()
    assert not EncapsulateSubgraphs().run(g)
    assert not BuildXlaOps().run(g)
    assert g.to_text() == before


def test_each_stage_computes_the_same_values() -> None:
    """Marked, encapsulated (functions run op by op) and built (XLA) graphs agree with the original."""
    x = np.random.default_rng(3).uniform(-1, 1, (4, 3)).astype(np.float32)
    expected = Session(mixed_graph()).run(["d", "u"], {"x": x})
    g = _marked()
    stages = []
    for rewrite in (None, EncapsulateSubgraphs(["d", "u"]), BuildXlaOps()):
        if rewrite is not None:
            rewrite.run(g)
        stages.append(GraphExecutor(g).run([g.tensor("d"), g.tensor("u")], {"x": x}))
    for d, u in stages:
        np.testing.assert_allclose(d, expected[0], rtol=1e-5)
        np.testing.assert_array_equal(u, expected[1])


def test_fetched_intermediate_becomes_a_function_output() -> None:
    g = _marked()
    EncapsulateSubgraphs(fetches=["c"]).run(g)
    assert [r.name for r in g.functions["cluster_1"].retvals] == ["c_0_retval", "d_0_retval"]
