"""From a scheduled, buffer-assigned module to NVPTX kernels and launch plans.

The walk over each sequential computation is the CPU backend's
(:class:`~xla_teach.backends.cpu.ir_emitter.CpuIrEmitter`): the same instructions
need no code (parameters, tuples, bitcasts ...), the same run on the host
(while, conditional, call, custom-call). What differs is each kernel:

* a ``ptx_kernel`` function taking one device pointer per buffer slice;
* a *launch dimension* -- how many blocks of how many threads -- chosen per kernel
  and written into the optimized HLO as ``backend_config``, as XLA does;
* the emitter: loop fusions get one thread per element, reductions the warp-shuffle
  reduction, dots the tiled shared-memory product, transposes a shared-memory tile;
  inherently sequential ops (sort, scatter, select-and-scatter, dynamic-update-slice,
  rng-bit-generator, rng-get-and-update-state) reuse the CPU emitters on a single GPU
  thread -- correct, and honest about being slow (the launch shows ``1x1``). The legacy
  rng's Philox state is a device global, reset by a one-thread kernel first in the entry.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass

from xla_teach.backends.cpu.ir_emitter import CpuIrEmitter, _hlo_comment, _leaves, find_dot_in
from xla_teach.backends.cpu.kernels.context import KernelContext
from xla_teach.backends.cpu.kernels.reduction import is_reduction_hero
from xla_teach.backends.cpu.kernels.rng import (
    emit_rng_bit_generator_kernel,
    emit_rng_get_and_update_state_kernel,
    emit_rng_state_reset,
)
from xla_teach.backends.cpu.kernels.scatter import (
    emit_dynamic_update_slice_kernel,
    emit_scatter_kernel,
    emit_select_and_scatter_kernel,
)
from xla_teach.backends.cpu.kernels.sort import emit_sort_kernel
from xla_teach.backends.gpu.kernel_builder import GpuKernelBuilder, LaunchDimensions, ptx_name
from xla_teach.backends.gpu.kernels.dot import emit_gpu_dot_kernel
from xla_teach.backends.gpu.kernels.loop import emit_gpu_loop_kernel, emit_single_thread
from xla_teach.backends.gpu.kernels.reduction import emit_gpu_reduction_kernel
from xla_teach.backends.gpu.kernels.transpose import emit_gpu_transpose_kernel, is_tiled_transpose
from xla_teach.backends.gpu.nvptx import DATA_LAYOUT, TRIPLE
from xla_teach.hlo.ir import HloInstruction
from xla_teach.passes.scheduling.buffer_assignment import BufferAssignment, BufferSlice


@dataclass
class GpuKernelPlan:
    name: str
    instruction: str
    slices: list[BufferSlice]
    launch: LaunchDimensions
    nbytes: int


class GpuIrEmitter(CpuIrEmitter):
    """Emits one NVPTX LLVM module for the whole HLO module."""

    def emit_all(self):  # type: ignore[no-untyped-def]
        self.llvm_module.triple = TRIPLE
        self.llvm_module.data_layout = DATA_LAYOUT
        return super().emit_all()

    def symbol(self, name: str) -> str:
        return ptx_name(name)  # PTX identifiers: letters, digits, _ and $ only

    def _emit_kernel(self, instr: HloInstruction, assignment: BufferAssignment) -> GpuKernelPlan:  # type: ignore[override]
        operand_slices, operand_shapes = [], []
        for op in instr.operands:
            if op.shape.is_tuple or op.shape.is_token:
                raise NotImplementedError(f"{instr.name}: kernels take array operands, {op.name} is {op.shape}")
            operand_slices.append(assignment.slice(op))
            operand_shapes.append(op.shape)
        output_slices = assignment.leaf_slices(instr)
        name = self._kernel_name(instr)
        slices = operand_slices + output_slices
        kb = GpuKernelBuilder(self.llvm_module, name, operand_shapes + _leaves(instr.shape), slices)
        ctx = KernelContext(kb, instr, kb.arrays[: len(operand_shapes)], kb.arrays[len(operand_shapes):])  # type: ignore[arg-type]
        launch = self._choose_gpu(instr, assignment)(ctx)
        kb.finish()
        self.comments[name] = _hlo_comment(instr)
        instr.backend_config = json.dumps({"launch_dimensions": launch.as_config()}, separators=(",", ":"))
        return GpuKernelPlan(name, instr.name, slices, launch, sum(s.size for s in slices))

    def _emit_rng_state_reset(self) -> GpuKernelPlan:  # type: ignore[override]
        name = self._unique_symbol("rng_state_reset")
        kb = GpuKernelBuilder(self.llvm_module, name, [], [])
        emit_rng_state_reset(kb.b, self.llvm_module)
        kb.finish()
        self.comments[name] = "(no HLO) the Philox state of rng-get-and-update-state := {key, 0}"
        return GpuKernelPlan(name, "rng_state_reset", [], LaunchDimensions((1, 1, 1), (1, 1, 1)), 0)

    def _choose_gpu(self, instr: HloInstruction,
                    assignment: BufferAssignment) -> Callable[[KernelContext], LaunchDimensions]:
        op = instr.opcode
        sequential = {"sort": emit_sort_kernel, "scatter": emit_scatter_kernel,
                      "select-and-scatter": emit_select_and_scatter_kernel,
                      "rng-bit-generator": emit_rng_bit_generator_kernel,
                      "rng-get-and-update-state": emit_rng_get_and_update_state_kernel}
        if op in sequential:
            return lambda ctx: emit_single_thread(ctx, sequential[op])
        if op == "dynamic-update-slice":
            in_place = assignment.slice(instr) == assignment.slice(instr.operand(0))
            return lambda ctx: emit_single_thread(ctx, lambda c: emit_dynamic_update_slice_kernel(c, in_place))
        if op in ("rng", "topk"):
            raise NotImplementedError(f"'{op}' has no GPU kernel")
        hero = instr.fused_computation.root if op == "fusion" else instr
        if is_reduction_hero(hero):
            return emit_gpu_reduction_kernel
        if op == "dot" or (op == "fusion" and find_dot_in(instr) is not None):
            return emit_gpu_dot_kernel
        if is_tiled_transpose(instr):
            return emit_gpu_transpose_kernel
        return emit_gpu_loop_kernel
