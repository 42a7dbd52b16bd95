"""The BLAS behind large matrix products: OpenBLAS from the ``scipy-openblas64`` package.

The CPU backend calls ``cblas_sgemm``/``cblas_dgemm`` straight from the emitted LLVM code. The
library comes from ``scipy-openblas64``, the wheel the SciPy project publishes for exactly this
purpose (an OpenBLAS built for every x86-64 and AArch64 generation, with 64-bit integers and its
symbols renamed ``scipy_cblas_sgemm64_`` ... so that it never clashes with another BLAS in the
process) and a declared dependency of xla_teach. This module loads it, and tells LLVM's JIT where
the symbols live. If the package is missing, large dots fall back to emitted loop nests.

OpenBLAS is told to run every call on the calling thread (``openblas_set_num_threads(1)``): the
CPU backend's own thread pool splits a product by rows (or batches, or a convolution's blocks),
as XLA splits its Eigen contractions over its own pool. Two threads each calling a threaded
OpenBLAS fight over its workers (a blocked convolution: 13 ms; single-threaded calls: 8 ms), and
OpenBLAS's threads would not flush denormals as the run's threads do. This copy of OpenBLAS is
the package's own, not NumPy's, so NumPy's matrix products keep their threads.
"""

from __future__ import annotations

import ctypes
import functools
import os
from dataclasses import dataclass

import llvmlite.binding as llvm

CBLAS_ROW_MAJOR, CBLAS_NO_TRANS, CBLAS_TRANS = 101, 111, 112


@dataclass(frozen=True)
class BlasLibrary:
    path: str
    sgemm: str  # symbol names as LLVM must call them
    dgemm: str
    int_bits: int  # 64 for ILP64 builds


def library_path() -> str | None:
    """The shared library of the ``scipy-openblas64`` package (None if it is not installed)."""
    try:
        import scipy_openblas64
    except ImportError:
        return None
    folder = scipy_openblas64.get_lib_dir()
    name = scipy_openblas64.get_library()
    for candidate in (f"lib{name}.so", f"lib{name}.dylib", f"{name}.dll"):
        path = os.path.join(folder, candidate)
        if os.path.exists(path):
            return path
    return None


@functools.cache
def find_blas() -> BlasLibrary | None:
    """Load the package's OpenBLAS and register its gemm symbols with LLVM (None if absent)."""
    path = library_path()
    if path is None:
        return None
    try:
        lib = ctypes.CDLL(path)
    except OSError:
        return None
    sgemm, dgemm = "scipy_cblas_sgemm64_", "scipy_cblas_dgemm64_"
    if not (hasattr(lib, sgemm) and hasattr(lib, dgemm)):
        return None
    for name in (sgemm, dgemm):
        llvm.add_symbol(name, ctypes.cast(getattr(lib, name), ctypes.c_void_p).value)
    set_threads = getattr(lib, "scipy_openblas_set_num_threads64_", None)
    if set_threads is not None:
        set_threads(ctypes.c_int(1))
    return BlasLibrary(path, sgemm, dgemm, 64)
