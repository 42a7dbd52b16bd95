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
from dataclasses import dataclass, field
from functools import partial
from typing import Any

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
from xla_teach.backends.llvm.ir_emitter_base import (
    IrEmitterBase,
    KernelRule,
    SequencePlan,
    hero,
    kernel,
    no_kernel,
    opcode,
    refuse_expanded,
    writes_in_place,
)
from xla_teach.backends.llvm.kernel_context import KernelContext, is_dot_kernel, is_reduction_hero
from xla_teach.backends.llvm.kernel_support import ptx_name
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

    def kernel_builder(self, name: str, shapes: list[Any], slices: list[BufferSlice]) -> GpuKernelBuilder:
        return GpuKernelBuilder(self.llvm_module, name, shapes, slices)

    def kernel_plan(self, instr: HloInstruction, name: str, slices: list[BufferSlice], rule: KernelRule,
                    result: LaunchDimensions, ctx: KernelContext, assignment: BufferAssignment) -> GpuKernelPlan:
        copies = (scatter_copies(instr, assignment) or []) if rule.name == "scatter" else []
        instr.backend_config = json.dumps({"launch_dimensions": result.as_config()}, separators=(",", ":"))
        return GpuKernelPlan(name, instr.name, slices, result, sum(s.size for s in slices), copies)

    def emit_rng_state_reset(self) -> GpuKernelPlan:
        name = self.unique_symbol("rng_state_reset")
        kb = GpuKernelBuilder(self.llvm_module, name, [], [])
        emit_rng_state_reset(kb.b, self.llvm_module)
        kb.finish()
        self.comments[name] = "(no HLO) the Philox state of rng-get-and-update-state := {key, 0}"
        return GpuKernelPlan(name, "rng_state_reset", [], LaunchDimensions((1, 1, 1), (1, 1, 1)), 0)

    # Which emitter writes a kernel (first match wins). Variadic scatter (several outputs combined
    # as one tuple cannot be atomic), select-and-scatter and the legacy rng's two-word state run the
    # CPU's sequential emitters on one GPU thread.
    KERNELS = (
        kernel("sort", opcode("sort"), emit_gpu_sort_kernel),
        kernel("rng-bit-generator", opcode("rng-bit-generator"), emit_gpu_rng_bit_generator_kernel),
        kernel("scatter", lambda i, a: i.opcode == "scatter" and scatter_copies(i, a) is not None,
               emit_gpu_scatter_kernel),  # a thread per update, atomics
        KernelRule("dynamic-update-slice", opcode("dynamic-update-slice"),
                   lambda e, i, a: partial(emit_gpu_dynamic_update_slice_kernel, in_place=writes_in_place(i, a))),
        kernel("sequential scatter", opcode("scatter"), partial(emit_single_thread, emit=emit_scatter_kernel)),
        kernel("select-and-scatter", opcode("select-and-scatter"),
               partial(emit_single_thread, emit=emit_select_and_scatter_kernel)),
        kernel("rng-get-and-update-state", opcode("rng-get-and-update-state"),
               partial(emit_single_thread, emit=emit_rng_get_and_update_state_kernel)),
        KernelRule("expanded op", no_kernel, refuse_expanded),  # rng, topk: an expander rewrites them
        kernel("row fusion", lambda i, a: is_row_fusion(i), emit_gpu_row_fusion_kernel),  # a block per row
        kernel("reduction", lambda i, a: is_reduction_hero(hero(i)), emit_gpu_reduction_kernel),  # warp shuffles
        KernelRule("dot", lambda i, a: is_dot_kernel(i),
                   lambda e, i, a: partial(emit_gpu_dot_kernel, allow_tf32=e.allow_tf32)),
        kernel("transpose", lambda i, a: is_tiled_transpose(i), emit_gpu_transpose_kernel),  # a shared-memory tile
        kernel("loop", lambda i, a: True, emit_gpu_loop_kernel),  # a thread per element
    )


def scatter_copies(instr: HloInstruction, assignment: BufferAssignment) -> list[DeviceCopy] | None:
    """The memcpy that puts a one-operand scatter's operand in its output buffer first (none when
    they share it), or None when the parallel kernel cannot do this scatter."""
    if instr.operand_count != 3 or instr.shape.is_tuple:
        return None
    operand = instr.operand(0)
    if operand.shape.minor_to_major() != instr.shape.minor_to_major():
        return None
    source, dest = assignment.slice(operand), assignment.slice(instr)
    return [] if source == dest else [DeviceCopy(source, dest, instr.shape.byte_size())]
