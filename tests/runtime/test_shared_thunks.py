"""The host thunks (while, conditional, call, custom-call) are one implementation for both
runtimes. On the CPU they run in every test; here they run over the GPU runtime's DeviceRun too,
with a stand-in for the CUDA context whose "device" memory is host memory, so that the device
path of the control flow is exercised on machines without a GPU."""

from __future__ import annotations

import ctypes
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from xla_teach.backends.gpu.executable import DeviceArray, DeviceRun, download, upload
from xla_teach.hlo.shape import Shape
from xla_teach.hlo.types import PrimitiveType
from xla_teach.passes.scheduling.buffer_assignment import Allocation, BufferSlice
from xla_teach.runtime.thunks import CallThunk, ConditionalThunk, HostCallThunk, WhileThunk

F32 = Shape.array(PrimitiveType.F32, (4,))
PRED = Shape.array(PrimitiveType.PRED, ())


class HostMemoryContext:
    """CudaContext's memory calls, over host memory (ctypes.memmove for every copy)."""

    def __init__(self) -> None:
        self.allocations = 0

    def alloc(self, nbytes: int) -> SimpleNamespace:
        self.allocations += 1
        block = np.zeros(max(nbytes, 1), np.uint8)
        return SimpleNamespace(ptr=block.ctypes.data, block=block)

    def to_device(self, array: np.ndarray, ptr: int) -> None:
        array = np.ascontiguousarray(array)
        ctypes.memmove(ptr, array.ctypes.data, array.nbytes)

    def to_host(self, ptr: int, array: np.ndarray) -> np.ndarray:
        ctypes.memmove(array.ctypes.data, ptr, array.nbytes)
        return array

    def copy_device(self, dst: int, src: int, nbytes: int) -> None:
        ctypes.memmove(dst, src, nbytes)


class DeviceFunction:
    """A nested sequence on the device: downloads, computes with NumPy, uploads."""

    def __init__(self, ctx: HostMemoryContext, fn: Any, shapes: list[Shape]) -> None:
        self.ctx, self.fn, self.shapes, self.calls = ctx, fn, shapes, 0

    def run(self, values: list[DeviceArray], profiler: Any = None) -> list[DeviceArray]:
        self.calls += 1
        out = self.fn(*[download(self.ctx, v) for v in values])  # type: ignore[arg-type]
        outs = out if isinstance(out, tuple) else (out,)
        return [upload(self.ctx, np.asarray(o), s) for o, s in zip(outs, self.shapes, strict=True)]  # type: ignore[arg-type]


def device_run(ctx: HostMemoryContext, initial: np.ndarray) -> tuple[DeviceRun, BufferSlice, int]:
    """A run with allocation 0 holding ``initial`` (a parameter) and allocation 1 for the result."""
    allocations = [Allocation(0, initial.nbytes, "parameter"), Allocation(1, initial.nbytes, "output")]
    run = DeviceRun(ctx, SimpleNamespace(allocations=allocations))  # type: ignore[arg-type]
    given = upload(ctx, initial, F32)  # type: ignore[arg-type]
    run.bind(0, given.ptr, given.owner)
    return run, BufferSlice(allocations[0], 0, initial.nbytes), 1


def test_while_over_device_arrays_doubles_until_the_predicate_turns_false() -> None:
    ctx = HostMemoryContext()
    run, source, result = device_run(ctx, np.array([1, 2, 3, 4], np.float32))
    condition = DeviceFunction(ctx, lambda x: np.asarray(x.sum() < 100), [PRED])
    body = DeviceFunction(ctx, lambda x: x * 2, [F32])
    thunk = WhileThunk("loop", condition, body, [(source, F32)], [(result, F32)])
    thunk.execute(run, None)
    assert thunk.trip_count == 4 and body.calls == 4 and condition.calls == 5
    np.testing.assert_array_equal(download(ctx, run.array(BufferSlice(Allocation(1, 16, "output"), 0, 16), F32)),  # type: ignore[arg-type]
                                  [16, 32, 48, 64])


def test_a_loop_that_never_runs_copies_its_input_through() -> None:
    ctx = HostMemoryContext()
    run, source, result = device_run(ctx, np.array([500, 0, 0, 0], np.float32))
    thunk = WhileThunk("loop", DeviceFunction(ctx, lambda x: np.asarray(x.sum() < 100), [PRED]),
                       DeviceFunction(ctx, lambda x: x, [F32]), [(source, F32)], [(result, F32)])
    before = ctx.allocations
    thunk.execute(run, None)
    assert run.addresses[1] != run.addresses[0] and ctx.allocations > before  # a copy, not the input's bytes
    np.testing.assert_array_equal(download(ctx, DeviceArray(run.addresses[1], F32, None)), [500, 0, 0, 0])  # type: ignore[arg-type]


@pytest.mark.parametrize(("selector", "expected"), [(True, [2, 4, 6, 8]), (False, [-1, -2, -3, -4])])
def test_conditional_and_call_pick_and_run_on_the_device(selector: bool, expected: list[float]) -> None:
    ctx = HostMemoryContext()
    run, source, result = device_run(ctx, np.array([1, 2, 3, 4], np.float32))
    pred = upload(ctx, np.asarray(selector), PRED)  # type: ignore[arg-type]
    run.addresses.append(pred.ptr)
    run.owners.append(pred.owner)
    pred_slice = BufferSlice(Allocation(2, 1, "temp"), 0, 1)
    branches = [DeviceFunction(ctx, lambda x: x * 2, [F32]), DeviceFunction(ctx, lambda x: -x, [F32])]
    ConditionalThunk("cond", (pred_slice, PRED), branches, [[(source, F32)], [(source, F32)]],  # type: ignore[arg-type]
                     [(result, F32)]).execute(run, None)
    np.testing.assert_array_equal(download(ctx, DeviceArray(run.addresses[1], F32, None)), expected)  # type: ignore[arg-type]
    CallThunk("call", DeviceFunction(ctx, lambda x: x + 1, [F32]), [(source, F32)], [(result, F32)]).execute(run, None)
    np.testing.assert_array_equal(download(ctx, DeviceArray(run.addresses[1], F32, None)), [2, 3, 4, 5])  # type: ignore[arg-type]


def test_custom_call_target_gets_host_arrays_and_its_result_goes_to_the_device() -> None:
    ctx = HostMemoryContext()
    run, source, result = device_run(ctx, np.array([1, 2, 3, 4], np.float32))
    thunk = HostCallThunk("cc", "reverse", lambda x: x[::-1], [(source, F32)], [(result, F32)], [F32], F32)
    thunk.execute(run, None)
    np.testing.assert_array_equal(download(ctx, DeviceArray(run.addresses[1], F32, None)), [4, 3, 2, 1])  # type: ignore[arg-type]
