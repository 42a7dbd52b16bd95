"""Thunks: the steps an executable runs, in schedule order.

XLA's CPU and GPU runtimes execute a *thunk sequence*: "launch this kernel on
these buffers", "call this library", "run this loop". xla_teach has the same:

* :class:`KernelThunk` -- call a compiled kernel with the addresses of the
  buffer slices it reads and writes; large kernels are split along their
  outermost loop and run on several threads;
* :class:`HostCallThunk` -- a ``custom-call`` into a registered Python target;
* :class:`WhileThunk`, :class:`ConditionalThunk`, :class:`CallThunk` -- control
  flow driven from the host, each running nested sequences.

Every thunk reports to an optional profiler (name, start, duration, bytes), which
is what the Chrome-trace timeline shows.
"""

from __future__ import annotations

import ctypes
import os
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

import numpy as np

from xla_teach.hlo.shape import Shape
from xla_teach.passes.scheduling.buffer_assignment import BufferSlice
from xla_teach.runtime.buffers import RunBuffers, to_physical

if TYPE_CHECKING:
    from xla_teach.runtime.executable import SequenceExecutable

KERNEL_SIGNATURE = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64)
_pool: ThreadPoolExecutor | None = None


def thread_pool() -> ThreadPoolExecutor:
    global _pool
    if _pool is None:
        _pool = ThreadPoolExecutor(max_workers=max(os.cpu_count() or 1, 1), thread_name_prefix="xla_teach")
    return _pool


class Profiler(Protocol):
    def record(self, name: str, kind: str, start: float, end: float, nbytes: int) -> None: ...


class Thunk:
    """Base class; subclasses are dataclasses with ``name``, ``kind`` and optionally ``nbytes``."""

    def execute(self, buffers: RunBuffers, profiler: Profiler | None) -> None:
        if profiler is None:
            self.run(buffers)
            return
        start = time.perf_counter()
        self.run(buffers)
        profiler.record(self.name, self.kind, start, time.perf_counter(), getattr(self, "nbytes", 0))

    def run(self, buffers: RunBuffers) -> None:
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

    def run(self, buffers: RunBuffers) -> None:
        args = self._args
        for i, s in enumerate(self.slices):
            args[i] = buffers.address(s)
        if self.partitions <= 1 or self.outer_size < 2:
            self._fn(args, 0, self.outer_size)
            return
        parts = min(self.partitions, self.outer_size)
        bounds = [self.outer_size * k // parts for k in range(parts + 1)]
        pointer = ctypes.cast(args, ctypes.c_void_p)
        futures = [thread_pool().submit(self._fn, pointer, bounds[k], bounds[k + 1]) for k in range(1, parts)]
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

    def run(self, buffers: RunBuffers) -> None:
        leaves = iter([np.array(buffers.array(s, shape)) for s, shape in self.operands])
        out = self.function(*[_nest(leaves, shape) for shape in self.operand_shapes])
        values = self._flatten(out, self.result_shape)
        for value, (alloc, shape) in zip(values, self.results, strict=True):
            array = np.asarray(value)
            if array.shape != shape.dimensions:
                raise RuntimeError(f"custom-call target '{self.target}' returned {array.dtype}{list(array.shape)}, "
                                   f"expected {shape.to_text()}")
            # converted to the declared element type, as the interpreter does (hlo/custom_calls.py)
            buffers.bind(alloc, to_physical(array.astype(shape.dtype, copy=False), shape))

    def _flatten(self, value: object, shape: Shape) -> list[object]:
        if not shape.is_tuple:
            return [value]
        if not isinstance(value, (tuple, list)) or len(value) != len(shape.tuple_shapes):
            got = f"{len(value)} values" if isinstance(value, (tuple, list)) else type(value).__name__
            raise RuntimeError(f"custom-call target '{self.target}' returned {got}, expected a tuple of "
                               f"{len(shape.tuple_shapes)} for {shape.to_text()}")
        return [leaf for v, s in zip(value, shape.tuple_shapes, strict=True) for leaf in self._flatten(v, s)]


def _nest(leaves: Iterator[np.ndarray], shape: Shape) -> object:
    """The next value of ``shape`` from a stream of array leaves (tuples rebuilt)."""
    if shape.is_tuple:
        return tuple(_nest(leaves, s) for s in shape.tuple_shapes)
    return next(leaves)


def _gather(buffers: RunBuffers, operands: Sequence[tuple[BufferSlice, Shape]]) -> list[np.ndarray]:
    return [buffers.array(s, shape) for s, shape in operands]


def _bind_results(buffers: RunBuffers, results: list[tuple[int, Shape]], arrays: list[np.ndarray],
                  inputs: list[np.ndarray]) -> None:
    """Bind control-flow results; a result that *is* one of the inputs (a value passed
    straight through) is copied, since the input's bytes may be reused afterwards."""
    for (alloc, shape), array in zip(results, arrays, strict=True):
        if any(np.may_share_memory(array, given) for given in inputs):
            array = np.array(array, copy=True)
        buffers.bind(alloc, to_physical(array, shape))


@dataclass(eq=False)
class WhileThunk(Thunk):
    name: str
    condition: SequenceExecutable
    body: SequenceExecutable
    operands: list[tuple[BufferSlice, Shape]]  # init state leaves
    results: list[tuple[int, Shape]]
    kind: str = "while"
    profiler: Profiler | None = None

    def execute(self, buffers: RunBuffers, profiler: Profiler | None) -> None:
        self.profiler = profiler
        super().execute(buffers, profiler)

    def run(self, buffers: RunBuffers) -> None:
        initial = _gather(buffers, self.operands)
        state = initial
        trips = 0
        while bool(self.condition.run(state, self.profiler)[0].reshape(())):
            state = self.body.run(state, self.profiler)
            trips += 1
        self.trip_count = trips
        _bind_results(buffers, self.results, state, initial)


@dataclass(eq=False)
class ConditionalThunk(Thunk):
    name: str
    selector: tuple[BufferSlice, Shape]  # pred or s32 branch index
    branches: list[SequenceExecutable]
    branch_operands: list[list[tuple[BufferSlice, Shape]]]
    results: list[tuple[int, Shape]]
    kind: str = "conditional"
    profiler: Profiler | None = None

    def execute(self, buffers: RunBuffers, profiler: Profiler | None) -> None:
        self.profiler = profiler
        super().execute(buffers, profiler)

    def run(self, buffers: RunBuffers) -> None:
        selector = buffers.array(*self.selector).reshape(())
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
    callee: SequenceExecutable
    operands: list[tuple[BufferSlice, Shape]]
    results: list[tuple[int, Shape]]
    kind: str = "call"
    profiler: Profiler | None = None

    def execute(self, buffers: RunBuffers, profiler: Profiler | None) -> None:
        self.profiler = profiler
        super().execute(buffers, profiler)

    def run(self, buffers: RunBuffers) -> None:
        inputs = _gather(buffers, self.operands)
        _bind_results(buffers, self.results, self.callee.run(inputs, self.profiler), inputs)
