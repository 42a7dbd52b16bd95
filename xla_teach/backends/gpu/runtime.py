"""The CUDA driver through cuda-python: devices, memory, modules, launches, events.

Everything a GPU executable needs from ``cuda.bindings.driver`` goes through
this module, so the rest of the backend never sees driver error codes:

* :func:`device_available` -- is there a CUDA device *and* a driver? (the usual
  answer on our machines and in CI is no: then compiling still works and
  executing says so plainly);
* :class:`CudaContext` -- the primary context of device 0, module loading,
  kernel launches, copies, events;
* :class:`DeviceBuffer` -- a ``cuMemAlloc`` allocation freed with its owner.
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


class DeviceBuffer:
    """Device memory from ``cuMemAlloc``; freed when this object goes away."""

    def __init__(self, ctx: CudaContext, nbytes: int) -> None:
        self.ctx = ctx
        self.nbytes = nbytes
        self.ptr = int(check(ctx.driver.cuMemAlloc(max(nbytes, 1)), "cuMemAlloc"))

    def __del__(self) -> None:
        try:
            self.ctx.driver.cuMemFree(self.ptr)
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass


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
        values = [np.array([p], dtype=np.uint64) for p in pointers]
        params = np.array([v.ctypes.data for v in values], dtype=np.uint64)
        check(self.driver.cuLaunchKernel(function, *grid, *block, shared_bytes, self.stream,
                                         params.ctypes.data, 0), "cuLaunchKernel")

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

    def copy_device(self, dst: int, src: int, nbytes: int) -> None:
        if nbytes:
            check(self.driver.cuMemcpyDtoDAsync(dst, src, nbytes, self.stream), "cuMemcpyDtoD")

    # ---- timing -----------------------------------------------------------------------
    def event(self) -> Any:
        return check(self.driver.cuEventCreate(0), "cuEventCreate")

    def record(self, event: Any) -> None:
        check(self.driver.cuEventRecord(event, self.stream), "cuEventRecord")

    def elapsed_ms(self, start: Any, end: Any) -> float:
        check(self.driver.cuEventSynchronize(end), "cuEventSynchronize")
        return float(check(self.driver.cuEventElapsedTime(start, end), "cuEventElapsedTime"))
