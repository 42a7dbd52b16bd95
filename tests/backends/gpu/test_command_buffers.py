"""CUDA graphs (XLA's command buffers): which kernels are grouped into one graph, when a graph is
recorded and when it is replayed. Everywhere, over a stand-in for the CUDA context that logs
launches (a graph's replay must launch exactly what running the kernels one by one launches);
with a device (marked ``gpu``), the results with and without graphs against the interpreter, and
one graph launch per run."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from xla_teach import flags
from xla_teach.api import compile_module
from xla_teach.backends.gpu.executable import CommandBufferThunk, DeviceRun, GpuKernelThunk, form_command_buffers
from xla_teach.backends.gpu.kernel_builder import LaunchDimensions
from xla_teach.backends.gpu.runtime import device_available
from xla_teach.hlo.evaluator import evaluate_module
from xla_teach.hlo.text.parser import parse_hlo
from xla_teach.passes.scheduling.buffer_assignment import Allocation, BufferSlice


class LoggingContext:
    """Logs every launch as ``(kernel, argument pointers, stream)``; a "graph" is the list of
    launches recorded while capturing, and replaying it logs them again on the main stream."""

    def __init__(self) -> None:
        self.launched: list[tuple[str, tuple[int, ...], str]] = []
        self.host_launches = 0
        self.destroyed = 0

    def launch_with(self, function: str, grid: Any, block: Any, arguments: Any, shared_bytes: int = 0,
                    stream: Any = None) -> None:
        self.launched.append((function, tuple(int(v) for v in arguments.values), stream or "main"))
        self.host_launches += stream is None

    def copy_device(self, dst: int, src: int, nbytes: int, stream: Any = None) -> None:
        self.launched.append(("copy", (dst, src, nbytes), stream or "main"))

    def capture(self, issue: Any) -> list[tuple[str, tuple[int, ...], str]]:
        before = len(self.launched)
        issue("capture")
        graph = self.launched[before:]
        del self.launched[before:]
        return graph

    def launch_graph(self, graph: list[tuple[str, tuple[int, ...], str]]) -> None:
        self.host_launches += 1
        self.launched += [(name, args, "main") for name, args, _ in graph]

    def destroy_graph(self, graph: Any) -> None:
        self.destroyed += 1


ALLOCATIONS = [Allocation(i, 64, "temp") for i in range(3)]


def kernel(name: str, reads: int, writes: int) -> GpuKernelThunk:
    slices = [BufferSlice(ALLOCATIONS[reads], 0, 64), BufferSlice(ALLOCATIONS[writes], 0, 64)]
    return GpuKernelThunk(name, name, slices, LaunchDimensions((1, 1, 1), (32, 1, 1)), 128)


def run_at(ctx: LoggingContext, *addresses: int) -> DeviceRun:
    run = DeviceRun(ctx, SimpleNamespace(allocations=ALLOCATIONS))  # type: ignore[arg-type]
    for index, address in enumerate(addresses):
        run.bind(index, address, None)
    return run


def test_runs_of_enough_kernels_become_command_buffers_and_host_thunks_split_them() -> None:
    host = SimpleNamespace(name="while")
    kernels = [kernel(f"k{i}", 0, 1) for i in range(7)]
    thunks = form_command_buffers([*kernels[:3], host, *kernels[3:]], min_size=3)
    assert [type(t).__name__ for t in thunks] == ["CommandBufferThunk", "SimpleNamespace", "CommandBufferThunk"]
    assert [t.name for t in thunks[2].thunks] == ["k3", "k4", "k5", "k6"]
    short = form_command_buffers([kernels[0], kernels[1], host, kernels[2]], min_size=3)
    assert short == [kernels[0], kernels[1], host, kernels[2]]
    assert form_command_buffers(kernels, min_size=0) == kernels


def test_a_graph_replays_what_one_launch_each_would_launch_and_is_kept_per_address_set() -> None:
    ctx = LoggingContext()
    kernels = [kernel("a", 0, 1), kernel("b", 1, 2), kernel("c", 2, 0)]
    buffer = CommandBufferThunk(kernels, limit=2)
    assert buffer.allocations == [0, 1, 2]

    direct = LoggingContext()
    for k in kernels:
        k.execute(run_at(direct, 1000, 2000, 3000), None)  # type: ignore[arg-type]

    buffer.execute(run_at(ctx, 1000, 2000, 3000), None)  # type: ignore[arg-type]
    assert ctx.launched == direct.launched and ctx.host_launches == 1 and buffer.recorded == 1
    buffer.execute(run_at(ctx, 1000, 2000, 3000), None)  # type: ignore[arg-type]
    assert buffer.recorded == 1 and ctx.launched == direct.launched * 2 and ctx.host_launches == 2

    buffer.execute(run_at(ctx, 5000, 2000, 3000), None)  # type: ignore[arg-type]  # another parameter address
    assert buffer.recorded == 2 and ctx.launched[-3] == ("a", (5000, 2000), "main")
    buffer.execute(run_at(ctx, 7000, 2000, 3000), None)  # type: ignore[arg-type]
    assert buffer.recorded == 3 and ctx.destroyed == 1 and len(buffer.graphs) == 2  # the oldest went


def test_with_a_profiler_the_kernels_run_one_by_one() -> None:
    ctx = LoggingContext()
    buffer = CommandBufferThunk([kernel("a", 0, 1), kernel("b", 1, 2)])
    recorded: list[str] = []
    profiler = SimpleNamespace(record=lambda name, *rest: recorded.append(name))
    ctx.event = lambda: None  # type: ignore[attr-defined]
    ctx.record = lambda event: None  # type: ignore[attr-defined]
    ctx.elapsed_ms = lambda start, end: 0.5  # type: ignore[attr-defined]
    buffer.execute(run_at(ctx, 1, 2, 3), profiler)  # type: ignore[arg-type]
    assert recorded == ["a", "b"] and buffer.recorded == 0 and ctx.host_launches == 2


def test_the_flags_set_the_smallest_graph() -> None:
    text = "HloModule m\nENTRY e {\n  x = f32[4] parameter(0)\n  ROOT y = f32[4] negate(x)\n}\n"
    assert compile_module(text, "gpu").program.graph_min_size == 5
    with flags.override(xla_gpu_graph_min_graph_size=2):
        assert compile_module(text, "gpu").program.graph_min_size == 2
    with flags.override(xla_gpu_enable_command_buffer=""):
        assert compile_module(text, "gpu").program.graph_min_size == 0


class FakeDriver:
    """cuMemAlloc hands out fresh addresses (the caching allocator above it is the real one)."""

    def __init__(self) -> None:
        self.next = 1 << 32

    def cuMemAlloc(self, size: int) -> tuple[int, int]:  # noqa: N802 - the driver's name
        self.next += 1 << 32
        return 0, self.next

    def cuMemFree(self, ptr: int) -> tuple[int]:  # noqa: N802
        return (0,)


class DeviceStandIn(LoggingContext):
    """Enough of CudaContext for an executable to load and run, device memory from the real
    CachingAllocator over :class:`FakeDriver`."""

    def __init__(self) -> None:
        super().__init__()
        from xla_teach.backends.gpu.runtime import CachingAllocator

        self.allocator = CachingAllocator(FakeDriver())
        self.info = SimpleNamespace(arch="sm_90")

    def alloc(self, nbytes: int) -> Any:
        from xla_teach.backends.gpu.runtime import DeviceBuffer

        return DeviceBuffer(self, nbytes)  # type: ignore[arg-type]

    def to_device(self, array: Any, ptr: int) -> None:
        pass

    def load_module(self, ptx: str) -> str:
        return "module"

    def function(self, module: str, name: str) -> str:
        return name


def test_a_step_run_again_and_again_replays_its_graph(monkeypatch: pytest.MonkeyPatch) -> None:
    """A training loop's step, run six times on inputs that stay put: its results are fresh
    allocations each time, but the caching allocator hands the same blocks back once the last
    results are dropped, so the graph is recorded once (at most twice: a GPT step's first blocks
    come from the driver) and replayed after -- never recorded per run, which would cost more
    than the launches it saves."""
    from xla_teach.backends.gpu import compiler, runtime
    from xla_teach.backends.gpu.executable import DeviceArray

    ctx = DeviceStandIn()
    monkeypatch.setattr(runtime.CudaContext, "get", classmethod(lambda cls: ctx))
    monkeypatch.setattr(compiler, "device_available", lambda: True)
    with flags.override(xla_gpu_graph_min_graph_size=2):
        loaded = compile_module(STEP, "gpu").loaded()
    held = [ctx.alloc(shape.byte_size()) for _, shape in loaded.entry.parameter_leaves]
    inputs = [DeviceArray(b.ptr, shape, b) for b, (_, shape) in zip(held, loaded.entry.parameter_leaves, strict=True)]
    buffers = [t for t in loaded.entry.thunks if isinstance(t, CommandBufferThunk)]
    assert buffers
    for _ in range(6):
        loaded.run_on_device(inputs)
    assert all(1 <= b.recorded <= 2 for b in buffers) and ctx.host_launches == 6 * len(buffers)


STEP = """HloModule step
add { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT s = f32[] add(a, b) }
ENTRY main {
  x = f32[256,128] parameter(0)
  w = f32[128,64] parameter(1)
  h = f32[256,64] dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  t = f32[256,64] tanh(h)
  zero = f32[] constant(0)
  r = f32[64] reduce(t, zero), dimensions={0}, to_apply=add
  e = f32[256,64] exponential(t)
  s = f32[256] reduce(e, zero), dimensions={1}, to_apply=add
  wt = f32[64,128] transpose(w), dimensions={1,0}
  g = f32[256,128] dot(t, wt), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT out = (f32[64], f32[256], f32[256,128]) tuple(r, s, g)
}
"""


@pytest.mark.gpu
@pytest.mark.skipif(not device_available(), reason="no CUDA device/driver")
def test_graphs_give_the_interpreters_results_with_one_launch_per_run() -> None:
    module = parse_hlo(STEP)
    rng = np.random.default_rng(0)
    args = [rng.standard_normal((256, 128), dtype=np.float32), rng.standard_normal((128, 64), dtype=np.float32)]
    want = evaluate_module(module, args)
    with flags.override(xla_gpu_graph_min_graph_size=2, xla_teach_gpu_tf32=False):
        executable = compile_module(STEP, "gpu")
    buffers = [t for t in executable.loaded().entry.thunks if isinstance(t, CommandBufferThunk)]
    assert buffers, [type(t).__name__ for t in executable.loaded().entry.thunks]
    for _ in range(3):
        got = executable.execute(args)
        for g, w in zip(got, want, strict=True):
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4 * 128)
    assert all(b.recorded <= 2 for b in buffers)  # recorded once per set of addresses, then replayed
