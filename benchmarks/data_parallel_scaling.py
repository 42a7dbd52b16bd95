"""Data-parallel scaling: one MLP training step on 1 and 2 devices -- CPU threads in one process,
and MPI processes -- with the bytes each device sends per step.

    .venv/bin/python benchmarks/data_parallel_scaling.py [--steps N] [--batch B]

The step is the MNIST-sized MLP of ``xla_comparison.py`` (784-512-10, batch 2048 by default),
jitted with the batch split over the devices and the weights replicated
(``in_shardings``); the SPMD partitioner makes every device compute its rows and all-reduce the
gradients. Over MPI the script starts itself under ``mpiexec -n P`` (``--worker``); every
process runs the same steps, and rank 0 reports the median step time. "sent" is what one
device sends per step for its all-reduces, with a ring all-reduce's ``2 (g-1)/g`` bytes per byte
reduced. The time per step includes the collectives (MPI's own ``MPI_Allreduce`` on the arrays'
buffers across processes; a rendezvous of threads in one process). ``--width`` and ``--batch``
make the step compute-bound: ``--batch 4096 --width 1024`` is the size docs/performance.md reports.

Each configuration runs twice: with the backend's thread pool (one device already uses every
core for its kernels, so a second device on the same cores only adds communication), and with
one core per device (``--xla_teach_cpu_parallel=false``), which shows what splitting the batch
buys when every device has cores of its own, as on several machines.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parents[1]))


def _problem(batch: int, width: int = 512) -> tuple[list[np.ndarray], object]:
    import xla_teach
    import xla_teach.nn as nn

    rng = np.random.default_rng(0)
    args = [(rng.standard_normal((784, width)) * 0.05).astype(np.float32),
            (rng.standard_normal((width, 10)) * 0.05).astype(np.float32),
            rng.standard_normal((batch, 784)).astype(np.float32),
            np.eye(10, dtype=np.float32)[rng.integers(0, 10, batch)]]

    def loss(w1, w2, x, y):  # type: ignore[no-untyped-def]
        return -(nn.log_softmax(nn.relu(x @ w1) @ w2) * y).sum() / x.shape[0]

    def step(w1, w2, x, y):  # type: ignore[no-untyped-def]
        g1, g2 = xla_teach.grad(loss, argnums=(0, 1))(w1, w2, x, y)
        return w1 - 0.1 * g1, w2 - 0.1 * g2

    return args, step


def _sent_bytes(fn: object, shardings: object, args: list[np.ndarray]) -> int:
    import xla_teach
    from xla_teach.passes.spmd.spmd_partitioner import SpmdPartitioner

    module = xla_teach.jit(fn, in_shardings=shardings).lower(*args).module.clone()  # type: ignore[arg-type]
    SpmdPartitioner().run(module)
    total = 0
    for instr in module.instructions():
        if instr.opcode == "all-reduce":
            group = len(str(instr.attrs["replica_groups"]).split("}")[0].strip("{").split(","))
            total += int(2 * (group - 1) / group * instr.shape.element_count() * instr.shape.element_type.byte_size)
    return total


def measure(devices: int, steps: int, batch: int, width: int = 512) -> tuple[float, int]:
    """Median seconds per step and bytes sent per device per step, on ``devices`` devices (this
    process's CPU threads, or -- under mpiexec -- the processes)."""
    import xla_teach
    from xla_teach.sharding import NamedSharding, P

    args, step = _problem(batch, width)
    shardings = None
    sent = 0
    if devices > 1:
        mesh = xla_teach.make_mesh((devices,), ("batch",))
        whole, rows = NamedSharding(mesh, P()), NamedSharding(mesh, P("batch"))
        shardings = (whole, whole, rows, rows)
        sent = _sent_bytes(step, shardings, args)
    train = xla_teach.jit(step, in_shardings=shardings)
    train(*args)  # compile
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        train(*args)
        times.append(time.perf_counter() - start)
    return statistics.median(times), sent


def worker(steps: int, batch: int, width: int) -> None:
    from xla_teach import distributed

    distributed.initialize()
    seconds, sent = measure(distributed.process_count(), steps, batch, width)
    if distributed.process_index() == 0:
        print(f"RESULT {seconds} {sent}", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--batch", type=int, default=2048)
    parser.add_argument("--width", type=int, default=512, help="hidden units (784-WIDTH-10)")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    a = parser.parse_args()
    if a.worker:
        worker(a.steps, a.batch, a.width)
        return 0
    import os

    from xla_teach import flags

    mpiexec = shutil.which("mpiexec", path=str(Path(sys.executable).parent)) or shutil.which("mpiexec")
    print(f"MLP 784-{a.width}-10 training step, batch {a.batch}, median of {a.steps} steps")
    for parallel in (True, False):
        print("\n" + ("kernels on every core (the thread pool)" if parallel else "one core per device"))
        print(f"{'devices':<28} {'step':>10} {'speed-up':>9} {'sent per device':>16}")
        base = None
        for devices in (1, 2):
            with flags.override(xla_force_host_platform_device_count=devices, xla_teach_cpu_parallel=parallel):
                seconds, sent = measure(devices, a.steps, a.batch, a.width)
            base = base or seconds
            print(f"{f'{devices} CPU thread(s), 1 process':<28} {seconds * 1e3:>8.2f}ms {base / seconds:>8.2f}x "
                  f"{sent / 1024:>13.1f}KiB", flush=True)
        if mpiexec is None:
            print("no mpiexec: pip install -e '.[mpi]' for the MPI rows")
            continue
        env = dict(os.environ, XLA_FLAGS=f"--xla_teach_cpu_parallel={str(parallel).lower()}")
        if not parallel:  # one core per process: OpenBLAS's own threads too
            env["OPENBLAS_NUM_THREADS"] = "1"
        for processes in (1, 2):
            run = subprocess.run([mpiexec, "-n", str(processes), sys.executable, __file__, "--worker", "--steps",
                                  str(a.steps), "--batch", str(a.batch), "--width", str(a.width)],
                                 capture_output=True, text=True, timeout=900, env=env)
            line = next((x for x in run.stdout.splitlines() if x.startswith("RESULT")), None)
            if line is None:
                print(f"{processes} MPI process(es) failed:\n{run.stderr[-2000:]}")
                return 1
            seconds, sent = float(line.split()[1]), int(line.split()[2])
            print(f"{f'{processes} MPI process(es)':<28} {seconds * 1e3:>8.2f}ms {base / seconds:>8.2f}x "
                  f"{sent / 1024:>13.1f}KiB", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
