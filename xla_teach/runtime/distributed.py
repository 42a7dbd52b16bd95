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
shardings say which), and its collectives meet the other processes' through
:class:`MpiRendezvous`, as MPI's own operations (``MPI_Allreduce``, ``MPI_Allgather``...) on a
communicator per replica group, in place on the NumPy buffers. The outputs are then gathered, so
every process gets the global results, as ``jax.jit`` returns global arrays.

A host file (MPICH's ``-f`` option) lists one machine per line, ``name:slots``; processes are
placed in its order, so device ``i`` is the ``i``-th process. ``mpiexec`` starts the processes
on the other machines through ``ssh``; xla_teach needs nothing more there than the same Python
environment. A process that fails calls ``MPI_Abort``, which stops the others instead of leaving
them waiting in a collective.
"""

from __future__ import annotations

import atexit
import sys
import threading
import time
import traceback
import weakref
import zlib
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from xla_teach.hlo.evaluator.device_context import CollectiveCall, DeviceContext

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
    rendezvous = MpiRendezvous(comm)
    _state["device"] = DeviceContext(comm.Get_rank(), rendezvous)
    _abort_on_uncaught_errors(comm)
    atexit.register(_agree_on_the_end, rendezvous)


def _abort_on_uncaught_errors(comm: Any) -> None:
    """An exception that ends this process -- anywhere in the user's program, not only inside a
    collective, in any thread -- stops every process with ``MPI_Abort`` after printing it: the
    others would otherwise wait for this one in their next collective forever."""
    previous, previous_thread = sys.excepthook, threading.excepthook

    def say(error: BaseException | None) -> None:
        # One line first, before the traceback: mpiexec forwards a process's output as it comes,
        # and MPI_Abort may end the forwarding before a long traceback is through.
        what = f" ({type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''})" if error else ""
        sys.stderr.write(f"[xla_teach] process {comm.Get_rank()} failed{what}: stopping all "
                         f"{comm.Get_size()} processes\n")
        sys.stderr.flush()

    def stop_all() -> None:
        sys.stderr.flush()
        time.sleep(0.5)  # let mpiexec forward what was printed before every process is stopped
        comm.Abort(1)

    def hook(kind: type[BaseException], error: BaseException, tb: Any) -> None:
        say(error)
        previous(kind, error, tb)
        stop_all()

    def thread_hook(args: threading.ExceptHookArgs) -> None:
        say(args.exc_value)
        previous_thread(args)
        stop_all()

    sys.excepthook = hook
    threading.excepthook = thread_hook


def _agree_on_the_end(rendezvous: MpiRendezvous) -> None:
    """At exit (``sys.exit`` too), each process tells the others it has ended, in the same
    exchange that precedes every collective: if one process is still in the program -- an extra
    step, a collective the others skipped -- every process learns it at once and all stop,
    instead of one waiting in its collective for the others forever."""
    if not _state:
        return
    try:
        rendezvous.agree_on("the end of the program", None)
    except DistributedError as error:
        sys.stderr.write(f"{error}\n")
        sys.stderr.flush()
        rendezvous.comm.Abort(1)


def agree(what: str, fingerprint: str | Callable[[], str], remember: tuple[Any, str] | None = None,
          hint: str = "the same program, mesh and argument shapes on every process") -> None:
    """Check that every process is about to run the same thing (``fingerprint``: a module's text
    and its arguments' shapes); if not, every process raises the same clear error naming which
    processes differ, instead of meeting in mismatched collectives. ``remember=(obj, detail)``:
    once agreed, the same object with the same detail is not checked again (every process
    remembers the same calls, so they skip together)."""
    if not _state or process_count() <= 1:
        return
    agreed = _state.setdefault("agreed", weakref.WeakKeyDictionary())
    if remember is not None and remember[1] in agreed.get(remember[0], ()):
        return
    _state["device"].rendezvous.agree_on(f"the check that every process runs the same {what}", None)
    everyone = list(_state["comm"].allgather(fingerprint() if callable(fingerprint) else fingerprint))
    if len(set(everyone)) > 1:
        groups: dict[str, list[int]] = {}
        for rank, value in enumerate(everyone):
            groups.setdefault(value, []).append(rank)
        raise DistributedError(f"the processes are not running the same {what}: processes "
                               + "; ".join(f"{ranks}" for ranks in groups.values())
                               + f" differ ({hint})")
    if remember is not None:
        agreed.setdefault(remember[0], set()).add(remember[1])


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


class CollectiveTimeout(DistributedError):
    """A collective waited longer than ``--xla_teach_collective_timeout_seconds``."""


# The reductions MPI computes itself, by the opcode of the collective's to_apply.
_MPI_REDUCERS = {"add": "SUM", "multiply": "PROD", "maximum": "MAX", "minimum": "MIN"}
# Element types MPI reduces (others -- bf16, f16 -- are reduced by the interpreter's code).
_MPI_ARITHMETIC = {np.dtype(t) for t in (np.float32, np.float64, np.int8, np.int16, np.int32, np.int64,
                                         np.uint8, np.uint16, np.uint32, np.uint64)}


class MpiRendezvous:
    """The rendezvous of :class:`~xla_teach.hlo.evaluator.devices.DeviceContext` over MPI.

    Collectives run as MPI's own buffer operations on a communicator per replica group (made once
    per set of groups with ``MPI_Comm_split``), on the NumPy arrays themselves, no pickles:

        all-reduce            MPI_Allreduce (add, multiply, maximum, minimum of MPI's types)
        all-gather            MPI_Allgather
        reduce-scatter        MPI_Reduce_scatter_block
        all-to-all            MPI_Alltoall
        collective-broadcast  MPI_Bcast from the group's first device
        collective-permute    MPI_Isend / MPI_Irecv between the pairs

    MPI picks its own order for a reduction (a tree, not the group's order), so a float sum may
    differ from the simulated devices' in its last bits; every process gets the same bits. A
    reduction MPI cannot do (by a computation, or in bf16) falls back to :meth:`exchange`: one
    ``allgather`` of the values, combined in group order by the interpreter. Every collective is
    posted without blocking and waited for with a deadline (``--xla_teach_collective_timeout_seconds``).

    Each process also publishes where it is -- how many collectives it has started, and whether
    it is waiting in one now -- in a few bytes of memory shared with the processes on its machine
    (an MPI shared-memory window: the others read it without its help, even while it is stuck).
    A process that times out reads them, so its error names the processes that did not arrive
    and where they are (a process on another machine is named without its place)."""

    def __init__(self, comm: Any) -> None:
        self.comm = comm
        self.devices = int(comm.Get_size())
        self._communicators: dict[tuple[tuple[int, ...], ...], Any] = {}
        self._permutes = 0
        self._started = 0  # collectives this process has entered
        MPI = _mpi()  # noqa: N806 - mpi4py's name
        self._machine = comm.Split_type(MPI.COMM_TYPE_SHARED)  # the processes on this machine
        self._window = MPI.Win.Allocate_shared(2 * 8, 8, comm=self._machine)  # [started, waiting] int64
        self._neighbours = {int(r): i for i, r in enumerate(self._machine.allgather(comm.Get_rank()))}
        self._whereabouts = self._place_of(comm.Get_rank())
        self._publish(waiting=False)

    def _place_of(self, rank: int) -> np.ndarray:
        memory, _ = self._window.Shared_query(self._neighbours[rank])
        return np.frombuffer(memory, dtype=np.int64, count=2)

    def _publish(self, waiting: bool) -> None:
        self._whereabouts[:] = (self._started, int(waiting))  # a plain store: the others just read it

    def _enter(self) -> None:
        self._started += 1
        self._publish(waiting=True)

    def _leave(self) -> None:
        self._publish(waiting=False)

    def where_everyone_is(self) -> dict[int, tuple[int, bool]]:
        """(collectives started, waiting in one now) of each process on this machine."""
        out = {}
        for rank in self._neighbours:
            started, waiting = (int(v) for v in self._place_of(rank))
            out[rank] = (started, bool(waiting))
        return out

    def _missing(self, call: CollectiveCall, members: Sequence[int]) -> str:
        """Which of ``members`` have not arrived at ``call``, and where they are."""
        try:
            places = self.where_everyone_is()
        except Exception as error:  # noqa: BLE001 - the timeout's own message matters more
            return f"(could not read where the others are: {error})"
        mine = self._started
        absent = [d for d in members if places.get(d) != (mine, True)]
        if not absent:
            return "every member has arrived: MPI itself is slow or stuck"
        words = []
        for d in absent:
            if d not in places:
                words.append(f"process {d} runs on another machine")
                continue
            started, waiting = places[d]
            if started < mine:
                where = (f"waiting in its collective number {started}" if waiting else
                         f"computing before its collective number {started + 1}, outside any collective")
            elif started == mine:
                where = "already left it"
            else:
                where = f"already at its collective number {started}: it took another path"
            words.append(f"process {d} is {where}")
        return (f"processes {absent} did not arrive at this collective (number {mine} here): " + "; ".join(words))

    def _communicator(self, call: CollectiveCall) -> Any:
        """The communicator of this process's group; every process splits at the same collective
        (they run the same program), so the groups are made together -- once all have arrived
        (a barrier waited for with the timeout: the split itself would wait forever)."""
        groups = call.groups
        if groups not in self._communicators:
            self._wait(call, self.comm.Ibarrier(), everyone=True)
            rank = self.comm.Get_rank()
            color = next(i for i, g in enumerate(groups) if rank in g)
            self._communicators[groups] = self.comm.Split(color, groups[color].index(rank))
        return self._communicators[groups]

    def run_collective(self, call: CollectiveCall) -> list[np.ndarray] | None:
        if call.kind in ("all-reduce", "reduce-scatter") and (
                call.reducer not in _MPI_REDUCERS or any(o.dtype not in _MPI_ARITHMETIC for o in call.operands)):
            return None
        self._enter()
        try:
            self.agree_on(call.describe(), call)
            return self._run_collective(call)
        finally:
            self._leave()

    def agree_on(self, what: str, call: CollectiveCall | None) -> None:
        """Before each collective, every process says which one it is at (a short record, one
        ``MPI_Allgather`` over all processes: every process runs every collective of an SPMD
        program): a process that skipped one, or took another path, would otherwise meet the
        others' next collective and exchange the wrong data in silence. On a difference every
        process raises the same error, naming where each one is."""
        text = what.encode()
        record = np.zeros(_RECORD_BYTES, np.uint8)
        stamp = f"{zlib.crc32(text):08x} ".encode() + text  # equal stamps: the same collective, even if cut short
        record[:min(len(stamp), _RECORD_BYTES)] = np.frombuffer(stamp[:_RECORD_BYTES], np.uint8)
        everyone = np.empty((self.devices, _RECORD_BYTES), np.uint8)
        self._wait(call, self.comm.Iallgather(record, everyone), everyone=True, where=what)
        if (everyone == record).all():
            return
        places: dict[str, list[int]] = {}
        for rank, row in enumerate(everyone):
            place = bytes(row).rstrip(b"\0").decode(errors="replace").partition(" ")[2]
            places.setdefault(place, []).append(rank)
        raise DistributedError(
            "the processes are not at the same collective: "
            + "; ".join(f"processes {ranks} at {place}" for place, ranks in places.items())
            + " (one skipped a collective, ran an extra step or took another path through the program; "
            "they stop here instead of exchanging the wrong data)")

    def _run_collective(self, call: CollectiveCall) -> list[np.ndarray] | None:
        MPI = _mpi()  # noqa: N806 - mpi4py's name
        x = call.operands[0]
        if call.kind == "collective-permute":
            return [self._permute(call, _contiguous(x))]
        comm = self._communicator(call)
        n = comm.Get_size()
        if call.kind == "all-reduce":
            op = getattr(MPI, _MPI_REDUCERS[call.reducer or ""])
            outs = []
            for operand in call.operands:
                send = _contiguous(operand)
                out = np.empty_like(send)
                self._wait(call, comm.Iallreduce(send, out, op=op))
                outs.append(out)
            return outs
        if call.kind == "collective-broadcast":
            out = np.array(x, copy=True, order="C")
            self._wait(call, comm.Ibcast(_bytes(out), root=0))
            return [out]
        front = _contiguous(np.moveaxis(x, call.axis, 0))  # the pieces: blocks along axis 0
        if call.kind == "all-gather":
            out = np.empty((n * front.shape[0], *front.shape[1:]), front.dtype)
            self._wait(call, comm.Iallgather(_bytes(front), _bytes(out)))
        elif call.kind == "reduce-scatter":
            out = np.empty((front.shape[0] // n, *front.shape[1:]), front.dtype)
            op = getattr(MPI, _MPI_REDUCERS[call.reducer or ""])
            self._wait(call, comm.Ireduce_scatter_block(front, out, op=op))
        elif call.kind == "all-to-all":
            out = np.empty_like(front)
            self._wait(call, comm.Ialltoall(_bytes(front), _bytes(out)))
        else:
            return None
        return [np.moveaxis(out, 0, call.axis)]

    def _permute(self, call: CollectiveCall, x: np.ndarray) -> np.ndarray:
        """Send to the pair's target, receive from the pair's source (zeros if none)."""
        tag = self._permutes % 32768  # every process runs the permutes in the same order
        self._permutes += 1
        me = call.device
        requests = [self.comm.Isend(_bytes(x), dest=t, tag=tag) for s, t in call.pairs if s == me]
        sources = [s for s, t in call.pairs if t == me]
        out = np.zeros_like(x)
        if sources:
            requests.append(self.comm.Irecv(_bytes(out), source=sources[0], tag=tag))
        for request in requests:
            self._wait(call, request)
        return out

    def _wait(self, call: CollectiveCall | None, request: Any, everyone: bool = False, where: str = "") -> None:
        """Wait for a posted operation, testing it now and then, until the collective timeout.
        ``everyone``: the operation needs every process, not only the group (the exchange that
        precedes each collective; making the groups' communicators, the first time a set of groups
        is used). ``call`` None: outside any collective, at ``where`` (the end of the program, say)."""
        def timed_out(limit: float) -> CollectiveTimeout:
            me = int(self.comm.Get_rank())
            members = list(range(self.devices)) if everyone or call is None else list(call.group)
            waited_for = "every process" if everyone or call is None else f"devices {members}"
            if call is not None:
                where_text = f"{call.kind} {call.key[0]} (run {call.key[1] + 1})"
            else:
                where_text = where or "an exchange outside any collective"
            missing = self._missing(call, members) if call is not None else ""
            return CollectiveTimeout(
                f"process {me} waited {limit:g} s in {where_text} for {waited_for}: one of them never reached it (a "
                "deadlock: the processes took different paths through the program, or one is stuck); raise "
                f"--xla_teach_collective_timeout_seconds if it is only slow. {missing}")

        wait_with_deadline(request, timed_out)

    def exchange(self, key: tuple[str, int], group: list[int], device: int, value: Any) -> dict[int, Any]:
        self._enter()
        try:
            self.agree_on(f"the collective {key[0]} (run {key[1] + 1}), exchanging values", None)
            everyone = self.comm.allgather((key, device, value))
        finally:
            self._leave()
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


_RECORD_BYTES = 192  # the record each process shows the others before a collective: a checksum and a description


def wait_with_deadline(request: Any, timed_out: Callable[[float], Exception]) -> None:
    """Wait for a posted MPI operation, testing it now and then; after
    ``--xla_teach_collective_timeout_seconds`` (0: forever) raise ``timed_out(limit)``."""
    from xla_teach import flags

    limit = float(flags.get("xla_teach_collective_timeout_seconds"))
    deadline = time.monotonic() + limit
    pause = 0.0
    while not request.Test():
        if limit and time.monotonic() > deadline:
            raise timed_out(limit)
        time.sleep(pause)
        pause = min(2 * pause + 1e-6, 1e-4)  # spin first, then sleep up to 0.1 ms


def _gather_outputs(comm: Any, out: np.ndarray, everyone: np.ndarray) -> None:
    """``MPI_Allgather`` of one output, waited for with the collective timeout (a process that
    never gets here -- stuck, or on another path -- must not leave the others waiting forever)."""
    wait_with_deadline(comm.Iallgather(_bytes(out), _bytes(everyone)), lambda limit: CollectiveTimeout(
        f"process {comm.Get_rank()} waited {limit:g} s to gather the outputs from every process: one of them "
        "never finished the program (raise --xla_teach_collective_timeout_seconds if it is only slow)"))


def run_here(run_one: Callable[[DeviceContext], list[np.ndarray]],
             gather: Sequence[bool] | None = None) -> list[list[np.ndarray]]:
    """Run this process's device (``run_one(device)``), then gather every device's results, so
    that each process holds them all (for putting the global outputs back together) -- with
    ``MPI_Allgather`` into one buffer per output. ``gather[i]`` False: output ``i`` is the same
    on every device (replicated), so this process's own stands for every device's, and nothing
    is sent."""
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
    comm = _state["comm"]
    n = comm.Get_size()
    columns = []
    for i, out in enumerate(mine):
        out = _contiguous(np.asarray(out))
        if gather is not None and not gather[i]:
            columns.append([out] * n)
            continue
        everyone = np.empty((n, *out.shape), out.dtype)
        _gather_outputs(comm, out, everyone)
        columns.append(list(everyone))
    return [[column[d] for column in columns] for d in range(n)]


def allgather_array(x: np.ndarray) -> list[np.ndarray]:
    """Every process's ``x`` (the same shape and dtype on each), in rank order, with one
    ``MPI_Allgather``."""
    if not _state:
        raise DistributedError("distributed.initialize() was not called")
    comm = _state["comm"]
    x = _contiguous(np.asarray(x))
    everyone = np.empty((comm.Get_size(), *x.shape), x.dtype)
    _gather_outputs(comm, x, everyone)
    return list(everyone)


def _bytes(x: np.ndarray) -> np.ndarray:
    """The array's bytes, for the operations that only move data (MPI has no bf16 or f16)."""
    return x.reshape(-1).view(np.uint8)


def _contiguous(x: np.ndarray) -> np.ndarray:
    """``x`` in C order (np.ascontiguousarray would turn a scalar into a 1-element vector)."""
    return x if x.flags.c_contiguous else np.array(x, order="C")
