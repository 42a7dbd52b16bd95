"""The GPU compiler: HLO passes, NVPTX LLVM IR, PTX -- and, with a device, an executable.

Stages, as in XLA's ``GpuCompiler``:

1. ``run_hlo_passes`` -- the shared pipeline with GPU fusion choices
   (:mod:`~xla_teach.backends.gpu.gpu_pipeline`), scheduling and buffer assignment;
2. ``run_backend`` -- one ``ptx_kernel`` per fusion or unfused op
   (:class:`~xla_teach.backends.gpu.ir_emitter.GpuIrEmitter`), LLVM's ``-O3`` for
   ``nvptx64-nvidia-cuda``, PTX for the target ``sm_XX``.

Compilation never needs a GPU: the PTX is in ``executable.artifacts.ptx`` (and in
``--xla_dump_to`` dumps). Only ``execute`` needs a device; without one it raises
:class:`~xla_teach.backends.gpu.runtime.GpuUnavailableError` ("no CUDA device/driver").
The target architecture is ``--xla_teach_gpu_arch`` if set, else the device's, else sm_80.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from xla_teach.backends.compiler_base import CompilerBase
from xla_teach.backends.gpu.ir_emitter import GpuIrEmitter, GpuKernelPlan
from xla_teach.backends.gpu.nvptx import DEFAULT_ARCH, compile_to_ptx, normalize_arch
from xla_teach.backends.gpu.runtime import GpuUnavailableError, device_available, unavailable_reason
from xla_teach.backends.llvm.ir_emitter_base import HostPlan, SequencePlan
from xla_teach.backends.llvm.kernel_support import annotate_kernels
from xla_teach.backends.llvm.loops import resolve_loop_hints
from xla_teach.backends.options import CompileOptions
from xla_teach.hlo.ir import HloModule
from xla_teach.passes.pass_base import HloPassPipeline
from xla_teach.passes.scheduling.buffer_assignment import ModuleBufferAssignment
from xla_teach.runtime.executable import CompiledArtifacts, CompiledExecutable
from xla_teach.runtime.thunks import host_thunk


def target_arch(options: CompileOptions) -> str:
    if options.gpu_arch:
        return normalize_arch(options.gpu_arch)
    if device_available():
        from xla_teach.backends.gpu.runtime import CudaContext

        return CudaContext.get().info.arch
    return DEFAULT_ARCH


class GpuProgram:
    """What compilation produced, before any device is touched."""

    def __init__(self, module: HloModule, plans: dict[str, SequencePlan], ptx: str, arch: str,
                 graph_min_size: int = 5) -> None:
        self.module = module
        self.plans = plans
        self.ptx = ptx
        self.arch = arch
        self.graph_min_size = graph_min_size  # kernels in a row replayed as one CUDA graph; 0: none


class GpuCompiledExecutable(CompiledExecutable):
    """``execute`` loads the PTX on first use (so compiling works without a GPU)."""

    backend = "gpu"

    def __init__(self, program: GpuProgram, artifacts: CompiledArtifacts) -> None:
        self.program = program
        self.module = program.module
        self.artifacts = artifacts
        self.arch = program.arch
        self._loaded: Any = None

    @property
    def launch_dimensions(self) -> dict[str, Any]:
        return {step.instruction: step.launch for plan in self.program.plans.values() for step in plan.steps
                if isinstance(step, GpuKernelPlan)}

    def loaded(self) -> Any:
        """The device executable (:class:`~xla_teach.backends.gpu.executable.GpuExecutable`)."""
        if self._loaded is None:
            if not device_available():
                raise GpuUnavailableError(
                    f"cannot execute on backend 'gpu': {unavailable_reason()}. The module compiled to PTX "
                    "(see .artifacts.ptx); run it where an NVIDIA GPU and driver are present.")
            self._loaded = _load(self.program, self.artifacts)
        return self._loaded

    def execute(self, args: Sequence[np.ndarray], profiler: Any = None) -> list[np.ndarray]:
        return self.loaded().execute(args, profiler)

    def loaded_with_graphs(self, graph_min_size: int) -> Any:
        """Another device executable of the same program, whose runs of ``graph_min_size`` or more
        kernels are CUDA graphs (0: every kernel launched from the host); benchmarks compare the two."""
        self.loaded()  # says plainly when there is no device
        program = GpuProgram(self.program.module, self.program.plans, self.program.ptx, self.program.arch,
                             graph_min_size)
        return _load(program, self.artifacts)


def _load(program: GpuProgram, artifacts: CompiledArtifacts) -> Any:
    from xla_teach.backends.gpu.executable import (
        GpuExecutable,
        GpuKernelThunk,
        GpuSequence,
        form_command_buffers,
    )
    from xla_teach.backends.gpu.runtime import CudaContext

    ctx = CudaContext.get()
    cu_module = ctx.load_module(program.ptx)
    sequences: dict[str, GpuSequence] = {}

    def sequence(name: str) -> GpuSequence:
        if name in sequences:
            return sequences[name]
        plan = program.plans[name]
        seq = GpuSequence(ctx, plan.assignment)
        sequences[name] = seq
        ba = plan.assignment
        for step in plan.steps:
            if isinstance(step, GpuKernelPlan):
                seq.thunks.append(GpuKernelThunk(step.name, ctx.function(cu_module, step.name), step.slices,
                                                 step.launch, step.nbytes, step.copies))
                continue
            assert isinstance(step, HostPlan)
            seq.thunks.append(host_thunk(step.instruction, ba, sequence))  # shared with the CPU runtime
        seq.thunks = form_command_buffers(seq.thunks, program.graph_min_size)
        return seq

    entry = sequence(program.module.entry.name)
    return GpuExecutable(program.module, entry, artifacts, keep_alive=(cu_module, sequences))


class GpuCompiler(CompilerBase):
    platform = "gpu"

    def hlo_pipeline(self) -> HloPassPipeline:
        from xla_teach.backends.gpu.gpu_pipeline import gpu_pipeline

        return gpu_pipeline()

    def run_backend(self, optimized: HloModule) -> GpuCompiledExecutable:
        start = time.perf_counter()
        assignments = ModuleBufferAssignment(optimized)
        emitter = GpuIrEmitter(optimized, assignments)
        emitter.allow_tf32 = self.options.gpu_tf32
        plans = emitter.emit_all()
        ir_text = resolve_loop_hints(annotate_kernels(str(emitter.llvm_module), emitter.comments))
        self.timings["ir_emission"] = time.perf_counter() - start
        start = time.perf_counter()
        arch = target_arch(self.options)
        optimized_ir, ptx = compile_to_ptx(ir_text, arch, self.options.llvm_opt_level)
        self.timings["llvm"] = time.perf_counter() - start
        artifacts = CompiledArtifacts(optimized_module=optimized, buffer_assignment_text=assignments.to_text(),
                                      llvm_ir=ir_text, optimized_llvm_ir=optimized_ir, ptx=ptx,
                                      extra={"arch": arch})
        program = GpuProgram(optimized, plans, ptx, arch, self.options.gpu_graph_min_size)
        executable = GpuCompiledExecutable(program, artifacts)
        executable.buffer_assignment = assignments
        return executable

