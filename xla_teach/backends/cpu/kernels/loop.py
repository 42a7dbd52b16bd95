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

When the loop reads some operand *down its columns* -- ``a.T + b``, or operands whose layouts
disagree -- every step along the output's row lands on a new cache line of that operand, and the
lines are gone again before the next row could use them. Such loops walk the output in 32 x 32
blocks (:func:`~xla_teach.backends.llvm.loops.for_each_index_tiled`): within a block both
operands touch 32 lines each, all still cached when the block's next row comes
(``a.T + b`` at 4096 x 4096: 87 ms -> 38 ms).
"""

from __future__ import annotations

from xla_teach.backends.cpu.kernels.partitions import choose_partitions
from xla_teach.backends.llvm.ir_array import IrArray, IrIndex
from xla_teach.backends.llvm.kernel_context import KernelContext, element_values
from xla_teach.backends.llvm.loops import for_each_index, for_each_index_tiled
from xla_teach.hlo.ir import HloInstruction
from xla_teach.hlo.opcodes import is_elementwise

TILE = 32  # elements per side of a block when the loop reads an operand across its rows


def reads_across_rows(instr: HloInstruction) -> bool:
    """Does the loop read some operand down its columns? It walks the output along its
    contiguous dimension; follow that dimension back through elementwise ops, transposes and
    broadcasts to every array it reads: if one of them keeps another dimension contiguous (its
    layout differs, or a transpose moved the dimension), each step of the loop lands on a new
    cache line of that operand -- then the loop walks in blocks."""
    if instr.shape.is_tuple or instr.shape.rank < 2:
        return False
    root = instr.fused_computation.root if instr.opcode == "fusion" else instr
    stack = [(root, instr.shape.minor_to_major()[0])]
    seen = set()
    while stack:
        node, dim = stack.pop()
        if (id(node), dim) in seen:
            continue
        seen.add((id(node), dim))
        if node.opcode == "parameter" or (node is not root and instr.opcode != "fusion"):
            if node.shape.is_array and node.shape.rank >= 2 and node.shape.minor_to_major()[0] != dim:
                return True
            continue
        if node.opcode == "transpose":
            stack.append((node.operand(0), list(node.attr("dimensions"))[dim]))
        elif node.opcode == "broadcast":
            mapped = list(node.attr("dimensions"))
            if dim in mapped:
                stack.append((node.operand(0), mapped.index(dim)))
        elif is_elementwise(node.opcode):
            stack.extend((op, dim) for op in node.operands if op.shape.is_array and op.shape.rank == node.shape.rank)
    return False


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
    if reads_across_rows(ctx.instr) and min(shape.dimensions[d] for d in shape.minor_to_major()[:2]) >= 2 * TILE:
        for_each_index_tiled(b, shape, body, TILE, "loop", outer_range=(ctx.kb.begin, ctx.kb.end))
    else:
        for_each_index(b, shape, body, "loop", outer_range=(ctx.kb.begin, ctx.kb.end))
    outer = shape.dimensions[list(reversed(shape.minor_to_major()))[0]]
    return outer, choose_partitions(outer, shape.element_count() * max(1, len(elements)))
