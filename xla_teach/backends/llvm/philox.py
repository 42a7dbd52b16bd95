"""Philox-4x32-10 in LLVM IR, the counter-based generator behind ``rng-bit-generator``.

Philox (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11) maps a
128-bit *counter* and a 64-bit *key* to 128 random bits with ten rounds of two 32x32->64
multiplies and a few xors. Nothing is carried from one block of 128 bits to the next: the
``b``-th block is simply ``philox(base + b, key)``. So every output word can be computed
on its own, by any loop iteration (CPU) or any GPU thread, with no state in between.

:func:`emit_rng_word` gives word ``w`` of the stream the interpreter
(:mod:`xla_teach.hlo.evaluator.random`) produces for a ``{key, base}`` state: block
``w / 4``, lane ``w % 4``.
"""

from __future__ import annotations

from llvmlite import ir

from xla_teach.backends.llvm.ir_array import i64
from xla_teach.backends.llvm.ir_types import I32, I64
from xla_teach.hlo.evaluator.random import PHILOX_M0, PHILOX_M1, PHILOX_ROUNDS, PHILOX_W0, PHILOX_W1


def emit_philox(b: ir.IRBuilder, counter: list[ir.Value], key: list[ir.Value]) -> list[ir.Value]:
    """Ten Philox-4x32 rounds on i32 words."""
    c0, c1, c2, c3 = counter
    k0, k1 = key

    def mulhilo(a: int, x: ir.Value) -> tuple[ir.Value, ir.Value]:
        product = b.mul(ir.Constant(I64, a), b.zext(x, I64))
        return b.trunc(b.lshr(product, ir.Constant(I64, 32)), I32), b.trunc(product, I32)

    for _ in range(PHILOX_ROUNDS):
        hi0, lo0 = mulhilo(PHILOX_M0, c0)
        hi1, lo1 = mulhilo(PHILOX_M1, c2)
        c0, c1, c2, c3 = b.xor(b.xor(hi1, c1), k0), lo1, b.xor(b.xor(hi0, c3), k1), lo0
        k0 = b.add(k0, ir.Constant(I32, PHILOX_W0))
        k1 = b.add(k1, ir.Constant(I32, PHILOX_W1))
    return [c0, c1, c2, c3]


def split_key(b: ir.IRBuilder, key64: ir.Value) -> list[ir.Value]:
    return [b.trunc(key64, I32), b.trunc(b.lshr(key64, ir.Constant(I64, 32)), I32)]


def emit_rng_word(b: ir.IRBuilder, base: ir.Value, key: list[ir.Value], w: ir.Value) -> ir.Value:
    """32-bit word ``w`` (i64) of the stream that starts at counter ``base`` (i64)."""
    block = b.udiv(w, i64(4))
    lane = b.urem(w, i64(4))
    counter = b.add(base, block)
    carry = b.zext(b.icmp_unsigned("<", counter, base), I32)  # the 64-bit counter wrapped
    out = emit_philox(b, [b.trunc(counter, I32), b.trunc(b.lshr(counter, i64(32)), I32), carry,
                          ir.Constant(I32, 0)], key)
    result = out[3]
    for k in (2, 1, 0):
        result = b.select(b.icmp_unsigned("==", lane, i64(k)), out[k], result)
    return result


def emit_rng_element(b: ir.IRBuilder, base: ir.Value, key: list[ir.Value], e: ir.Value, width: int) -> ir.Value:
    """Output element ``e`` of ``width`` bits: two words (low, high) for 64-bit elements, else the
    low ``width`` bits of word ``e``."""
    if width == 64:
        lo = b.zext(emit_rng_word(b, base, key, b.mul(e, i64(2))), I64)
        hi = b.zext(emit_rng_word(b, base, key, b.add(b.mul(e, i64(2)), i64(1))), I64)
        return b.or_(lo, b.shl(hi, i64(32)))
    word = emit_rng_word(b, base, key, e)
    return word if width == 32 else b.trunc(word, ir.IntType(width))


def blocks_used(count: int, width: int) -> int:
    """How far the counter advances for ``count`` elements of ``width`` bits (4 words a block)."""
    return (count * (2 if width == 64 else 1) + 3) // 4
