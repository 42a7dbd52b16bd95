"""The native thread pool (runtime/native_pool.py): every part of a split kernel runs exactly
once, whatever the sizes, under many calls and concurrent callers; the workers take part and
compute with the caller's floating-point control register (denormals flushed or not)."""

from __future__ import annotations

import ctypes
import threading

import llvmlite.binding as llvm
import numpy as np
import pytest

from xla_teach.runtime.denormals import scoped_flush_denormal
from xla_teach.runtime.native_pool import native_pool

pool = native_pool()
pytestmark = pytest.mark.skipif(pool is None, reason="no native pool on this machine (not Linux x86-64/AArch64)")

# kernel(buffers, begin, end): counts[i] += 1 atomically for i in [begin, end).
COUNT = """
define void @count(ptr %buffers, i64 %begin, i64 %end) {
entry:
  %counts = load ptr, ptr %buffers
  br label %head
head:
  %i = phi i64 [ %begin, %entry ], [ %i1, %body ]
  %go = icmp slt i64 %i, %end
  br i1 %go, label %body, label %exit
body:
  %p = getelementptr i64, ptr %counts, i64 %i
  %old = atomicrmw add ptr %p, i64 1 seq_cst
  %i1 = add i64 %i, 1
  br label %head
exit:
  ret void
}

; kernel(buffers = {x, y, out, threads}, begin, end): out[i] = x[i] * y[i], threads[i] = the
; thread's id; then a busy wait, so that the worker has time to claim the next part.
declare i64 @pthread_self()
define void @multiply(ptr %buffers, i64 %begin, i64 %end) {
entry:
  %xs = load ptr, ptr %buffers
  %yp = getelementptr ptr, ptr %buffers, i64 1
  %ys = load ptr, ptr %yp
  %op = getelementptr ptr, ptr %buffers, i64 2
  %out = load ptr, ptr %op
  %tp = getelementptr ptr, ptr %buffers, i64 3
  %threads = load ptr, ptr %tp
  %slot = alloca i64
  br label %head
head:
  %i = phi i64 [ %begin, %entry ], [ %i1, %body ]
  %go = icmp slt i64 %i, %end
  br i1 %go, label %body, label %delay
body:
  %xp = getelementptr float, ptr %xs, i64 %i
  %x = load volatile float, ptr %xp
  %yq = getelementptr float, ptr %ys, i64 %i
  %y = load volatile float, ptr %yq
  %z = fmul float %x, %y
  %zp = getelementptr float, ptr %out, i64 %i
  store float %z, ptr %zp
  %me = call i64 @pthread_self()
  %tq = getelementptr i64, ptr %threads, i64 %i
  store i64 %me, ptr %tq
  %i1 = add i64 %i, 1
  br label %head
delay:
  %j = phi i64 [ 0, %head ], [ %j1, %delay ]
  store volatile i64 %j, ptr %slot
  %j1 = add i64 %j, 1
  %wait = icmp slt i64 %j1, 300000
  br i1 %wait, label %delay, label %exit
exit:
  ret void
}
"""


@pytest.fixture(scope="module")
def kernels() -> dict[str, int]:
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    machine = llvm.Target.from_default_triple().create_target_machine(jit=True)
    module = llvm.parse_assembly(COUNT)
    module.triple = machine.triple
    engine = llvm.create_mcjit_compiler(module, machine)
    engine.finalize_object()
    kernels.engine = engine  # type: ignore[attr-defined]  # keep the code alive
    return {name: engine.get_function_address(name) for name in ("count", "multiply")}


def _table(*arrays: np.ndarray) -> ctypes.Array:
    table = (ctypes.c_void_p * len(arrays))()
    for i, a in enumerate(arrays):
        table[i] = a.ctypes.data
    return table


@pytest.mark.parametrize("outer,parts", [(1, 2), (2, 2), (7, 3), (1000, 2), (1000, 8), (5, 5)])
def test_every_index_runs_exactly_once(kernels: dict[str, int], outer: int, parts: int) -> None:
    assert pool is not None
    counts = np.zeros(outer, np.int64)
    table = _table(counts)
    calls = 500
    for _ in range(calls):
        pool.parallel_for(kernels["count"], ctypes.cast(table, ctypes.c_void_p), outer, parts)
    np.testing.assert_array_equal(counts, np.full(outer, calls))


def test_concurrent_callers_each_get_their_whole_kernel(kernels: dict[str, int]) -> None:
    """Two Python threads splitting kernels at once: one owns the pool, the other runs its
    kernel whole; no part is lost or run twice."""
    assert pool is not None
    results = [np.zeros(301, np.int64) for _ in range(3)]
    tables = [_table(r) for r in results]

    def caller(k: int) -> None:
        for _ in range(300):
            pool.parallel_for(kernels["count"], ctypes.cast(tables[k], ctypes.c_void_p), 301, 4)

    threads = [threading.Thread(target=caller, args=(k,)) for k in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for r in results:
        np.testing.assert_array_equal(r, np.full(301, 300))


@pytest.mark.parametrize("flush", [True, False])
def test_workers_compute_with_the_callers_control_register(kernels: dict[str, int], flush: bool) -> None:
    assert pool is not None
    x = np.full(2, 1e-20, np.float32)
    y = np.full(2, 1e-20, np.float32)
    out = np.full(2, np.nan, np.float32)
    threads = np.zeros(2, np.int64)
    table = _table(x, y, out, threads)
    caller = threading.get_ident()  # pthread_self() of this thread
    helped = 0
    for attempt in range(500):  # at least 20 runs, and until a worker has taken a part (on a busy
        if attempt >= 20 and helped:  # machine the caller may do both parts before it wakes)
            break
        with scoped_flush_denormal(flush):
            pool.parallel_for(kernels["multiply"], ctypes.cast(table, ctypes.c_void_p), 2, 2)
        helped += int(threads[1] != caller or threads[0] != caller)
        if flush:
            np.testing.assert_array_equal(out, [0, 0])  # 1e-40 flushed, on both threads
        else:
            assert np.all(out > 0) and np.all(out < np.finfo(np.float32).tiny)
    assert helped > 0, "the worker never took a part"


def test_a_timed_split_says_when_and_on_which_thread_each_part_ran(kernels: dict[str, int]) -> None:
    """``parallel_for_timed``: every part once, each on a thread of this process, its times inside
    the call and on the clock ``time.perf_counter`` reads; the work still done exactly once."""
    import os
    import time

    assert pool is not None
    outer, parts = 1000, 4
    counts = np.zeros(outer, np.int64)
    table = _table(counts)
    before = time.perf_counter()
    timed = pool.parallel_for_timed(kernels["count"], ctypes.cast(table, ctypes.c_void_p), outer, parts)
    after = time.perf_counter()
    np.testing.assert_array_equal(counts, np.ones(outer))
    assert sorted(p.part for p in timed) == list(range(parts))
    threads = {t.native_id for t in threading.enumerate()}
    for p in timed:
        assert before <= p.start <= p.end <= after, (before, p, after)
        assert p.thread in threads or p.thread == os.getpid()
    assert threading.get_native_id() in {p.thread for p in timed}, "the caller claims parts too"
    # Untimed calls after a timed one write no timings (the table pointer is the task's own).
    pool.parallel_for(kernels["count"], ctypes.cast(table, ctypes.c_void_p), outer, parts)
    np.testing.assert_array_equal(counts, np.full(outer, 2))
