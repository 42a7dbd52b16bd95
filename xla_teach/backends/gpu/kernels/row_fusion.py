"""The GPU kernel of a ``row-fusion`` (softmax, log-softmax, layer norm): one thread block per row.

``passes/fusion/row_fusion.py`` puts a whole row-wise computation into one ``kCustom``
fusion. On the GPU, block ``r`` owns row ``r``; each of its ``T`` threads owns the same few
elements of the row throughout (runs of 4 neighbours, ``T`` runs apart, so a warp reads 512
contiguous bytes as 16-byte vector loads) and keeps them **in registers**::

    mine = [x(r, j) for j in my elements]            # the only read of the row from memory
    for each reduction R (in dependency order):
        acc = fold(reducer, [operand_R(r, j) for j in my elements])    # from registers
        acc = block_reduce(acc)      # warp shuffles, then one value per warp in shared memory
        R(r) = acc                   # broadcast to every thread through shared memory
    for j in my elements:  out(r, j) = root(r, j)    # may use every R(r); the only write

Every per-element value (``x``, ``exp(x - max)``, ``x - mean``) is computed once per element
and reused by the later steps -- the emitter's generators are memoised per element -- so the
row crosses the memory bus exactly twice, once in and once out. Softmax without this fusion is
three kernels, each streaming the whole array.
"""

from __future__ import annotations

from llvmlite import ir

from xla_teach.backends.gpu.kernel_builder import WARP_SIZE, LaunchDimensions
from xla_teach.backends.llvm.elemental_emitter import ElementalEmitter
from xla_teach.backends.llvm.ir_array import IrIndex, i64, unflatten
from xla_teach.backends.llvm.kernel_context import KernelContext
from xla_teach.backends.llvm.loops import if_then, stack_slot
from xla_teach.backends.llvm.scalar_computation import emit_scalar_computation
from xla_teach.hlo.ir import HloInstruction
from xla_teach.hlo.shape import Shape

MAX_THREADS = 1024
ELEMENTS_PER_THREAD = 8  # kept in registers; longer rows get more threads, up to MAX_THREADS


def _unflatten(b: ir.IRBuilder, linear: ir.Value, dims: list[int], sizes: list[int]) -> dict[int, ir.Value]:
    """Indices of ``dims`` (major to minor) for a row-major position over them."""
    return dict(zip(dims, unflatten(b, linear, sizes), strict=True))


def emit_gpu_row_fusion_kernel(ctx: KernelContext) -> LaunchDimensions:
    fused = ctx.instr.fused_computation
    root = fused.root
    reduces = [i for i in fused.post_order() if i.opcode == "reduce"]
    if any(r.operand_count != 2 for r in reduces):
        raise NotImplementedError(f"{ctx.instr.name}: variadic reductions in a row fusion")
    shape = root.shape
    row = sorted(reduces[0].attrs["dimensions"])
    order = list(reversed(shape.minor_to_major()))  # physical major to minor
    kept = [d for d in order if d not in row]
    row_dims = [d for d in order if d in row]
    row_len = 1
    for d in row_dims:
        row_len *= shape.dimensions[d]
    rows = 1
    for d in kept:
        rows *= shape.dimensions[d]
    threads = min(MAX_THREADS, max(WARP_SIZE, -(-row_len // (ELEMENTS_PER_THREAD * WARP_SIZE)) * WARP_SIZE))
    launch = LaunchDimensions((max(rows, 1), 1, 1), (threads, 1, 1))
    if shape.element_count() == 0:
        return launch
    b, kb = ctx.b, ctx.kb
    em = ctx.emitter(reassociate=True)
    tid = kb.thread_x()  # type: ignore[attr-defined]
    kept_values = _unflatten(b, kb.block_x(), kept, [shape.dimensions[d] for d in kept]) if kept else {}  # type: ignore[attr-defined]

    # This thread's elements: runs of `vector` neighbours, `threads * vector` apart. Positions past
    # the row's end (when it does not divide evenly) read its last element and are masked.
    vector = 4 if row_len % (4 * threads) == 0 else 1
    runs = -(-row_len // (threads * vector))
    mine: list[tuple[IrIndex, ir.Value | None]] = []
    for run in range(runs):
        for v in range(vector):
            j = b.add(b.mul(b.add(tid, i64(run * threads)), i64(vector)), i64(v))
            valid = None if (run + 1) * threads * vector <= row_len else b.icmp_unsigned("<", j, i64(row_len))
            safe = j if valid is None else b.select(valid, j, i64(row_len - 1))
            row_values = _unflatten(b, safe, row_dims, [shape.dimensions[d] for d in row_dims])
            index = IrIndex(tuple(kept_values.get(d, row_values.get(d)) for d in range(shape.rank)), shape)
            mine.append((index, valid))
    _memoise_per_element(em, ctx.instr.fused_computation.post_order(), shape)

    for k, r in enumerate(reduces):
        init = em.value_at(r.operand(1), IrIndex.scalar(r.operand(1).shape))
        acc: ir.Value = init
        for index, valid in mine:
            value = em.value_at(r.operand(0), index)
            new = emit_scalar_computation(b, r.to_apply, [acc, value], reassociate=True)[0]
            acc = new if valid is None else b.select(valid, new, acc)
        slot = stack_slot(b, init.type, f"acc.{k}")
        b.store(acc, slot)
        result = _block_reduce(ctx, r, slot, init, threads, k)
        em.set_generator(r, lambda _index, v=result: v)

    out = ctx.output_arrays[0]
    values = [(em.value_at(root, index), index, valid) for index, valid in mine]  # all before any store
    for value, index, valid in values:
        if valid is None:
            out.store(b, value, IrIndex(index.dims, out.shape))
        else:
            with if_then(b, valid, "tail"):
                out.store(b, value, IrIndex(index.dims, out.shape))
    return launch


def _memoise_per_element(em: ElementalEmitter, instructions: list[HloInstruction], shape: Shape) -> None:
    """Make every row-shaped value computed once per element index object (whatever basic block
    asks later: each is computed in straight-line code that dominates the rest of the kernel)."""
    for instr in instructions:
        if instr.opcode == "reduce" or instr.shape.is_tuple or tuple(instr.shape.dimensions) != tuple(
                shape.dimensions):
            continue
        inner = em.generator(instr)
        memo: dict[int, tuple[IrIndex, ir.Value]] = {}

        def generator(index: IrIndex, inner=inner, memo=memo) -> ir.Value:  # type: ignore[no-untyped-def]
            hit = memo.get(id(index))
            if hit is None or hit[0] is not index:
                hit = memo[id(index)] = (index, inner(index))
            return hit[1]

        em.set_generator(instr, generator)


def _block_reduce(ctx: KernelContext, r: HloInstruction, acc: ir.AllocaInstr, init: ir.Value,
                  threads: int, k: int) -> ir.Value:
    """Every thread's ``acc`` combined with ``r``'s reducer; the result is returned to all threads."""
    b, kb = ctx.b, ctx.kb
    warps = threads // WARP_SIZE
    element = acc.allocated_type

    def warp_reduce() -> None:
        offset = WARP_SIZE // 2
        while offset >= 1:
            mine = b.load(acc)
            theirs = kb.shuffle_down(mine, offset)  # type: ignore[attr-defined]
            b.store(emit_scalar_computation(b, r.to_apply, [mine, theirs], reassociate=True)[0], acc)
            offset //= 2

    tid = kb.thread_x()  # type: ignore[attr-defined]
    lane, warp = b.urem(tid, i64(WARP_SIZE)), b.udiv(tid, i64(WARP_SIZE))
    partials = kb.shared_array(element, WARP_SIZE, f"partials{k}")  # type: ignore[attr-defined]
    total = kb.shared_array(element, 1, f"total{k}")  # type: ignore[attr-defined]
    warp_reduce()
    with if_then(b, b.icmp_unsigned("==", lane, i64(0)), "lane0"):
        b.store(b.load(acc), kb.shared_address(partials, warp, element))  # type: ignore[attr-defined]
    kb.barrier()  # type: ignore[attr-defined]
    with if_then(b, b.icmp_unsigned("==", warp, i64(0)), "warp0"):
        valid = b.icmp_unsigned("<", lane, i64(warps))
        loaded = b.load(kb.shared_address(partials, b.select(valid, lane, i64(0)), element), typ=element)  # type: ignore[attr-defined]
        b.store(b.select(valid, loaded, init), acc)
        warp_reduce()
        with if_then(b, b.icmp_unsigned("==", lane, i64(0)), "publish"):
            b.store(b.load(acc), kb.shared_address(total, i64(0), element))  # type: ignore[attr-defined]
    kb.barrier()  # type: ignore[attr-defined]
    return b.load(kb.shared_address(total, i64(0), element), typ=element)  # type: ignore[attr-defined]
