"""The GPU kernel of a ``row-fusion`` (softmax, log-softmax, layer norm): one thread block per row.

``passes/fusion/row_fusion.py`` puts a whole row-wise computation into one ``kCustom``
fusion. On the GPU, block ``r`` owns row ``r`` and its ``T`` threads share every step::

    for each reduction R (in dependency order):
        acc = init;  for j = tid; j < row_len; j += T:  acc = f(acc, operand_R(r, j))
        acc = block_reduce(acc)          # warp shuffles, then one value per warp in shared memory
        R(r) = acc                       # broadcast to every thread through shared memory
    for j = tid; j < row_len; j += T:  out(r, j) = root(r, j)     # may use every R(r)

Neighbouring threads touch neighbouring elements (coalesced), and a row (16 KiB for 4096 f32)
is read from device memory once: the later walks find it in the multiprocessor's L1 cache.
Softmax without this fusion is three kernels, each streaming the whole array.
"""

from __future__ import annotations

from llvmlite import ir

from xla_teach.backends.cpu.kernels.context import KernelContext
from xla_teach.backends.gpu.kernel_builder import WARP_SIZE, LaunchDimensions
from xla_teach.backends.llvm.ir_array import IrIndex, i64
from xla_teach.backends.llvm.loops import for_range, if_then, stack_slot
from xla_teach.backends.llvm.scalar_computation import emit_scalar_computation
from xla_teach.hlo.ir import HloInstruction

MAX_THREADS = 512
ELEMENTS_PER_THREAD = 8


def _unflatten(b: ir.IRBuilder, linear: ir.Value, dims: list[int], sizes: list[int]) -> dict[int, ir.Value]:
    """Indices of ``dims`` (major to minor) for a row-major position over them."""
    values: dict[int, ir.Value] = {}
    remaining = linear
    for n, (d, size) in enumerate(zip(reversed(dims), reversed(sizes), strict=True)):
        if n == len(dims) - 1:
            values[d] = remaining
        else:
            values[d] = b.urem(remaining, i64(size))
            remaining = b.udiv(remaining, i64(size))
    return values


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

    def full_index(j: ir.Value) -> IrIndex:
        row_values = _unflatten(b, j, row_dims, [shape.dimensions[d] for d in row_dims])
        return IrIndex(tuple(kept_values.get(d, row_values.get(d)) for d in range(shape.rank)), shape)

    for k, r in enumerate(reduces):
        init = em.value_at(r.operand(1), IrIndex.scalar(r.operand(1).shape))
        acc = stack_slot(b, init.type, f"acc.{r.name}")
        b.store(init, acc)
        with for_range(b, i64(row_len), f"{r.name}.walk", tid, i64(threads)) as j:
            value = em.value_at(r.operand(0), full_index(j))
            b.store(emit_scalar_computation(b, r.to_apply, [b.load(acc), value], reassociate=True)[0], acc)
        result = _block_reduce(ctx, r, acc, init, threads, k)
        em.set_generator(r, lambda _index, v=result: v)

    out = ctx.output_arrays[0]
    with for_range(b, i64(row_len), "out.walk", tid, i64(threads)) as j:
        index = full_index(j)
        out.store(b, em.value_at(root, index), IrIndex(index.dims, out.shape))
    return launch


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
