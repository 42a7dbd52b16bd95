"""GPU executables: thunk sequences over device memory.

Like the CPU runtime (:mod:`xla_teach.runtime.executable`), each sequential
computation gets a buffer assignment and a list of thunks. On the device:

* temporaries and constants live in one device arena per sequence (allocated once,
  constants uploaded once), at the offsets buffer assignment chose;
* parameters are the caller's device arrays; results are fresh device allocations;
* kernels are launched on one stream with the launch dimensions chosen at compile
  time; a run of at least ``--xla_gpu_graph_min_graph_size`` kernels in a row is one
  :class:`CommandBufferThunk` (XLA's name): recorded once as a CUDA graph and replayed with one
  launch from the host, instead of one ``cuLaunchKernel`` per kernel;
* control flow (while, conditional, call) and custom-calls are the CPU runtime's own
  thunks (:mod:`xla_teach.runtime.thunks`) over :class:`DeviceRun`, which gives them device
  arrays as values and copies the loop predicate or branch index back to the host each time.

The entry executable copies NumPy arguments to the device, runs, and copies the
results back.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from xla_teach.backends.gpu.kernel_builder import LaunchDimensions
from xla_teach.backends.gpu.runtime import CudaContext, DeviceBuffer, KernelArguments
from xla_teach.hlo.literal import literal_at
from xla_teach.hlo.shape import Shape
from xla_teach.passes.scheduling.buffer_assignment import BufferAssignment, BufferSlice
from xla_teach.runtime.buffers import empty_physical, logical_view, to_physical

ALIGN = 256


@dataclass
class DeviceArray:
    """An array in device memory (a pointer into some owner's allocation)."""

    ptr: int
    shape: Shape
    owner: Any  # keeps the allocation alive

    @property
    def nbytes(self) -> int:
        return self.shape.byte_size()


def upload(ctx: CudaContext, array: np.ndarray, shape: Shape) -> DeviceArray:
    physical = to_physical(np.asarray(array), shape)
    buffer = ctx.alloc(physical.nbytes)
    ctx.to_device(physical, buffer.ptr)
    return DeviceArray(buffer.ptr, shape, buffer)


def download(ctx: CudaContext, array: DeviceArray) -> np.ndarray:
    host = empty_physical(array.shape)
    ctx.to_host(array.ptr, host)
    return logical_view(host, array.shape)


class DeviceRun:
    """Addresses of every allocation of one sequence during one run; to the shared thunks
    (:class:`xla_teach.runtime.thunks.RunValues`), values are :class:`DeviceArray` s."""

    def __init__(self, ctx: CudaContext, assignment: BufferAssignment) -> None:
        self.ctx = ctx
        self.addresses = [0] * len(assignment.allocations)
        self.owners: list[Any] = [None] * len(assignment.allocations)

    def bind(self, index: int, ptr: int, owner: Any) -> None:
        self.addresses[index] = ptr
        self.owners[index] = owner

    def address(self, s: BufferSlice) -> int:
        return self.addresses[s.allocation.index] + s.offset

    def array(self, s: BufferSlice, shape: Shape) -> DeviceArray:
        return DeviceArray(self.address(s), shape, self.owners[s.allocation.index])

    # ---- RunValues ------------------------------------------------------------------------
    value = array

    def host_array(self, s: BufferSlice, shape: Shape) -> np.ndarray:
        return np.array(download(self.ctx, self.array(s, shape)))

    def to_host(self, value: DeviceArray) -> np.ndarray:
        return download(self.ctx, value)

    def bind_value(self, index: int, value: DeviceArray, shape: Shape, inputs: list[DeviceArray]) -> None:
        """Bind a nested sequence's result; one passed straight through from an input is copied,
        since the input's bytes may be reused afterwards."""
        if any(value.ptr == given.ptr for given in inputs):
            copy = self.ctx.alloc(value.nbytes)
            self.ctx.copy_device(copy.ptr, value.ptr, value.nbytes)
            value = DeviceArray(copy.ptr, shape, copy)
        self.bind(index, value.ptr, value.owner)

    def bind_host(self, index: int, array: np.ndarray, shape: Shape) -> None:
        uploaded = upload(self.ctx, array, shape)
        self.bind(index, uploaded.ptr, uploaded.owner)


@dataclass(eq=False)
class GpuKernelThunk:
    name: str
    function: Any
    slices: list[BufferSlice]
    launch: LaunchDimensions
    nbytes: int
    copies: list[Any] = field(default_factory=list)  # DeviceCopy steps issued first (a scatter's operand)
    kind: str = "kernel"

    def __post_init__(self) -> None:
        self.arguments = KernelArguments(len(self.slices))
        self.lock = threading.Lock()
        self.allocation_offsets = [(s.allocation.index, s.offset) for s in self.slices]

    @property
    def allocation_indices(self) -> set[int]:
        """The allocations whose addresses this kernel (and its copies) is launched with."""
        copies = {s.allocation.index for copy in self.copies for s in (copy.dest, copy.source)}
        return {index for index, _ in self.allocation_offsets} | copies

    def execute(self, run: DeviceRun, profiler: Any, stream: Any = None) -> None:
        ctx = run.ctx
        for copy in self.copies:
            ctx.copy_device(run.address(copy.dest), run.address(copy.source), copy.nbytes, stream)
        addresses = run.addresses
        pointers = [addresses[index] + offset for index, offset in self.allocation_offsets]
        if profiler is None:
            with self.lock:  # one argument array per kernel: callers on other threads wait here
                self.arguments.set(pointers)
                ctx.launch_with(self.function, self.launch.blocks, self.launch.threads, self.arguments,
                                stream=stream)
            return
        self.arguments = KernelArguments(len(pointers))
        self.arguments.set(pointers)
        start_event, end_event = ctx.event(), ctx.event()
        start = time.perf_counter()
        ctx.record(start_event)
        ctx.launch_with(self.function, self.launch.blocks, self.launch.threads, self.arguments)
        ctx.record(end_event)
        ms = ctx.elapsed_ms(start_event, end_event)
        profiler.record(self.name, self.kind, start, start + ms / 1e3, self.nbytes)


class CommandBufferThunk:
    """Kernels in a row, replayed as one CUDA graph (XLA's ``CommandBufferThunk``).

    Launching a kernel from Python costs several microseconds of host time, more than a small
    kernel runs: a training step of a few hundred kernels is bound by its launches. The first run
    records the kernels' launches (and the copies before them) into a CUDA graph; later runs
    launch the whole graph with one call. A recorded launch holds the device addresses it was
    given, so the graph is valid only for the same buffers: the graphs are kept by the addresses
    of every allocation the kernels touch (parameters, results, the arena), and a run with other
    addresses records another (the ``limit`` most recent are kept). A training loop that feeds a
    step's results back in reuses a few address sets, since freed result buffers come back from
    the caching allocator.

    When a profiler is given, the kernels run one by one, so that each is timed on its own.
    """

    kind = "command-buffer"

    def __init__(self, thunks: list[GpuKernelThunk], limit: int = 8) -> None:
        self.thunks = thunks
        self.name = f"command_buffer[{thunks[0].name}..{thunks[-1].name}]"
        self.allocations = sorted(set().union(*(t.allocation_indices for t in thunks)))
        self.limit = limit
        self.graphs: OrderedDict[tuple[int, ...], Any] = OrderedDict()
        self.recorded = 0  # how many times a graph was recorded (a test reads it)
        self.lock = threading.Lock()

    def execute(self, run: DeviceRun, profiler: Any) -> None:
        if profiler is not None:
            for thunk in self.thunks:
                thunk.execute(run, profiler)
            return
        ctx = run.ctx
        key = tuple(run.addresses[index] for index in self.allocations)
        with self.lock:
            graph = self.graphs.get(key)
            if graph is None:
                graph = ctx.capture(lambda stream: [t.execute(run, None, stream) for t in self.thunks])
                self.recorded += 1
                self.graphs[key] = graph
                if len(self.graphs) > self.limit:
                    ctx.destroy_graph(self.graphs.popitem(last=False)[1])
            else:
                self.graphs.move_to_end(key)
            ctx.launch_graph(graph)


def form_command_buffers(thunks: list[Any], min_size: int) -> list[Any]:
    """Replace each run of at least ``min_size`` kernel thunks in a row by one
    :class:`CommandBufferThunk`; host thunks (loops, branches, custom calls) stay between them.
    ``min_size`` 0 forms none."""
    if min_size <= 0:
        return list(thunks)
    result: list[Any] = []
    run: list[GpuKernelThunk] = []
    for thunk in [*thunks, None]:
        if isinstance(thunk, GpuKernelThunk):
            run.append(thunk)
            continue
        result += [CommandBufferThunk(run)] if len(run) >= min_size else run
        run = []
        if thunk is not None:
            result.append(thunk)
    return result


class GpuSequence:
    def __init__(self, ctx: CudaContext, assignment: BufferAssignment) -> None:
        self.ctx = ctx
        self.assignment = assignment
        self.thunks: list[Any] = []
        comp = assignment.computation
        self.parameter_leaves = [(assignment.slice(p, idx).allocation.index, assignment.value(p, idx).shape)
                                 for p in comp.parameter_instructions for idx in p.shape.leaf_indices()]
        self.outputs = [assignment.slice(comp.root, idx) for idx in comp.root.shape.leaf_indices()]
        # The root's own shapes: a root that is a bitcast (reshape) shares its operand's buffer and
        # value, whose shape is the operand's.
        self.output_shapes = comp.root.shape.leaf_shapes()
        # One arena for constants and temporaries.
        self.arena_offsets: dict[int, int] = {}
        size = 0
        for alloc in assignment.allocations:
            if alloc.kind in ("constant", "temp"):
                self.arena_offsets[alloc.index] = size
                size += -(-max(alloc.size, 1) // ALIGN) * ALIGN
        self.arena: DeviceBuffer = ctx.alloc(size)
        for alloc in assignment.allocations:
            if alloc.kind == "constant":
                value = alloc.values[0][0]
                ctx.to_device(to_physical(literal_at(value.instruction.literal, value.index), value.shape),
                              self.arena.ptr + self.arena_offsets[alloc.index])
        self.output_allocations = [a for a in assignment.allocations if a.kind == "output"]

    def run(self, inputs: Sequence[DeviceArray], profiler: Any = None) -> list[DeviceArray]:
        run = DeviceRun(self.ctx, self.assignment)
        for index, offset in self.arena_offsets.items():
            run.bind(index, self.arena.ptr + offset, self.arena)
        for (index, _shape), array in zip(self.parameter_leaves, inputs, strict=True):
            run.bind(index, array.ptr, array.owner)
        for alloc in self.output_allocations:
            buffer = self.ctx.alloc(alloc.size)
            run.bind(alloc.index, buffer.ptr, buffer)
        for thunk in self.thunks:
            thunk.execute(run, profiler)
        results = []
        for s, shape in zip(self.outputs, self.output_shapes, strict=True):
            array = run.array(s, shape)
            if s.allocation.kind in ("constant", "temp"):  # never hand out arena memory
                copy = self.ctx.alloc(s.size)
                self.ctx.copy_device(copy.ptr, array.ptr, s.size)
                array = DeviceArray(copy.ptr, shape, copy)
            results.append(array)
        return results


class GpuExecutable:
    backend = "gpu"

    def __init__(self, module: Any, entry: GpuSequence, artifacts: Any, keep_alive: Any) -> None:
        self.module = module
        self.entry = entry
        self.artifacts = artifacts
        self.keep_alive = keep_alive

    def execute(self, args: Sequence[np.ndarray], profiler: Any = None) -> list[np.ndarray]:
        from xla_teach.hlo.evaluator.arguments import check_arguments
        from xla_teach.runtime.executable import flatten_arguments

        ctx = self.entry.ctx
        ctx.make_current()
        leaves = flatten_arguments(check_arguments(self.module.entry, args))
        inputs = [upload(ctx, leaf, shape) for leaf, (_, shape) in zip(leaves, self.entry.parameter_leaves,
                                                                       strict=True)]
        outputs = self.entry.run(inputs, profiler)
        ctx.synchronize()
        return [np.array(download(ctx, out)) for out in outputs]

    def run_on_device(self, inputs: list[DeviceArray]) -> list[DeviceArray]:
        """Run with arguments already on the device (benchmarks time this)."""
        return self.entry.run(inputs)
