"""Exponentials and logarithms: exp, exp2, expm1, log, log1p.

**exp** (Cody & Waite, 1980).  Write ``x = k*ln2 + r`` with ``k = roundeven(x / ln2)`` and
``|r| <= ln2/2 ~= 0.347``; then ``exp(x) = 2^k * exp(r)``.  ``r`` is computed as
``fma(-k, ln2_hi, x)`` -- exact, because the true result is a multiple of ``ulp(ln2_hi)/2``
smaller than 0.5 -- followed by ``fma(-k, ln2_lo, .)`` which supplies the bits of ``ln2`` that
``ln2_hi`` lacks.  On that small interval a minimax polynomial gives
``expm1(r) = r + r^2 P(r)`` (degree 6 for f32, 11 for f64; see ``coefficients.py``), and
``2^k`` is built from integer bits, in two halves so that overflow and subnormal results come out
right (:meth:`FloatOps.scale`).  Clamping ``x`` first (to just beyond the overflow and underflow
thresholds) makes ``+inf -> inf``, ``-inf -> 0`` and keeps ``k`` a small integer, so only NaN needs
a final ``select``.  Subnormal results are produced (gradual underflow), not flushed.

**expm1** uses the same reduction; ``expm1(x) = 2^k * expm1(r) + (2^k - 1)``, where ``2^k - 1``
is exact for ``k <= precision``: no cancellation near 0 (there ``k = 0``) and none elsewhere.

**log** (the fdlibm algorithm).  Split ``x = 2^e * m`` with ``m in [sqrt(1/2), sqrt(2))`` by a bit
trick, let ``f = m - 1`` (exact) and ``s = f / (2 + f)``.  Then
``log(1+f) = 2 atanh(s) = 2s + s*R(s^2)`` and, rearranged so that the exact ``f`` carries the
bulk of the value and rounding errors only touch small corrections,
``log(1+f) = f - f^2/2 + s*(f^2/2 + R(s^2))``; finally ``log(x) = e*ln2 + log(1+f)``.
``s^2 <= 0.0295``, so ``R`` needs only 3 (f32) or 8 (f64) terms.

**log1p** runs the same kernel on ``u = fl(1 + x)`` and adds ``c/u``, where ``c = (1 + x) - u`` is
the rounding error recovered exactly by TwoSum: ``log(1+x) = log(u) + log(1 + c/u)``.
"""

from __future__ import annotations

from llvmlite import ir

from xla_teach.backends.llvm.math.coefficients import EXPM1, LN2, LOG, LOG2E
from xla_teach.backends.llvm.math.common import FloatOps

# exp(x) overflows above / rounds to zero below (with a little margin): the clamp interval.
_EXP_RANGE = {"f32": (-104.0, 89.0), "f64": (-746.0, 710.0)}
# Below these, expm1(x) rounds to -1.
_EXPM1_LOW = {"f32": -30.0, "f64": -40.0}
# sqrt(1/2) as bits: the mantissa window [sqrt(1/2), sqrt(2)) starts here.
_SQRT_HALF_BITS = {"f32": 0x3F3504F3, "f64": 0x3FE6A09E667F3BCD}


# ---------------------------------------------------------------------------------------------
# Kernels shared by several functions
# ---------------------------------------------------------------------------------------------
def reduce_ln2(m: FloatOps, x: ir.Value) -> tuple[ir.Value, ir.Value, ir.Value]:
    """``(k, r, c)`` with ``x ~= k*ln2 + r + c``, ``k`` integral (as a float), ``|r| <= ~0.347``.

    ``c`` is the rounding error of ``r`` (a fraction of ``ulp(r)``); only expm1 needs it.
    ``x`` must already be clamped so that ``k`` is small (|k| < 2^11).
    """
    ln2_hi, ln2_lo = m.table(LN2)
    k = m.roundeven(m.mul(x, m.const(m.table(LOG2E))))
    neg_k = m.neg(k)
    r_hi = m.fma(neg_k, m.const(ln2_hi), x)  # exact
    r = m.fma(neg_k, m.const(ln2_lo), r_hi)
    return k, r, m.fma(neg_k, m.const(ln2_lo), m.sub(r_hi, r))


def expm1_poly(m: FloatOps, r: ir.Value) -> ir.Value:
    """``expm1(r) ~= r + r^2 * P(r)`` for ``|r| <= 0.347``."""
    return m.fma(m.mul(r, r), m.horner(r, m.table(EXPM1)), r)


def exp_kernel(m: FloatOps, x: ir.Value) -> ir.Value:
    """``exp(x)`` for a non-NaN ``x`` (infinities fine); no NaN handling."""
    lo, hi = m.table(_EXP_RANGE)
    k, r, _ = reduce_ln2(m, m.clamp(x, lo, hi))
    return m.scale(m.add(m.const(1.0), expm1_poly(m, r)), m.to_int(k))


def log_reduce(m: FloatOps, x: ir.Value, subnormals: bool = True) -> tuple[ir.Value, ir.Value]:
    """``(e, f)`` with ``x = 2^e * (1 + f)``, ``1 + f in [sqrt(1/2), sqrt(2))``; ``e`` integral (float).

    ``x`` must be finite and positive.  With ``subnormals`` a subnormal ``x`` is first scaled by
    ``2^precision`` so that the exponent/mantissa split below sees a normal number.
    """
    fmt, b = m.fmt, m.b
    exponent_adjust = m.const(0.0)
    if subnormals:
        tiny = m.cmp("<", x, fmt.min_normal)
        x = m.select(tiny, m.mul(x, m.const(2.0**fmt.precision)), x)
        exponent_adjust = m.select(tiny, m.const(-float(fmt.precision)), exponent_adjust)
    # Subtracting the bits of sqrt(1/2) makes the exponent field count from sqrt(1/2) instead of
    # 1: e = (bits - bits(sqrt(1/2))) >> mantissa_bits (arithmetic shift), and removing e from the
    # exponent field leaves the mantissa x / 2^e in [sqrt(1/2), sqrt(2)).
    bits = m.to_bits(x)
    e_int = b.ashr(b.sub(bits, m.iconst(m.table(_SQRT_HALF_BITS))), m.iconst(fmt.mantissa_bits))
    mant = m.from_bits(b.sub(bits, b.shl(e_int, m.iconst(fmt.mantissa_bits))))
    e = m.add(b.sitofp(e_int, m.ty), exponent_adjust)
    return e, m.sub(mant, m.const(1.0))  # exact (Sterbenz)


def log_kernel(m: FloatOps, x: ir.Value, correction: ir.Value | None = None,
               subnormals: bool = True) -> ir.Value:
    """``log(x) + correction`` for finite ``x > 0``; ``correction`` must be tiny compared to ulp(1)."""
    e, f = log_reduce(m, x, subnormals)
    s = m.div(f, m.add(m.const(2.0), f))
    z = m.mul(s, s)
    r = m.mul(z, m.horner(z, m.table(LOG)))  # R(z) = 2z/3 + 2z^2/5 + ...
    half_f2 = m.mul(m.mul(f, f), m.const(0.5))
    ln2_hi, ln2_lo = m.table(LN2)
    low = m.mul(e, m.const(ln2_lo))
    if correction is not None:
        low = m.add(low, correction)
    t = m.fma(s, m.add(half_f2, r), low)
    # e*ln2_hi + (f - (f^2/2 - (s*(f^2/2 + R) + e*ln2_lo)))
    return m.fma(e, m.const(ln2_hi), m.sub(f, m.sub(half_f2, t)))


def expm1_kernel(m: FloatOps, x: ir.Value) -> ir.Value:
    """``expm1(x)`` for a non-NaN ``x``: ``2^k * expm1(r) + (2^k - 1)``; returns +0 for -0."""
    fmt, b = m.fmt, m.b
    k, r, c = reduce_ln2(m, m.clamp(x, m.table(_EXPM1_LOW), m.table(_EXP_RANGE)[1]))
    # expm1(r) = r + q with q = r^2 P(r) (plus c, the reduction's rounding error).  Keeping r and
    # q apart until the end matters when k != 0: for k = 1, 2r + 1 is exact and only 2q rounds,
    # whereas rounding r + q first and doubling would double its error.
    q = m.fma(m.mul(r, r), m.horner(r, m.table(EXPM1)), c)
    k_int = m.to_int(k)
    # 2^k - 1 is exact up to k = precision; beyond, the "- 1" is below half an ulp of the result.
    big = m.cmp(">", k, float(fmt.precision))
    t = m.pow2i(b.select(big, m.iconst(0), k_int))
    moderate = m.fma(t, q, m.fma(t, r, m.sub(t, m.const(1.0))))
    exp_x = m.scale(m.add(m.const(1.0), m.add(r, q)), k_int)  # e^x: the result above k = precision
    # Below k = -precision, 2^k - 1 is no longer exact (it rounds to -1 at the tie), and the
    # corrections added after it cannot bring back what that rounding lost: expm1(-17.2) came
    # out -1.0 instead of -0.99999994. There e^x is tiny against 1, so e^x - 1 rounded once is
    # right however e^x's own last bits fall.
    small = m.cmp("<", k, -float(fmt.precision))
    return m.select(big, exp_x, m.select(small, m.sub(exp_x, m.const(1.0)), moderate))


# ---------------------------------------------------------------------------------------------
# Public emitters
# ---------------------------------------------------------------------------------------------
def emit_exp(builder: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """``e^x``: ±inf -> inf / 0, NaN -> NaN, overflow -> inf, gradual underflow."""
    m = FloatOps(builder, x)
    return m.select(m.is_nan(x), x, exp_kernel(m, x))


def emit_exp2(builder: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """``2^x``: ``k = roundeven(x)``, ``f = x - k`` (exact), ``2^x = 2^k * exp(f * ln2)``."""
    m = FloatOps(builder, x)
    fmt = m.fmt
    xc = m.clamp(x, -float(fmt.bias + fmt.precision + 2), float(fmt.bias + 2))
    k = m.roundeven(xc)
    f = m.sub(xc, k)
    ln2_hi, ln2_lo = m.table(LN2)
    r = m.fma(f, m.const(ln2_hi), m.mul(f, m.const(ln2_lo)))
    result = m.scale(m.add(m.const(1.0), expm1_poly(m, r)), m.to_int(k))
    return m.select(m.is_nan(x), x, result)


def emit_expm1(builder: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """``e^x - 1``, accurate near 0; expm1(±0) = ±0, expm1(-inf) = -1."""
    m = FloatOps(builder, x)
    result = m.select(m.cmp("==", x, 0.0), x, expm1_kernel(m, x))  # keep the sign of zero
    return m.select(m.is_nan(x), x, result)


def emit_log(builder: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """Natural log: log(0) = -inf, log(x<0) = NaN, log(inf) = inf; subnormals handled."""
    m = FloatOps(builder, x)
    result = log_kernel(m, x)
    result = m.select(m.cmp("==", x, float("inf")), x, result)
    result = m.select(m.cmp("==", x, 0.0), m.const(float("-inf")), result)
    return m.select(builder.fcmp_unordered("<", x, m.const(0.0)), m.const(float("nan")), result)


def emit_log1p(builder: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """``log(1 + x)``, accurate near 0: log1p(-1) = -inf, log1p(x < -1) = NaN, log1p(±0) = ±0."""
    m = FloatOps(builder, x)
    u, c = m.two_sum(m.const(1.0), x)  # u + c == 1 + x exactly
    # u >= 2^-precision whenever x > -1, so the kernel needs no subnormal scaling.  Other inputs
    # (x <= -1, inf, NaN) get their answer from the selects below; feed the kernel 1.0 for them.
    ok = builder.and_(m.cmp(">", u, 0.0), m.is_finite(u))
    safe_u = m.select(ok, u, m.const(1.0))
    correction = m.select(ok, m.div(c, safe_u), m.const(0.0))
    result = log_kernel(m, safe_u, correction, subnormals=False)
    result = m.select(m.cmp("==", x, float("inf")), x, result)
    result = m.select(m.cmp("==", x, 0.0), x, result)
    result = m.select(m.cmp("==", x, -1.0), m.const(float("-inf")), result)
    return m.select(builder.fcmp_unordered("<", x, m.const(-1.0)), m.const(float("nan")), result)
