"""The CPU compiler: HLO passes, then buffers, LLVM IR, machine code and thunks.

``CpuCompiler().compile(module)`` mirrors XLA's ``CpuCompiler``:

1. ``run_hlo_passes`` -- the default pipeline with the CPU's own passes
   (fusion rules, dot strategy, scheduling), every stage recorded;
2. ``run_backend`` -- buffer assignment over the schedule, one LLVM function per
   kernel, LLVM ``-O3`` for the host CPU, MCJIT, and a thunk sequence per
   computation.

The result is an :class:`~xla_teach.runtime.executable.Executable`; its
``artifacts`` keep the optimized HLO, the buffer assignment, the LLVM IR before
and after optimization, and the assembly.
"""

from __future__ import annotations

import time

from xla_teach.backends.compiler_base import CompilerBase
from xla_teach.backends.cpu import runtime_library, split_codegen
from xla_teach.backends.cpu.ir_emitter import CpuIrEmitter, HostPlan, KernelPlan, SequencePlan
from xla_teach.backends.cpu.jit import CpuJit
from xla_teach.backends.cpu.kernel_builder import declare_dynamic_denormal_mode
from xla_teach.backends.llvm.kernel_dedup import dedupe_kernels
from xla_teach.backends.llvm.kernel_support import annotate_kernels
from xla_teach.backends.llvm.loops import resolve_loop_hints
from xla_teach.hlo.ir import HloModule
from xla_teach.passes.pass_base import HloPassPipeline
from xla_teach.passes.scheduling.buffer_assignment import ModuleBufferAssignment
from xla_teach.runtime.executable import CompiledArtifacts, Executable, SequenceExecutable
from xla_teach.runtime.thunks import KernelThunk, Thunk, host_thunk

# A module this large makes LLVM IR worth compiling in two parts (split_codegen.SPLIT_MIN_BYTES)
SPLIT_CODEGEN_MIN_INSTRUCTIONS = 1000


class CpuCompiler(CompilerBase):
    platform = "cpu"

    def hlo_pipeline(self) -> HloPassPipeline:
        from xla_teach.backends.cpu.cpu_pipeline import cpu_pipeline

        return cpu_pipeline()

    # ---- stage 2 ----------------------------------------------------------------------
    def run_backend(self, optimized: HloModule) -> Executable:
        start = time.perf_counter()
        if self.options.split_codegen and optimized.instruction_count() >= SPLIT_CODEGEN_MIN_INSTRUCTIONS:
            split_codegen.worker()  # started now, it is ready when LLVM begins (it takes ~0.4 s to start)
        assignments = ModuleBufferAssignment(optimized, donate_loop_state=True)  # loops update their state in place
        emitter = CpuIrEmitter(optimized, assignments)
        plans = emitter.emit_all()
        declare_dynamic_denormal_mode(emitter.llvm_module)
        ir_text = resolve_loop_hints(annotate_kernels(str(emitter.llvm_module), emitter.comments))
        ir_text, _ = dedupe_kernels(ir_text, list(emitter.comments))  # identical kernels compiled once
        self.timings["ir_emission"] = time.perf_counter() - start
        start = time.perf_counter()
        jit = CpuJit(ir_text, self.options.llvm_opt_level, self.options.keep_assembly, emitter.vector_code_only,
                     split=self.options.split_codegen)
        self.timings["llvm"] = time.perf_counter() - start
        sequences: dict[str, SequenceExecutable] = {}

        def sequence(name: str) -> SequenceExecutable:
            if name not in sequences:
                plan = plans[name]
                sequences[name] = SequenceExecutable(plan.assignment, self._thunks(plan, jit, sequence))
            return sequences[name]

        entry = sequence(optimized.entry.name)
        artifacts = CompiledArtifacts(
            optimized_module=optimized, buffer_assignment_text=assignments.to_text(), llvm_ir=ir_text,
            optimized_llvm_ir=jit.ir_with_opt, make_assembly=lambda: jit.assembly,
            extra=runtime_library.dump_files(emitter.llvm_module))
        executable = Executable(optimized, entry, artifacts, backend="cpu")
        executable.keep_alive = jit  # the machine code lives as long as the JIT engine
        executable.flush_denormals = self.options.flush_denormals
        executable.sequences = sequences  # type: ignore[attr-defined]
        executable.buffer_assignment = assignments
        return executable

    # ---- thunks -----------------------------------------------------------------------
    def _thunks(self, plan: SequencePlan, jit: CpuJit, sequence) -> list[Thunk]:  # type: ignore[no-untyped-def]
        thunks: list[Thunk] = []
        ba = plan.assignment
        for step in plan.steps:
            if isinstance(step, KernelPlan):
                partitions = step.partitions if self.options.cpu_parallel else 1
                thunks.append(KernelThunk(step.name, jit.function_address(step.name), step.slices,
                                          step.outer_size, partitions, step.nbytes))
                continue
            assert isinstance(step, HostPlan)
            thunks.append(host_thunk(step.instruction, ba, sequence))
        return thunks

