"""Many processes, one device each, over MPI: ``jax.distributed`` in xla_teach.

When a program outgrows one machine, XLA runs one process per device (or per host) and its
collectives go through a communication library (Gloo or MPI on CPUs, NCCL on GPUs). xla_teach does
the same with MPI, the standard for this since the 1990s, through ``mpi4py`` and an MPI that pip
installs (the ``mpich`` wheel)::

    # train.py
    import xla_teach
    from xla_teach import distributed

    distributed.initialize()                 # this process is device process_index()
    outputs = xla_teach.execute(module, global_args)   # every process passes the global arrays

    $ mpiexec -n 4 python train.py           # four processes on this machine
    $ mpiexec -f hosts -n 8 python train.py  # on the machines listed in the file "hosts"

Each process runs the per-device module on *its* piece of the arguments (the parameters'
shardings say which), and its collectives and ``partition-id`` meet the other processes'
through :class:`MpiRendezvous`: every process deposits its operand with one ``MPI_Allgather``
and combines its group's values, in group order, with the interpreter's collective code -- so
four processes compute the bits four threads or four simulated devices do. The outputs are
gathered the same way, so every process gets the global results, as ``jax.jit`` returns global
arrays.

A host file (MPICH's ``-f`` option) lists one machine per line, ``name:slots``; processes are
placed in its order, so device ``i`` is the ``i``-th process. ``mpiexec`` starts the processes
on the other machines through ``ssh``; xla_teach needs nothing more there than the same Python
environment. A process that fails calls ``MPI_Abort``, which stops the others instead of leaving
them waiting in a collective.
"""

from __future__ import annotations

import sys
import traceback
from collections.abc import Callable
from typing import Any

import numpy as np

from xla_teach.hlo.evaluator.device_context import DeviceContext

_state: dict[str, Any] = {}


class DistributedError(RuntimeError):
    """MPI is missing, or the processes do not match the program."""


def _mpi() -> Any:
    try:
        from mpi4py import MPI
    except ImportError as error:
        raise DistributedError(
            "MPI is not installed: pip install 'xla_teach[mpi]' (mpi4py and the mpich wheel), then start the "
            f"processes with mpiexec -n N python your_program.py ({error})") from None
    return MPI


def initialize() -> None:
    """Join the processes ``mpiexec`` started (like ``jax.distributed.initialize()``): this
    process becomes device :func:`process_index` of :func:`process_count`."""
    if _state:
        return
    comm = _mpi().COMM_WORLD
    _state["comm"] = comm
    _state["device"] = DeviceContext(comm.Get_rank(), MpiRendezvous(comm))
    _abort_on_uncaught_errors(comm)


def _abort_on_uncaught_errors(comm: Any) -> None:
    """An exception that ends this process -- anywhere in the user's program, not only inside a
    collective -- stops every process with ``MPI_Abort`` after printing it: the others would
    otherwise wait for this one in their next collective forever."""
    previous = sys.excepthook

    def hook(kind: type[BaseException], error: BaseException, tb: Any) -> None:
        previous(kind, error, tb)
        sys.stderr.write(f"[xla_teach] process {comm.Get_rank()} failed: stopping all {comm.Get_size()} processes\n")
        sys.stderr.flush()
        comm.Abort(1)

    sys.excepthook = hook


def agree(what: str, fingerprint: str) -> None:
    """Check that every process is about to run the same thing (``fingerprint``: a module's text
    and its arguments' shapes); if not, every process raises the same clear error naming which
    processes differ, instead of meeting in mismatched collectives."""
    if not _state or process_count() <= 1:
        return
    everyone = list(_state["comm"].allgather(fingerprint))
    if len(set(everyone)) > 1:
        groups: dict[str, list[int]] = {}
        for rank, value in enumerate(everyone):
            groups.setdefault(value, []).append(rank)
        raise DistributedError(f"the processes are not running the same {what}: processes "
                               + "; ".join(f"{ranks}" for ranks in groups.values())
                               + " differ (the same program, mesh and argument shapes on every process)")


def is_initialized() -> bool:
    return bool(_state)


def process_index() -> int:
    """This process's device (its MPI rank); 0 when not initialized."""
    return int(_state["comm"].Get_rank()) if _state else 0


def process_count() -> int:
    """How many processes (devices) there are; 1 when not initialized."""
    return int(_state["comm"].Get_size()) if _state else 1


def shutdown() -> None:
    """Forget the processes (MPI itself ends with the process)."""
    _state.clear()


class MpiRendezvous:
    """The rendezvous of :class:`~xla_teach.hlo.evaluator.devices.DeviceContext` over MPI: one
    ``allgather`` per collective, over every process (each then keeps its group's values).
    Every process reaches the collectives of an SPMD program in the same order; the key checks it."""

    def __init__(self, comm: Any) -> None:
        self.comm = comm
        self.devices = int(comm.Get_size())

    def exchange(self, key: tuple[str, int], group: list[int], device: int, value: Any) -> dict[int, Any]:
        everyone = self.comm.allgather((key, device, value))
        keys = {k for k, _, _ in everyone}
        if len(keys) != 1:
            raise DistributedError(f"the processes reached different collectives ({sorted(keys)}): they are not "
                                   "running the same program")
        return {d: v for _, d, v in everyone if d in group}

    def fail(self, error: BaseException) -> None:
        """Stop every process: the others would wait in their next collective forever."""
        traceback.print_exception(error, file=sys.stderr)
        sys.stderr.flush()
        self.comm.Abort(1)


def run_here(run_one: Callable[[DeviceContext], list[np.ndarray]]) -> list[list[np.ndarray]]:
    """Run this process's device (``run_one(device)``), then gather every device's results, so
    that each process holds them all (for putting the global outputs back together)."""
    from xla_teach.hlo.evaluator.device_context import as_device

    if not _state:
        raise DistributedError("distributed.initialize() was not called")
    device: DeviceContext = _state["device"]
    try:
        with as_device(device):
            mine = run_one(device)
    except Exception as error:  # noqa: BLE001 - every process must stop, not just this one
        device.rendezvous.fail(error)
        raise
    return list(_state["comm"].allgather(mine))
