"""Flushing denormals to zero while a CPU executable runs, as XLA's CPU runtime does.

A *denormal* (subnormal) float is one smaller in magnitude than the smallest normal number
(``1.2e-38`` in f32, ``2.2e-308`` in f64). Arithmetic on them is slow on many CPUs, so XLA's
CPU runtime sets two bits of the processor's floating-point control register for the whole
run (``tsl::port::ScopedFlushDenormal``), and its thread pool sets them in every worker:

* **DAZ** (denormals are zero): an arithmetic instruction reads a denormal operand as zero,
  so ``log(1e-39)`` is ``-inf`` and ``1e-39 > 0`` is false;
* **FTZ** (flush to zero): an arithmetic result that would be denormal is written as zero, so
  ``1e-20 * 1e-20`` is ``0``.

Instructions that only move bits -- copies, reshapes, ``select``, ``negate`` and ``abs`` (a
sign-bit flip or mask) -- keep a denormal as it is. f16 is computed in f32, where every f16
value is normal, so f16 denormals survive; bf16 shares f32's exponent range and is flushed.

On x86-64 the bits live in MXCSR (FTZ = bit 15, DAZ = bit 6), read and written by the
``stmxcsr``/``ldmxcsr`` instructions; on AArch64 one bit of FPCR (FZ = bit 24) does both.
Python cannot reach either register, so :func:`fp_control` JIT-compiles a six-instruction LLVM
function that swaps the register's bits and returns the old value::

    define i32 @xla_teach_fp_control(i32 %set, i32 %clear) {   ; x86-64
      %slot = alloca i32
      call void @llvm.x86.sse.stmxcsr(ptr %slot)
      %old = load i32, ptr %slot
      %kept = and i32 %old, ~%clear
      %new = or i32 %kept, %set
      store i32 %new, ptr %slot
      call void @llvm.x86.sse.ldmxcsr(ptr %slot)
      ret i32 %old
    }

The register belongs to one thread: :func:`scoped_flush_denormal` sets the bits on the
calling thread and puts the old value back afterwards; :func:`in_callers_mode` wraps work
handed to a pool thread so that it runs with the caller's bits. BLAS and NumPy calls made
inside the scope are flushed as well (they run on the same thread), as XLA's Eigen calls are.
"""

from __future__ import annotations

import ctypes
import functools
import platform
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

_X86_FTZ_DAZ = (1 << 15) | (1 << 6)
_AARCH64_FZ = 1 << 24

_X86_IR = """
declare void @llvm.x86.sse.stmxcsr(ptr)
declare void @llvm.x86.sse.ldmxcsr(ptr)
define i64 @xla_teach_fp_control(i64 %set, i64 %clear) {
  %slot = alloca i32
  call void @llvm.x86.sse.stmxcsr(ptr %slot)
  %old = load i32, ptr %slot
  %s = trunc i64 %set to i32
  %c = trunc i64 %clear to i32
  %nc = xor i32 %c, -1
  %kept = and i32 %old, %nc
  %new = or i32 %kept, %s
  store i32 %new, ptr %slot
  call void @llvm.x86.sse.ldmxcsr(ptr %slot)
  %ret = zext i32 %old to i64
  ret i64 %ret
}
"""

_AARCH64_IR = """
declare i64 @llvm.aarch64.get.fpcr()
declare void @llvm.aarch64.set.fpcr(i64)
define i64 @xla_teach_fp_control(i64 %set, i64 %clear) {
  %old = call i64 @llvm.aarch64.get.fpcr()
  %nc = xor i64 %clear, -1
  %kept = and i64 %old, %nc
  %new = or i64 %kept, %set
  call void @llvm.aarch64.set.fpcr(i64 %new)
  ret i64 %old
}
"""

_SIGNATURE = ctypes.CFUNCTYPE(ctypes.c_uint64, ctypes.c_uint64, ctypes.c_uint64)
_state = threading.local()  # .flushing: is the current thread inside scoped_flush_denormal?


def flush_bits(machine: str | None = None) -> tuple[str, int] | None:
    """The control-register IR and bit mask that flush denormals on ``machine`` (the host's by
    default), or None where xla_teach does not know the register."""
    machine = (machine or platform.machine()).lower()
    if machine in ("x86_64", "amd64"):
        return _X86_IR, _X86_FTZ_DAZ
    if machine in ("aarch64", "arm64"):
        return _AARCH64_IR, _AARCH64_FZ
    return None


class FpControl:
    """The host's floating-point control register, swapped through a JIT-compiled function."""

    def __init__(self, ir_text: str, mask: int) -> None:
        import llvmlite.binding as llvm

        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        target = llvm.Target.from_default_triple()
        machine = target.create_target_machine(jit=True)
        module = llvm.parse_assembly(ir_text)
        module.triple = machine.triple
        module.verify()
        self._engine = llvm.create_mcjit_compiler(module, machine)
        self._engine.finalize_object()
        self._swap = _SIGNATURE(self._engine.get_function_address("xla_teach_fp_control"))
        self.mask = mask

    def swap(self, set_bits: int, clear_bits: int) -> int:
        """Clear ``clear_bits``, then set ``set_bits``; returns the register's old value."""
        return int(self._swap(set_bits, clear_bits))

    def read(self) -> int:
        return self.swap(0, 0)

    def flushing(self) -> bool:
        """Are denormals flushed on this thread right now?"""
        return self.read() & self.mask == self.mask


_build_lock = threading.Lock()


@functools.cache
def _host_control() -> FpControl | None:
    found = flush_bits()
    if found is None:
        return None
    with _build_lock:
        return FpControl(*found)


def fp_control() -> FpControl | None:
    """The host's control register (None on a CPU whose register xla_teach does not know:
    there denormals are not flushed, and :func:`denormals_flushed_here` says so)."""
    return _host_control()


def denormals_flushed_here() -> bool:
    """Can this machine flush denormals (x86-64 and AArch64 can)?"""
    return flush_bits() is not None


def _start_flushing() -> tuple[FpControl, int] | None:
    """Set the bits on this thread; the register and its old value to restore (None when
    there is nothing to do: no known register, or the thread flushes already)."""
    control = fp_control()
    if control is None or getattr(_state, "flushing", False):
        return None
    old = control.swap(control.mask, 0)
    _state.flushing = True
    return control, old


def _stop_flushing(started: tuple[FpControl, int]) -> None:
    control, old = started
    _state.flushing = False
    control.swap(old & control.mask, control.mask)


@contextmanager
def scoped_flush_denormal(enabled: bool = True) -> Iterator[None]:
    """Flush denormals on the calling thread inside the ``with`` block (when ``enabled`` and
    the CPU allows it), then restore the register as it was, as XLA's ``ScopedFlushDenormal``."""
    started = _start_flushing() if enabled else None
    try:
        yield
    finally:
        if started is not None:
            _stop_flushing(started)


def run_flushing_denormals(fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)`` inside :func:`scoped_flush_denormal` -- the same, without a generator's cost
    on every call of a small executable."""
    started = _start_flushing()
    try:
        return fn(*args)
    finally:
        if started is not None:
            _stop_flushing(started)


def in_callers_mode(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` as it should run on a pool thread: with denormals flushed if the calling thread
    (the one calling ``in_callers_mode``) is flushing them."""
    if not getattr(_state, "flushing", False):
        return fn

    def run(*args: Any) -> Any:
        with scoped_flush_denormal():
            return fn(*args)

    return run
