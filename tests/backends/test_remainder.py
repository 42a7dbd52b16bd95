"""``remainder`` is C's ``fmod`` on every backend, IEEE's special cases included: fmod(+-inf, y)
and fmod(x, 0) are NaN, fmod(x, +-inf) is x, the result has x's sign. Oracle: NumPy's fmod. The
fuzz against XLA's GPU found xla_teach's GPU giving inf for fmod(inf, inf) and wrong digits for
large quotients (LLVM expands ``frem`` for NVPTX as x - trunc(x/y)*y); the GPU now runs an exact
fmod (tests/backends/llvm/test_math.py checks it bit for bit), whose PTX is assembled here and run
on a device in the gpu tests."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from xla_teach.api import compile_module, execute
from xla_teach.backends.gpu.nvptx import assemble_with_ptxas, ptxas_path
from xla_teach.backends.gpu.runtime import device_available

TEXT = """HloModule m
ENTRY e {
  x = f32[14] parameter(0)
  y = f32[14] parameter(1)
  ROOT r = f32[14] remainder(x, y)
}"""
INF, NAN = np.inf, np.nan
X = np.array([INF, -INF, 5.5, -5.5, 3, NAN, 2, 0, -0.0, INF, 7, -7, 1e30, -1e-3], np.float32)
Y = np.array([2, INF, INF, -INF, 0, 1, NAN, 3, 3, NAN, -2, 2, 3, 3e-30], np.float32)


def want() -> np.ndarray:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.fmod(X, Y)


@pytest.mark.parametrize("backend", ["interpreter", "cpu"])
def test_remainder_special_values(backend: str) -> None:
    got = execute(TEXT, [X, Y], backend)[0]
    np.testing.assert_array_equal(got, want())
    assert list(np.signbit(got[7:9])) == [False, True]  # fmod(+-0, y) keeps the zero's sign


@pytest.mark.skipif(ptxas_path() is None, reason="ptxas is not on PATH")
def test_remainder_ptx_assembles() -> None:
    ok, messages = assemble_with_ptxas(compile_module(TEXT, "gpu").artifacts.ptx, "sm_90")
    assert ok, messages


@pytest.mark.gpu
@pytest.mark.skipif(not device_available(), reason="no CUDA device/driver")
def test_remainder_special_values_on_the_device() -> None:
    got = compile_module(TEXT, "gpu").execute([X, Y])[0]
    np.testing.assert_array_equal(got, want())
