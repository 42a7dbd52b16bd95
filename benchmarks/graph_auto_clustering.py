"""The seed's headline, re-told: the CIFAR-10 CNN of TensorFlow's XLA auto-clustering tutorial,
trained op by op and auto-clustered, time per epoch.

    .venv/bin/python benchmarks/graph_auto_clustering.py [--batch 32] [--steps 40]

The model is ``xla_teach.graph.cifar_example`` (4 convolutions, 2 poolings, 2 dense layers,
RMSprop, gradients written as graph ops). The same graph runs in two sessions side by side in
this process: ``--tf_xla_auto_jit=-1`` (every op its own NumPy kernel, as TensorFlow runs it
without XLA) and ``--tf_xla_auto_jit=2 --tf_xla_cpu_global_jit`` (one XLA cluster; the two
host ops run beside it). The two are timed in blocks (eager steps, clustered steps, and again;
`block_medians`): interleaved step by step, each eager step ran right after a compiled one and
came out 20-40 % slower than in a block of its own (its NumPy kernels then start on cold caches
and freshly returned memory), which would flatter auto-clustering. An epoch is 50,000 images
(CIFAR-10's training set) at the median step time. The tutorial
reported about 1.17x on a Titan V GPU for its 25 epochs.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from common import block_medians, header  # noqa: E402

from xla_teach.graph import Session, kernel_launches  # noqa: E402
from xla_teach.graph.cifar_example import PARAMS, STEP_FETCHES, build_cifar_step, feeds  # noqa: E402
from xla_teach.tools.timeline import Timeline  # noqa: E402

EPOCH_IMAGES = 50_000


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--steps", type=int, default=40, help="timed steps of each session (default 40)")
    a = parser.parse_args(argv)
    header(f"CIFAR-10 CNN as a graph, batch {a.batch}: op by op vs auto-clustered (--tf_xla_auto_jit=2)")
    graph = build_cifar_step(a.batch)
    values = feeds(a.batch)
    eager = Session(graph, tf_xla_flags="--tf_xla_auto_jit=-1")
    clustered = Session(graph, tf_xla_flags="--tf_xla_auto_jit=2 --tf_xla_cpu_global_jit")
    start = time.perf_counter()
    clustered.run(STEP_FETCHES, values)
    compile_s = time.perf_counter() - start
    eager.run(STEP_FETCHES, values)
    t_eager, t_xla = block_medians(lambda: eager.run(STEP_FETCHES, values),
                                   lambda: clustered.run(STEP_FETCHES, values), runs=a.steps)
    timeline = Timeline()
    for session, track in ((eager, "eager"), (clustered, "xla")):
        with timeline.on_track(track):
            session.run(STEP_FETCHES, values, profiler=timeline)
    steps_per_epoch = -(-EPOCH_IMAGES // a.batch)
    print(f"graph: {len(graph.nodes)} nodes, {len(PARAMS)} parameters; "
          f"first clustered step (compiles) {compile_s:.2f} s")
    print(f"{'':<22}{'step':>10} {'epoch':>10} {'kernels/step':>13}")
    print(f"{'op by op (eager)':<22}{t_eager * 1e3:8.1f}ms {t_eager * steps_per_epoch:9.1f}s "
          f"{kernel_launches(timeline, 'eager'):13d}")
    print(f"{'auto-clustered (XLA)':<22}{t_xla * 1e3:8.1f}ms {t_xla * steps_per_epoch:9.1f}s "
          f"{kernel_launches(timeline, 'xla'):13d}")
    print(f"speed-up from auto-clustering: {t_eager / t_xla:.2f}x  (the tutorial: ~1.17x on a Titan V)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
