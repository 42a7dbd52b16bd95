"""How many threads of the CPU's pool share one kernel."""

from __future__ import annotations

import os

# Split a kernel across threads when its outermost loop carries at least this much work.
PARALLEL_WORK_THRESHOLD = 1 << 17
# ... and a library product (BLAS) when it has at least this many multiply-adds: handing a piece
# to a pool thread from Python costs tens of microseconds, the time of ~2^21 multiply-adds.
PARALLEL_FLOPS_THRESHOLD = 1 << 24


def choose_partitions(outer_size: int, work: int) -> int:
    """How many threads should share a kernel whose outer loop has ``outer_size`` steps."""
    cores = os.cpu_count() or 1
    if cores <= 1 or outer_size < 2 or work < PARALLEL_WORK_THRESHOLD:
        return 1
    return min(cores, outer_size)


def choose_gemm_partitions(outer_size: int, flops: int) -> int:
    """How many threads should share BLAS calls of ``flops`` multiply-adds in all."""
    return choose_partitions(outer_size, PARALLEL_WORK_THRESHOLD if flops >= PARALLEL_FLOPS_THRESHOLD else 0)
