"""The MNIST comparison: auto_jit=2 launches fewer kernels and computes the same step."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from xla_teach.graph import Session, compare_eager_and_clustered, kernel_launches
from xla_teach.graph.mnist_example import STEP_FETCHES, build_mnist_step, feeds, train


def test_auto_jit_2_launches_fewer_kernels_and_agrees(tmp_path: Path) -> None:
    graph = build_mnist_step(batch=16, hidden=32)
    timeline, eager, clustered = compare_eager_and_clustered(graph, STEP_FETCHES, feeds(16, 32), steps=2)
    eager_launches, xla_launches = kernel_launches(timeline, "eager"), kernel_launches(timeline, "auto_jit=2")
    eager_ops = len([n for n in graph.nodes if n.op != "Placeholder"])
    assert eager_launches == 2 * eager_ops  # one kernel per op per step
    assert xla_launches < eager_launches
    for name, e, c in zip(STEP_FETCHES, eager, clustered, strict=True):
        if name == "logged":  # the PyFunc's call counter: both sessions share its list
            continue
        if e.dtype.kind == "U":
            assert abs(float(e) - float(c)) < 1e-5, name
        else:
            np.testing.assert_allclose(c, e, rtol=1e-4, atol=1e-6, err_msg=name)
    trace = timeline.write_chrome_trace(tmp_path / "mnist.json")
    processes = {e["args"]["name"] for e in json.loads(trace.read_text())["traceEvents"] if e["ph"] == "M"
                 and e["name"] == "process_name"}
    assert processes == {"eager", "auto_jit=2"}


def test_only_host_ops_stay_outside_the_cluster() -> None:
    graph = build_mnist_step(batch=8, hidden=16)
    sess = Session(graph, tf_xla_flags="--tf_xla_auto_jit=2 --tf_xla_cpu_global_jit")
    clustering = sess.plan(STEP_FETCHES).clustering
    assert list(clustering.clusters) == ["cluster_0"]
    left_out = {n for n, why in clustering.explanations.items() if not why.startswith("Placeholder")}
    assert left_out == {"logged", "loss_summary"}


def test_training_reduces_the_loss_under_auto_jit() -> None:
    losses: list[float] = []
    graph = build_mnist_step(batch=32, hidden=32, learning_rate=0.2, losses=losses)
    sess = Session(graph, tf_xla_flags="--tf_xla_auto_jit=2 --tf_xla_cpu_global_jit")
    fetched = train(sess, steps=8, batch=32, hidden=32)
    assert losses == fetched  # the PyFunc saw the same loss values the cluster produced
    assert fetched[-1] < 0.9 * fetched[0]
