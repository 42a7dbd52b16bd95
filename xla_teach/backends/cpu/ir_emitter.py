"""The CPU's kernels and thunk plans for a scheduled, buffer-assigned module.

The walk over each sequential computation -- which instructions need nothing, which run on
the host, which get a kernel -- is :class:`~xla_teach.backends.llvm.ir_emitter_base.IrEmitterBase`,
shared with the GPU backend. Here: each CPU kernel is a function ``(buffers, begin, end)`` whose
outer loop the runtime may split across threads (``KernelPlan.partitions``).

Kernels are chosen by the instruction's *hero* (a fusion's root): reductions get
the reduction emitter, dots the dot emitter, sort/scatter/... their own, and
everything else the loop emitter.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from xla_teach.backends.cpu.kernel_builder import KernelBuilder
from xla_teach.backends.cpu.kernels.attention import emit_attention_kernel, is_attention_fusion
from xla_teach.backends.cpu.kernels.convolution import emit_im2col_gemm_kernel, im2col_geometry
from xla_teach.backends.cpu.kernels.dot import emit_dot_kernel
from xla_teach.backends.cpu.kernels.loop import emit_loop_kernel
from xla_teach.backends.cpu.kernels.reduction import emit_reduction_kernel
from xla_teach.backends.cpu.kernels.row_fusion import emit_row_fusion_kernel
from xla_teach.backends.cpu.kernels.scan import emit_scan_kernel, scan_dimension
from xla_teach.backends.cpu.kernels.sort import emit_sort_kernel
from xla_teach.backends.cpu.kernels.topk import emit_topk_kernel, topk_parameters
from xla_teach.backends.llvm.ir_emitter_base import EXPANDED_BY, HostPlan, IrEmitterBase, SequencePlan
from xla_teach.backends.llvm.kernel_context import KernelContext, find_dot_in, is_reduction_hero
from xla_teach.backends.llvm.kernel_support import hlo_comment
from xla_teach.backends.llvm.kernels.rng import (
    emit_rng_bit_generator_kernel,
    emit_rng_get_and_update_state_kernel,
    emit_rng_state_reset,
)
from xla_teach.backends.llvm.kernels.scatter import (
    emit_dynamic_update_slice_kernel,
    emit_scatter_kernel,
    emit_select_and_scatter_kernel,
)
from xla_teach.hlo.ir import HloInstruction
from xla_teach.passes.fusion.row_fusion import is_row_fusion
from xla_teach.passes.scheduling.buffer_assignment import BufferAssignment, BufferSlice


@dataclass
class KernelPlan:
    name: str
    instruction: str
    slices: list[BufferSlice]
    outer_size: int
    partitions: int
    nbytes: int


class CpuIrEmitter(IrEmitterBase):
    # Whether every kernel emitted so far is vector code already (or only calls): then the module
    # needs no loop vectorizer, and LLVM runs its short pipeline (kernel_support.optimize_module).
    vector_code_only = True

    def emit_rng_state_reset(self) -> KernelPlan:
        name = self.unique_symbol("rng_state_reset")
        kb = KernelBuilder(self.llvm_module, name, [], [])
        emit_rng_state_reset(kb.b, self.llvm_module)
        kb.finish()
        self.comments[name] = "(no HLO) the Philox state of rng-get-and-update-state := {key, 0}"
        return KernelPlan(name, "rng_state_reset", [], 1, 1, 0)

    def emit_kernel(self, instr: HloInstruction, assignment: BufferAssignment) -> KernelPlan:
        operand_slices, operand_shapes = [], []
        for op in instr.operands:
            if op.shape.is_tuple or op.shape.is_token:
                raise NotImplementedError(f"{instr.name}: kernels take array operands, {op.name} is {op.shape}")
            operand_slices.append(assignment.slice(op))
            operand_shapes.append(op.shape)
        output_slices = assignment.leaf_slices(instr)
        output_shapes = instr.shape.leaf_shapes()
        name = self.kernel_name(instr)
        slices = operand_slices + output_slices
        kb = KernelBuilder(self.llvm_module, name, operand_shapes + output_shapes, slices)
        ctx = KernelContext(kb, instr, kb.arrays[: len(operand_shapes)], kb.arrays[len(operand_shapes):])
        emit = self._choose(instr, assignment)
        outer, partitions = emit(ctx)
        self.vector_code_only = self.vector_code_only and ctx.vector_code
        kb.finish()
        self.comments[name] = hlo_comment(instr)
        nbytes = sum(s.size for s in slices)
        return KernelPlan(name, instr.name, slices, outer, partitions, nbytes)

    def _choose(self, instr: HloInstruction,
                assignment: BufferAssignment) -> Callable[[KernelContext], tuple[int, int]]:
        op = instr.opcode
        if topk_parameters(instr) is not None:
            return emit_topk_kernel  # one pass per row, no sort
        if im2col_geometry(instr) is not None:
            return emit_im2col_gemm_kernel  # patch blocks in cache, one gemm per block
        if op == "sort":
            return emit_sort_kernel
        if op == "scatter":
            in_place = not instr.shape.is_tuple and assignment.slice(instr) == assignment.slice(instr.operand(0))
            return lambda ctx: emit_scatter_kernel(ctx, in_place)
        if op == "select-and-scatter":
            return emit_select_and_scatter_kernel
        if op == "rng-bit-generator":
            return emit_rng_bit_generator_kernel
        if op == "rng-get-and-update-state":
            return emit_rng_get_and_update_state_kernel
        if op == "dynamic-update-slice":
            in_place = assignment.slice(instr) == assignment.slice(instr.operand(0))
            return lambda ctx: emit_dynamic_update_slice_kernel(ctx, in_place)
        if op in EXPANDED_BY:
            raise NotImplementedError(
                f"{instr.name}: '{op}' has no kernel; the '{EXPANDED_BY[op]}' pass rewrites it before code "
                "generation, and it did not run (--xla_disable_hlo_passes?)")
        if op == "reduce-window" and scan_dimension(instr) is not None:
            return emit_scan_kernel  # cumsum & co.: one pass per row, not one window per element
        if is_attention_fusion(instr):
            return emit_attention_kernel  # scores in a tile on the stack, two gemms per block of queries
        if is_row_fusion(instr):
            return emit_row_fusion_kernel
        hero = instr.fused_computation.root if op == "fusion" else instr
        if is_reduction_hero(hero):
            return emit_reduction_kernel
        if op == "dot" or (op == "fusion" and find_dot_in(instr) is not None):
            return emit_dot_kernel
        return emit_loop_kernel


__all__ = ["CpuIrEmitter", "HostPlan", "KernelPlan", "SequencePlan"]
