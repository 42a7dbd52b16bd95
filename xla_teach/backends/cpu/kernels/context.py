"""What every kernel emitter gets: the builder, the instruction, its buffers.

For a ``fusion`` the elemental emitter reads the fused computation's
parameters from the fusion's operand buffers; for an unfused instruction it
reads the instruction's operands directly. Either way :meth:`KernelContext.hero`
returns the instruction whose values the kernel computes (the fused root, or the
instruction itself) and :meth:`KernelContext.emitter` the generators for it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from xla_teach.backends.cpu.kernel_builder import KernelBuilder
from xla_teach.backends.llvm.elemental_emitter import ElementalEmitter, Generator
from xla_teach.backends.llvm.ir_array import IrArray, IrIndex
from xla_teach.hlo.ir import HloInstruction

# Split a kernel across threads when its outermost loop carries at least this much work.
PARALLEL_WORK_THRESHOLD = 1 << 17


@dataclass
class KernelContext:
    kb: KernelBuilder
    instr: HloInstruction
    operand_arrays: list[IrArray]  # in the order of `instr.operands`
    output_arrays: list[IrArray]  # the leaves of `instr.shape`
    _emitter: ElementalEmitter | None = field(default=None, init=False)

    @property
    def b(self):  # type: ignore[no-untyped-def]
        return self.kb.b

    def hero(self) -> HloInstruction:
        """The instruction computed: the fused root for a fusion, else the instruction."""
        if self.instr.opcode == "fusion":
            return self.instr.fused_computation.root
        return self.instr

    def emitter(self, reassociate: bool = False) -> ElementalEmitter:
        if self._emitter is None:
            gens: dict[int, Generator] = {}
            if self.instr.opcode == "fusion":
                for param in self.instr.fused_computation.parameter_instructions:
                    gens[param.unique_id] = _loader(self, self.operand_arrays[param.parameter_number])
            else:
                for op, array in zip(self.instr.operands, self.operand_arrays, strict=True):
                    gens[op.unique_id] = _loader(self, array)
            self._emitter = ElementalEmitter(self.b, gens, reassociate=reassociate)
        return self._emitter


def _loader(ctx: KernelContext, array: IrArray) -> Generator:
    def load(index: IrIndex) -> object:
        same = index if index.shape.minor_to_major() == array.shape.minor_to_major() else IrIndex(
            index.dims, array.shape)
        return array.load(ctx.b, IrIndex(same.dims, array.shape, same.linear))

    return load  # type: ignore[return-value]


def choose_partitions(outer_size: int, work: int) -> int:
    """How many threads should share a kernel whose outer loop has ``outer_size`` steps."""
    cores = os.cpu_count() or 1
    if cores <= 1 or outer_size < 2 or work < PARALLEL_WORK_THRESHOLD:
        return 1
    return min(cores, outer_size)
