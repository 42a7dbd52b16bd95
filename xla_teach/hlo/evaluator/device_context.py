"""What one simulated device is while the interpreter runs it: its index and the meeting place
(:class:`Rendezvous`) its collectives share with the other devices.

The interpreter's core asks :func:`current_device` which device its thread runs; the runners in
:mod:`~xla_teach.hlo.evaluator.devices` set it with :func:`as_device`. Keeping these here, below
both, lets the runners build evaluators without the core importing them back.
"""

from __future__ import annotations

import threading
import weakref
import zlib
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from xla_teach.hlo.replica_groups import expand_replica_groups

if TYPE_CHECKING:
    from xla_teach.hlo.ir import HloInstruction, HloModule



class Rendezvous:
    """Where the devices' collectives meet. A meeting is keyed by the instruction and how many
    times this device has run it (loops run an instruction again)."""

    def __init__(self, devices: int) -> None:
        from xla_teach import flags

        self.devices = devices
        # a device that never arrives (a deadlocked program) fails the run after this long (None: never)
        self.timeout = float(flags.get("xla_teach_collective_timeout_seconds")) or None
        self._cond = threading.Condition()
        self._deposits: dict[tuple[str, int, int], dict[int, Any]] = {}
        self._collected: dict[tuple[str, int, int], int] = {}  # members that took a meeting's values
        self.failed: BaseException | None = None

    def exchange(self, key: tuple[str, int], group: list[int], device: int, value: Any) -> dict[int, Any]:
        """Deposit ``value``; return every group member's, once all have deposited. ``key`` is
        the collective's name and how many times this device has run it."""
        meeting = (*key, min(group))
        with self._cond:
            self._deposits.setdefault(meeting, {})[device] = value
            self._cond.notify_all()
            arrived = self._cond.wait_for(
                lambda: self.failed is not None or len(self._deposits[meeting]) == len(group), self.timeout)
            if self.failed is not None:
                raise RuntimeError(f"another device failed: {self.failed}") from self.failed
            if not arrived:
                missing = sorted(set(group) - set(self._deposits[meeting]))
                raise RuntimeError(f"devices {missing} never reached this collective in {self.timeout:g} s (a "
                                   "deadlock? raise --xla_teach_collective_timeout_seconds if it is only slow)")
            values = dict(self._deposits[meeting])
            self._collected[meeting] = self._collected.get(meeting, 0) + 1
            if self._collected[meeting] == len(group):  # the last member forgets the meeting
                del self._deposits[meeting], self._collected[meeting]
            return values

    def fail(self, error: BaseException) -> None:
        with self._cond:
            if self.failed is None:
                self.failed = error
            self._cond.notify_all()


@dataclass(frozen=True)
class CollectiveCall:
    """One collective, as a communication library sees it: what to do, among which devices, on
    which arrays. A rendezvous that has such a library (MPI) runs the whole collective with it;
    one that has not (threads) only exchanges values and the interpreter combines them."""

    kind: str  # all-reduce, all-gather, reduce-scatter, all-to-all, collective-broadcast, collective-permute
    key: tuple[str, int]  # the instruction's name and how many times this device has run it
    groups: tuple[tuple[int, ...], ...]  # every group of the collective (each device is in one)
    device: int
    operands: tuple[np.ndarray, ...]
    reducer: str | None = None  # all-reduce, reduce-scatter: the opcode of to_apply (None: not a plain op)
    axis: int = 0  # all-gather, reduce-scatter, all-to-all
    pairs: tuple[tuple[int, int], ...] = ()  # collective-permute: (source, target)
    program: str = ""  # the name of the module it belongs to

    def describe(self) -> str:
        """What every process must be doing at the same moment: this collective of this program,
        this run of it, on these shapes."""
        shapes = ", ".join(f"{o.dtype}{list(o.shape)}" for o in self.operands)
        name = self.key[0] if self.key[0].startswith(self.kind) else f"{self.kind} {self.key[0]}"
        return f"{name} of {self.program or 'a program'} (run {self.key[1] + 1}) on {shapes}"

    @property
    def group(self) -> tuple[int, ...]:
        return next(g for g in self.groups if self.device in g)


_PROGRAM_NAMES: weakref.WeakKeyDictionary[HloModule, str] = weakref.WeakKeyDictionary()


def program_name(module: HloModule) -> str:
    """The module's name and a checksum of its text (``jit_f #1a2b3c4d``): two programs JAX would
    both call ``jit_<lambda>`` are told apart. Worked out once per module."""
    name = _PROGRAM_NAMES.get(module)
    if name is None:
        name = _PROGRAM_NAMES[module] = f"{module.name} #{zlib.crc32(module.to_text().encode()):08x}"
    return name


@dataclass
class DeviceContext:
    """One simulated device: its index and the rendezvous it shares with the others."""

    index: int
    # a Rendezvous, or distributed.MpiRendezvous: exchange(key, group, device, value), fail(error), and
    # run_collective(call) -> the result, or None when the collective is left to the interpreter
    rendezvous: Any
    _runs: dict[int, int] = field(default_factory=dict)

    @property
    def count(self) -> int:
        return self.rendezvous.devices

    def group_of(self, instr: HloInstruction) -> list[int]:
        for group in expand_replica_groups(str(instr.attrs.get("replica_groups") or "{}"), self.count):
            if self.index in group:
                return group
        raise RuntimeError(f"{instr.name}: device {self.index} is in none of its replica_groups")

    def groups_of(self, instr: HloInstruction) -> tuple[tuple[int, ...], ...]:
        return tuple(tuple(g) for g in expand_replica_groups(str(instr.attrs.get("replica_groups") or "{}"),
                                                             self.count))

    def _key(self, instr: HloInstruction) -> tuple[str, int]:
        run = self._runs.get(instr.unique_id, 0)
        self._runs[instr.unique_id] = run + 1
        return instr.name, run

    def exchange(self, instr: HloInstruction, group: list[int], value: Any) -> dict[int, Any]:
        return self.rendezvous.exchange(self._key(instr), group, self.index, value)

    def run_collective(self, instr: HloInstruction, kind: str, operands: Sequence[np.ndarray], *,
                       groups: tuple[tuple[int, ...], ...] | None = None, reducer: str | None = None,
                       axis: int = 0, pairs: tuple[tuple[int, int], ...] = ()) -> Any | None:
        """Hand the whole collective to the rendezvous's library; None when it has none for this
        one (the caller then exchanges values, and the interpreter combines them)."""
        run = getattr(self.rendezvous, "run_collective", None)
        if run is None:
            return None
        computation = instr.parent
        program = program_name(computation.parent) if computation is not None and computation.parent else ""
        call = CollectiveCall(kind, (instr.name, self._runs.get(instr.unique_id, 0)),
                              groups if groups is not None else self.groups_of(instr), self.index,
                              tuple(np.asarray(o) for o in operands), reducer, axis, pairs, program)
        result = run(call)
        if result is not None:
            self._key(instr)  # this run of the instruction is done
        return result


_current = threading.local()


def current_device() -> DeviceContext | None:
    """The simulated device this thread runs (None outside :func:`run_devices`)."""
    return getattr(_current, "device", None)


@contextmanager
def as_device(device: DeviceContext) -> Iterator[None]:
    """This thread runs ``device`` inside the ``with`` block (what :func:`current_device` returns)."""
    previous = current_device()
    _current.device = device
    try:
        yield
    finally:
        _current.device = previous
