"""A while loop run by a few lines of native code: no Python between its kernels.

:mod:`~xla_teach.runtime.fixed_loop` binds a loop's buffers once, so each iteration is only
kernel calls -- but each call still goes from Python through ``ctypes``, a few microseconds
apiece, and an LSTM's 64 steps of 15 kernels make two thousand of them. XLA's CPU runtime runs
a loop's thunks from C++. Here the same is a small LLVM function, compiled once per process,
that is handed the loop as data::

    Step = {kernel, its buffer table, outer loop size, parts}     # one per kernel
    Copy = {destination, source, bytes}                           # state copied back

    trips = 0
    loop:
        for step in condition: run(step)     # a step of several parts goes to the native pool
        if not *pred: return trips
        for step in body: run(step)
        for copy in copies: memcpy(copy)
        trips += 1

``run(step)`` calls ``kernel(table, 0, outer)``, or -- when the kernel is split -- the native
pool's ``xla_teach_parallel_for`` (:mod:`~xla_teach.runtime.native_pool`), whose address the
loop is given. So the whole loop is one call from Python, which releases the interpreter lock
for its length.
"""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Sequence
from typing import Any

_LOOP_IR = """
%Step = type { ptr, ptr, i64, i64 }
%Copy = type { ptr, ptr, i64 }
declare void @llvm.memcpy.p0.p0.i64(ptr, ptr, i64, i1)

define internal void @run_steps(ptr %steps, i64 %n, ptr %parallel_for) {
entry:
  br label %head
head:
  %i = phi i64 [ 0, %entry ], [ %next, %latch ]
  %more = icmp slt i64 %i, %n
  br i1 %more, label %step, label %done
step:
  %fnp = getelementptr %Step, ptr %steps, i64 %i, i32 0
  %fn = load ptr, ptr %fnp
  %tablep = getelementptr %Step, ptr %steps, i64 %i, i32 1
  %table = load ptr, ptr %tablep
  %outerp = getelementptr %Step, ptr %steps, i64 %i, i32 2
  %outer = load i64, ptr %outerp
  %partsp = getelementptr %Step, ptr %steps, i64 %i, i32 3
  %parts = load i64, ptr %partsp
  %split = icmp sgt i64 %parts, 1
  br i1 %split, label %parallel, label %serial
parallel:
  call void %parallel_for(ptr %fn, ptr %table, i64 %outer, i64 %parts)
  br label %latch
serial:
  call void %fn(ptr %table, i64 0, i64 %outer)
  br label %latch
latch:
  %next = add i64 %i, 1
  br label %head
done:
  ret void
}

define i64 @xla_teach_run_loop(ptr %cond, i64 %ncond, ptr %pred, ptr %body, i64 %nbody, ptr %copies,
                               i64 %ncopies, ptr %parallel_for) {
entry:
  br label %loop
loop:
  %trips = phi i64 [ 0, %entry ], [ %trips.next, %copied ]
  call void @run_steps(ptr %cond, i64 %ncond, ptr %parallel_for)
  %p = load i8, ptr %pred
  %go = icmp ne i8 %p, 0
  br i1 %go, label %iteration, label %exit
iteration:
  call void @run_steps(ptr %body, i64 %nbody, ptr %parallel_for)
  br label %copy.head
copy.head:
  %c = phi i64 [ 0, %iteration ], [ %c.next, %copy ]
  %cmore = icmp slt i64 %c, %ncopies
  br i1 %cmore, label %copy, label %copied
copy:
  %dstp = getelementptr %Copy, ptr %copies, i64 %c, i32 0
  %dst = load ptr, ptr %dstp
  %srcp = getelementptr %Copy, ptr %copies, i64 %c, i32 1
  %src = load ptr, ptr %srcp
  %nbytesp = getelementptr %Copy, ptr %copies, i64 %c, i32 2
  %nbytes = load i64, ptr %nbytesp
  call void @llvm.memcpy.p0.p0.i64(ptr %dst, ptr %src, i64 %nbytes, i1 false)
  %c.next = add i64 %c, 1
  br label %copy.head
copied:
  %trips.next = add i64 %trips, 1
  br label %loop
exit:
  ret i64 %trips
}
"""


class Step(ctypes.Structure):
    _fields_ = [("kernel", ctypes.c_void_p), ("table", ctypes.c_void_p), ("outer", ctypes.c_int64),
                ("parts", ctypes.c_int64)]


class Copy(ctypes.Structure):
    _fields_ = [("destination", ctypes.c_void_p), ("source", ctypes.c_void_p), ("nbytes", ctypes.c_int64)]


_RUN_LOOP = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_void_p, ctypes.c_int64, ctypes.c_void_p, ctypes.c_void_p,
                             ctypes.c_int64, ctypes.c_void_p, ctypes.c_int64, ctypes.c_void_p)


@functools.cache
def _compiled() -> tuple[Any, Any]:
    import llvmlite.binding as llvm

    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    machine = llvm.Target.from_default_triple().create_target_machine(jit=True, opt=2)
    module = llvm.parse_assembly(_LOOP_IR)
    module.triple = machine.triple
    module.verify()
    engine = llvm.create_mcjit_compiler(module, machine)
    engine.finalize_object()
    return engine, _RUN_LOOP(engine.get_function_address("xla_teach_run_loop"))


def steps(kernels: Sequence[tuple[int, ctypes.Array, int, int]]) -> ctypes.Array:
    """The step table of ``(kernel address, buffer table, outer size, parts)``."""
    table = (Step * max(len(kernels), 1))()
    for slot, (address, args, outer, parts) in zip(table, kernels, strict=False):
        slot.kernel, slot.table = address, ctypes.cast(args, ctypes.c_void_p).value
        slot.outer, slot.parts = outer, parts
    return table


def copies(pairs: Sequence[tuple[int, int, int]]) -> ctypes.Array:
    """The copy table of ``(destination address, source address, bytes)``."""
    table = (Copy * max(len(pairs), 1))()
    for slot, (destination, source, nbytes) in zip(table, pairs, strict=False):
        slot.destination, slot.source, slot.nbytes = destination, source, nbytes
    return table


def run_loop(condition: ctypes.Array, n_condition: int, pred: int, body: ctypes.Array, n_body: int,
             copy_table: ctypes.Array, n_copies: int, parallel_for: int) -> int:
    """Run the loop natively; returns its trip count (see the module docstring)."""
    _, run = _compiled()
    return int(run(ctypes.cast(condition, ctypes.c_void_p), n_condition, pred, ctypes.cast(body, ctypes.c_void_p),
                   n_body, ctypes.cast(copy_table, ctypes.c_void_p), n_copies, parallel_for))
