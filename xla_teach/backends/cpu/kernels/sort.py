"""Sort kernels: a stable bottom-up merge sort of every 1-D slice, with the HLO
comparator computation emitted inline.

``sort`` may carry several operands that move together (keys and values); the
comparator sees ``(a0, b0, a1, b1, ...)`` and answers "does a go before b". The
kernel sorts a *permutation* of slice positions (so any number of operands
follow the same order), then writes each output through it::

    perm = [0, 1, ..., n-1]
    for width = 1, 2, 4, ...:  merge neighbouring runs of perm (stable)
    out_k[t] = operand_k[perm[t]]

Scratch space for the permutation comes from ``malloc``.
"""

from __future__ import annotations

from llvmlite import ir

from xla_teach.backends.cpu.kernels.context import KernelContext
from xla_teach.backends.llvm.elemental_windows import loop_nest
from xla_teach.backends.llvm.ir_array import IrIndex, i64
from xla_teach.backends.llvm.ir_types import I64, PTR
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
    malloc = _libc(b.module, "malloc", ir.FunctionType(PTR, [I64]))
    free = _libc(b.module, "free", ir.FunctionType(ir.VoidType(), [PTR]))
    perm = b.call(malloc, [i64(2 * 8 * max(n, 1))])
    scratch = b.gep(perm, [i64(n)], inbounds=True, source_etype=I64)
    src_slot, dst_slot = stack_slot(b, PTR, "sort.src"), stack_slot(b, PTR, "sort.dst")

    def at(p: ir.Value, i: ir.Value) -> ir.Value:
        return b.gep(p, [i], inbounds=True, source_etype=I64)

    def per_slice(outer: list[ir.Value]) -> None:
        def index(pos: ir.Value) -> tuple[ir.Value, ...]:
            full: list[ir.Value] = [i64(0)] * shape.rank
            for d, v in zip(others, outer, strict=True):
                full[d] = v
            full[dim] = pos
            return tuple(full)

        def goes_before(i: ir.Value, j: ir.Value) -> ir.Value:
            args = []
            for array in ctx.operand_arrays:
                args.append(array.load(b, IrIndex(index(i), array.shape)))
                args.append(array.load(b, IrIndex(index(j), array.shape)))
            return emit_scalar_computation(b, instr.to_apply, args)[0]

        with for_range(b, i64(n), "init") as t:
            b.store(t, at(perm, t))
        b.store(perm, src_slot)
        b.store(scratch, dst_slot)
        width = stack_slot(b, I64, "sort.width")
        b.store(i64(1), width)

        def merge_pass() -> None:
            w = b.load(width)
            src, dst = b.load(src_slot), b.load(dst_slot)
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
                    pi, pj = b.load(at(src, i_safe), typ=I64), b.load(at(src, j_safe), typ=I64)
                    right_first = goes_before(pj, pi)
                    left_done = b.icmp_signed(">=", i, mid)
                    right_ok = b.icmp_signed("<", j, hi)
                    take_right = b.and_(right_ok, b.or_(left_done, right_first))
                    b.store(b.select(take_right, pj, pi), at(dst, t))
                    b.store(b.select(take_right, i, b.add(i, i64(1))), i_slot)
                    b.store(b.select(take_right, b.add(j, i64(1)), j), j_slot)
                b.store(b.add(lo, b.mul(w, i64(2))), lo_slot)

            while_loop(b, lambda: b.icmp_signed("<", b.load(lo_slot), i64(n)), merge_runs, "runs")
            b.store(dst, src_slot)
            b.store(src, dst_slot)
            b.store(b.mul(w, i64(2)), width)

        while_loop(b, lambda: b.icmp_signed("<", b.load(width), i64(n)), merge_pass, "passes")
        final = b.load(src_slot)
        with for_range(b, i64(n), "write") as t:
            source = b.load(at(final, t), typ=I64)
            for array, out in zip(ctx.operand_arrays, ctx.output_arrays, strict=True):
                out.store(b, array.load(b, IrIndex(index(source), array.shape)), IrIndex(index(t), out.shape))

    loop_nest(b, [shape.dimensions[d] for d in others], "slice", per_slice)
    b.call(free, [perm])
    return 1, 1
