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

from xla_teach.backends.cpu.kernels.context import KernelContext, choose_partitions
from xla_teach.backends.llvm.elemental_windows import loop_nest
from xla_teach.backends.llvm.ir_array import IrArray, IrIndex, i64
from xla_teach.backends.llvm.loops import for_each_index, stack_slot
from xla_teach.backends.llvm.scalar_computation import emit_scalar_computation
from xla_teach.hlo.ir import HloInstruction


def is_reduction_hero(hero: HloInstruction) -> bool:
    if hero.opcode == "reduce":
        return True
    return hero.opcode == "tuple" and any(e.opcode == "reduce" for e in hero.operands)


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
