"""The kernel of a ``row-fusion`` (see ``passes/fusion/row_fusion.py``): a whole row-wise
computation, one row at a time, so the row is read from memory once and then from cache::

    for kept index k in [begin, end):          # rows, split across threads
      for each reduction r (in dependency order):
        acc_r = init_r
        for j in row:  acc_r = reducer(acc_r, operand_r(k, j))   # may use earlier acc's
      for j in row:    out(k, j) = root(k, j)                    # uses every acc

A value that a reduction reads and the rest of the row reads again -- softmax's
``e = exp(x - max)``, summed and then divided -- is computed once: while its reduction walks
the row, each element is also stored into a small per-row scratch array on the stack (the
*row cache*), and later uses load it from there instead of computing ``exp`` a second time.
"""

from __future__ import annotations

from llvmlite import ir

from xla_teach.backends.cpu.kernels.partitions import choose_partitions
from xla_teach.backends.llvm.elemental_windows import loop_nest
from xla_teach.backends.llvm.ir_array import IrIndex
from xla_teach.backends.llvm.kernel_context import KernelContext
from xla_teach.backends.llvm.loops import for_each_index, stack_slot
from xla_teach.backends.llvm.scalar_computation import emit_scalar_computation
from xla_teach.hlo.ir import HloInstruction
from xla_teach.hlo.shape import Shape

ROW_CACHE_MAX_BYTES = 64 * 1024  # per cached value and thread: small enough for the stack and L2
_CHEAP_OPCODES = frozenset({"parameter", "constant", "broadcast", "iota", "reshape", "bitcast", "copy"})


def cached_row_values(reduces: list[HloInstruction], row_elements: int) -> list[HloInstruction]:
    """The reductions' operands worth keeping per row: computed (not a plain parameter or
    broadcast), read again after their reduction, and small enough for a stack array."""
    chosen = []
    for r in reduces:
        value = r.operand(0)
        reused = any(user is not r for user in value.users)
        if value.opcode in _CHEAP_OPCODES or not reused or value in chosen:
            continue
        if row_elements * value.shape.element_type.byte_size > ROW_CACHE_MAX_BYTES:
            continue
        chosen.append(value)
    return chosen


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

    row_sizes = [shape.dimensions[d] for d in row_order]
    row_elements = 1
    for size in row_sizes:
        row_elements *= size
    cached = cached_row_values(reduces, row_elements)
    scratch: dict[int, ir.AllocaInstr] = {}
    filled: set[int] = set()  # cached values whose row is in scratch (later uses load it)

    def row_offset(row_values: list[ir.Value]) -> ir.Value:
        """The position of one element within its row (row-major over the row dimensions)."""
        offset: ir.Value = ir.Constant(ir.IntType(64), 0)
        for size, v in zip(row_sizes, row_values, strict=True):
            offset = b.add(b.mul(offset, ir.Constant(ir.IntType(64), size)), v)
        return offset

    def scratch_slot(value: HloInstruction, element: ir.Value, row_values: list[ir.Value]) -> ir.Value:
        if value.unique_id not in scratch:
            array = ir.ArrayType(element.type, row_elements)
            scratch[value.unique_id] = stack_slot(b, array, f"row_cache.{value.name}")
        zero = ir.Constant(ir.IntType(64), 0)
        return b.gep(scratch[value.unique_id], [zero, row_offset(row_values)], inbounds=True)

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
                if r.operand(0) in cached and r.operand(0).unique_id not in filled:
                    b.store(value, scratch_slot(r.operand(0), value, values))
                new = emit_scalar_computation(b, r.to_apply, [b.load(slot), value], reassociate=True)
                b.store(new[0], slot)

            loop_nest(b, row_sizes, f"{r.name}.row", accumulate, unroll=False, accumulates=True)
            em.set_generator(r, lambda index, slot=slot: b.load(slot))
            if r.operand(0) in cached and r.operand(0).unique_id not in filled:
                cache = r.operand(0)
                filled.add(cache.unique_id)

                def from_cache(index: IrIndex, cache=cache) -> ir.Value:  # type: ignore[no-untyped-def]
                    row_values = [index.dims[d] for d in row_order]
                    zero = ir.Constant(ir.IntType(64), 0)
                    pointer = b.gep(scratch[cache.unique_id], [zero, row_offset(row_values)], inbounds=True)
                    return b.load(pointer)

                em.set_generator(cache, from_cache)

        def write(values: list[ir.Value]) -> None:
            index = full_index(kept_index, values)
            out.store(b, em.value_at(root, index), IrIndex(index.dims, out.shape))

        loop_nest(b, row_sizes, "out.row", write, unroll=False)

    if not kept:
        per_row(IrIndex.scalar(Shape.scalar(shape.element_type)))
        return 1, 1
    for_each_index(b, kept_shape, per_row, "rows", outer_range=(ctx.kb.begin, ctx.kb.end))
    outer = kept_shape.dimensions[list(reversed(kept_shape.minor_to_major()))[0]]
    return outer, choose_partitions(outer, shape.element_count() * 4)
