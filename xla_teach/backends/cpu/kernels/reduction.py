"""Reduction kernels (``kInput`` fusions and unfused ``reduce``).

The output is a loop over the *kept* dimensions; for each output element an
accumulator starts at the init value and an inner loop walks the *reduced*
dimensions in memory order, applying the reducer computation inline. With the
reduced dimensions minor (a row reduction) the inner loop reads contiguous
memory, and because float adds in reducers are marked reassociable, LLVM
vectorizes it into SIMD partial sums::

    for i in [begin, end):                 # kept dims (parallel across threads)
      acc = init
      for j in [0, n):                     # reduced dims, contiguous
        acc = reducer(acc, producer(i, j)) # fused elementwise producers inline
      out[i] = acc

A multi-output fusion may add *side outputs* of the input's shape (e.g. the
``exp(x - max)`` that softmax needs again): they are stored inside the inner
loop at the full index, so the input is still read once.
"""

from __future__ import annotations

from llvmlite import ir

from xla_teach.backends.cpu.kernels.partitions import choose_partitions
from xla_teach.backends.llvm.elemental_windows import loop_nest
from xla_teach.backends.llvm.ir_array import IrArray, IrIndex, i64
from xla_teach.backends.llvm.kernel_context import KernelContext
from xla_teach.backends.llvm.loops import for_each_index, for_range, stack_slot
from xla_teach.backends.llvm.scalar_computation import emit_scalar_computation
from xla_teach.hlo.ir import HloInstruction
from xla_teach.passes.fusion.fusion_rules import keeps_minor_dimensions


def emit_reduction_kernel(ctx: KernelContext) -> tuple[int, int]:
    hero = ctx.hero()
    elements = list(hero.operands) if hero.opcode == "tuple" else [hero]
    reduces = [e for e in elements if e.opcode == "reduce"]
    first = reduces[0]
    in_shape = first.operand(0).shape
    reduced = set(first.dimensions)
    for other in reduces[1:]:
        if other.operand(0).shape.dimensions != in_shape.dimensions or set(other.dimensions) != reduced:
            raise NotImplementedError(f"{ctx.instr.name}: sibling reductions over different shapes")
    kept = [d for d in range(in_shape.rank) if d not in reduced]
    loop_dims = [d for d in reversed(in_shape.minor_to_major()) if d in reduced]
    out_shape = first.shape.tuple_shapes[0] if first.shape.is_tuple else first.shape
    if is_column_reduction(elements, in_shape, kept):
        return emit_column_reduction(ctx, elements, in_shape, kept, loop_dims)

    # Which output arrays belong to which element (a variadic reduce owns several).
    outputs_of: list[list[IrArray]] = []
    cursor = 0
    for element in elements:
        count = len(element.shape.tuple_shapes) if element.shape.is_tuple else 1
        outputs_of.append(ctx.output_arrays[cursor : cursor + count])
        cursor += count
    em = ctx.emitter(reassociate=True)
    b = ctx.b

    def per_output(index: IrIndex) -> None:
        accs: dict[int, list[ir.AllocaInstr]] = {}
        for r in reduces:
            n = r.operand_count // 2
            inits = [em.value_at(init, IrIndex.scalar(init.shape)) for init in r.operands[n:]]
            slots = []
            for k, value in enumerate(inits):
                slot = stack_slot(b, value.type, f"acc.{r.name}.{k}")
                b.store(value, slot)
                slots.append(slot)
            accs[r.unique_id] = slots

        def inner(loop_values: list[ir.Value]) -> None:
            full: list[ir.Value] = [i64(0)] * in_shape.rank
            for d, v in zip(kept, index.dims, strict=True):
                full[d] = v
            for d, v in zip(loop_dims, loop_values, strict=True):
                full[d] = v
            for element, outs in zip(elements, outputs_of, strict=True):
                if element.opcode == "reduce":
                    n = element.operand_count // 2
                    values = [em.value_at(inp, IrIndex(tuple(full), inp.shape)) for inp in element.operands[:n]]
                    slots = accs[element.unique_id]
                    current = [b.load(s) for s in slots]
                    new = emit_scalar_computation(b, element.to_apply, current + values, reassociate=True)
                    for s, v in zip(slots, new, strict=True):
                        b.store(v, s)
                else:  # side output with the input's shape
                    value = em.value_at(element, IrIndex(tuple(full), element.shape))
                    outs[0].store(b, value, IrIndex(tuple(full), outs[0].shape))

        loop_nest(b, [in_shape.dimensions[d] for d in loop_dims], f"{first.name}.r", inner)
        for element, outs in zip(elements, outputs_of, strict=True):
            if element.opcode == "reduce":
                for slot, out in zip(accs[element.unique_id], outs, strict=True):
                    out.store(b, b.load(slot), IrIndex(index.dims, out.shape))

    if out_shape.rank == 0:
        per_output(IrIndex.scalar(out_shape))
        return 1, 1
    for_each_index(b, out_shape, per_output, "out", outer_range=(ctx.kb.begin, ctx.kb.end))
    outer = out_shape.dimensions[list(reversed(out_shape.minor_to_major()))[0]]
    return outer, choose_partitions(outer, in_shape.element_count())


# ---- column reductions --------------------------------------------------------------------------------
COLUMN_CHUNK = 512  # kept elements per chunk: their accumulators stay in L1 while the rows stream by


def is_column_reduction(elements: list[HloInstruction], in_shape, kept: list[int]) -> bool:  # type: ignore[no-untyped-def]
    """Single-operand reductions (no side outputs) whose *kept* dimensions are the minor-most ones
    in memory -- e.g. summing the rows of a row-major matrix into one row."""
    if any(e.opcode != "reduce" or e.operand_count != 2 for e in elements):
        return False
    return keeps_minor_dimensions(in_shape, kept)


def emit_column_reduction(ctx: KernelContext, reduces: list[HloInstruction], in_shape, kept: list[int],  # type: ignore[no-untyped-def]
                          loop_dims: list[int]) -> tuple[int, int]:
    """Reduce the major dimensions of the input while walking memory in order::

        for chunk in [begin, end):                 # kept elements, COLUMN_CHUNK at a time (parallel)
          out[j] = init                for j in chunk
          for i in reduced dims:                   # row by row
            for j in chunk:                        # contiguous: vectorized, accumulators in cache
              out[j] = reducer(out[j], producer(i, j))

    The naive order (one output at a time, walking a column) touches one element per cache line.
    """
    b = ctx.b
    em = ctx.emitter()
    kept_order = [d for d in in_shape.minor_to_major() if d in kept]  # minor to major
    total = 1
    for d in kept:
        total *= in_shape.dimensions[d]
    chunks = -(-total // COLUMN_CHUNK)
    outs = ctx.output_arrays

    def kept_index(j: ir.Value) -> dict[int, ir.Value]:
        values, rest = {}, j
        for n, d in enumerate(kept_order):
            size = in_shape.dimensions[d]
            last = n == len(kept_order) - 1
            values[d] = rest if last else b.urem(rest, i64(size))
            if not last:
                rest = b.udiv(rest, i64(size))
        return values

    def out_index(values: dict[int, ir.Value], out: IrArray) -> IrIndex:
        return IrIndex(tuple(values[d] for d in kept), out.shape)

    with for_range(b, ctx.kb.end, "chunk", ctx.kb.begin) as chunk:
        lo = b.mul(chunk, i64(COLUMN_CHUNK))
        hi_raw = b.add(lo, i64(COLUMN_CHUNK))
        hi = b.select(b.icmp_unsigned("<", hi_raw, i64(total)), hi_raw, i64(total))
        with for_range(b, hi, "j.init", lo) as j:
            kv = kept_index(j)
            for r, out in zip(reduces, outs, strict=True):
                out.store(b, em.value_at(r.operand(1), IrIndex.scalar(r.operand(1).shape)), out_index(kv, out))

        def row(loop_values: list[ir.Value]) -> None:
            with for_range(b, hi, "j", lo) as j:
                kv = kept_index(j)
                full = [i64(0)] * in_shape.rank
                for d, v in kv.items():
                    full[d] = v
                for d, v in zip(loop_dims, loop_values, strict=True):
                    full[d] = v
                for r, out in zip(reduces, outs, strict=True):
                    value = em.value_at(r.operand(0), IrIndex(tuple(full), r.operand(0).shape))
                    index = out_index(kv, out)
                    new = emit_scalar_computation(b, r.to_apply, [out.load(b, index), value])
                    out.store(b, new[0], index)

        loop_nest(b, [in_shape.dimensions[d] for d in loop_dims], f"{reduces[0].name}.rows", row)
    return chunks, choose_partitions(chunks, in_shape.element_count())
