"""LLVM for the host CPU through llvmlite: optimize, JIT, and keep every stage's text.

:class:`CpuJit` turns one LLVM module (all kernels of an HLO module) into
machine code with MCJIT for the host's CPU and features (AVX-512, ...), after
running LLVM's ``-O<level>`` pipeline with loop and SLP vectorization on. It keeps
the unoptimized IR, the optimized IR and the assembly, which is what
``Lowered.as_text("llvm_ir" | "optimized_llvm_ir" | "asm")`` and the
``.ir-no-opt.ll`` / ``.ir-with-opt.ll`` / ``.s`` dumps show.
"""

from __future__ import annotations

import threading

import llvmlite.binding as llvm

from xla_teach.backends.cpu import split_codegen
from xla_teach.backends.cpu.host_target import host_cpu, host_target_machine, initialize_llvm  # noqa: F401 - their old home
from xla_teach.backends.llvm.kernel_support import optimize_module

_lock = threading.Lock()


class CpuJit:
    """A JIT-compiled LLVM module whose functions can be called through ctypes."""

    def __init__(self, ir_text: str, opt_level: int = 3, keep_assembly: bool = True,
                 vector_code: bool = False, split: bool = False) -> None:
        """``vector_code``: the module's kernels are vector code already (LLVM's short pipeline,
        see :func:`~xla_teach.backends.llvm.kernel_support.optimize_module`). ``split``: a large
        module is compiled in two parts at once, one by the codegen worker process
        (:mod:`~xla_teach.backends.cpu.split_codegen`)."""
        initialize_llvm()
        self.ir_no_opt = ir_text
        self.opt_level = opt_level
        self.keep_assembly = keep_assembly
        self._assembly: str | None = None
        self._other_parts: list[str] = []  # the optimized IR of the parts the worker compiled
        worker = split_codegen.worker() if split and len(ir_text) >= split_codegen.SPLIT_MIN_BYTES else None
        if worker is not None and worker.busy.acquire(blocking=False):
            try:
                self._compile_split(ir_text, worker, opt_level, vector_code)
                return
            except RuntimeError:
                split_codegen.give_up()  # the worker failed: compile it all here, now and from now on
            finally:
                worker.busy.release()
        self._module, self.engine = self._compile(ir_text, opt_level, vector_code)
        with _lock:
            self.engine.finalize_object()
        self.ir_with_opt = str(self._module)

    @staticmethod
    def _compile(ir_text: str, opt_level: int, vector_code: bool) -> tuple[llvm.ModuleRef, llvm.ExecutionEngine]:
        tm = host_target_machine(opt_level)
        with _lock:
            module = llvm.parse_assembly(ir_text)
            module.triple = tm.triple
            module.data_layout = str(tm.target_data)
            module.verify()
            optimize_module(module, tm, opt_level, vector_code)
            engine = llvm.create_mcjit_compiler(module, tm)
            return module, engine

    def _compile_split(self, ir_text: str, worker: split_codegen.CodegenWorker, opt_level: int,
                       vector_code: bool) -> None:
        """The first part here, the second in the worker at the same time (each part's machine
        code is complete on its own); the worker's object file then joins this engine."""
        mine, theirs = split_codegen.split_module(ir_text, 2)
        worker.start(theirs, opt_level, vector_code)
        module, engine = self._compile(mine, opt_level, vector_code)
        with _lock:
            engine.finalize_object()
        code, optimized = worker.result()
        with _lock:
            engine.add_object_file(llvm.ObjectFileRef.from_data(code))
            engine.finalize_object()
        self._module, self.engine, self._other_parts = module, engine, [optimized]
        self.ir_with_opt = str(module) + "".join(
            f"\n; ---- part {k + 2} of {len(self._other_parts) + 1}, compiled by the codegen worker process "
            f"----\n{text}" for k, text in enumerate(self._other_parts))

    @property
    def assembly(self) -> str:
        """The optimized module's assembly, made when first asked for (a quarter of LLVM's time
        on a mid-size module, and only dumps, ``as_text("asm")`` and the explorer read it); a
        split module's parts one after another."""
        if self._assembly is None:
            if not self.keep_assembly:
                self._assembly = ""
            else:
                with _lock:
                    tm = host_target_machine(self.opt_level)
                    parts = [tm.emit_assembly(self._module)]
                    for text in self._other_parts:
                        part = llvm.parse_assembly(text)
                        parts.append(tm.emit_assembly(part))
                self._assembly = "\n".join(parts)
        return self._assembly

    def function_address(self, name: str) -> int:
        address = self.engine.get_function_address(name)
        if not address:
            raise KeyError(f"function {name} is not in the compiled module")
        return address
