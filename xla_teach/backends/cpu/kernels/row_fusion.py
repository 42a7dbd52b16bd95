"""The kernel of a ``row-fusion`` (see ``backends/cpu/passes/row_fusion.py``): a whole row-wise
computation, one row at a time, so the row is read from memory once and then from cache::

    for kept index k in [begin, end):          # rows, split across threads
      for each reduction r (in dependency order):
        acc_r = init_r
        for j in row:  acc_r = reducer(acc_r, operand_r(k, j))   # may use earlier acc's
      for j in row:    out(k, j) = root(k, j)                    # uses every acc
"""

from __future__ import annotations

from llvmlite import ir

from xla_teach.backends.cpu.kernels.context import KernelContext, choose_partitions
from xla_teach.backends.llvm.elemental_windows import loop_nest
from xla_teach.backends.llvm.ir_array import IrIndex
from xla_teach.backends.llvm.loops import for_each_index, stack_slot
from xla_teach.backends.llvm.scalar_computation import emit_scalar_computation
from xla_teach.hlo.shape import Shape


def emit_row_fusion_kernel(ctx: KernelContext) -> tuple[int, int]:
    fused = ctx.instr.fused_computation
    root = fused.root
    reduces = [i for i in fused.post_order() if i.opcode == "reduce"]
    row = sorted(reduces[0].attrs["dimensions"])
    shape = root.shape
    kept = [d for d in range(shape.rank) if d not in row]
    kept_shape = reduces[0].shape
    row_order = [d for d in reversed(shape.minor_to_major()) if d in row]  # major to minor
    em = ctx.emitter(reassociate=True)
    b = ctx.b
    out = ctx.output_arrays[0]

    def full_index(kept_index: IrIndex, row_values: list[ir.Value]) -> IrIndex:
        dims: list[ir.Value] = [None] * shape.rank  # type: ignore[list-item]
        for d, v in zip(kept, kept_index.dims, strict=True):
            dims[d] = v
        for d, v in zip(row_order, row_values, strict=True):
            dims[d] = v
        return IrIndex(tuple(dims), shape)

    def per_row(kept_index: IrIndex) -> None:
        for r in reduces:
            init = em.value_at(r.operand(1), IrIndex.scalar(r.operand(1).shape))
            slot = stack_slot(b, init.type, f"acc.{r.name}")
            b.store(init, slot)

            def accumulate(values: list[ir.Value], r=r, slot=slot) -> None:  # type: ignore[no-untyped-def]
                value = em.value_at(r.operand(0), full_index(kept_index, values))
                new = emit_scalar_computation(b, r.to_apply, [b.load(slot), value], reassociate=True)
                b.store(new[0], slot)

            loop_nest(b, [shape.dimensions[d] for d in row_order], f"{r.name}.row", accumulate)
            em.set_generator(r, lambda index, slot=slot: b.load(slot))

        def write(values: list[ir.Value]) -> None:
            index = full_index(kept_index, values)
            out.store(b, em.value_at(root, index), IrIndex(index.dims, out.shape))

        loop_nest(b, [shape.dimensions[d] for d in row_order], "out.row", write)

    if not kept:
        per_row(IrIndex.scalar(Shape.scalar(shape.element_type)))
        return 1, 1
    for_each_index(b, kept_shape, per_row, "rows", outer_range=(ctx.kb.begin, ctx.kb.end))
    outer = kept_shape.dimensions[list(reversed(kept_shape.minor_to_major()))[0]]
    return outer, choose_partitions(outer, shape.element_count() * 4)
