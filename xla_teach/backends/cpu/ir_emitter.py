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

from dataclasses import dataclass
from functools import partial
from typing import Any

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
from xla_teach.backends.llvm.ir_emitter_base import (
    HostPlan,
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

    def kernel_builder(self, name: str, shapes: list[Any], slices: list[BufferSlice]) -> KernelBuilder:
        return KernelBuilder(self.llvm_module, name, shapes, slices)

    def kernel_plan(self, instr: HloInstruction, name: str, slices: list[BufferSlice], rule: KernelRule,
                    result: tuple[int, int], ctx: KernelContext, assignment: BufferAssignment) -> KernelPlan:
        outer, partitions = result  # the outer loop's size, and how many parts the threads share
        self.vector_code_only = self.vector_code_only and ctx.vector_code
        return KernelPlan(name, instr.name, slices, outer, partitions, sum(s.size for s in slices))

    # Which emitter writes a kernel, by its instruction (a fusion by its hero, its root): the
    # first rule that applies.
    KERNELS = (
        kernel("topk", lambda i, a: topk_parameters(i) is not None, emit_topk_kernel),  # one pass per row, no sort
        kernel("im2col convolution", lambda i, a: im2col_geometry(i) is not None,
               emit_im2col_gemm_kernel),  # patch blocks in cache, one gemm per block
        kernel("sort", opcode("sort"), emit_sort_kernel),
        KernelRule("scatter", opcode("scatter"),
                   lambda e, i, a: partial(emit_scatter_kernel, in_place=writes_in_place(i, a))),
        kernel("select-and-scatter", opcode("select-and-scatter"), emit_select_and_scatter_kernel),
        kernel("rng-bit-generator", opcode("rng-bit-generator"), emit_rng_bit_generator_kernel),
        kernel("rng-get-and-update-state", opcode("rng-get-and-update-state"), emit_rng_get_and_update_state_kernel),
        KernelRule("dynamic-update-slice", opcode("dynamic-update-slice"),
                   lambda e, i, a: partial(emit_dynamic_update_slice_kernel, in_place=writes_in_place(i, a))),
        KernelRule("expanded op", no_kernel, refuse_expanded),  # rng, topk: an expander rewrites them
        kernel("scan", lambda i, a: i.opcode == "reduce-window" and scan_dimension(i) is not None,
               emit_scan_kernel),  # cumsum & co.: one pass per row, not one window per element
        kernel("attention", lambda i, a: is_attention_fusion(i),
               emit_attention_kernel),  # scores in a tile on the stack, two gemms per block of queries
        kernel("row fusion", lambda i, a: is_row_fusion(i), emit_row_fusion_kernel),
        kernel("reduction", lambda i, a: is_reduction_hero(hero(i)), emit_reduction_kernel),
        kernel("dot", lambda i, a: is_dot_kernel(i), emit_dot_kernel),
        kernel("loop", lambda i, a: True, emit_loop_kernel),
    )


__all__ = ["CpuIrEmitter", "HostPlan", "KernelPlan", "SequencePlan"]
