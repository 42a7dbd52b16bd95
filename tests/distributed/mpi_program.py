"""Run by tests/distributed/test_mpi.py under ``mpiexec -n 4``: one device per process.

    mpiexec -n 4 python tests/distributed/mpi_program.py MODE BACKEND OUT.npz

MODE ``collectives``: every process runs its device of the module of every collective and rank 0
saves every device's results; ``global``: XLA's data-parallel module on the global arrays (each
process passes them all, as with jax.jit), rank 0 saves the global outputs; ``train``: five
data-parallel steps of an MLP (``jit`` with the batch split over the processes), rank 0 saves the
losses; ``fail``: process 2 gets a wrong argument, and the run must stop instead of hanging;
``raise``: process 1 raises before any collective (a trace-time error), and every process must
stop; ``mismatch``: process 3 passes global arrays of another shape, and every process must refuse;
``other-data``: process 3 passes other values of the same shape, and every process must refuse;
``local``: the training fed by each process's own rows, the weights kept on the devices, and a
result split over the processes gathered with ``process_allgather``;
``engine``: collectives MPI runs itself and ones it leaves to the interpreter, rank 0 saves the
results and which ones fell back; ``hang``: process 3 never reaches a collective, and the others
must stop every process after the collective timeout, naming process 3 (BACKEND ``cpu-twice``:
after one run together).

The faults of :func:`fault_run` (MODE ``skip``, ``extra``, ``exit``, ``trace``, ``mesh``; any number of
processes) each leave process 1 doing something the others do not; every process must stop in
seconds, each writing the error it raised to ``OUT.<rank>.err``.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).parents[2]))

from tests.hlo.test_multi_device_interpreter import COLLECTIVES  # noqa: E402
from xla_teach import distributed  # noqa: E402
from xla_teach.api import compile_module, execute  # noqa: E402

DATA = Path(__file__).parents[1] / "data" / "spmd"


def _mlp_problem() -> tuple[list[np.ndarray], np.ndarray, np.ndarray, Callable[..., Any]]:
    """The weights, the 64-row batch and the SGD step of a small MLP classifier."""
    import xla_teach
    import xla_teach.nn as nn

    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 16)).astype(np.float32)
    y = np.eye(4, dtype=np.float32)[rng.integers(0, 4, 64)]
    w1 = (rng.standard_normal((16, 32)) * 0.3).astype(np.float32)
    w2 = (rng.standard_normal((32, 4)) * 0.3).astype(np.float32)

    def loss(w1, w2, x, y):  # type: ignore[no-untyped-def]
        return -(nn.log_softmax(nn.relu(x @ w1) @ w2) * y).sum() / x.shape[0]

    def step(w1, w2, x, y):  # type: ignore[no-untyped-def]
        value, (g1, g2) = xla_teach.value_and_grad(loss, argnums=(0, 1))(w1, w2, x, y)
        return value, w1 - 0.5 * g1, w2 - 0.5 * g2

    return [w1, w2], x, y, step


def train_losses(steps: int = 5) -> list[float]:
    """Five steps of a data-parallel MLP: the batch split over every device, the weights whole
    (one device when not under mpiexec)."""
    import xla_teach
    from xla_teach.sharding import NamedSharding, P

    (w1, w2), x, y, step = _mlp_problem()
    shardings = None
    if len(xla_teach.devices()) > 1:
        mesh = xla_teach.make_mesh((len(xla_teach.devices()),), ("batch",))
        batch, whole = NamedSharding(mesh, P("batch")), NamedSharding(mesh, P())
        shardings = (whole, whole, batch, batch)
    train = xla_teach.jit(step, in_shardings=shardings)
    losses = []
    for _ in range(steps):
        value, w1, w2 = train(w1, w2, x, y)
        losses.append(float(value))
    return losses


def local_data_run(steps: int = 5) -> tuple[list[float], np.ndarray, str]:
    """The same training, but each process feeds only its own rows of the batch
    (``make_array_from_process_local_data``) and the weights stay on the devices between steps
    (``device_put``; sharded in, sharded out). Then a result split over the processes: reading it
    whole refuses (its message returned), ``process_allgather`` gives the whole."""
    import xla_teach
    from xla_teach.multihost_utils import process_allgather
    from xla_teach.sharding import NamedSharding, P

    weights, x, y, step = _mlp_problem()
    n, rank = len(xla_teach.devices()), distributed.process_index()
    mesh = xla_teach.make_mesh((n,), ("batch",))
    batch, whole = NamedSharding(mesh, P("batch")), NamedSharding(mesh, P())
    mine = slice(rank * 64 // n, (rank + 1) * 64 // n)
    xs = xla_teach.make_array_from_process_local_data(batch, x[mine])
    ys = xla_teach.make_array_from_process_local_data(batch, y[mine])
    ws = xla_teach.device_put(tuple(weights), whole)
    train = xla_teach.jit(step)
    losses = []
    for _ in range(steps):
        value, *ws = train(*ws, xs, ys)
        losses.append(float(value))
    doubled = xla_teach.jit(lambda v: 2 * v)(xs)
    message = ""
    try:
        np.asarray(doubled)
    except ValueError as error:
        message = str(error)
    return losses, process_allgather(doubled), message


# Collectives along dimension 1, in bf16 (moved as bytes; reduced by the interpreter's code: MPI
# has no bf16), by maximum, variadic, by a computation MPI cannot run, and a broadcast.
ENGINE = """HloModule engine, num_partitions=4

add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = f32[] add(a, b)
}

max {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = f32[] maximum(a, b)
}

add_bf16 {
  a = bf16[] parameter(0)
  b = bf16[] parameter(1)
  ROOT c = bf16[] add(a, b)
}

add_twice {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  s = f32[] add(a, b)
  ROOT c = f32[] add(s, b)
}

ENTRY main {
  x = f32[4,4] parameter(0)
  h = bf16[4,4] convert(x)
  gathered1 = f32[4,8] all-gather(x), replica_groups={{0,2},{1,3}}, dimensions={1}
  scattered1 = f32[4,1] reduce-scatter(x), replica_groups={{0,1,2,3}}, dimensions={1}, to_apply=add
  exchanged1 = f32[4,4] all-to-all(x), replica_groups={{0,1,2,3}}, dimensions={1}
  biggest = f32[4,4] all-reduce(x), replica_groups={{0,1,2,3}}, to_apply=max
  both = (f32[4,4], f32[4,4]) all-reduce(x, x), replica_groups={{0,3},{1,2}}, to_apply=add
  both0 = f32[4,4] get-tuple-element(both), index=0
  gathered_bf16 = bf16[8,4] all-gather(h), replica_groups={{0,1},{2,3}}, dimensions={0}
  summed_bf16 = bf16[4,4] all-reduce(h), replica_groups={{0,1},{2,3}}, to_apply=add_bf16
  odd = f32[4,4] all-reduce(x), replica_groups={{0,1,2,3}}, to_apply=add_twice
  sent = f32[4,4] collective-broadcast(x), replica_groups={{2,3},{0,1}}
  ROOT t = (f32[4,8], f32[4,1], f32[4,4], f32[4,4], f32[4,4], bf16[8,4], bf16[4,4], f32[4,4], f32[4,4]) tuple(gathered1, scattered1, exchanged1, biggest, both0, gathered_bf16, summed_bf16, odd, sent)
}
"""


FAULTS = ("skip", "extra", "exit", "trace", "mesh")


def fault_run(mode: str, out: str) -> None:
    """Two data-parallel programs (each ends in an all-reduce over the processes), each run once
    by every process; then process 1:
    ``skip``, skips the first program's next call; ``extra``, runs one step more than the others;
    ``exit``, calls sys.exit(3) where the others compute; ``trace``, fails while tracing (a shape
    error only it makes); ``mesh``, splits the batch over a mesh of another shape."""
    import xla_teach
    from xla_teach.sharding import NamedSharding, P

    rank, n = distributed.process_index(), distributed.process_count()
    mesh = xla_teach.make_mesh((n,), ("batch",))
    batch = NamedSharding(mesh, P("batch"))
    if mode == "mesh" and rank == 1:  # the same devices, as a 2-D mesh with the batch split the other way
        batch = NamedSharding(xla_teach.make_mesh((1, n), ("rows", "batch")), P("rows"))
    x = np.arange(8 * n, dtype=np.float32).reshape(4 * n, 2)
    total = xla_teach.jit(lambda v: v.sum(), in_shardings=batch)
    doubled = xla_teach.jit(lambda v: (2 * v).sum(), in_shardings=batch)
    try:
        if mode == "exit" and rank == 1:
            sys.exit(3)
        if mode == "trace" and rank == 1:
            x = np.ones((4 * n, 3), np.float32)
            total = xla_teach.jit(lambda v: (v @ np.ones((2, 2), np.float32)).sum(), in_shardings=batch)
        if mode != "trace":  # each program once on every process: what they run is checked and agreed
            float(total(x))
            float(doubled(x))
        if not (mode == "skip" and rank == 1):
            float(total(x))
        float(doubled(x))
        for _ in range(3 if mode == "extra" and rank == 1 else 2):
            float(total(x))
    except Exception as error:  # each process keeps its own message: tracebacks interleave on stderr
        Path(f"{out}.{rank}.err").write_text(f"{type(error).__name__}: {error}")
        raise


def engine_input(rank: int) -> np.ndarray:
    return (np.arange(16, dtype=np.float32).reshape(4, 4) * (rank + 1) - 3 * rank) / 4


def main(mode: str, backend: str, out: str) -> None:
    distributed.initialize()
    rank = distributed.process_index()
    if mode in FAULTS:
        fault_run(mode, out)
        return
    if mode == "engine":  # count the collectives that fell back to exchanging values
        from xla_teach.runtime.distributed import MpiRendezvous

        exchanged: list[str] = []
        exchange = MpiRendezvous.exchange
        MpiRendezvous.exchange = lambda self, key, *a: exchanged.append(key[0]) or exchange(self, key, *a)
        executable = compile_module(ENGINE, backend)
        results = distributed.run_here(lambda device: executable.execute([engine_input(rank)]))
        if rank == 0:
            np.savez(out, exchanged=np.array(sorted(exchanged)),
                     **{f"dev{d}_out{i}": v for d, leaves in enumerate(results) for i, v in enumerate(leaves)})
        return
    if mode == "hang":  # process 3 never reaches the all-reduce: the others must give up and stop all
        import time

        from xla_teach import flags

        with flags.override(xla_teach_collective_timeout_seconds=3):
            executable = compile_module(COLLECTIVES, backend.removesuffix("-twice"))
            if backend.endswith("-twice"):  # one run together first: the groups' communicators exist
                distributed.run_here(lambda device: executable.execute([np.zeros((4, 2), np.float32)]))
            if rank == 3:
                time.sleep(600)
            distributed.run_here(lambda device: executable.execute([np.zeros((4, 2), np.float32)]))
        return
    if mode == "local":
        losses, doubled, message = local_data_run()
        if rank == 0:
            np.savez(out, losses=np.array(losses), doubled=doubled, message=np.array(message))
        return
    if mode == "train":
        losses = train_losses()
        if rank == 0:
            np.savez(out, losses=np.array(losses))
        return
    if mode == "raise" and rank == 1:
        raise RuntimeError("process 1 fails before any collective")
    if mode in ("mismatch", "other-data"):
        data = np.load(DATA / "data_parallel.npz")
        x = data["global_arg0"] if rank != 3 else data["global_arg0"][:8] if mode == "mismatch" else \
            data["global_arg0"] + 1
        try:
            execute((DATA / "data_parallel.txt").read_text(), [x, data["global_arg1"]], backend=backend)
        except Exception as error:  # each process keeps its own message: four tracebacks interleave on stderr
            Path(f"{out}.{rank}.err").write_text(str(error))
            raise
        return
    if mode in ("global", "raise"):
        data = np.load(DATA / "data_parallel.npz")
        got = execute((DATA / "data_parallel.txt").read_text(), [data["global_arg0"], data["global_arg1"]],
                      backend=backend)
        if rank == 0:
            np.savez(out, *got)
        return
    x = np.arange(8, dtype=np.float32).reshape(4, 2) + 100 * rank
    if mode == "fail" and rank == 2:
        x = np.zeros((3, 2), np.float32)
    executable = compile_module(COLLECTIVES, backend)
    results = distributed.run_here(lambda device: executable.execute([x]))
    if rank == 0:
        np.savez(out, **{f"dev{d}_out{i}": v for d, leaves in enumerate(results) for i, v in enumerate(leaves)})


if __name__ == "__main__":
    main(*sys.argv[1:4])
