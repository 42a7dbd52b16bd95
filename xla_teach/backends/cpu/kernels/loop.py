"""Loop kernels: one loop nest over the output, each element from the elemental emitter.

Used for ``kLoop`` fusions and for every unfused elementwise or data-movement
instruction (and for windows, convolutions and maps, whose generators loop
inside). A multi-output loop fusion stores all its outputs in the same nest. A fusion whose
root only reshapes (the bytes stay where they are) loops over the reshape's operand instead:
the same stores, without dividing each output index into the operand's.
The outermost loop honours ``[begin, end)`` so the runtime can split it::

    for i0 in [begin, end):          # most-major dimension
      for i1 in [0, n1):             # ... down to the contiguous one
        out[i0, i1] = <fused expression at (i0, i1)>
"""

from __future__ import annotations

from xla_teach.backends.cpu.kernels.partitions import choose_partitions
from xla_teach.backends.llvm.ir_array import IrArray, IrIndex
from xla_teach.backends.llvm.kernel_context import KernelContext, element_values
from xla_teach.backends.llvm.loops import for_each_index
from xla_teach.hlo.ir import HloInstruction


def _elements(hero: HloInstruction) -> list[HloInstruction]:
    return list(hero.operands) if hero.opcode == "tuple" else [hero]


def _bytes_kept(hero: HloInstruction, n_outputs: int) -> HloInstruction | None:
    """The operand of a root reshape that keeps every byte where it is (both in the default
    layout): the loop can then run over the operand's dimensions and store into the same bytes,
    with no division to turn each output index into the operand's."""
    if n_outputs != 1 or hero.opcode not in ("reshape", "bitcast"):
        return None
    source = hero.operand(0)
    if (source.shape.is_array and source.shape.rank >= 1 and source.shape.element_type is hero.shape.element_type
            and source.shape.has_default_layout() and hero.shape.has_default_layout()):
        return source
    return None


def emit_loop_kernel(ctx: KernelContext) -> tuple[int, int]:
    """Returns (outer loop size, suggested partitions)."""
    em = ctx.emitter()
    elements = _elements(ctx.hero())
    outputs = ctx.output_arrays
    shape = outputs[0].shape
    b = ctx.b
    source = _bytes_kept(ctx.hero(), len(outputs))
    if source is not None and ctx.instr.opcode == "fusion" and source.opcode != "parameter":
        view = IrArray(outputs[0].base, source.shape, outputs[0].name)
        for_each_index(b, source.shape, lambda index: view.store(b, em.value_at(source, index), index), "loop",
                       outer_range=(ctx.kb.begin, ctx.kb.end))
        outer = source.shape.dimensions[0]
        return outer, choose_partitions(outer, source.shape.element_count())

    def body(index: IrIndex) -> None:
        values = element_values(em, elements, index)
        for value, out in zip(values, outputs, strict=True):
            out.store(b, value, IrIndex(index.dims, out.shape))

    if shape.rank == 0:
        body(IrIndex.scalar(shape))
        return 1, 1
    for_each_index(b, shape, body, "loop", outer_range=(ctx.kb.begin, ctx.kb.end))
    outer = shape.dimensions[list(reversed(shape.minor_to_major()))[0]]
    return outer, choose_partitions(outer, shape.element_count() * max(1, len(elements)))
