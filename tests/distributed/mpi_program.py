"""Run by tests/distributed/test_mpi.py under ``mpiexec -n 4``: one device per process.

    mpiexec -n 4 python tests/distributed/mpi_program.py MODE BACKEND OUT.npz

MODE ``collectives``: every process runs its device of the module of every collective and rank 0
saves every device's results; ``global``: XLA's data-parallel module on the global arrays (each
process passes them all, as with jax.jit), rank 0 saves the global outputs; ``train``: five
data-parallel steps of an MLP (``jit`` with the batch split over the processes), rank 0 saves the
losses; ``fail``: process 2 gets a wrong argument, and the run must stop instead of hanging;
``raise``: process 1 raises before any collective (a trace-time error), and every process must
stop; ``mismatch``: process 3 passes global arrays of another shape, and every process must refuse.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parents[2]))

from tests.hlo.test_multi_device_interpreter import COLLECTIVES  # noqa: E402
from xla_teach import distributed  # noqa: E402
from xla_teach.api import compile_module, execute  # noqa: E402

DATA = Path(__file__).parents[1] / "data" / "spmd"


def train_losses(steps: int = 5) -> list[float]:
    """Five steps of a data-parallel MLP: the batch split over every device, the weights whole
    (one device when not under mpiexec)."""
    import xla_teach
    import xla_teach.nn as nn
    from xla_teach.sharding import NamedSharding, P

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


def main(mode: str, backend: str, out: str) -> None:
    distributed.initialize()
    rank = distributed.process_index()
    if mode == "train":
        losses = train_losses()
        if rank == 0:
            np.savez(out, losses=np.array(losses))
        return
    if mode == "raise" and rank == 1:
        raise RuntimeError("process 1 fails before any collective")
    if mode == "mismatch":
        data = np.load(DATA / "data_parallel.npz")
        x = data["global_arg0"] if rank != 3 else data["global_arg0"][:8]
        execute((DATA / "data_parallel.txt").read_text(), [x, data["global_arg1"]], backend=backend)
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
