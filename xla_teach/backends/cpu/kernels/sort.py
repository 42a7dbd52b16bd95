"""Sort kernels: a stable bottom-up merge sort of every 1-D slice, with the HLO
comparator computation emitted inline.

``sort`` may carry several operands that move together (keys and values); the
comparator sees ``(a0, b0, a1, b1, ...)`` and answers "does a go before b". Each
slice of every operand is copied into a contiguous scratch run, the runs are merged
pairwise with all operands moving together, and the result is copied out::

    src_k = operand_k[slice]
    for width = 1, 2, 4, ...:  merge neighbouring runs of src into dst (stable); swap
    out_k[slice] = src_k

Carrying the values themselves (rather than sorting a permutation of positions and
reading the keys through it) keeps every merge pass a sequential walk through memory.
Scratch space (two runs per operand) comes from ``malloc``. Slices are independent, so
the threads of the kernel each sort their own range of them.
"""

from __future__ import annotations

import math

from llvmlite import ir

from xla_teach.backends.cpu.kernels.partitions import choose_partitions
from xla_teach.backends.llvm.ir_array import IrArray, IrIndex, i64
from xla_teach.backends.llvm.ir_types import I64, PTR, from_storage
from xla_teach.backends.llvm.kernel_context import KernelContext
from xla_teach.backends.llvm.loops import for_range, stack_slot, while_loop
from xla_teach.backends.llvm.scalar_computation import emit_scalar_computation


def _libc(module: ir.Module, name: str, fnty: ir.FunctionType) -> ir.Function:
    return module.globals.get(name) or ir.Function(module, fnty, name)


def _min(b: ir.IRBuilder, x: ir.Value, y: ir.Value) -> ir.Value:
    return b.select(b.icmp_signed("<", x, y), x, y)


def emit_sort_kernel(ctx: KernelContext) -> tuple[int, int]:
    instr = ctx.instr
    b = ctx.b
    shape = instr.operand(0).shape
    dim = instr.dimensions[0]
    n = shape.dimensions[dim]
    others = [d for d in range(shape.rank) if d != dim]
    if shape.element_count() == 0:
        return 1, 1
    arrays = ctx.operand_arrays
    widths = [a.element_type.byte_size for a in arrays]  # bytes of each operand's storage
    malloc = _libc(b.module, "malloc", ir.FunctionType(PTR, [I64]))
    free = _libc(b.module, "free", ir.FunctionType(ir.VoidType(), [PTR]))
    block = b.call(malloc, [i64(2 * n * sum(widths))])
    runs, offset = [], 0
    for width in widths:  # two runs per operand, one after another in the block
        runs.append((b.gep(block, [i64(offset)], inbounds=True, source_etype=ir.IntType(8)),
                     b.gep(block, [i64(offset + n * width)], inbounds=True, source_etype=ir.IntType(8))))
        offset += 2 * n * width
    src_slots = [stack_slot(b, PTR, f"sort.src{k}") for k in range(len(arrays))]
    dst_slots = [stack_slot(b, PTR, f"sort.dst{k}") for k in range(len(arrays))]

    def at(array: IrArray, p: ir.Value, i: ir.Value) -> ir.Value:
        return b.gep(p, [i], inbounds=True, source_etype=array.storage)

    def per_slice(outer: list[ir.Value]) -> None:
        def index(pos: ir.Value) -> tuple[ir.Value, ...]:
            full: list[ir.Value] = [i64(0)] * shape.rank
            for d, v in zip(others, outer, strict=True):
                full[d] = v
            full[dim] = pos
            return tuple(full)

        for k, array in enumerate(arrays):
            with for_range(b, i64(n), "copy_in") as t:
                raw = b.load(array.address(b, IrIndex(index(t), array.shape)), typ=array.storage)
                b.store(raw, at(array, runs[k][0], t))
            b.store(runs[k][0], src_slots[k])
            b.store(runs[k][1], dst_slots[k])
        width = stack_slot(b, I64, "sort.width")
        b.store(i64(1), width)

        def merge_pass() -> None:
            w = b.load(width)
            srcs, dsts = [b.load(s) for s in src_slots], [b.load(d) for d in dst_slots]
            lo_slot = stack_slot(b, I64, "sort.lo")
            b.store(i64(0), lo_slot)

            def merge_runs() -> None:
                lo = b.load(lo_slot)
                mid = _min(b, b.add(lo, w), i64(n))
                hi = _min(b, b.add(lo, b.mul(w, i64(2))), i64(n))
                i_slot, j_slot = stack_slot(b, I64, "sort.i"), stack_slot(b, I64, "sort.j")
                b.store(lo, i_slot)
                b.store(mid, j_slot)
                with for_range(b, hi, "merge", lo) as t:
                    i, j = b.load(i_slot), b.load(j_slot)
                    i_safe, j_safe = _min(b, i, i64(n - 1)), _min(b, j, i64(n - 1))
                    left = [b.load(at(a, src, i_safe), typ=a.storage) for a, src in zip(arrays, srcs, strict=True)]
                    right = [b.load(at(a, src, j_safe), typ=a.storage) for a, src in zip(arrays, srcs, strict=True)]
                    args = []
                    for a, r, le in zip(arrays, right, left, strict=True):  # "does right go before left?"
                        args += [from_storage(b, r, a.element_type), from_storage(b, le, a.element_type)]
                    right_first = emit_scalar_computation(b, instr.to_apply, args)[0]
                    left_done = b.icmp_signed(">=", i, mid)
                    right_ok = b.icmp_signed("<", j, hi)
                    take_right = b.and_(right_ok, b.or_(left_done, right_first))
                    # Select the *position*, then load: an integer select is a cmov, whereas
                    # selecting between two float values became an unpredictable branch.
                    chosen = b.select(take_right, j_safe, i_safe)
                    for a, src, dst in zip(arrays, srcs, dsts, strict=True):
                        b.store(b.load(at(a, src, chosen), typ=a.storage), at(a, dst, t))
                    b.store(b.select(take_right, i, b.add(i, i64(1))), i_slot)
                    b.store(b.select(take_right, b.add(j, i64(1)), j), j_slot)
                b.store(b.add(lo, b.mul(w, i64(2))), lo_slot)

            while_loop(b, lambda: b.icmp_signed("<", b.load(lo_slot), i64(n)), merge_runs, "runs")
            for k in range(len(arrays)):
                b.store(dsts[k], src_slots[k])
                b.store(srcs[k], dst_slots[k])
            b.store(b.mul(w, i64(2)), width)

        while_loop(b, lambda: b.icmp_signed("<", b.load(width), i64(n)), merge_pass, "passes")
        for k, (array, out) in enumerate(zip(arrays, ctx.output_arrays, strict=True)):
            final = b.load(src_slots[k])
            with for_range(b, i64(n), "copy_out") as t:
                raw = b.load(at(array, final, t), typ=array.storage)
                b.store(raw, out.address(b, IrIndex(index(t), out.shape)))

    # The slices are independent: this thread sorts slices [begin, end) of the row-major order
    # of the other dimensions (each thread has its own scratch block).
    # (The GPU backend runs this kernel in one thread, with no range: then it sorts them all.)
    other_sizes = [shape.dimensions[d] for d in others]
    slices = math.prod(other_sizes)
    begin, end = getattr(ctx.kb, "begin", i64(0)), getattr(ctx.kb, "end", i64(slices))
    with for_range(b, end, "slice", begin) as linear:
        outer, rest = [], linear
        for size in reversed(other_sizes):
            outer.append(b.urem(rest, i64(size)))
            rest = b.udiv(rest, i64(size))
        per_slice(outer[::-1])
    b.call(free, [block])
    return slices, choose_partitions(slices, slices * n * max(n.bit_length(), 1))
