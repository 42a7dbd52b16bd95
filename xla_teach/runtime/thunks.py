"""Thunks: the steps an executable runs, in schedule order.

XLA's CPU and GPU runtimes execute a *thunk sequence*: "launch this kernel on
these buffers", "call this library", "run this loop". xla_teach has the same:

* :class:`KernelThunk` -- call a compiled kernel with the addresses of the
  buffer slices it reads and writes; large kernels are split along their
  outermost loop and run on several threads;
* :class:`HostCallThunk` -- a ``custom-call`` into a registered Python target;
* :class:`WhileThunk`, :class:`ConditionalThunk`, :class:`CallThunk` -- control
  flow driven from the host, each running nested sequences.

The host-side thunks are shared by the CPU and the GPU runtimes: they see one run's
buffers only through :class:`RunValues` -- read a value, bring it to the host, bind a
result. On the CPU a value is a NumPy array over host memory
(:class:`~xla_teach.runtime.buffers.RunBuffers`); on the GPU a device array, which the
host copies down only to test a loop predicate or pick a branch
(``backends/gpu/executable.py``'s ``DeviceRun``). Only the kernel thunks differ.

Every thunk reports to an optional profiler (name, start, duration, bytes), which
is what the Chrome-trace timeline shows.
"""

from __future__ import annotations

import ctypes
import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np

from xla_teach.hlo.ir import HloInstruction
from xla_teach.hlo.opcodes import CROSS_DEVICE_OPCODES
from xla_teach.hlo.shape import Shape
from xla_teach.passes.scheduling.buffer_assignment import BufferAssignment, BufferSlice
from xla_teach.runtime.buffers import RunBuffers
from xla_teach.runtime.denormals import in_callers_mode
from xla_teach.runtime.native_pool import PartTime, native_pool

KERNEL_SIGNATURE = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64)
_pool: ThreadPoolExecutor | None = None


def thread_pool() -> ThreadPoolExecutor:
    global _pool
    if _pool is None:
        _pool = ThreadPoolExecutor(max_workers=max(os.cpu_count() or 1, 1), thread_name_prefix="xla_teach")
    return _pool


class Profiler(Protocol):
    def record(self, name: str, kind: str, start: float, end: float, nbytes: int) -> None: ...


@runtime_checkable
class PartProfiler(Profiler, Protocol):
    """A profiler that also wants the parts of a split kernel: when and on which thread each ran
    (the thread-pool lanes of a timeline)."""

    def record_parts(self, name: str, parts: list[PartTime]) -> None: ...


class RunValues(Protocol):
    """One run's buffers, as the shared thunks see them. A *value* is whatever the backend's
    sequences take and return: a host array on the CPU, a device array on the GPU."""

    def value(self, slice_: BufferSlice, shape: Shape) -> Any: ...
    def host_array(self, slice_: BufferSlice, shape: Shape) -> np.ndarray: ...
    def to_host(self, value: Any) -> np.ndarray: ...
    def bind_value(self, allocation_index: int, value: Any, shape: Shape, inputs: list[Any]) -> None: ...
    def bind_host(self, allocation_index: int, array: np.ndarray, shape: Shape) -> None: ...
    def store(self, target: Any, value: Any) -> None: ...  # only where a ``while``'s results are assigned


class NestedSequence(Protocol):
    """A nested computation's thunk sequence: values in, the root's values out."""

    def run(self, values: Sequence[Any], profiler: Profiler | None = None) -> list[Any]: ...


class Thunk:
    """Base class; subclasses are dataclasses with ``name``, ``kind`` and optionally ``nbytes``.
    ``buffers`` is the run's :class:`RunValues` (a kernel thunk knows its backend's kind)."""

    def execute(self, buffers: Any, profiler: Profiler | None) -> None:
        if profiler is None:
            self.run(buffers)
            return
        start = time.perf_counter()
        self.run(buffers)
        profiler.record(self.name, self.kind, start, time.perf_counter(), getattr(self, "nbytes", 0))

    def run(self, buffers: Any) -> None:
        raise NotImplementedError

    def describe(self) -> str:
        return f"{getattr(self, 'kind', 'thunk')} {getattr(self, 'name', '?')}"


@dataclass(eq=False)
class KernelThunk(Thunk):
    """Calls ``void kernel(void** buffers, i64 begin, i64 end)`` over ``[0, outer_size)``,
    in ``partitions`` pieces on the thread pool when that pays."""

    name: str
    address: int
    slices: list[BufferSlice]
    outer_size: int
    partitions: int = 1
    nbytes: int = 0
    kind: str = "kernel"
    _fn: Callable = field(init=False, repr=False)
    _args: ctypes.Array = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._fn = KERNEL_SIGNATURE(self.address)
        self._args = (ctypes.c_void_p * max(len(self.slices), 1))()
        self._args_in_use = threading.Lock()

    def run(self, buffers: RunBuffers) -> None:
        # One argument array, made once; a second thread running the same executable at the
        # same time makes its own rather than overwrite it.
        if not self._args_in_use.acquire(blocking=False):
            self._call((ctypes.c_void_p * max(len(self.slices), 1))(), buffers)
            return
        try:
            self._call(self._args, buffers)
        finally:
            self._args_in_use.release()

    def execute(self, buffers: Any, profiler: Profiler | None) -> None:
        if profiler is None or self.partitions <= 1 or self.outer_size < 2 or not isinstance(profiler, PartProfiler):
            super().execute(buffers, profiler)
            return
        args = (ctypes.c_void_p * max(len(self.slices), 1))()
        for i, s in enumerate(self.slices):
            args[i] = buffers.address(s)
        start = time.perf_counter()
        parts = self._split_timed(args)
        profiler.record(self.name, self.kind, start, time.perf_counter(), self.nbytes)
        profiler.record_parts(self.name, parts)

    def _split_timed(self, args: ctypes.Array) -> list[PartTime]:
        """``_split``, noting when and on which thread each part ran."""
        parts = min(self.partitions, self.outer_size)
        pool = native_pool()
        pointer = ctypes.cast(args, ctypes.c_void_p)
        if pool is not None:
            return pool.parallel_for_timed(self.address, pointer, self.outer_size, parts)
        bounds = [self.outer_size * k // parts for k in range(parts + 1)]
        fn = in_callers_mode(self._fn)

        def timed(k: int) -> PartTime:
            begin = time.perf_counter()
            fn(pointer, bounds[k], bounds[k + 1])
            return PartTime(k, threading.get_native_id(), begin, time.perf_counter())

        futures = [thread_pool().submit(timed, k) for k in range(1, parts)]
        first = timed(0)
        return [first, *(f.result() for f in futures)]

    def with_fixed_addresses(self, buffers: RunBuffers) -> Callable[[], None]:
        """The kernel as a call with its address table filled once (for a loop whose buffers
        do not move between iterations: ``runtime/fixed_loop.py``)."""
        args = (ctypes.c_void_p * max(len(self.slices), 1))()
        for i, s in enumerate(self.slices):
            args[i] = buffers.address(s)
        if self.partitions <= 1 or self.outer_size < 2:
            fn, outer = self._fn, self.outer_size
            return lambda: fn(args, 0, outer)
        return lambda: self._split(args)

    def fixed_step(self, buffers: RunBuffers) -> tuple[int, ctypes.Array, int, int]:
        """``(kernel address, buffer table filled once, outer size, parts)`` for a native loop
        (``runtime/native_loop.py``); parts 1 runs it whole on the calling thread."""
        args = (ctypes.c_void_p * max(len(self.slices), 1))()
        for i, s in enumerate(self.slices):
            args[i] = buffers.address(s)
        parts = 1 if self.partitions <= 1 or self.outer_size < 2 else min(self.partitions, self.outer_size)
        return self.address, args, self.outer_size, parts

    def run_table(self, args: ctypes.Array) -> None:
        """Run the kernel on a buffer table already filled (split over threads as decided)."""
        self._split(args)

    def run_table_profiled(self, args: ctypes.Array, profiler: Profiler) -> None:
        """``run_table``, reported to ``profiler`` as ``execute`` reports a run (a split kernel's
        parts too, to a profiler that wants them)."""
        start = time.perf_counter()
        if self.partitions > 1 and self.outer_size >= 2 and isinstance(profiler, PartProfiler):
            parts = self._split_timed(args)
            profiler.record(self.name, self.kind, start, time.perf_counter(), self.nbytes)
            profiler.record_parts(self.name, parts)
            return
        self._split(args)
        profiler.record(self.name, self.kind, start, time.perf_counter(), self.nbytes)

    def _call(self, args: ctypes.Array, buffers: RunBuffers) -> None:
        for i, s in enumerate(self.slices):
            args[i] = buffers.address(s)
        self._split(args)

    def _split(self, args: ctypes.Array) -> None:
        if self.partitions <= 1 or self.outer_size < 2:
            self._fn(args, 0, self.outer_size)
            return
        parts = min(self.partitions, self.outer_size)
        pool = native_pool()
        if pool is not None:  # the parts run on native worker threads (runtime/native_pool.py)
            pool.parallel_for(self.address, ctypes.cast(args, ctypes.c_void_p), self.outer_size, parts)
            return
        bounds = [self.outer_size * k // parts for k in range(parts + 1)]
        pointer = ctypes.cast(args, ctypes.c_void_p)
        fn = in_callers_mode(self._fn)  # the workers flush denormals when this thread does
        futures = [thread_pool().submit(fn, pointer, bounds[k], bounds[k + 1]) for k in range(1, parts)]
        self._fn(pointer, bounds[0], bounds[1])
        for f in futures:
            f.result()

    def describe(self) -> str:
        split = f", {self.partitions} partitions" if self.partitions > 1 else ""
        return f"kernel {self.name}({len(self.slices)} buffers{split})"


@dataclass(eq=False)
class HostCallThunk(Thunk):
    """``custom-call`` to a Python target: operands in, results bound as external buffers.

    The buffers hold array leaves; ``operand_shapes`` and ``result_shape`` give them back
    their tuple structure, so the target sees what the interpreter gives it (a tuple operand
    arrives as a tuple) and may return nested tuples for a nested tuple shape."""

    name: str
    target: str
    function: Callable[..., object]
    operands: list[tuple[BufferSlice, Shape]]  # every operand's array leaves, in order
    results: list[tuple[int, Shape]]  # (allocation index, shape) per result leaf
    operand_shapes: list[Shape]
    result_shape: Shape
    kind: str = "host-call"

    def run(self, buffers: RunValues) -> None:
        leaves = iter([buffers.host_array(s, shape) for s, shape in self.operands])
        out = self.function(*[_nest(leaves, shape) for shape in self.operand_shapes])
        values = self._flatten(out, self.result_shape)
        for value, (alloc, shape) in zip(values, self.results, strict=True):
            array = np.asarray(value)
            if array.shape != shape.dimensions:
                raise RuntimeError(f"custom-call target '{self.target}' returned {array.dtype}{list(array.shape)}, "
                                   f"expected {shape.to_text()}")
            # converted to the declared element type, as the interpreter does (hlo/custom_calls.py)
            buffers.bind_host(alloc, array.astype(shape.dtype, copy=False), shape)

    def _flatten(self, value: object, shape: Shape) -> list[object]:
        if not shape.is_tuple:
            return [value]
        if not isinstance(value, (tuple, list)) or len(value) != len(shape.tuple_shapes):
            got = f"{len(value)} values" if isinstance(value, (tuple, list)) else type(value).__name__
            raise RuntimeError(f"custom-call target '{self.target}' returned {got}, expected a tuple of "
                               f"{len(shape.tuple_shapes)} for {shape.to_text()}")
        return [leaf for v, s in zip(value, shape.tuple_shapes, strict=True) for leaf in self._flatten(v, s)]


@dataclass(eq=False)
class CollectiveThunk(Thunk):
    """A collective (or ``partition-id``/``replica-id``) of a module that runs on several
    devices, each device a thread of this process (``run_devices``): the operands are copied out
    of this device's buffers and meet the other devices' at the rendezvous, and the result is
    what the interpreter's collective computes from them -- the same combination in group order,
    so every backend gives the interpreter's bits. On one device it returns its operand.
    ``nbytes``: the bytes this device puts in (its operands), what a profile reports as the
    collective's payload."""

    name: str
    instruction: HloInstruction
    operands: list[tuple[BufferSlice, Shape]]
    results: list[tuple[int, Shape]]
    kind: str = "collective"
    nbytes: int = 0

    def __post_init__(self) -> None:
        self.nbytes = sum(shape.byte_size() for _, shape in self.operands)
        if self.instruction.opcode in ("partition-id", "replica-id"):  # asks, exchanges nothing
            self.kind, self.nbytes = "device-id", 0

    def run(self, buffers: RunValues) -> None:
        from xla_teach.hlo.evaluator.core import HloEvaluator
        from xla_teach.hlo.evaluator.device_context import current_device

        # host_array copies: another device reads them after this one has moved on and reused its buffers.
        values = [buffers.host_array(s, shape) for s, shape in self.operands]
        evaluator = HloEvaluator()
        evaluator.device = current_device()
        out = evaluator.execute(self.instruction, values)
        leaves = list(out) if isinstance(out, tuple) else [out]
        for value, (alloc, shape) in zip(leaves, self.results, strict=True):
            buffers.bind_host(alloc, np.asarray(value).astype(shape.dtype, copy=False), shape)


def _nest(leaves: Iterator[np.ndarray], shape: Shape) -> object:
    """The next value of ``shape`` from a stream of array leaves (tuples rebuilt)."""
    if shape.is_tuple:
        return tuple(_nest(leaves, s) for s in shape.tuple_shapes)
    return next(leaves)


def _gather(buffers: RunValues, operands: Sequence[tuple[BufferSlice, Shape]]) -> list[Any]:
    return [buffers.value(s, shape) for s, shape in operands]


def _bind_results(buffers: RunValues, results: list[tuple[int, Shape]], values: list[Any], inputs: list[Any]) -> None:
    """Bind control-flow results (a result that is one of the inputs is copied: see ``bind_value``)."""
    for (alloc, shape), value in zip(results, values, strict=True):
        buffers.bind_value(alloc, value, shape, inputs)


@dataclass(eq=False)
class WhileThunk(Thunk):
    """Runs a ``while``: the condition's sequence, then the body's, until the predicate is false.

    Where buffer assignment gave the loop's results buffers (``state``: the CPU), the loop runs in
    them: the initial values are copied in once -- unless they are already there, computed in
    place by the instructions before the loop -- and a body that updates its state in place
    writes straight into them, so the last iteration leaves the results where they belong.
    Otherwise (the GPU, whose bodies never write their state in place) the loop starts from the
    initial values and the results are bound afterwards.
    """

    name: str
    condition: NestedSequence
    body: NestedSequence
    operands: list[tuple[BufferSlice, Shape]]  # init state leaves
    results: list[tuple[int, Shape]]
    state: list[tuple[BufferSlice, Shape]] | None = None  # the results' buffers, when assigned
    kind: str = "while"
    profiler: Profiler | None = None
    path: str = ""  # how the last run went: "fixed addresses" or "general"

    def execute(self, buffers: RunValues, profiler: Profiler | None) -> None:
        self.profiler = profiler
        super().execute(buffers, profiler)

    def run(self, buffers: RunValues) -> None:
        initial = _gather(buffers, self.operands)
        if self.state is not None:
            homes = [buffers.value(s, shape) for s, shape in self.state]
            for (home_slice, shape), (init_slice, _), home, value in zip(self.state, self.operands, homes, initial,
                                                                         strict=True):
                if home_slice != init_slice and not shape.is_token:
                    buffers.store(home, value)
            state = self._loop(buffers, homes)
            for (_, shape), home, value in zip(self.state, homes, state, strict=True):
                if not shape.is_token:  # a value the last iteration wrote elsewhere is copied home
                    buffers.store(home, value)
            return
        _bind_results(buffers, self.results, self._loop(buffers, initial), initial)

    def _loop(self, buffers: RunValues, state: list[Any]) -> list[Any]:
        fixed = getattr(self.body, "run_as_fixed_loop", None)
        if fixed is not None:  # kernels only: bind once, then just call them (timed, when profiled)
            done = fixed(self.condition, state, self.profiler)
            if done is not None:
                self.path = "fixed addresses"
                state, self.trip_count = done
                return state
        self.path = "general"
        trips = 0
        while bool(buffers.to_host(self.condition.run(state, self.profiler)[0]).reshape(())):
            state = self.body.run(state, self.profiler)
            trips += 1
        self.trip_count = trips
        return state


@dataclass(eq=False)
class ConditionalThunk(Thunk):
    name: str
    selector: tuple[BufferSlice, Shape]  # pred or s32 branch index
    branches: list[NestedSequence]
    branch_operands: list[list[tuple[BufferSlice, Shape]]]
    results: list[tuple[int, Shape]]
    kind: str = "conditional"
    profiler: Profiler | None = None

    def execute(self, buffers: RunValues, profiler: Profiler | None) -> None:
        self.profiler = profiler
        super().execute(buffers, profiler)

    def run(self, buffers: RunValues) -> None:
        selector = buffers.host_array(*self.selector).reshape(())
        if selector.dtype == np.bool_:
            branch = 0 if bool(selector) else 1
        else:
            branch = int(selector)
            if branch < 0 or branch >= len(self.branches):
                branch = len(self.branches) - 1  # out-of-range index runs the last branch
        inputs = _gather(buffers, self.branch_operands[branch])
        _bind_results(buffers, self.results, self.branches[branch].run(inputs, self.profiler), inputs)


@dataclass(eq=False)
class CallThunk(Thunk):
    name: str
    callee: NestedSequence
    operands: list[tuple[BufferSlice, Shape]]
    results: list[tuple[int, Shape]]
    kind: str = "call"
    profiler: Profiler | None = None

    def execute(self, buffers: RunValues, profiler: Profiler | None) -> None:
        self.profiler = profiler
        super().execute(buffers, profiler)

    def run(self, buffers: RunValues) -> None:
        inputs = _gather(buffers, self.operands)
        _bind_results(buffers, self.results, self.callee.run(inputs, self.profiler), inputs)


def host_thunk(instr: HloInstruction, assignment: BufferAssignment,
               sequence: Callable[[str], NestedSequence]) -> Thunk:
    """The host thunk of a ``while``, ``conditional``, ``call`` or ``custom-call`` whose values
    buffer ``assignment`` placed; ``sequence(name)`` is the backend's sequence of a computation.
    Both backends build theirs here: only the sequences and the values differ."""
    from xla_teach.hlo.custom_calls import get_custom_call_target

    def leaves(op: HloInstruction) -> list[tuple[BufferSlice, Shape]]:
        return [(assignment.slice(op, idx), op.shape.subshape(idx)) for idx in op.shape.leaf_indices()]

    results = [(assignment.slice(instr, idx).allocation.index, instr.shape.subshape(idx))
               for idx in instr.shape.leaf_indices()]
    if instr.opcode == "while":
        assigned = all(assignment.slice(instr, idx).allocation.kind != "external"
                       for idx in instr.shape.leaf_indices())
        return WhileThunk(instr.name, sequence(instr.attrs["condition"].name), sequence(instr.attrs["body"].name),
                          leaves(instr.operand(0)), results, leaves(instr) if assigned else None)
    if instr.opcode == "call":
        return CallThunk(instr.name, sequence(instr.to_apply.name), [x for op in instr.operands for x in leaves(op)],
                         results)
    if instr.opcode == "conditional":
        branches = instr.branch_computations()
        return ConditionalThunk(instr.name, (assignment.slice(instr.operand(0)), instr.operand(0).shape),
                                [sequence(c.name) for c in branches],
                                [leaves(instr.operand(i + 1)) for i in range(len(branches))], results)
    if instr.opcode in CROSS_DEVICE_OPCODES:
        return CollectiveThunk(instr.name, instr, [x for op in instr.operands for x in leaves(op)], results)
    if instr.opcode != "custom-call":
        raise ValueError(f"{instr.name}: {instr.opcode} does not run on the host")
    target = str(instr.attrs["custom_call_target"])
    return HostCallThunk(instr.name, target, get_custom_call_target(target, instr.shape),
                         [x for op in instr.operands for x in leaves(op)], results,
                         [op.shape for op in instr.operands], instr.shape)
