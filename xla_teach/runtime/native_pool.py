"""The CPU's thread pool, written in LLVM IR: a kernel split across cores for a few microseconds.

A CPU kernel is ``void kernel(void** buffers, i64 begin, i64 end)``: it computes the part
``[begin, end)`` of its outermost loop, so ``parts`` threads can share it. Handing a part to a
Python ``ThreadPoolExecutor`` and waiting for it costs about 90 microseconds (the queue, the
futures, the interpreter lock passed back and forth) -- as long as a 1M-element kernel takes,
and paid again for every kernel of a loop's every iteration. XLA's runtime splits work over an
Eigen thread pool in C++; this module does the same in about a hundred lines of LLVM IR, which
llvmlite compiles once, so a whole split runs without touching the interpreter:

* the **task** lives in one global: the kernel, its buffer table, the loop's size and the
  number of parts, and the caller's floating-point control register (the workers copy it, so
  they flush denormals exactly when the caller does);
* the workers are threads that Python starts once, each spending its life inside
  ``xla_teach_pool_worker`` (a native call, so they never hold the interpreter lock). A worker
  waits for the ``generation`` counter to change: first by re-reading it (``SPIN`` times, a
  fraction of a millisecond: a kernel sequence publishes its next task within microseconds, and a
  loop body's next split kernel within a few hundred), then asleep in the Linux ``futex`` system
  call, which the caller's ``futex(WAKE)`` ends;
* ``xla_teach_parallel_for`` (called from Python through ctypes) publishes a task, wakes the
  workers and then **claims parts itself** like any worker. Parts are claimed one at a time from
  a 64-bit word ``generation << 32 | parts left`` by compare-and-swap, so a part runs exactly
  once and a late worker can never claim a part of a finished task. The caller does not wait
  for a worker to wake up: if none has, it computes every part alone;
* the thread that finishes the last part wakes the caller if it is asleep on ``pending``.

One task runs at a time; a second caller (another Python thread running an executable) finds the
pool ``busy`` and runs its kernel whole, on its own thread. On a machine where xla_teach does
not know the futex system call or the control register (anything but Linux on x86-64 or
AArch64), :func:`native_pool` returns None and the runtime uses Python threads.
"""

from __future__ import annotations

import ctypes
import functools
import os
import platform
import sys
import threading
from dataclasses import dataclass

_CONTROL = {  # per architecture: the floating-point control register, the futex and gettid syscalls
    "x86_64": ("""
declare void @llvm.x86.sse.stmxcsr(ptr)
declare void @llvm.x86.sse.ldmxcsr(ptr)
define internal i64 @read_control() {
  %slot = alloca i32
  call void @llvm.x86.sse.stmxcsr(ptr %slot)
  %v = load i32, ptr %slot
  %w = zext i32 %v to i64
  ret i64 %w
}
define internal void @write_control(i64 %value) {
  %slot = alloca i32
  %v = trunc i64 %value to i32
  store i32 %v, ptr %slot
  call void @llvm.x86.sse.ldmxcsr(ptr %slot)
  ret void
}
""", 202, 186),
    "aarch64": ("""
declare i64 @llvm.aarch64.get.fpcr()
declare void @llvm.aarch64.set.fpcr(i64)
define internal i64 @read_control() {
  %v = call i64 @llvm.aarch64.get.fpcr()
  ret i64 %v
}
define internal void @write_control(i64 %value) {
  call void @llvm.aarch64.set.fpcr(i64 %value)
  ret void
}
""", 98, 178),
}

# Re-reads of the counter before a worker sleeps. A sleeping worker wakes tens of microseconds
# after futex(WAKE) -- later than a short part takes, so the caller computes every part alone.
# At 2^14 re-reads the workers slept between the LSTM step's 32-row products and the caller did
# them alone (57 ms a step); at 2^18 they are awake for the next one (45 ms; XLA's, 43-49 ms).
# XLA's Eigen pool spins before sleeping too.
SPIN = 1 << 18

# The pool's one global: the fields' indices are named in the IR's comments.
_POOL_IR = """
%Pool = type { i32, i32, i32, i32, i64, ptr, ptr, i64, i64, i64, ptr }
; 0 generation   (futex word: the workers sleep on it)
; 1 pending      (futex word: parts not yet finished; the caller sleeps on it)
; 2 busy         (1 while a caller owns the pool)
; 3 (padding)
; 4 next         (generation << 32 | parts not yet claimed)
; 5 kernel  6 buffer table  7 outer loop size  8 parts  9 the caller's control register
; 10 timings    (null, or i64[parts][3]: each part's thread id, start and end in nanoseconds)
@pool = internal global %Pool zeroinitializer, align 64

declare i64 @syscall(i64, ...)
declare i32 @clock_gettime(i32, ptr)

; CLOCK_MONOTONIC in nanoseconds: the clock Python's time.perf_counter reads on Linux.
define internal i64 @now_ns() {
  %ts = alloca { i64, i64 }
  %r = call i32 @clock_gettime(i32 1, ptr %ts)
  %sp = getelementptr { i64, i64 }, ptr %ts, i32 0, i32 0
  %nsp = getelementptr { i64, i64 }, ptr %ts, i32 0, i32 1
  %s = load i64, ptr %sp
  %ns = load i64, ptr %nsp
  %s9 = mul i64 %s, 1000000000
  %t = add i64 %s9, %ns
  ret i64 %t
}

define internal void @futex_wait(ptr %word, i32 %expected) {
  %e = zext i32 %expected to i64
  %r = call i64 (i64, ...) @syscall(i64 FUTEX, ptr %word, i64 128, i64 %e, ptr null)  ; FUTEX_WAIT_PRIVATE
  ret void
}

define internal void @futex_wake(ptr %word) {
  %r = call i64 (i64, ...) @syscall(i64 FUTEX, ptr %word, i64 129, i64 2147483647)  ; FUTEX_WAKE_PRIVATE, all
  ret void
}

; Claim and run parts of task `gen` until none is left.
define internal void @run_parts(i32 %gen) {
entry:
  %nextp = getelementptr %Pool, ptr @pool, i32 0, i32 4
  %pendingp = getelementptr %Pool, ptr @pool, i32 0, i32 1
  %fn = load ptr, ptr getelementptr (%Pool, ptr @pool, i32 0, i32 5)
  %args = load ptr, ptr getelementptr (%Pool, ptr @pool, i32 0, i32 6)
  %outer = load i64, ptr getelementptr (%Pool, ptr @pool, i32 0, i32 7)
  %parts = load i64, ptr getelementptr (%Pool, ptr @pool, i32 0, i32 8)
  %times = load ptr, ptr getelementptr (%Pool, ptr @pool, i32 0, i32 10)
  %timed = icmp ne ptr %times, null
  %g = zext i32 %gen to i64
  %tag = shl i64 %g, 32
  br label %claim
claim:
  %v = load atomic i64, ptr %nextp seq_cst, align 8
  %vtag = and i64 %v, -4294967296
  %left = and i64 %v, 4294967295
  %ours = icmp eq i64 %vtag, %tag
  %some = icmp ne i64 %left, 0
  %ok = and i1 %ours, %some
  br i1 %ok, label %try, label %done
try:
  %v1 = sub i64 %v, 1
  %pair = cmpxchg ptr %nextp, i64 %v, i64 %v1 seq_cst seq_cst
  %won = extractvalue { i64, i1 } %pair, 1
  br i1 %won, label %run, label %claim
run:
  ; A successful claim proves task `gen` was live, so the fields read above are its own.
  %k = sub i64 %parts, %left
  %b0 = mul i64 %outer, %k
  %begin = udiv i64 %b0, %parts
  %k1 = add i64 %k, 1
  %e0 = mul i64 %outer, %k1
  %end = udiv i64 %e0, %parts
  br i1 %timed, label %timed_run, label %plain_run
plain_run:
  call void %fn(ptr %args, i64 %begin, i64 %end)
  br label %finished
timed_run:  ; the profiler asked for each part's thread and times (runtime/thunks.py)
  %t0 = call i64 @now_ns()
  call void %fn(ptr %args, i64 %begin, i64 %end)
  %t1 = call i64 @now_ns()
  %tid = call i64 (i64, ...) @syscall(i64 GETTID)
  %row = mul i64 %k, 3
  %tidp = getelementptr i64, ptr %times, i64 %row
  store i64 %tid, ptr %tidp
  %t0p = getelementptr i64, ptr %tidp, i64 1
  store i64 %t0, ptr %t0p
  %t1p = getelementptr i64, ptr %tidp, i64 2
  store i64 %t1, ptr %t1p
  br label %finished
finished:
  %was = atomicrmw sub ptr %pendingp, i32 1 seq_cst
  %last = icmp eq i32 %was, 1
  br i1 %last, label %wake, label %claim
wake:
  call void @futex_wake(ptr %pendingp)
  br label %claim
done:
  ret void
}

; A worker thread: wait for a new generation, adopt the caller's control register, run parts.
define void @xla_teach_pool_worker() {
entry:
  %genp = getelementptr %Pool, ptr @pool, i32 0, i32 0
  %start = load atomic i32, ptr %genp seq_cst, align 4
  br label %wait
wait:
  %seen = phi i32 [ %start, %entry ], [ %now, %work ]
  br label %spin
spin:
  %i = phi i32 [ 0, %wait ], [ %i1, %again ], [ 0, %sleep ]
  %now = load atomic i32, ptr %genp seq_cst, align 4
  %changed = icmp ne i32 %now, %seen
  br i1 %changed, label %work, label %again
again:
  %i1 = add i32 %i, 1
  %more = icmp ult i32 %i1, SPIN
  br i1 %more, label %spin, label %sleep
sleep:
  call void @futex_wait(ptr %genp, i32 %seen)
  br label %spin
work:
  %control = load i64, ptr getelementptr (%Pool, ptr @pool, i32 0, i32 9)
  call void @write_control(i64 %control)
  call void @run_parts(i32 %now)
  br label %wait
}

; Run kernel `fn` over [0, outer) in `parts` parts on this thread and the workers.
define void @xla_teach_parallel_for(ptr %fn, ptr %args, i64 %outer, i64 %parts) {
entry:
  call void @xla_teach_parallel_for_timed(ptr %fn, ptr %args, i64 %outer, i64 %parts, ptr null)
  ret void
}

; The same, writing each part's thread id, start and end (ns) into `times` (i64[parts][3]) when
; it is not null. A call that finds the pool busy runs the kernel whole and writes nothing.
define void @xla_teach_parallel_for_timed(ptr %fn, ptr %args, i64 %outer, i64 %parts, ptr %times) {
entry:
  %busyp = getelementptr %Pool, ptr @pool, i32 0, i32 2
  %pair = cmpxchg ptr %busyp, i32 0, i32 1 seq_cst seq_cst
  %owner = extractvalue { i32, i1 } %pair, 1
  br i1 %owner, label %publish, label %alone
alone:
  call void %fn(ptr %args, i64 0, i64 %outer)
  ret void
publish:
  store ptr %fn, ptr getelementptr (%Pool, ptr @pool, i32 0, i32 5)
  store ptr %args, ptr getelementptr (%Pool, ptr @pool, i32 0, i32 6)
  store i64 %outer, ptr getelementptr (%Pool, ptr @pool, i32 0, i32 7)
  store i64 %parts, ptr getelementptr (%Pool, ptr @pool, i32 0, i32 8)
  %control = call i64 @read_control()
  store i64 %control, ptr getelementptr (%Pool, ptr @pool, i32 0, i32 9)
  store ptr %times, ptr getelementptr (%Pool, ptr @pool, i32 0, i32 10)
  %genp = getelementptr %Pool, ptr @pool, i32 0, i32 0
  %pendingp = getelementptr %Pool, ptr @pool, i32 0, i32 1
  %old = load atomic i32, ptr %genp seq_cst, align 4
  %gen = add i32 %old, 1
  %p32 = trunc i64 %parts to i32
  store atomic i32 %p32, ptr %pendingp seq_cst, align 4
  %g = zext i32 %gen to i64
  %tag = shl i64 %g, 32
  %next = or i64 %tag, %parts
  store atomic i64 %next, ptr getelementptr (%Pool, ptr @pool, i32 0, i32 4) seq_cst, align 8
  store atomic i32 %gen, ptr %genp seq_cst, align 4
  call void @futex_wake(ptr %genp)
  call void @run_parts(i32 %gen)
  br label %check
check:
  %i = phi i32 [ 0, %publish ], [ %i1, %again ], [ 0, %sleep ]
  %p = load atomic i32, ptr %pendingp seq_cst, align 4
  %finished = icmp eq i32 %p, 0
  br i1 %finished, label %release, label %again
again:
  %i1 = add i32 %i, 1
  %more = icmp ult i32 %i1, SPIN
  br i1 %more, label %check, label %sleep
sleep:
  call void @futex_wait(ptr %pendingp, i32 %p)
  br label %check
release:
  store atomic i32 0, ptr %busyp seq_cst, align 4
  ret void
}
"""

PARALLEL_FOR = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64)
PARALLEL_FOR_TIMED = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64,
                                      ctypes.c_void_p)


@dataclass(frozen=True)
class PartTime:
    """One part of a split kernel as it ran: the thread (its Linux thread id) and when."""

    part: int
    thread: int
    start: float  # time.perf_counter() seconds
    end: float
_WORKER = ctypes.CFUNCTYPE(None)


class NativePool:
    """The compiled pool and its worker threads (``os.cpu_count() - 1``: the caller is one more)."""

    def __init__(self, control_ir: str, futex: int, gettid: int, workers: int) -> None:
        import llvmlite.binding as llvm

        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        machine = llvm.Target.from_default_triple().create_target_machine(jit=True, opt=2)
        text = control_ir + _POOL_IR.replace("FUTEX", str(futex)).replace("GETTID", str(gettid))
        text = text.replace("SPIN", str(SPIN))
        module = llvm.parse_assembly(text)
        module.triple = machine.triple
        module.verify()
        self.ir = text
        self._engine = llvm.create_mcjit_compiler(module, machine)
        self._engine.finalize_object()
        self.parallel_for_address = self._engine.get_function_address("xla_teach_parallel_for")
        self.parallel_for = PARALLEL_FOR(self.parallel_for_address)
        self._timed = PARALLEL_FOR_TIMED(self._engine.get_function_address("xla_teach_parallel_for_timed"))
        worker = _WORKER(self._engine.get_function_address("xla_teach_pool_worker"))
        self.workers = workers
        self._threads = [threading.Thread(target=worker, name=f"xla_teach-worker-{i}", daemon=True)
                         for i in range(workers)]
        for t in self._threads:
            t.start()  # each stays inside the native worker loop, without the interpreter lock


    def parallel_for_timed(self, fn: int, args: int | None, outer: int, parts: int) -> list[PartTime]:
        """``parallel_for``, returning when and on which thread each part ran (for the profiler's
        thread-pool lanes); empty when another caller held the pool and the kernel ran whole."""
        table = (ctypes.c_int64 * (3 * parts))()
        self._timed(fn, args, outer, parts, ctypes.cast(table, ctypes.c_void_p))
        return [PartTime(k, table[3 * k], table[3 * k + 1] / 1e9, table[3 * k + 2] / 1e9)
                for k in range(parts) if table[3 * k + 2]]


def _host_support() -> tuple[str, int, int] | None:
    if not sys.platform.startswith("linux"):
        return None
    machine = platform.machine().lower()
    found = _CONTROL.get("x86_64" if machine in ("x86_64", "amd64") else machine)
    return found


_lock = threading.Lock()


def has_native_pool() -> bool:
    """Whether kernels will be split by the native pool (without starting it)."""
    return (_host_support() is not None and (os.cpu_count() or 1) >= 2
            and not os.environ.get("XLA_TEACH_PYTHON_THREAD_POOL"))


@functools.cache
def _pool() -> NativePool | None:
    if not has_native_pool():
        return None
    support = _host_support()
    assert support is not None
    with _lock:
        return NativePool(*support, workers=(os.cpu_count() or 1) - 1)


def native_pool() -> NativePool | None:
    """The native pool (started on first use), or None where the runtime uses Python threads:
    not Linux on x86-64/AArch64, one core, or ``XLA_TEACH_PYTHON_THREAD_POOL`` set."""
    return _pool()
