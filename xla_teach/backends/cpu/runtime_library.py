"""The CPU runtime library: functions compiled once per process and called by every module's kernels.

XLA's CPU compiler does not generate code for everything it runs. A convolution becomes a call
into XLA's runtime (``__xla_cpu_runtime_EigenConv2DF32``: Eigen's spatial convolution, compiled
into XLA itself), with the shapes passed as arguments. Generating and optimizing that code for
every convolution of every program would cost more compile time than the rest of a small
program together.

xla_teach does the same with LLVM instead of a C++ compiler. A library function is emitted by
Python code like any kernel, but with its sizes as run-time arguments instead of constants; the
first module that needs it has it compiled (LLVM ``-O3``, once per process and function), and
from then on a module only declares it and calls it. LLVM's JIT finds the symbol as it finds
OpenBLAS's ``cblas_sgemm``: :func:`llvm.add_symbol` tells it the address.

    fn = library_function(module, "xla_teach_conv_f32_2d", signature, build)
    b.call(fn, [...])       # in a kernel; `build` runs only the first time in the process

Each library function lives in a module and a JIT engine of its own, kept for the life of the
process (the machine code must outlive every executable that calls it).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import llvmlite.binding as llvm
from llvmlite import ir

from xla_teach.backends.cpu.jit import CpuJit
from xla_teach.backends.cpu.kernel_builder import declare_dynamic_denormal_mode
from xla_teach.backends.llvm.loops import resolve_loop_hints


@dataclass
class LibraryFunction:
    """One compiled library function: its symbol, where it lives, what compiling it cost."""

    name: str
    address: int
    compile_seconds: float
    jit: CpuJit  # owns the machine code


_compiled: dict[str, LibraryFunction] = {}
_lock = threading.RLock()  # re-entered: a library function may call another


def library_function(module: ir.Module, name: str, signature: ir.FunctionType,
                     build: Callable[[ir.Function], None]) -> ir.Function:
    """Declare library function ``name`` in ``module`` (a kernel module calls it), compiling it
    first if this process has not: ``build(fn)`` fills in the body of ``fn``, a function of
    ``signature`` in a module of its own."""
    compiled(name, signature, build)
    existing = module.globals.get(name)
    if isinstance(existing, ir.Function):
        return existing
    return ir.Function(module, signature, name)


def compiled(name: str, signature: ir.FunctionType, build: Callable[[ir.Function], None]) -> LibraryFunction:
    """The compiled function ``name`` (compiled now if this is the first time)."""
    with _lock:
        if name in _compiled:
            return _compiled[name]
        start = time.perf_counter()
        library = ir.Module(name=name)
        fn = ir.Function(library, signature, name)
        fn.attributes.add("nounwind")
        build(fn)
        declare_dynamic_denormal_mode(library)
        jit = CpuJit(resolve_loop_hints(str(library)), keep_assembly=False)
        address = jit.function_address(name)
        llvm.add_symbol(name, address)
        _compiled[name] = LibraryFunction(name, address, time.perf_counter() - start, jit)
        return _compiled[name]


def compiled_functions() -> list[LibraryFunction]:
    """What this process has compiled so far (for tools and tests)."""
    with _lock:
        return list(_compiled.values())


def called_by(module: ir.Module) -> list[LibraryFunction]:
    """The library functions a kernel module declares (and so calls)."""
    return [f for f in compiled_functions() if f.name in module.globals]


def dump_files(module: ir.Module) -> dict[str, str]:
    """``{file suffix: text}`` of the library functions a module calls, before and after LLVM's
    ``-O3``: what ``--xla_dump_to`` writes next to the module's own ``.ir-no-opt.ll``, so that a
    dump shows the code a kernel's call runs."""
    files = {}
    for f in called_by(module):
        files[f"runtime-library.{f.name}.ir-no-opt.ll"] = f.jit.ir_no_opt
        files[f"runtime-library.{f.name}.ir-with-opt.ll"] = f.jit.ir_with_opt
    return files
