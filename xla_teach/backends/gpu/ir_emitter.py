"""From a scheduled, buffer-assigned module to NVPTX kernels and launch plans.

The walk over each sequential computation is shared with the CPU backend
(:class:`~xla_teach.backends.llvm.ir_emitter_base.IrEmitterBase`): the same instructions
need no code (parameters, tuples, bitcasts ...), the same run on the host
(while, conditional, call, custom-call). What differs is each kernel:

* a ``ptx_kernel`` function taking one device pointer per buffer slice;
* a *launch dimension* -- how many blocks of how many threads -- chosen per kernel
  and written into the optimized HLO as ``backend_config``, as XLA does;
* the emitter: loop fusions get one thread per element, reductions the warp-shuffle
  reduction, row fusions (softmax, layer norm) a block per row, dots a register-tiled
  shared-memory product, transposes a shared-memory tile, sorts a bitonic network per
  slice, scatters a thread per update with atomics (after a memcpy of the operand),
  dynamic-update-slice and rng-bit-generator a thread per element.
  What remains sequential -- select-and-scatter, variadic scatter -- reuses the CPU emitter
  on a single GPU thread (the launch shows ``1x1``). The legacy rng's Philox state is a
  device global, reset by a one-thread kernel first in the entry and advanced by a
  one-thread ``rng-get-and-update-state`` kernel.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field

from xla_teach.backends.gpu.kernel_builder import GpuKernelBuilder, LaunchDimensions
from xla_teach.backends.gpu.kernels.dot import emit_gpu_dot_kernel
from xla_teach.backends.gpu.kernels.loop import emit_gpu_loop_kernel, emit_single_thread
from xla_teach.backends.gpu.kernels.reduction import emit_gpu_reduction_kernel
from xla_teach.backends.gpu.kernels.rng import emit_gpu_rng_bit_generator_kernel
from xla_teach.backends.gpu.kernels.row_fusion import emit_gpu_row_fusion_kernel
from xla_teach.backends.gpu.kernels.scatter import emit_gpu_dynamic_update_slice_kernel, emit_gpu_scatter_kernel
from xla_teach.backends.gpu.kernels.sort import emit_gpu_sort_kernel
from xla_teach.backends.gpu.kernels.transpose import emit_gpu_transpose_kernel, is_tiled_transpose
from xla_teach.backends.gpu.nvptx import DATA_LAYOUT, TRIPLE
from xla_teach.backends.llvm.ir_emitter_base import IrEmitterBase, SequencePlan
from xla_teach.backends.llvm.kernel_context import KernelContext, find_dot_in, is_reduction_hero
from xla_teach.backends.llvm.kernel_support import hlo_comment, ptx_name
from xla_teach.backends.llvm.kernels.rng import emit_rng_get_and_update_state_kernel, emit_rng_state_reset
from xla_teach.backends.llvm.kernels.scatter import emit_scatter_kernel, emit_select_and_scatter_kernel
from xla_teach.hlo.ir import HloInstruction
from xla_teach.passes.fusion.row_fusion import is_row_fusion
from xla_teach.passes.scheduling.buffer_assignment import BufferAssignment, BufferSlice


@dataclass(frozen=True)
class DeviceCopy:
    """A device-to-device memcpy the runtime issues before a kernel (a scatter's operand)."""

    source: BufferSlice
    dest: BufferSlice
    nbytes: int


@dataclass
class GpuKernelPlan:
    name: str
    instruction: str
    slices: list[BufferSlice]
    launch: LaunchDimensions
    nbytes: int
    copies: list[DeviceCopy] = field(default_factory=list)


class GpuIrEmitter(IrEmitterBase):
    """Emits one NVPTX LLVM module for the whole HLO module."""

    allow_tf32 = True  # --xla_teach_gpu_tf32

    def emit_all(self) -> dict[str, SequencePlan]:
        self.llvm_module.triple = TRIPLE
        self.llvm_module.data_layout = DATA_LAYOUT
        return super().emit_all()

    def symbol(self, name: str) -> str:
        return ptx_name(name)  # PTX identifiers: letters, digits, _ and $ only

    def emit_kernel(self, instr: HloInstruction, assignment: BufferAssignment) -> GpuKernelPlan:
        operand_slices, operand_shapes = [], []
        for op in instr.operands:
            if op.shape.is_tuple or op.shape.is_token:
                raise NotImplementedError(f"{instr.name}: kernels take array operands, {op.name} is {op.shape}")
            operand_slices.append(assignment.slice(op))
            operand_shapes.append(op.shape)
        output_slices = assignment.leaf_slices(instr)
        name = self.kernel_name(instr)
        slices = operand_slices + output_slices
        kb = GpuKernelBuilder(self.llvm_module, name, operand_shapes + instr.shape.leaf_shapes(), slices)
        ctx = KernelContext(kb, instr, kb.arrays[: len(operand_shapes)], kb.arrays[len(operand_shapes):])
        emit = self._choose_gpu(instr, assignment)
        launch = emit(ctx)
        kb.finish()
        copies = (self._scatter_copies(instr, assignment) or []) if emit is emit_gpu_scatter_kernel else []
        self.comments[name] = hlo_comment(instr)
        instr.backend_config = json.dumps({"launch_dimensions": launch.as_config()}, separators=(",", ":"))
        return GpuKernelPlan(name, instr.name, slices, launch, sum(s.size for s in slices), copies)

    def emit_rng_state_reset(self) -> GpuKernelPlan:
        name = self.unique_symbol("rng_state_reset")
        kb = GpuKernelBuilder(self.llvm_module, name, [], [])
        emit_rng_state_reset(kb.b, self.llvm_module)
        kb.finish()
        self.comments[name] = "(no HLO) the Philox state of rng-get-and-update-state := {key, 0}"
        return GpuKernelPlan(name, "rng_state_reset", [], LaunchDimensions((1, 1, 1), (1, 1, 1)), 0)

    def _choose_gpu(self, instr: HloInstruction,
                    assignment: BufferAssignment) -> Callable[[KernelContext], LaunchDimensions]:
        op = instr.opcode
        if op == "sort":
            return emit_gpu_sort_kernel
        if op == "rng-bit-generator":
            return emit_gpu_rng_bit_generator_kernel
        if op == "scatter" and self._scatter_copies(instr, assignment) is not None:
            return emit_gpu_scatter_kernel
        if op == "dynamic-update-slice":
            in_place = assignment.slice(instr) == assignment.slice(instr.operand(0))
            return lambda ctx: emit_gpu_dynamic_update_slice_kernel(ctx, in_place)
        # Variadic scatter (several outputs combined as one tuple cannot be atomic), select-and-scatter
        # and the legacy rng's two-word state run the CPU's sequential emitters on one GPU thread.
        sequential = {"scatter": emit_scatter_kernel, "select-and-scatter": emit_select_and_scatter_kernel,
                      "rng-get-and-update-state": emit_rng_get_and_update_state_kernel}
        if op in sequential:
            return lambda ctx: emit_single_thread(ctx, sequential[op])
        if op in ("rng", "topk"):
            raise NotImplementedError(f"'{op}' has no GPU kernel")
        if is_row_fusion(instr):
            return emit_gpu_row_fusion_kernel
        hero = instr.fused_computation.root if op == "fusion" else instr
        if is_reduction_hero(hero):
            return emit_gpu_reduction_kernel
        if op == "dot" or (op == "fusion" and find_dot_in(instr) is not None):
            return lambda ctx: emit_gpu_dot_kernel(ctx, self.allow_tf32)
        if is_tiled_transpose(instr):
            return emit_gpu_transpose_kernel
        return emit_gpu_loop_kernel

    @staticmethod
    def _scatter_copies(instr: HloInstruction, assignment: BufferAssignment) -> list[DeviceCopy] | None:
        """The memcpy that puts a one-operand scatter's operand in its output buffer first (none when
        they share it), or None when the parallel kernel cannot do this scatter."""
        if instr.operand_count != 3 or instr.shape.is_tuple:
            return None
        operand = instr.operand(0)
        if operand.shape.minor_to_major() != instr.shape.minor_to_major():
            return None
        source, dest = assignment.slice(operand), assignment.slice(instr)
        return [] if source == dest else [DeviceCopy(source, dest, instr.shape.byte_size())]
