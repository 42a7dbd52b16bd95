"""How many threads of the CPU's pool share one kernel."""

from __future__ import annotations

import os

# Split a kernel across threads when its outermost loop carries at least this much work.
PARALLEL_WORK_THRESHOLD = 1 << 17
# ... and a library product (BLAS) when it has at least this many multiply-adds: the native pool
# (runtime/native_pool.py) hands a part to another core in a few microseconds, so a product of
# 2^21 multiply-adds (~70 us on one core: an LSTM step's 32x256 @ 256x1024) pays for it; a
# Python thread pool costs tens of microseconds, the time of ~2^21 multiply-adds, so there only
# products of 2^24 and more are split.
PARALLEL_FLOPS_THRESHOLD_NATIVE = 1 << 21
PARALLEL_FLOPS_THRESHOLD_PYTHON = 1 << 24


def choose_partitions(outer_size: int, work: int) -> int:
    """How many threads should share a kernel whose outer loop has ``outer_size`` steps."""
    cores = os.cpu_count() or 1
    if cores <= 1 or outer_size < 2 or work < PARALLEL_WORK_THRESHOLD:
        return 1
    return min(cores, outer_size)


def choose_gemm_partitions(outer_size: int, flops: int) -> int:
    """How many threads should share BLAS calls of ``flops`` multiply-adds in all."""
    from xla_teach.runtime.native_pool import has_native_pool

    threshold = PARALLEL_FLOPS_THRESHOLD_NATIVE if has_native_pool() else PARALLEL_FLOPS_THRESHOLD_PYTHON
    return choose_partitions(outer_size, PARALLEL_WORK_THRESHOLD if flops >= threshold else 0)
