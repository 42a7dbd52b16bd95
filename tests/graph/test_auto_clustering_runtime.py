"""Auto-clustered runs: agreement with eager runs, the per-shape cache, and the dumps."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from xla_teach import flags
from xla_teach.graph import Graph, Session
from xla_teach.graph import ops as gops

from .graph_test_utils import mixed_graph, random_feeds, random_graphs

AUTO = "--tf_xla_auto_jit=2 --tf_xla_cpu_global_jit --tf_xla_min_cluster_size=2"


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(random_graphs(max_ops=12))
def test_auto_clustered_and_eager_runs_agree(case: tuple[Graph, list[str]]) -> None:
    g, fetches = case
    feeds = random_feeds()
    eager = Session(g, tf_xla_flags="--tf_xla_auto_jit=-1").run(fetches, feeds)
    session = Session(g, tf_xla_flags=AUTO)
    clustered = session.run(fetches, feeds)
    for name, e, c in zip(fetches, eager, clustered, strict=True):
        assert c.dtype == e.dtype and c.shape == e.shape, name
        np.testing.assert_allclose(c, e, rtol=2e-5, atol=1e-6, err_msg=name)
    clusters = session.plan(fetches).clustering.clusters
    assert session.cache.compile_count() == len(clusters)


def _shape_polymorphic_graph() -> Graph:
    g = Graph()
    with g.as_default():
        x = gops.placeholder(np.float32, (None, 3), name="x")
        gops.sum(gops.tanh(gops.exp(gops.negative(x, name="n"), name="e"), name="t"), axis=1, name="s")
    return g


def test_cache_compiles_once_per_shape_and_logs_recompilation(caplog: pytest.LogCaptureFixture) -> None:
    sess = Session(_shape_polymorphic_graph(), tf_xla_flags=AUTO)
    rng = np.random.default_rng(0)
    small, large = rng.random((2, 3), dtype=np.float32), rng.random((5, 3), dtype=np.float32)
    with caplog.at_level(logging.INFO, logger="xla_teach.graph"):
        for x in (small, small, large, small):
            np.testing.assert_allclose(sess.run("s", {"x": x}), np.tanh(np.exp(-x)).sum(1), rtol=1e-5)
    assert [e.signature for e in sess.cache.log] == ["f32[2,3]", "f32[5,3]"]
    assert sess.cache.log[0].reason == "first launch"
    assert sess.cache.log[1].reason.startswith("recompiled_on_launch: new input signature (f32[2,3]) -> (f32[5,3])")
    assert "recompiled_on_launch" in caplog.text
    assert sess.cache.hits == 2
    assert "3 launch(es)" in sess.cache.summary()


def test_clustering_debug_writes_graph_dumps(tmp_path: Path) -> None:
    sess = Session(mixed_graph(), tf_xla_flags=AUTO + " --tf_xla_clustering_debug", dump_prefix=str(tmp_path))
    sess.run("d", {"x": np.ones((4, 3), np.float32)})
    names = sorted(p.name for p in tmp_path.iterdir())
    stages = ["before_mark_for_compilation", "build_xla_ops", "encapsulate_subgraphs_after",
              "mark_for_compilation", "mark_for_compilation_annotated"]
    assert names == sorted(f"{s}.{ext}" for s in stages for ext in ("dot", "pbtxt"))
    marked = (tmp_path / "mark_for_compilation.pbtxt").read_text()
    assert 'key: "_XlaCluster"' in marked and 's: "cluster_0"' in marked
    annotated = (tmp_path / "mark_for_compilation_annotated.pbtxt").read_text()
    assert 'name: "cluster_1/d"' in annotated and 'name: "unclustered/p"' in annotated
    dot = (tmp_path / "mark_for_compilation.dot").read_text()
    assert 'label="cluster_0"' in dot and "fillcolor=" in dot
    # a second session into the same folder never overwrites: names get _1
    Session(mixed_graph(), tf_xla_flags=AUTO + " --tf_xla_clustering_debug",
            dump_prefix=str(tmp_path)).run("d", {"x": np.ones((4, 3), np.float32)})
    assert (tmp_path / "build_xla_ops_1.pbtxt").exists() and (tmp_path / "build_xla_ops_1.dot").exists()


def test_clustering_debug_without_prefix_warns(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TF_DUMP_GRAPH_PREFIX", raising=False)
    sess = Session(mixed_graph(), tf_xla_flags=AUTO + " --tf_xla_clustering_debug")
    with pytest.warns(UserWarning, match="TF_DUMP_GRAPH_PREFIX"):
        sess.plan(["d"])


def test_xla_dumps_hold_one_module_per_cluster(tmp_path: Path) -> None:
    sess = Session(mixed_graph(), tf_xla_flags=AUTO)
    with flags.override(xla_dump_to=str(tmp_path)):
        sess.run("d", {"x": np.ones((4, 3), np.float32)})
    before = sorted(p.name for p in tmp_path.glob("*before_optimizations.txt"))
    tail = "__XlaCompiledKernel_true__XlaHasReferenceVars_false__XlaNumConstantArgs_0__XlaNumResourceArgs_0_.before_optimizations.txt"
    assert before == [f"module_0000.cluster_0{tail}", f"module_0001.cluster_1{tail}"]
    text = (tmp_path / before[0]).read_text()
    assert text.startswith("HloModule cluster_0__XlaCompiledKernel_true")
    assert 'op_name="jit(cluster_0)/a/' in text  # HLO metadata names the graph node


def test_graph_without_compilable_neighbours_runs_entirely_eagerly() -> None:
    sess = Session(mixed_graph(), tf_xla_flags="--tf_xla_auto_jit=2 --tf_xla_cpu_global_jit")
    x = np.ones((4, 3), np.float32)
    np.testing.assert_allclose(sess.run("d", {"x": x}), Session(mixed_graph()).run("d", {"x": x}))
    assert sess.cache.compile_count() == 0  # clusters of 2 < min size 4: nothing compiled
