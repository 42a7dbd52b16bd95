"""What every kernel emitter gets, on every backend: the builder, the instruction, its buffers.

For a ``fusion`` the elemental emitter reads the fused computation's
parameters from the fusion's operand buffers; for an unfused instruction it
reads the instruction's operands directly. Either way :meth:`KernelContext.hero`
returns the instruction whose values the kernel computes (the fused root, or the
instruction itself) and :meth:`KernelContext.emitter` the generators for it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from llvmlite import ir

from xla_teach.backends.llvm.elemental_emitter import ElementalEmitter, Generator
from xla_teach.backends.llvm.ir_array import IrArray, IrIndex
from xla_teach.hlo.ir import HloInstruction


class KernelFunctionBuilder(Protocol):
    """What the shared emitters need of a backend's kernel builder (the CPU's ``KernelBuilder``,
    the GPU's ``GpuKernelBuilder`` add their own: thread ranges, thread indices, shared memory)."""

    module: ir.Module
    b: ir.IRBuilder
    arrays: list[IrArray]


@dataclass
class LoopRange:
    """A kernel builder as far as the emitters go: the IR builder and the outer loop's
    ``[begin, end)`` -- for a kernel that runs another emitter's loops inside its own (over a tile,
    or in a function of its own)."""

    b: ir.IRBuilder
    module: ir.Module
    begin: ir.Value
    end: ir.Value


@dataclass
class KernelContext:
    kb: Any  # a KernelFunctionBuilder of the backend emitting the kernel
    instr: HloInstruction
    operand_arrays: list[IrArray]  # in the order of `instr.operands`
    output_arrays: list[IrArray]  # the leaves of `instr.shape`
    # Set by an emitter whose kernel is vector code already, or has no loop worth vectorizing
    # (a BLAS call): a module of only such kernels needs no LLVM loop vectorizer (kernel_support.py).
    vector_code: bool = field(default=False, init=False)
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
                    gens[param.unique_id] = operand_loader(self, self.operand_arrays[param.parameter_number])
            else:
                for op, array in zip(self.instr.operands, self.operand_arrays, strict=True):
                    gens[op.unique_id] = operand_loader(self, array)
            self._emitter = ElementalEmitter(self.b, gens, reassociate=reassociate)
        return self._emitter


def operand_loader(ctx: KernelContext, array: IrArray) -> Generator:
    """A generator that loads ``array`` at an index of its operand's shape (any layout)."""
    def load(index: IrIndex) -> object:
        same = index if index.shape.minor_to_major() == array.shape.minor_to_major() else IrIndex(
            index.dims, array.shape)
        return array.load(ctx.b, IrIndex(same.dims, array.shape, same.linear))

    return load  # type: ignore[return-value]


def element_values(em: ElementalEmitter, elements: list[HloInstruction], index: IrIndex) -> list[Any]:
    """The values of ``elements`` at ``index``, flattened: a variadic op (a tuple-shaped
    reduce-window, say) contributes one value per output."""
    values: list[Any] = []
    for element in elements:
        shape = element.shape.tuple_shapes[0] if element.shape.is_tuple else element.shape
        same_layout = shape.minor_to_major() == index.shape.minor_to_major()
        value = em.value_at(element, IrIndex(index.dims, shape, index.linear if same_layout else None))
        values.extend(value if isinstance(value, tuple) else [value])
    return values


def is_reduction_hero(hero: HloInstruction) -> bool:
    """A reduce, or a multi-output fusion's tuple with a reduce among its elements."""
    if hero.opcode == "reduce":
        return True
    return hero.opcode == "tuple" and any(e.opcode == "reduce" for e in hero.operands)


def is_dot_kernel(instr: HloInstruction) -> bool:
    """A dot, or a fusion around one (its epilogue or prologue): a dot kernel's work."""
    return instr.opcode == "dot" or (instr.opcode == "fusion" and find_dot_in(instr) is not None)


def find_dot_in(fusion: HloInstruction) -> HloInstruction | None:
    """The dot inside a fusion (an output fusion's hero), if any."""
    for instr in fusion.fused_computation.instructions:
        if instr.opcode == "dot":
            return instr
    return None
