"""GPU sort: a bitonic sorting network per slice, one thread block per slice.

A *sorting network* is a fixed list of compare-exchange steps that sorts any input; its steps
do not depend on the data, so all threads can run one step at once. Bitonic sort of ``n``
elements (padded in thought to ``N``, the next power of two) takes ``log N (log N + 1) / 2``
steps of ``N/2`` independent compare-exchanges each. In stage ``k = 2, 4, ..., N`` it merges
sorted runs of ``k/2`` into runs of ``k``: first each run of ``k`` is compared with its own
mirror image (element ``i`` with ``k-1-i``), then halves of ``j = k/4, ..., 1`` are compared
element by element (``i`` with ``i + j``). Every step puts the smaller element at the lower
position, so the phantom elements past ``n`` behave as ``+inf`` and their comparisons can
simply be skipped -- no padding is stored::

    block b sorts slice b; its T threads share the work of each step
    copy slice b into S (shared memory if it fits, else the output buffers)      ; barrier
    for k = 2; k <= N; k *= 2:
      for j = k/2; j >= 1; j /= 2:
        for t = tid; t < N/2; t += T:                      # the N/2 pairs of this step
          i = (t / j) * 2j + t % j
          p = (j == k/2) ? i + (k-1) - 2*(t % j) : i + j   # mirror first, then halves
          if p < n and before(S[p], S[i]): swap S[i], S[p] (every operand)
        barrier
    copy S out to slice b of the outputs

``before`` is the HLO comparator, emitted inline. A network is not stable, so the GPU pipeline
runs ``stable-sort-expander`` first: ties are broken by an ``iota`` operand, which makes the
order total and the result the interpreter's. Slices whose operands fit in 48 KiB of shared
memory sort there; longer ones sort in place in the output buffers, through the L2 cache
(each step's barrier makes one thread's global writes visible to the others of its block).
One block per slice leaves most of the GPU idle for a single long slice; XLA then launches one
kernel per step across all blocks, which a plan of one kernel per HLO instruction cannot do yet.
"""

from __future__ import annotations

import math

from llvmlite import ir

from xla_teach.backends.gpu.kernel_builder import LaunchDimensions
from xla_teach.backends.llvm.ir_array import IrArray, IrIndex, i64
from xla_teach.backends.llvm.ir_types import I64, from_storage
from xla_teach.backends.llvm.kernel_context import KernelContext
from xla_teach.backends.llvm.loops import for_range, if_then, stack_slot, while_loop
from xla_teach.backends.llvm.scalar_computation import emit_scalar_computation

SHARED_MEMORY_LIMIT = 48 * 1024  # bytes of static shared memory a block may use without opting in
MAX_THREADS = 1024


def sort_uses_shared_memory(n: int, arrays: list[IrArray]) -> bool:
    return n * sum(a.element_type.byte_size for a in arrays) <= SHARED_MEMORY_LIMIT


def emit_gpu_sort_kernel(ctx: KernelContext) -> LaunchDimensions:
    instr, b, kb = ctx.instr, ctx.b, ctx.kb
    shape = instr.operand(0).shape
    dim = instr.dimensions[0]
    n = shape.dimensions[dim]
    others = [d for d in range(shape.rank) if d != dim]
    slices = math.prod(shape.dimensions[d] for d in others)
    if shape.element_count() == 0:
        return LaunchDimensions((1, 1, 1), (1, 1, 1))
    padded = 1 << max(n - 1, 0).bit_length()  # N: the next power of two
    pairs = max(padded // 2, 1)
    threads = min(MAX_THREADS, max(32, pairs))
    launch = LaunchDimensions((slices, 1, 1), (threads, 1, 1))
    inputs, outputs = ctx.operand_arrays, ctx.output_arrays
    tid, nthreads = kb.thread_x(), i64(threads)  # type: ignore[attr-defined]

    # The slice of this block: its indices along the other dimensions.
    outer: dict[int, ir.Value] = {}
    rest = kb.block_x()  # type: ignore[attr-defined]
    for d in reversed(others):
        outer[d] = b.urem(rest, i64(shape.dimensions[d]))
        rest = b.udiv(rest, i64(shape.dimensions[d]))

    def index(array: IrArray, position: ir.Value) -> IrIndex:
        return IrIndex(tuple(position if d == dim else outer[d] for d in range(shape.rank)), array.shape)

    if sort_uses_shared_memory(n, inputs):
        tiles = [kb.shared_array(a.storage, n, f"sort{k}") for k, a in enumerate(inputs)]  # type: ignore[attr-defined]

        def at(k: int, position: ir.Value) -> ir.Value:
            return kb.shared_address(tiles[k], position, inputs[k].storage)  # type: ignore[attr-defined]
    else:
        def at(k: int, position: ir.Value) -> ir.Value:
            return outputs[k].address(b, index(outputs[k], position))

    # Copy in (every thread a strided share of the slice).
    with for_range(b, i64(n), "sort.in", tid, nthreads) as p:
        for k, array in enumerate(inputs):
            b.store(b.load(array.address(b, index(array, p)), typ=array.storage), at(k, p))
    kb.barrier()  # type: ignore[attr-defined]

    k_slot, j_slot = stack_slot(b, I64, "sort.k"), stack_slot(b, I64, "sort.j")
    b.store(i64(2), k_slot)

    def stage() -> None:
        size = b.load(k_slot)
        b.store(b.lshr(size, i64(1)), j_slot)

        def step() -> None:
            j = b.load(j_slot)
            mirror = b.icmp_unsigned("==", j, b.lshr(size, i64(1)))
            with for_range(b, i64(pairs), "sort.pair", tid, nthreads) as t:
                offset = b.urem(t, j)  # j is a power of two: LLVM cannot know, but urem is cheap next to loads
                i = b.add(b.mul(b.udiv(t, j), b.shl(j, i64(1))), offset)
                partner = b.select(mirror, b.sub(b.add(i, b.sub(size, i64(1))), b.shl(offset, i64(1))),
                                   b.add(i, j))
                with if_then(b, b.icmp_unsigned("<", partner, i64(n)), "sort.valid"):
                    _compare_exchange(ctx, at, i, partner)
            kb.barrier()  # type: ignore[attr-defined]
            b.store(b.lshr(j, i64(1)), j_slot)

        while_loop(b, lambda: b.icmp_unsigned(">", b.load(j_slot), i64(0)), step, "sort.step")
        b.store(b.shl(size, i64(1)), k_slot)

    while_loop(b, lambda: b.icmp_unsigned("<=", b.load(k_slot), i64(padded)), stage, "sort.stage")

    if sort_uses_shared_memory(n, inputs):
        with for_range(b, i64(n), "sort.out", tid, nthreads) as p:
            for k, out in enumerate(outputs):
                b.store(b.load(at(k, p), typ=out.storage), out.address(b, index(out, p)))
    return launch


def _compare_exchange(ctx: KernelContext, at, i: ir.Value, p: ir.Value) -> None:  # type: ignore[no-untyped-def]
    """If the comparator puts element ``p`` before element ``i`` (``i < p``), swap them."""
    b = ctx.b
    arrays = ctx.operand_arrays
    low = [b.load(at(k, i), typ=a.storage) for k, a in enumerate(arrays)]
    high = [b.load(at(k, p), typ=a.storage) for k, a in enumerate(arrays)]
    args = []
    for a, hi, lo in zip(arrays, high, low, strict=True):
        args += [from_storage(b, hi, a.element_type), from_storage(b, lo, a.element_type)]
    swap = emit_scalar_computation(b, ctx.instr.to_apply, args)[0]
    with if_then(b, swap, "sort.swap"):
        for k in range(len(arrays)):
            b.store(high[k], at(k, i))
            b.store(low[k], at(k, p))
