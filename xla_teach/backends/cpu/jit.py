"""LLVM for the host CPU through llvmlite: optimize, JIT, and keep every stage's text.

:class:`CpuJit` turns one LLVM module (all kernels of an HLO module) into
machine code with MCJIT for the host's CPU and features (AVX-512, ...), after
running LLVM's ``-O<level>`` pipeline with loop and SLP vectorization on. It keeps
the unoptimized IR, the optimized IR and the assembly, which is what
``Lowered.as_text("llvm_ir" | "optimized_llvm_ir" | "asm")`` and the
``.ir-no-opt.ll`` / ``.ir-with-opt.ll`` / ``.s`` dumps show.
"""

from __future__ import annotations

import functools
import threading

import llvmlite.binding as llvm

from xla_teach.backends.llvm.kernel_support import optimize_module

_lock = threading.Lock()


@functools.cache
def initialize_llvm() -> None:
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    llvm.initialize_native_asmparser()


@functools.cache
def host_cpu() -> tuple[str, str]:
    """The host's CPU name and feature string, asked of LLVM once (each ask reads ``cpuid`` and
    builds a string map: half a millisecond, every compile)."""
    initialize_llvm()
    return llvm.get_host_cpu_name(), llvm.get_host_cpu_features().flatten()


def host_target_machine(opt_level: int = 3) -> llvm.TargetMachine:
    """A new target machine for the host (MCJIT takes ownership of the one it is given)."""
    initialize_llvm()
    target = llvm.Target.from_default_triple()
    cpu, features = host_cpu()
    return target.create_target_machine(
        cpu=cpu, features=features, opt=min(max(opt_level, 0), 3), codemodel="jitdefault", jit=True)


class CpuJit:
    """A JIT-compiled LLVM module whose functions can be called through ctypes."""

    def __init__(self, ir_text: str, opt_level: int = 3, keep_assembly: bool = True,
                 vector_code: bool = False) -> None:
        """``vector_code``: the module's kernels are vector code already (LLVM's short pipeline,
        see :func:`~xla_teach.backends.llvm.kernel_support.optimize_module`)."""
        initialize_llvm()
        self.ir_no_opt = ir_text
        self.opt_level = opt_level
        self.keep_assembly = keep_assembly
        self._assembly: str | None = None
        tm = host_target_machine(opt_level)
        with _lock:
            module = llvm.parse_assembly(ir_text)
            module.triple = tm.triple
            module.data_layout = str(tm.target_data)
            module.verify()
            optimize_module(module, tm, opt_level, vector_code)
            self.ir_with_opt = str(module)
            self.engine = llvm.create_mcjit_compiler(module, tm)
            self.engine.finalize_object()
        self._module = module

    @property
    def assembly(self) -> str:
        """The optimized module's assembly, made when first asked for (a quarter of LLVM's time
        on a mid-size module, and only dumps, ``as_text("asm")`` and the explorer read it)."""
        if self._assembly is None:
            if not self.keep_assembly:
                self._assembly = ""
            else:
                with _lock:
                    self._assembly = host_target_machine(self.opt_level).emit_assembly(self._module)
        return self._assembly

    def function_address(self, name: str) -> int:
        address = self.engine.get_function_address(name)
        if not address:
            raise KeyError(f"function {name} is not in the compiled module")
        return address

    def object_code(self) -> bytes:
        """The module as a relocatable object file (for AOT)."""
        tm = host_target_machine()
        return tm.emit_object(self._module)
