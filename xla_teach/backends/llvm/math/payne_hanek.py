"""Payne-Hanek argument reduction: ``x mod pi/2`` for huge ``x``, with a table indexed by exponent.

Cody-Waite reduction (``trig.reduce_pio2``) subtracts ``j * pi/2`` with ``pi/2`` carried to about
three floats of precision.  For ``|x| = 2^100`` that is hopeless: ``j`` itself has 100 bits, so
``pi/2`` would need 100 + 24 bits *after* the binary point just to get ``r`` to float precision.
Payne and Hanek's observation is that only a short **window** of the bits of ``2/pi`` matters for
a given exponent of ``x``.

Write a finite float as ``x = M * 2^E`` with an integer mantissa ``M`` (24 bits for f32, 53 for
f64) and ``2/pi = sum b_i 2^-i``.  Then ``x * 2/pi = sum M b_i 2^(E-i)``, and we only want it
**modulo 4** (the quadrant, two bits) plus its fraction:

* bits with ``E - i >= 2`` contribute multiples of ``4 M``: they vanish modulo 4;
* bits far below contribute less than the precision we need.

So each exponent needs the bits of ``2/pi`` from ``i = E - 1`` on: call that window ``C``, a
number in ``[0, 4)``, so that ``x * 2/pi = M * C (mod 4)``.  The windows are precomputed and the
reduction is a lookup plus a short multiplication -- straight-line code that vectorizes and runs
unchanged on the GPU:

* **f32** groups the exponents in bands of 16 and keeps one ``C = c0 + c1`` (two doubles of 53
  bits) per band, picked by a tree of ``select``s -- no memory access, which matters because a
  CPU without fast gathers would load each lane's row separately.  Within a band
  ``x = M' * 2^E_band`` with ``M' = M * 2^delta < 2^40``; ``M' * c0`` is exact as a double-double
  (an FMA recovers the low half), its integer part modulo 4 is the quadrant, and ``M' * c1`` only
  adds a small correction.
* **f64** has a table in memory, one row per biased exponent: ``C`` as 192 bits (three 64-bit
  words).  ``M * C mod 4`` is computed exactly with 32x32 -> 64-bit integer multiplies: two
  integer bits (the quadrant) and 190 fraction bits.  The fraction is rounded to the nearest
  quadrant (a fraction ``>= 1/2`` becomes "one quadrant up, minus ``1 - fraction``", and
  ``1 - fraction`` is the one's complement of the fraction bits, off by one unit in the last bit)
  and converted to a double-double through exact 52- and 44-bit pieces.

Either way the signed fraction ``f`` (in quarter turns, ``|f| <= 1/2``) times ``pi/2`` in
double-double is ``r``.

How many bits are enough?  The closest a float comes to a multiple of ``pi/2`` decides it: about
``2^-29.9`` quarter turns for f32 (at ``16367173 * 2^72``, found by trying every float) and
``2^-61`` for f64 (at ``6381956970095103 * 2^797``; Muller, *Elementary Functions*), and the
fraction must be known to ``r``'s precision below that: the f32 windows leave an error of about
``2^40 * 2^-104 = 2^-64`` and the f64 ones ``2^53 * 2^-190 = 2^-137``.

Example (f32, ``x = 1e30``, stored as ``13234890 * 2^76``): the window for biased exponent 226
is ``C = 2.4589...``; ``M * C mod 4 = 2.5810...``, the nearest quadrant is 3 and the fraction
``-0.4189...``, so ``r = -0.4189... * pi/2 = -0.6580...`` and
``sin(1e30) = sin(3 pi/2 + r) = -cos(r) = -0.7911...``.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from llvmlite import ir

from xla_teach.backends.llvm.ir_types import constant_global_array
from xla_teach.backends.llvm.math.common import F32_FORMAT, F64_FORMAT, FloatFormat, FloatOps

I32 = ir.IntType(32)
I64 = ir.IntType(64)
_MASK32 = 0xFFFFFFFF
_PIO2_DD = (1.5707963267948966, 6.123233995736766e-17)  # pi/2 as a double-double
_BAND = 16  # f32: exponents per band sharing one window of 2/pi
_BITS = 1300  # bits of 2/pi computed: the f64 row of the largest exponent ends at bit 972 + 190


@cache
def two_over_pi_bits(bits: int) -> int:
    """``floor(2/pi * 2^bits)``, computed with Machin's formula ``pi/4 = 4 atan(1/5) - atan(1/239)``
    in big-integer fixed point (64 guard bits; the result is checked against a second run with more
    guard bits, so a carry out of the guard bits cannot go unnoticed)."""

    def attempt(guard: int) -> int:
        one = 1 << (bits + guard)

        def atan_inv(n: int) -> int:  # atan(1/n) * one, by its Taylor series
            total, power, k, sign = 0, one // n, 1, 1
            while power:
                total += sign * (power // k)
                power //= n * n
                k, sign = k + 2, -sign
            return total

        pi_fixed = 16 * atan_inv(5) - 4 * atan_inv(239)  # pi * 2^(bits + guard)
        return (2 << (2 * (bits + guard))) // pi_fixed >> guard

    value = attempt(64)
    if value != attempt(128):
        raise ArithmeticError("2/pi: guard bits too few")  # never expected
    return value


def window(fmt: FloatFormat, biased_exponent: int, fraction_bits: int) -> int:
    """``floor(C * 2^fraction_bits)`` where ``C = (2^E * 2/pi) mod 4`` for floats ``M * 2^E`` of
    this biased exponent: ``2/pi``'s bits ``E-1 .. E+fraction_bits`` as an integer."""
    e = biased_exponent - fmt.bias - fmt.mantissa_bits
    end = e + fraction_bits  # the last bit kept, as a position i of 2^-i in 2/pi
    if end < 0:
        return 0
    return (two_over_pi_bits(_BITS) >> (_BITS - end)) & ((1 << (fraction_bits + 2)) - 1)


@dataclass(frozen=True)
class ReductionTable:
    """The f64 windows of ``2/pi``: ``rows[b - first_exponent]`` is three 64-bit words (most
    significant first) for biased exponent ``b``.  Every exponent up to the all-ones one (inf/NaN,
    whose result is discarded) has a row and smaller ones (handled by Cody-Waite) share row 0, so
    the table is never indexed out of bounds."""

    first_exponent: int
    rows: tuple[tuple[int, int, int], ...]

    name = "xla_teach.two_over_pi.f64"


@cache
def reduction_table(first_exponent: int) -> ReductionTable:
    rows = []
    for biased in range(first_exponent, 2048):
        bits = window(F64_FORMAT, biased, 190)
        rows.append((bits >> 128, (bits >> 64) & ((1 << 64) - 1), bits & ((1 << 64) - 1)))
    return ReductionTable(first_exponent, tuple(rows))


def _load_row(b: ir.IRBuilder, table: ReductionTable, biased: ir.Value) -> list[ir.Value]:
    """The table row for an (i64) biased exponent, clamped below to row 0."""
    row = b.sub(biased, ir.Constant(I64, table.first_exponent))
    row = b.select(b.icmp_signed("<", row, ir.Constant(I64, 0)), ir.Constant(I64, 0), row)
    base = b.module.globals.get(table.name) or constant_global_array(
        b.module, table.name, I64, [ir.Constant(I64, w) for row in table.rows for w in row])
    start = b.mul(row, ir.Constant(I64, 3))
    return [b.load(b.gep(base, [ir.Constant(I64, 0), b.add(start, ir.Constant(I64, k))], inbounds=True), typ=I64)
            for k in range(3)]


@cache
def _f32_bands(first_exponent: int) -> list[tuple[float, float]]:
    """``C = c0 + c1`` (53 bits each) for the first exponent of every band of ``_BAND``."""
    fmt = F32_FORMAT
    all_ones = (1 << (31 - fmt.mantissa_bits)) - 1
    bands = []
    for start in range(first_exponent, all_ones + 1, _BAND):
        bits = window(fmt, start, 104)
        bands.append(((bits >> 53) * 2.0**-51, (bits & ((1 << 53) - 1)) * 2.0**-104))
    return bands


def _select_tree(b: ir.IRBuilder, index: ir.Value, values: list[ir.Value]) -> ir.Value:
    """``values[index]`` by a tree of selects on the bits of ``index`` (no memory access)."""
    level = 0
    while len(values) > 1:
        bit = b.trunc(b.lshr(index, ir.Constant(index.type, level)), ir.IntType(1))
        values = [b.select(bit, values[i + 1], values[i]) if i + 1 < len(values) else values[i]
                  for i in range(0, len(values), 2)]
        level += 1
    return values[0]


def _reduce_f32(m: FloatOps, d: FloatOps, x: ir.Value, first_exponent: int) -> tuple[ir.Value, ir.Value, ir.Value]:
    """Payne-Hanek for f32, computed in double without a table in memory.

    The exponents are grouped in bands of ``_BAND``, and each band's ``C = c0 + c1`` is picked by
    a select tree.  Within a band, ``|x| = M' * 2^E`` with ``M' = M * 2^delta < 2^40``, so
    ``M' * c0 = p + lo`` is exact as a double-double (an FMA recovers ``lo``), ``p < 2^42`` has
    its nearest integer ``q`` (the quadrant, modulo 4) and ``p - q`` exactly, and the fraction is
    ``(p - q) + (lo + M' * c1)``: one rounding in double, about ``2^-64`` absolute, which is
    plenty for a float ``r`` even at the worst case ``2^-29.9``.  The bits of ``C`` past ``c1``
    weigh less than ``2^40 * 2^-104``.  Signs are handled on the float results.
    """
    b = m.b
    bits = m.to_bits(m.fabs(x))
    mantissa = b.or_(b.and_(bits, m.iconst((1 << 23) - 1)), m.iconst(1 << 23))
    offset = b.sub(b.lshr(bits, m.iconst(23)), m.iconst(first_exponent))
    offset = b.select(b.icmp_signed("<", offset, m.iconst(0)), m.iconst(0), offset)
    band = b.lshr(offset, m.iconst(_BAND.bit_length() - 1))
    delta = b.zext(b.and_(offset, m.iconst(_BAND - 1)), I64)
    c0, c1 = (_select_tree(b, band, [d.const(c[k]) for c in _f32_bands(first_exponent)]) for k in range(2))
    big_m = d.mul(b.sitofp(mantissa, d.ty), d.pow2i(delta))  # exact
    p = d.mul(big_m, c0)
    lo = d.fma(big_m, c0, d.neg(p))
    q = d.roundeven(p)
    fraction = d.add(d.sub(p, q), d.fma(big_m, c1, lo))  # quarter turns, |fraction| <= ~1/2
    r64 = d.mul(fraction, d.const(_PIO2_DD[0]))
    r = b.fptrunc(r64, m.ty)
    dr = b.fptrunc(d.sub(r64, b.fpext(r, d.ty)), m.ty)
    quadrant = b.trunc(b.fptosi(q, I64), m.ity)
    # sin(-x) = -sin(x): negate r and mirror the quadrant.
    negative_x = m.signbit(x)
    r, dr = m.select(negative_x, m.neg(r), r), m.select(negative_x, m.neg(dr), dr)
    quadrant = b.select(negative_x, b.sub(m.iconst(0), quadrant), quadrant)
    return r, dr, b.and_(quadrant, m.iconst(3))


def _fraction_f64(m: FloatOps, d: FloatOps, mantissa: ir.Value,
                  row: list[ir.Value]) -> tuple[ir.Value, ir.Value, ir.Value]:
    """``(s, e, q)``: ``|x| * 2/pi mod 4 = q + s + e`` with ``|s| <= 1/2`` (a double-double and
    an i64), from the row's three 64-bit words by integer multiplication."""
    b = m.b

    def const(v: int) -> ir.Constant:
        return ir.Constant(I64, v)

    # M * C mod 2^192 by schoolbook multiplication of 32-bit digits, least significant first.
    # Each digit sits in an i64, so partial products fit and column sums cannot overflow.
    digits = [half for word in reversed(row) for half in (b.and_(word, const(_MASK32)), b.lshr(word, const(32)))]
    limbs = [b.and_(mantissa, const(_MASK32)), b.lshr(mantissa, const(32))]
    n = len(digits)
    columns: list[ir.Value | None] = [None] * n

    def accumulate(k: int, value: ir.Value) -> None:
        columns[k] = value if columns[k] is None else b.add(columns[k], value)

    for i, limb in enumerate(limbs):
        for j, digit in enumerate(digits):
            if i + j < n:
                product = b.mul(limb, digit)
                accumulate(i + j, b.and_(product, const(_MASK32)))
                if i + j + 1 < n:
                    accumulate(i + j + 1, b.lshr(product, const(32)))
    y, carry = [], const(0)
    for column in columns:
        total = b.add(column, carry)
        y.append(b.and_(total, const(_MASK32)))
        carry = b.lshr(total, const(32))

    # Split off the quadrant (the top two bits); shift the fraction up to fill whole words.
    quadrant = b.lshr(y[-1], const(30))
    fraction = [b.and_(b.shl(y[0], const(2)), const(_MASK32))]
    fraction += [b.and_(b.or_(b.shl(y[k], const(2)), b.lshr(y[k - 1], const(30))), const(_MASK32))
                 for k in range(1, n)]
    # Round to the nearest quadrant: fraction >= 1/2 -> next quadrant, magnitude 1 - fraction.
    up = b.lshr(fraction[-1], const(31))
    flip = b.and_(b.sub(const(0), up), const(_MASK32))
    magnitude = [b.xor(word, flip) for word in fraction]

    def exact(piece: ir.Value, exponent: int) -> ir.Value:
        """``piece * 2^exponent`` for ``piece < 2^52``.  Rather than ``uitofp`` (no vector
        instruction for it before AVX-512), plant the bits under the exponent of ``2^52`` and
        subtract ``2^52``: exact, and two vector instructions."""
        planted = d.from_bits(b.or_(piece, const(0x4330000000000000)))
        return d.mul(d.sub(planted, d.const(2.0**52)), d.const(2.0**exponent))

    top = b.or_(b.shl(magnitude[-1], const(32)), magnitude[-2])
    middle = b.or_(b.shl(b.and_(top, const(0xFFF)), const(32)), magnitude[-3])
    s, e = d.fast_two_sum(exact(b.lshr(top, const(12)), -52), exact(middle, -96))  # no overlap: exact
    e = d.add(e, d.add(exact(magnitude[1], -160), exact(magnitude[2], -128)))  # word 0 is noise
    negative = b.trunc(up, ir.IntType(1))
    s, e = d.select(negative, d.neg(s), s), d.select(negative, d.neg(e), e)
    return s, e, b.add(quadrant, up)


def reduce_payne_hanek(m: FloatOps, x: ir.Value, first_exponent: int) -> tuple[ir.Value, ir.Value, ir.Value]:
    """``(r, dr, q)`` with ``x = (4k + q) * pi/2 + r + dr`` for some integer ``k``, ``|r| <= ~pi/4``
    and ``q`` in 0..3 (an integer of ``x``'s width).  ``x`` must be finite and normal with a biased
    exponent of at least ``first_exponent``; other lanes get a meaningless (but safe) result.
    """
    b, fmt = m.b, m.fmt
    d = FloatOps(b, F64_FORMAT)
    if fmt is not F64_FORMAT:
        return _reduce_f32(m, d, x, first_exponent)
    bits = m.to_bits(m.fabs(x))
    mantissa = b.or_(b.and_(bits, m.iconst((1 << 52) - 1)), m.iconst(1 << 52))
    row = _load_row(b, reduction_table(first_exponent), b.lshr(bits, m.iconst(52)))
    s, e, quadrant = _fraction_f64(m, d, mantissa, row)

    # r = (s + e) * pi/2 in double-double
    p1, p2 = (d.const(c) for c in _PIO2_DD)
    r = d.mul(s, p1)
    r, dr = d.fast_two_sum(r, d.add(d.fma(s, p1, d.neg(r)), d.fma(s, p2, d.mul(e, p1))))

    # sin(-x) = -sin(x): negate r and mirror the quadrant.
    negative_x = m.signbit(x)
    r, dr = d.select(negative_x, d.neg(r), r), d.select(negative_x, d.neg(dr), dr)
    quadrant = b.select(negative_x, b.sub(ir.Constant(I64, 0), quadrant), quadrant)
    return r, dr, b.and_(quadrant, ir.Constant(I64, 3))
