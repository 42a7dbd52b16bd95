"""GPU reductions: a block per row with warp shuffles, or a thread per output.

**Row reduction** (the reduced dimensions are the contiguous, minor-most ones):
block ``r`` owns row ``r``. Each of its ``T`` threads walks the row with stride
``T`` (neighbouring threads read neighbouring addresses) keeping a partial result
in a register, then the block combines its partials deterministically::

    acc = init;  for j = tid; j < row_len; j += T:  acc = f(acc, in[r, j])
    for offset in 16, 8, 4, 2, 1:  acc = f(acc, shfl.down(acc, offset))   # within a warp
    if lane == 0:  shared[warp] = acc                                       # one value per warp
    barrier
    warp 0: acc = lane < warps ? shared[lane] : init;  shuffle again;  thread 0 writes out[r]

Side outputs of a multi-output fusion (values with the input's shape) are stored
by whichever thread visits their element.

**Other reductions** (reduced dimensions major, e.g. column sums): one thread
per output element loops over the reduced elements; neighbouring threads then
read neighbouring columns, which keeps the loads coalesced.
"""

from __future__ import annotations

from llvmlite import ir

from xla_teach.backends.gpu.kernel_builder import WARP_SIZE, LaunchDimensions, linear_launch
from xla_teach.backends.llvm.elemental_emitter import delinearize_physical
from xla_teach.backends.llvm.elemental_windows import loop_nest
from xla_teach.backends.llvm.ir_array import IrArray, IrIndex, i64, unflatten
from xla_teach.backends.llvm.kernel_context import KernelContext
from xla_teach.backends.llvm.loops import if_then, stack_slot
from xla_teach.backends.llvm.scalar_computation import emit_scalar_computation
from xla_teach.hlo.ir import HloInstruction
from xla_teach.hlo.shape import Shape

MAX_THREADS = 512


def _elements(ctx: KernelContext) -> tuple[list[HloInstruction], list[HloInstruction], list[list[IrArray]]]:
    hero = ctx.hero()
    elements = list(hero.operands) if hero.opcode == "tuple" else [hero]
    reduces = [e for e in elements if e.opcode == "reduce"]
    outputs_of, cursor = [], 0
    for element in elements:
        count = len(element.shape.tuple_shapes) if element.shape.is_tuple else 1
        outputs_of.append(ctx.output_arrays[cursor : cursor + count])
        cursor += count
    return elements, reduces, outputs_of


def _split(shape: Shape, reduced: set[int]) -> tuple[list[int], list[int]] | None:
    """(kept dims, reduced dims) in physical major-to-minor order, if reduced dims are minor-most."""
    order = list(reversed(shape.minor_to_major()))
    kept = [d for d in order if d not in reduced]
    red = [d for d in order if d in reduced]
    if order[len(kept):] != red:
        return None
    return kept, red


def _unflatten(b: ir.IRBuilder, linear: ir.Value, dims: list[int], shape: Shape) -> dict[int, ir.Value]:
    """Values of ``dims`` (major-to-minor) for a linear position over them."""
    return dict(zip(dims, unflatten(b, linear, [shape.dimensions[d] for d in dims]), strict=True))


def emit_gpu_reduction_kernel(ctx: KernelContext) -> LaunchDimensions:
    elements, reduces, outputs_of = _elements(ctx)
    first = reduces[0]
    in_shape = first.operand(0).shape
    out_shape = first.shape.tuple_shapes[0] if first.shape.is_tuple else first.shape
    if out_shape.element_count() == 0:
        # No output element (so a kept dimension is 0 and the input, side outputs included, is empty
        # too): both strategies below would still run one block/thread on row 0 and touch memory.
        return linear_launch(1)
    for other in reduces[1:]:
        # Both strategies index every reduction with the first one's loops (as the CPU emitter does).
        if other.operand(0).shape.dimensions != in_shape.dimensions or set(other.dimensions) != set(first.dimensions):
            raise NotImplementedError(f"{ctx.instr.name}: sibling reductions over different shapes")
    split = _split(in_shape, set(first.dimensions))
    if split is None:
        return _per_output_thread(ctx, elements, reduces, outputs_of)
    return _row_reduction(ctx, elements, reduces, outputs_of, *split)


def _init_accumulators(ctx: KernelContext, reduces: list[HloInstruction]) -> dict[int, list[ir.AllocaInstr]]:
    em, b = ctx.emitter(reassociate=True), ctx.b
    accs = {}
    for r in reduces:
        n = r.operand_count // 2
        slots = []
        for k, init in enumerate(r.operands[n:]):
            value = em.value_at(init, IrIndex.scalar(init.shape))
            slot = stack_slot(b, value.type, f"acc.{r.name}.{k}")
            b.store(value, slot)
            slots.append(slot)
        accs[r.unique_id] = slots
    return accs


def _visit(ctx: KernelContext, elements: list[HloInstruction], outputs_of: list[list[IrArray]],
           accs: dict[int, list[ir.AllocaInstr]], full: tuple[ir.Value, ...]) -> None:
    """Fold one input element into every reduction and store side outputs at ``full``."""
    em, b = ctx.emitter(reassociate=True), ctx.b
    for element, outs in zip(elements, outputs_of, strict=True):
        if element.opcode == "reduce":
            n = element.operand_count // 2
            values = [em.value_at(inp, IrIndex(full, inp.shape)) for inp in element.operands[:n]]
            slots = accs[element.unique_id]
            new = emit_scalar_computation(b, element.to_apply, [b.load(s) for s in slots] + values, reassociate=True)
            for s, v in zip(slots, new, strict=True):
                b.store(v, s)
        else:
            outs[0].store(b, em.value_at(element, IrIndex(full, element.shape)), IrIndex(full, outs[0].shape))


def _row_reduction(ctx: KernelContext, elements: list[HloInstruction], reduces: list[HloInstruction],
                   outputs_of: list[list[IrArray]], kept: list[int], red: list[int]) -> LaunchDimensions:
    b, kb = ctx.b, ctx.kb
    in_shape = reduces[0].operand(0).shape
    rows = 1
    for d in kept:
        rows *= in_shape.dimensions[d]
    row_len = 1
    for d in red:
        row_len *= in_shape.dimensions[d]
    threads = min(MAX_THREADS, max(WARP_SIZE, -(-row_len // WARP_SIZE) * WARP_SIZE))
    warps = threads // WARP_SIZE
    launch = LaunchDimensions((rows, 1, 1), (threads, 1, 1), 0)  # rows >= 1: empty outputs return early
    row, tid = kb.block_x(), kb.thread_x()
    kept_values = _unflatten(b, row, kept, in_shape) if kept else {}
    accs = _init_accumulators(ctx, reduces)
    _strided_loop(ctx, elements, outputs_of, accs, tid, threads, row_len, kept_values, red, in_shape)
    # Combine within each warp, then across warps through shared memory.
    slots = [s for r in reduces for s in accs[r.unique_id]]
    _warp_reduce(ctx, reduces, accs)
    lane, warp = b.urem(tid, i64(WARP_SIZE)), b.udiv(tid, i64(WARP_SIZE))
    shared = [kb.shared_array(s.allocated_type, WARP_SIZE, f"partial{k}") for k, s in enumerate(slots)]
    with if_then(b, b.icmp_unsigned("==", lane, i64(0)), "lane0"):
        for var, slot in zip(shared, slots, strict=True):
            b.store(b.load(slot), kb.shared_address(var, warp, slot.allocated_type))
    kb.barrier()
    with if_then(b, b.icmp_unsigned("==", warp, i64(0)), "warp0"):
        inits = _init_values(ctx, reduces)
        valid = b.icmp_unsigned("<", lane, i64(warps))
        safe_lane = b.select(valid, lane, i64(0))
        for var, slot, init in zip(shared, slots, inits, strict=True):
            loaded = b.load(kb.shared_address(var, safe_lane, slot.allocated_type), typ=slot.allocated_type)
            b.store(b.select(valid, loaded, init), slot)
        _warp_reduce(ctx, reduces, accs)
        with if_then(b, b.icmp_unsigned("==", lane, i64(0)), "write"):
            out_index = tuple(kept_values[d] for d in sorted(kept))
            for element, outs in zip(elements, outputs_of, strict=True):
                if element.opcode == "reduce":
                    for slot, out in zip(accs[element.unique_id], outs, strict=True):
                        out.store(b, b.load(slot), IrIndex(out_index, out.shape))
    return launch


def _init_values(ctx: KernelContext, reduces: list[HloInstruction]) -> list[ir.Value]:
    em = ctx.emitter(reassociate=True)
    values = []
    for r in reduces:
        n = r.operand_count // 2
        values += [em.value_at(init, IrIndex.scalar(init.shape)) for init in r.operands[n:]]
    return values


def _strided_loop(ctx: KernelContext, elements: list[HloInstruction], outputs_of: list[list[IrArray]],
                  accs: dict[int, list[ir.AllocaInstr]], tid: ir.Value, threads: int, row_len: int,
                  kept_values: dict[int, ir.Value], red: list[int], in_shape: Shape) -> None:
    """``for (j = tid; j < row_len; j += threads)`` visiting element (row, j)."""
    b = ctx.b
    j_slot = stack_slot(b, tid.type, "j")
    b.store(tid, j_slot)
    header = b.append_basic_block("row.header")
    body = b.append_basic_block("row.body")
    done = b.append_basic_block("row.done")
    b.branch(header)
    b.position_at_end(header)
    j = b.load(j_slot)
    b.cbranch(b.icmp_unsigned("<", j, i64(row_len)), body, done)
    b.position_at_end(body)
    red_values = _unflatten(b, j, red, in_shape)
    full = tuple(kept_values.get(d, red_values.get(d)) for d in range(in_shape.rank))
    _visit(ctx, elements, outputs_of, accs, full)
    b.store(b.add(j, i64(threads)), j_slot)
    b.branch(header)
    b.position_at_end(done)


def _warp_reduce(ctx: KernelContext, reduces: list[HloInstruction], accs: dict[int, list[ir.AllocaInstr]]) -> None:
    b, kb = ctx.b, ctx.kb
    offset = WARP_SIZE // 2
    while offset >= 1:
        for r in reduces:
            slots = accs[r.unique_id]
            mine = [b.load(s) for s in slots]
            theirs = [kb.shuffle_down(v, offset) for v in mine]
            new = emit_scalar_computation(b, r.to_apply, mine + theirs, reassociate=True)
            for s, v in zip(slots, new, strict=True):
                b.store(v, s)
        offset //= 2


def _per_output_thread(ctx: KernelContext, elements: list[HloInstruction], reduces: list[HloInstruction],
                       outputs_of: list[list[IrArray]]) -> LaunchDimensions:
    b, kb = ctx.b, ctx.kb
    first = reduces[0]
    in_shape = first.operand(0).shape
    reduced = sorted(first.dimensions)
    kept = [d for d in range(in_shape.rank) if d not in reduced]
    loop_dims = [d for d in reversed(in_shape.minor_to_major()) if d in reduced]
    out_shape = first.shape.tuple_shapes[0] if first.shape.is_tuple else first.shape
    n = out_shape.element_count()  # >= 1: empty outputs return early
    launch = linear_launch(n)
    tid = kb.global_thread_id()
    with if_then(b, b.icmp_unsigned("<", tid, i64(n)), "in_bounds"):
        out_index = delinearize_physical(b, tid, out_shape) if out_shape.rank else IrIndex.scalar(out_shape)
        accs = _init_accumulators(ctx, reduces)

        def inner(loop_values: list[ir.Value]) -> None:
            full: list[ir.Value] = [i64(0)] * in_shape.rank
            for d, v in zip(kept, out_index.dims, strict=True):
                full[d] = v
            for d, v in zip(loop_dims, loop_values, strict=True):
                full[d] = v
            _visit(ctx, elements, outputs_of, accs, tuple(full))

        loop_nest(b, [in_shape.dimensions[d] for d in loop_dims], "r", inner)
        for element, outs in zip(elements, outputs_of, strict=True):
            if element.opcode == "reduce":
                for slot, out in zip(accs[element.unique_id], outs, strict=True):
                    out.store(b, b.load(slot), IrIndex(out_index.dims, out.shape))
    return launch
