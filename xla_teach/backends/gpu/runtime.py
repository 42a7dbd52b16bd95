"""The CUDA driver through cuda-python: devices, memory, modules, launches, events.

Everything a GPU executable needs from ``cuda.bindings.driver`` goes through
this module, so the rest of the backend never sees driver error codes:

* :func:`device_available` -- is there a CUDA device *and* a driver? (the usual
  answer on our machines and in CI is no: then compiling still works and
  executing says so plainly);
* :class:`CudaContext` -- the primary context of device 0, module loading,
  kernel launches, copies, events;
* :class:`DeviceBuffer` -- device memory from a :class:`CachingAllocator`, given back with its owner;
* :class:`KernelArguments` -- a launch's argument array, built once per kernel;
* CUDA graphs -- a stream's work captured once (:meth:`CudaContext.capture`) and replayed with
  one launch (:meth:`CudaContext.launch_graph`): XLA's command buffers.
"""

from __future__ import annotations

import functools
import threading
from dataclasses import dataclass
from typing import Any

import numpy as np


class GpuUnavailableError(RuntimeError):
    """No CUDA device or no NVIDIA driver on this machine."""


class CudaError(RuntimeError):
    pass


def _driver() -> Any:
    try:
        from cuda.bindings import driver
    except Exception as err:  # ImportError, or RuntimeError when libcuda cannot be loaded
        raise GpuUnavailableError(f"no CUDA device/driver: cuda-python's driver bindings could not load ({err})") \
            from None
    return driver


def check(result: Any, what: str) -> Any:
    """Unpack a driver call's ``(error, values...)`` tuple, raising on error."""
    driver = _driver()
    err, *values = result if isinstance(result, tuple) else (result,)
    if err != driver.CUresult.CUDA_SUCCESS:
        _, name = driver.cuGetErrorName(err)
        raise CudaError(f"{what} failed: {name.decode() if isinstance(name, bytes) else name}")
    if not values:
        return None
    return values[0] if len(values) == 1 else tuple(values)


@functools.cache
def _probe() -> tuple[bool, str]:
    try:
        driver = _driver()
        err, = driver.cuInit(0)
        if err != driver.CUresult.CUDA_SUCCESS:
            return False, f"no CUDA device/driver: cuInit returned {err}"
        err, count = driver.cuDeviceGetCount()
        if err != driver.CUresult.CUDA_SUCCESS or count == 0:
            return False, "no CUDA device/driver: the driver reports no CUDA device"
        return True, ""
    except GpuUnavailableError as err:
        return False, str(err)
    except Exception as err:  # pragma: no cover - unexpected driver states
        return False, f"no CUDA device/driver: {type(err).__name__}: {err}"


def device_available() -> bool:
    return _probe()[0]


def unavailable_reason() -> str:
    return _probe()[1]


@dataclass(frozen=True)
class DeviceInfo:
    name: str
    compute_capability: tuple[int, int]
    multiprocessors: int
    memory_bytes: int

    @property
    def arch(self) -> str:
        major, minor = self.compute_capability
        return f"sm_{major}{minor}"


# Device allocations are rounded up to whole 16-byte words. Kernels mark 16-byte aligned
# arguments ``align 16``, and LLVM's load/store vectorizer may then read a short buffer's tail
# with one 16-byte load (7 bf16 values: a 16-byte read of a 14-byte buffer). That never crosses a
# 16-byte boundary, so it cannot fault, but it reads past the allocation (compute-sanitizer's
# memcheck says so); rounding keeps every access inside the allocation.
ALLOCATION_GRANULE = 16


class CachingAllocator:
    """Keeps freed device blocks for reuse, as XLA's and PyTorch's GPU allocators do.

    ``cuMemAlloc`` and ``cuMemFree`` are slow (they may synchronise the device and take tens of
    microseconds to milliseconds), and a compiled program allocates its results on every run. A
    freed block goes onto a free list by its (rounded) size, and the next allocation of that
    size takes it back without calling the driver. Every kernel and copy runs on the context's
    one stream, so a block reused by a later launch is only touched after the earlier work that
    used it -- stream order makes reuse safe without events. At most ``limit`` bytes are kept.
    """

    def __init__(self, driver: Any, limit: int = 4 << 30) -> None:
        self.driver = driver
        self.limit = limit
        self.free: dict[int, list[int]] = {}
        self.cached = 0
        self.lock = threading.Lock()

    @staticmethod
    def round_up(nbytes: int) -> int:
        """Sizes are kept in classes: whole 16-byte words, then 1/8 steps of the power of two."""
        size = -(-max(nbytes, 1) // ALLOCATION_GRANULE) * ALLOCATION_GRANULE
        if size > 4096:
            step = 1 << max(size.bit_length() - 4, 4)
            size = -(-size // step) * step
        return size

    def allocate(self, nbytes: int) -> tuple[int, int]:
        size = self.round_up(nbytes)
        with self.lock:
            blocks = self.free.get(size)
            if blocks:
                self.cached -= size
                return blocks.pop(), size
        return int(check(self.driver.cuMemAlloc(size), "cuMemAlloc")), size

    def release(self, ptr: int, size: int) -> None:
        with self.lock:
            if self.cached + size <= self.limit:
                self.free.setdefault(size, []).append(ptr)
                self.cached += size
                return
        self.driver.cuMemFree(ptr)

    def empty_cache(self) -> None:
        with self.lock:
            for blocks in self.free.values():
                for ptr in blocks:
                    self.driver.cuMemFree(ptr)
            self.free.clear()
            self.cached = 0


class DeviceBuffer:
    """Device memory from the context's caching allocator; returned to it when this object goes away."""

    def __init__(self, ctx: CudaContext, nbytes: int) -> None:
        self.ctx = ctx
        self.nbytes = nbytes
        self.ptr, self.size = ctx.allocator.allocate(nbytes)

    def __del__(self) -> None:
        try:
            self.ctx.allocator.release(self.ptr, self.size)
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass


class KernelArguments:
    """The ``void** kernelParams`` of ``cuLaunchKernel`` for a kernel of pointer arguments, built once.

    The driver wants an array of addresses, each pointing at one argument's value. Both arrays
    live here for the thunk's lifetime; a launch only writes the new pointer values into
    ``values`` (the driver copies them when the launch is issued, so the next launch may
    overwrite them at once). Building them anew for every launch cost more than the launch.
    """

    def __init__(self, count: int) -> None:
        self.values = np.zeros(max(count, 1), dtype=np.uint64)
        base = self.values.ctypes.data
        self.pointers = np.array([base + 8 * i for i in range(max(count, 1))], dtype=np.uint64)
        self.params_address = int(self.pointers.ctypes.data)

    def set(self, pointers: list[int]) -> None:
        self.values[: len(pointers)] = pointers


class CudaContext:
    """The primary context of device 0 (one per process)."""

    _instance: CudaContext | None = None
    _lock = threading.Lock()

    @classmethod
    def get(cls) -> CudaContext:
        with cls._lock:
            if cls._instance is None:
                if not device_available():
                    raise GpuUnavailableError(unavailable_reason())
                cls._instance = CudaContext()
            return cls._instance

    def __init__(self) -> None:
        self.driver = d = _driver()
        self.device = check(d.cuDeviceGet(0), "cuDeviceGet")
        self.context = check(d.cuDevicePrimaryCtxRetain(self.device), "cuDevicePrimaryCtxRetain")
        self.make_current()
        self.stream = check(d.cuStreamCreate(0), "cuStreamCreate")
        self.allocator = CachingAllocator(d)
        self._capture_stream: Any = None
        self._capture_lock = threading.Lock()
        # Sort and scatter run their CPU emitters on one GPU thread, which mallocs scratch space
        # from the device heap (8 MiB by default): give it room for large arrays.
        check(d.cuCtxSetLimit(d.CUlimit.CU_LIMIT_MALLOC_HEAP_SIZE, 1 << 30), "cuCtxSetLimit")
        attr = d.CUdevice_attribute
        major = check(d.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, self.device), "attr")
        minor = check(d.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, self.device), "attr")
        sms = check(d.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, self.device), "attr")
        name = check(d.cuDeviceGetName(256, self.device), "cuDeviceGetName")
        memory = check(d.cuDeviceTotalMem(self.device), "cuDeviceTotalMem")
        text = name.split(b"\0")[0].decode() if isinstance(name, bytes) else str(name)
        self.info = DeviceInfo(text, (int(major), int(minor)), int(sms), int(memory))

    def make_current(self) -> None:
        check(self.driver.cuCtxSetCurrent(self.context), "cuCtxSetCurrent")

    # ---- modules and launches ---------------------------------------------------------
    def load_module(self, ptx: str) -> Any:
        self.make_current()
        data = ptx.encode() + b"\0"
        try:
            return check(self.driver.cuModuleLoadData(data), "cuModuleLoadData (PTX JIT)")
        except CudaError as err:
            raise CudaError(f"{err}; the PTX was rejected by the driver's JIT") from None

    def function(self, module: Any, name: str) -> Any:
        return check(self.driver.cuModuleGetFunction(module, name.encode()), f"cuModuleGetFunction({name})")

    def launch(self, function: Any, grid: tuple[int, int, int], block: tuple[int, int, int],
               pointers: list[int], shared_bytes: int = 0) -> None:
        """Launch with device pointers as the kernel's arguments (see :class:`KernelArguments` for
        the fast way when the same kernel is launched again and again)."""
        arguments = KernelArguments(len(pointers))
        arguments.set(pointers)
        self.launch_with(function, grid, block, arguments, shared_bytes)

    def launch_with(self, function: Any, grid: tuple[int, int, int], block: tuple[int, int, int],
                    arguments: KernelArguments, shared_bytes: int = 0, stream: Any = None) -> None:
        err, = self.driver.cuLaunchKernel(function, *grid, *block, shared_bytes,
                                          self.stream if stream is None else stream, arguments.params_address, 0)
        if err != self.driver.CUresult.CUDA_SUCCESS:
            check((err,), "cuLaunchKernel")

    def synchronize(self) -> None:
        check(self.driver.cuStreamSynchronize(self.stream), "cuStreamSynchronize")

    # ---- memory -----------------------------------------------------------------------
    def alloc(self, nbytes: int) -> DeviceBuffer:
        return DeviceBuffer(self, nbytes)

    def to_device(self, array: np.ndarray, ptr: int) -> None:
        array = np.ascontiguousarray(array)
        if array.nbytes:
            check(self.driver.cuMemcpyHtoDAsync(ptr, array.ctypes.data, array.nbytes, self.stream), "cuMemcpyHtoD")
            self.synchronize()

    def to_host(self, ptr: int, array: np.ndarray) -> np.ndarray:
        if array.nbytes:
            check(self.driver.cuMemcpyDtoHAsync(array.ctypes.data, ptr, array.nbytes, self.stream), "cuMemcpyDtoH")
            self.synchronize()
        return array

    def copy_device(self, dst: int, src: int, nbytes: int, stream: Any = None) -> None:
        if nbytes:
            check(self.driver.cuMemcpyDtoDAsync(dst, src, nbytes, self.stream if stream is None else stream),
                  "cuMemcpyDtoD")

    # ---- CUDA graphs --------------------------------------------------------------------
    def capture(self, issue: Any) -> Any:
        """Record the work ``issue(stream)`` puts on a stream as a CUDA graph, without running it,
        and return the graph made executable (``cuGraphInstantiate``).

        The capture uses a stream of its own (non-blocking, so no other stream's work joins it)
        and a lock, so that launches of other threads on the context's stream are never recorded.
        A kernel launch's arguments are copied into the graph when it is recorded: the graph
        replays those device addresses, so it is valid only while they hold the same buffers.
        """
        d = self.driver
        with self._capture_lock:
            if self._capture_stream is None:
                self._capture_stream = check(d.cuStreamCreate(1), "cuStreamCreate")  # CU_STREAM_NON_BLOCKING
            stream = self._capture_stream
            check(d.cuStreamBeginCapture(stream, d.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_THREAD_LOCAL),
                  "cuStreamBeginCapture")
            try:
                issue(stream)
            finally:
                graph = check(d.cuStreamEndCapture(stream), "cuStreamEndCapture")
            try:
                return check(d.cuGraphInstantiate(graph, 0), "cuGraphInstantiate")
            finally:
                check(d.cuGraphDestroy(graph), "cuGraphDestroy")

    def launch_graph(self, graph_exec: Any) -> None:
        err, = self.driver.cuGraphLaunch(graph_exec, self.stream)
        if err != self.driver.CUresult.CUDA_SUCCESS:
            check((err,), "cuGraphLaunch")

    def destroy_graph(self, graph_exec: Any) -> None:
        check(self.driver.cuGraphExecDestroy(graph_exec), "cuGraphExecDestroy")

    # ---- timing -----------------------------------------------------------------------
    def event(self) -> Any:
        return check(self.driver.cuEventCreate(0), "cuEventCreate")

    def record(self, event: Any) -> None:
        check(self.driver.cuEventRecord(event, self.stream), "cuEventRecord")

    def elapsed_ms(self, start: Any, end: Any) -> float:
        check(self.driver.cuEventSynchronize(end), "cuEventSynchronize")
        return float(check(self.driver.cuEventElapsedTime(start, end), "cuEventElapsedTime"))
