"""Top-k: the k largest (or smallest) elements of every row in one pass, without sorting the row.

JAX writes ``lax.top_k(x, 10)`` as ``topk(x), k=10, largest=true`` (XLA's own optimized HLO
calls its ``TopK`` custom call, which the ``topk-custom-call-rewriter`` pass turns back into
``topk``). Sorting every row (what the ``topk-decomposer`` pass writes) costs O(n log n) per row
and moves every element many times. Only k of them are wanted, so this
kernel keeps the best k seen so far -- sorted, best first -- in the output row itself, and walks
the input once::

    for each row:
      filled = 0
      for j in 0 .. n-1:
        key = order_key(x[j])
        if filled == k and not better(key, keys[k-1]):
          continue                          # the usual case: one compare, and on
        p = min(filled, k-1)                # insert: move worse entries one place down
        while p > 0 and better(key, keys[p-1]):
          keys[p], values[p], indices[p] = keys[p-1], values[p-1], indices[p-1]
          p -= 1
        keys[p], values[p], indices[p] = key, x[j], j
        filled = min(filled + 1, k)

Once the first few hundred elements have passed, almost every element of a random row loses the
first compare against the k-th best, so a row costs about n compares (k per insertion in the worst
case, an ascending row). ``better`` is strict, so among equal keys the earlier index stays ahead:
ties go to the lower index, as the stable sort gives them.

The keys are integers. For floats they are the bits, with every bit but the sign flipped when the
sign is set; compared as signed integers they follow XLA's total order
``-NaN < -inf < ... < -0.0 < +0.0 < ... < +inf < +NaN`` (the comparator XLA's ``TopK`` carries
does the same). Values move as bits. Rows are independent, so threads split them.
"""

from __future__ import annotations

from llvmlite import ir

from xla_teach.backends.cpu.kernels.partitions import choose_partitions
from xla_teach.backends.llvm.ir_array import i64
from xla_teach.backends.llvm.kernel_context import KernelContext
from xla_teach.backends.llvm.loops import for_range, if_then, stack_slot, while_loop
from xla_teach.hlo.ir import HloInstruction
from xla_teach.hlo.shape import Shape

MAX_K = 128  # beyond this, insertion costs more than the decomposer's sort saves
I32 = ir.IntType(32)


def topk_parameters(instr: HloInstruction) -> tuple[int, bool] | None:
    """``(k, largest)`` when this kernel computes ``instr``: a ``topk`` over the last dimension
    of an array in the default layout, with k <= MAX_K, of a float or integer type. (XLA's
    ``TopK`` custom call becomes a ``topk`` first: ``topk-custom-call-rewriter``.)"""
    if instr.opcode != "topk":
        return None
    k, largest = int(instr.attr("k")), bool(instr.attr("largest"))
    operand = instr.operand(0).shape
    etype = operand.element_type
    if operand.rank == 0 or not 0 < k <= min(MAX_K, operand.dimensions[-1]):
        return None
    if not (etype.is_float or etype.is_signed_int or etype.is_unsigned_int):
        return None
    if not all(_row_major(s) for s in (operand, *instr.shape.leaf_shapes())):
        return None
    return k, largest


def stack_array(b: ir.IRBuilder, ty: ir.Type, count: int, name: str) -> ir.Value:
    """``count`` elements of ``ty`` on the stack, allocated in the function's entry block."""
    entry = b.function.entry_basic_block
    saved = b.block
    b.position_before(entry.instructions[0]) if entry.instructions else b.position_at_end(entry)
    slot = b.alloca(ty, size=count, name=name)
    b.position_at_end(saved)
    return slot


def _row_major(shape: Shape) -> bool:
    return list(shape.minor_to_major()) == list(range(shape.rank))[::-1]


def emit_topk_kernel(ctx: KernelContext) -> tuple[int, int]:
    instr = ctx.instr
    found = topk_parameters(instr)
    assert found is not None
    k, largest = found
    b = ctx.b
    source = ctx.operand_arrays[0]
    values, indices = ctx.output_arrays
    shape = instr.operand(0).shape
    n = shape.dimensions[-1]
    rows = shape.element_count() // n if n else 0
    etype = shape.element_type
    width = etype.bit_width
    bits = ir.IntType(width)
    signed = not etype.is_unsigned_int

    def order_key(x: ir.Value) -> ir.Value:
        if not etype.is_float:
            return x
        flip = b.lshr(b.ashr(x, ir.Constant(bits, width - 1)), ir.Constant(bits, 1))  # 0 or 0111..1
        return b.xor(x, flip)

    def better(a: ir.Value, c: ir.Value) -> ir.Value:
        op = ">" if largest else "<"
        return b.icmp_signed(op, a, c) if signed else b.icmp_unsigned(op, a, c)

    keys = stack_array(b, bits, k, f"{instr.name}.keys")
    filled = stack_slot(b, I32, f"{instr.name}.filled")
    p = stack_slot(b, I32, f"{instr.name}.p")

    def at(base: ir.Value, ty: ir.Type, offset: ir.Value) -> ir.Value:
        return b.gep(base, [offset], inbounds=True, source_etype=ty)

    def key_at(position: ir.Value) -> ir.Value:
        return b.gep(keys, [position], inbounds=True, source_etype=bits)

    with for_range(b, ctx.kb.end, f"{instr.name}.row", ctx.kb.begin) as row:
        row_in = b.mul(row, i64(n))
        row_out = b.mul(row, i64(k))
        b.store(ir.Constant(I32, 0), filled)
        with for_range(b, i64(n), f"{instr.name}.j") as j:
            x = b.load(at(source.base, bits, b.add(row_in, j)), typ=bits)
            key = order_key(x)
            full = b.icmp_signed("==", b.load(filled), ir.Constant(I32, k))
            last = b.load(key_at(i64(k - 1)))
            enters = b.or_(b.not_(full), better(key, last))
            with if_then(b, enters, f"{instr.name}.enters"):
                start = b.select(full, ir.Constant(I32, k - 1), b.load(filled))
                b.store(start, p)

                def moves_up() -> ir.Value:
                    position = b.load(p)
                    positive = b.icmp_signed(">", position, ir.Constant(I32, 0))
                    previous = b.select(positive, b.sub(position, ir.Constant(I32, 1)), position)
                    return b.and_(positive, better(key, b.load(key_at(b.zext(previous, ir.IntType(64))))))

                def shift() -> None:
                    here = b.zext(b.load(p), ir.IntType(64))
                    above = b.sub(here, i64(1))
                    b.store(b.load(key_at(above)), key_at(here))
                    src, dst = b.add(row_out, above), b.add(row_out, here)
                    b.store(b.load(at(values.base, bits, src), typ=bits), at(values.base, bits, dst))
                    b.store(b.load(at(indices.base, I32, src), typ=I32), at(indices.base, I32, dst))
                    b.store(b.trunc(above, I32), p)

                while_loop(b, moves_up, shift, f"{instr.name}.insert")
                here = b.zext(b.load(p), ir.IntType(64))
                b.store(key, key_at(here))
                b.store(x, at(values.base, bits, b.add(row_out, here)))
                b.store(b.trunc(j, I32), at(indices.base, I32, b.add(row_out, here)))
                count = b.load(filled)
                b.store(b.select(full, count, b.add(count, ir.Constant(I32, 1))), filled)
    return rows, choose_partitions(rows, shape.element_count() * width // 8)
