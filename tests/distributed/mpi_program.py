"""Run by tests/distributed/test_mpi.py under ``mpiexec -n 4``: one device per process.

    mpiexec -n 4 python tests/distributed/mpi_program.py MODE BACKEND OUT.npz

MODE ``collectives``: every process runs its device of the module of every collective and rank 0
saves every device's results; ``global``: XLA's data-parallel module on the global arrays (each
process passes them all, as with jax.jit), rank 0 saves the global outputs; ``fail``: process 2
gets a wrong argument, and the run must stop instead of hanging.
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


def main(mode: str, backend: str, out: str) -> None:
    distributed.initialize()
    rank = distributed.process_index()
    if mode == "global":
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
