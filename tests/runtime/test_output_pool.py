"""Large output buffers are recycled only after the caller has dropped them."""

from __future__ import annotations

import gc

import numpy as np

from xla_teach.api import compile_module
from xla_teach.runtime.buffers import OutputPool

N = 1 << 19  # 2 MiB of f32: above OutputPool.MIN_BYTES
TEXT = f"""HloModule m
ENTRY e {{
  x = f32[{N}] parameter(0)
  ROOT y = f32[{N}] exponential(x)
}}"""


def test_results_the_caller_keeps_are_never_reused() -> None:
    exe = compile_module(TEXT, "cpu")
    a, b = np.zeros(N, np.float32), np.ones(N, np.float32)
    first = exe.execute([a])[0]
    second = exe.execute([b])[0]
    np.testing.assert_array_equal(first, np.ones(N, np.float32))
    np.testing.assert_allclose(second, np.full(N, np.e, np.float32), rtol=1e-6)
    assert first.ctypes.data != second.ctypes.data


def test_a_dropped_result_gives_its_block_back() -> None:
    exe = compile_module(TEXT, "cpu")
    x = np.zeros(N, np.float32)
    first = exe.execute([x])[0]
    address = first.ctypes.data
    del first
    gc.collect()
    again = exe.execute([x])[0]
    assert again.ctypes.data == address
    np.testing.assert_array_equal(again, np.ones(N, np.float32))


def test_small_blocks_and_the_cache_limit() -> None:
    pool = OutputPool()
    small = pool.take(64)  # below 4 KiB: a plain NumPy array, with NumPy's 16-byte alignment
    assert small.nbytes == 64 and small.flags.writeable and small.ctypes.data % 16 == 0
    assert pool.take(8192).ctypes.data % 64 == 0  # larger ones start on a cache line
    pool.MAX_CACHED_BYTES = 3 << 20
    blocks = [pool.take(2 << 20) for _ in range(2)]
    del blocks
    gc.collect()
    assert pool._cached == 2 << 20  # the second did not fit under the limit
