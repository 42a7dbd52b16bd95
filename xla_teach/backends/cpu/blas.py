"""Finding an optimized BLAS for large matrix products: NumPy's own OpenBLAS.

NumPy wheels ship OpenBLAS (``libscipy_openblas64_*.so`` with 64-bit integers
and ``scipy_`` + ``64_``-decorated names). The CPU backend calls its
``cblas_sgemm``/``cblas_dgemm`` straight from the emitted LLVM code: this module
locates the library, loads it, and tells LLVM's JIT where the symbols live.
If no such library is found, large dots fall back to emitted loop nests.
"""

from __future__ import annotations

import ctypes
import functools
import glob
import os
from dataclasses import dataclass

import llvmlite.binding as llvm
import numpy as np

CBLAS_ROW_MAJOR, CBLAS_NO_TRANS, CBLAS_TRANS = 101, 111, 112


@dataclass(frozen=True)
class BlasLibrary:
    path: str
    sgemm: str  # symbol names as LLVM must call them
    dgemm: str
    int_bits: int  # 64 for ILP64 builds


def _candidates() -> list[str]:
    site = os.path.dirname(os.path.dirname(np.__file__))
    patterns = [os.path.join(site, "numpy.libs", "libscipy_openblas*.so*"),
                os.path.join(site, "numpy", ".dylibs", "libscipy_openblas*.dylib"),
                os.path.join(site, "scipy_openblas*", "lib", "libscipy_openblas*.so*")]
    return sorted(p for pattern in patterns for p in glob.glob(pattern))


@functools.cache
def find_blas() -> BlasLibrary | None:
    """Load NumPy's OpenBLAS and register its gemm symbols with LLVM (None if absent)."""
    for path in _candidates():
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for sgemm, dgemm, bits in (("scipy_cblas_sgemm64_", "scipy_cblas_dgemm64_", 64),
                                   ("scipy_cblas_sgemm", "scipy_cblas_dgemm", 32),
                                   ("cblas_sgemm", "cblas_dgemm", 32)):
            if hasattr(lib, sgemm) and hasattr(lib, dgemm):
                for name in (sgemm, dgemm):
                    llvm.add_symbol(name, ctypes.cast(getattr(lib, name), ctypes.c_void_p).value)
                return BlasLibrary(path, sgemm, dgemm, bits)
    return None
