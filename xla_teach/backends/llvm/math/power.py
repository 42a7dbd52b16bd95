"""Roots and powers: sqrt, rsqrt, cbrt, pow.

**sqrt** is ``llvm.sqrt`` -- correctly rounded in hardware on x86 (``sqrtps``) and NVPTX
(``sqrt.rn``); sqrt(-0) = -0 and sqrt(x < 0) = NaN as IEEE requires.  **rsqrt** is ``1 / sqrt(x)``
(two correctly rounded operations, < 1 ulp): rsqrt(+0) = +inf, rsqrt(-0) = -inf, rsqrt(inf) = 0.

**cbrt.**  Write ``|x| = 2^(3q + rem) * m`` with ``m in [1, 2)`` and ``rem in {0, 1, 2}``; then
``cbrt|x| = 2^q * cbrt(a)`` with ``a = 2^rem * m in [1, 8)`` (exact).  A degree-4 minimax
polynomial gives ``cbrt(m)`` to ``2^-16.7``; multiplying by ``2^(rem/3)`` seeds
``y ~= cbrt(a)``, and Newton's iteration for ``y^3 = a``,
``y <- y - (y^3 - a) / (3 y^2)``, doubles the number of correct bits per step (one step for f32,
two for f64).  The residual ``y^3 - a`` is computed almost exactly (``y^2 = hi + lo`` by two_prod,
then FMAs), so the last step's only error is its final subtraction.  Subnormals are scaled by
``2^(3k)`` first; ±0, ±inf and NaN pass through unchanged; the sign comes back with copysign.

**pow.**  ``x^y = exp(y * log|x|)`` -- but ``y * log|x|`` can be as large as ~745 in magnitude,
and an absolute error ``d`` in it becomes a relative error ``d`` in the result.  So in f64 the
log is computed in *double-double* (``hi + lo``, ~70 bits): ``log|x| = e*ln2 + 2s + s*R(s^2)``
with ``s = f/(2+f)`` split into ``s_hi + s_lo`` by an FMA residual, and ``e*ln2_hi`` exact
because ``ln2_hi`` has only 42 bits.  ``y * (hi + lo)`` is formed with two_prod, and exp
reduces the double-double argument, adding its low part back after the reduction.  f32 pow
simply converts to double, runs the f64 algorithm and rounds once at the end (< 0.51 ulp).

C99 special cases, as ``select``s after the main computation:
``pow(x, ±0) = 1`` (even for NaN x), ``pow(1, y) = 1`` (even for NaN y), ``pow(-1, ±inf) = 1``;
NaN otherwise propagates; a negative finite ``x`` with a finite non-integer ``y`` gives NaN; for
an odd integer ``y`` the sign of ``x`` is kept (``pow(-8, 3) = -512``, ``pow(-0, -1) = -inf``).
The zero/infinity rows of C's table need no code of their own: ``log 0 = -inf`` and
``log inf = inf`` flow through ``exp``, whose clamp maps ``±inf`` to ``inf`` / ``0``.
"""

from __future__ import annotations

from llvmlite import ir

from xla_teach.backends.llvm.math.coefficients import CBRT, CBRT2, LN2_POW, LOG
from xla_teach.backends.llvm.math.common import F64_FORMAT, FloatOps
from xla_teach.backends.llvm.math.exp_log import expm1_poly, log_reduce, reduce_ln2

_NEWTON_STEPS = {"f32": 1, "f64": 2}
_EXP_CLAMP_F64 = (-746.0, 710.0)


def emit_sqrt(builder: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """Correctly rounded square root (``llvm.sqrt``)."""
    return FloatOps(builder, x).sqrt(x)


def emit_rsqrt(builder: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """``1 / sqrt(x)``: rsqrt(0) = inf, rsqrt(inf) = 0, rsqrt(x < 0) = NaN."""
    m = FloatOps(builder, x)
    return m.div(m.const(1.0), m.sqrt(x))


def emit_cbrt(builder: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """Real cube root: cbrt(-8) = -2, cbrt(±0) = ±0, cbrt(±inf) = ±inf."""
    m = FloatOps(builder, x)
    fmt, b = m.fmt, builder
    a = m.fabs(x)
    # Scale subnormals by 2^(3k) >= 2^precision, so the exponent stays divisible by three.
    k = (fmt.precision + 2) // 3
    tiny = m.cmp("<", a, fmt.min_normal)
    a = m.select(tiny, m.mul(a, m.const(2.0 ** (3 * k))), a)
    # |x| = 2^e * mant, mant in [1, 2).
    bits = m.to_bits(a)
    e = b.sub(b.lshr(bits, m.iconst(fmt.mantissa_bits)), m.iconst(fmt.bias))
    mant_bits = b.or_(b.and_(bits, m.iconst((1 << fmt.mantissa_bits) - 1)), m.iconst(fmt.bias << fmt.mantissa_bits))
    mant = m.from_bits(mant_bits)
    # e = 3q + rem; q = floor(e / 3) is exact in floating point (e/3 is never within an ulp of the
    # next integer unless it *is* that integer).
    e_f = b.sitofp(e, m.ty)
    q = m.floor(m.div(e_f, m.const(3.0)))
    rem = m.sub(e_f, m.mul(q, m.const(3.0)))
    one, two = m.cmp("==", rem, 1.0), m.cmp("==", rem, 2.0)
    c1, c2 = m.table(CBRT2)
    arg = m.mul(mant, m.select(one, m.const(2.0), m.select(two, m.const(4.0), m.const(1.0))))  # exact
    y = m.mul(m.horner(mant, m.table(CBRT)), m.select(one, m.const(c1), m.select(two, m.const(c2), m.const(1.0))))
    for _ in range(m.table(_NEWTON_STEPS)):
        sq, sq_lo = m.two_prod(y, y)
        residual = m.fma(sq_lo, y, m.fma(sq, y, m.neg(arg)))  # y^3 - arg, nearly exact
        y = m.sub(y, m.div(residual, m.mul(m.const(3.0), sq)))
    q_int = m.to_int(q)
    q_int = b.sub(q_int, b.select(tiny, m.iconst(k), m.iconst(0)))
    result = m.copysign(m.scale(y, q_int), x)
    passthrough = b.or_(m.cmp("==", x, 0.0), b.not_(m.is_finite(x)))  # ±0, ±inf, NaN
    return m.select(passthrough, x, result)


# ---------------------------------------------------------------------------------------------
# pow
# ---------------------------------------------------------------------------------------------
def _log_double_double(d: FloatOps, x: ir.Value) -> tuple[ir.Value, ir.Value]:
    """``log(x) = hi + lo`` to ~2^-68 relative, for finite ``x > 0`` (f64)."""
    e, f = log_reduce(d, x)
    # s = f / (2 + f) = s_hi + s_lo: 2 + f is split exactly by fast_two_sum (|2| >= |f|), and the
    # FMA residual f - s_hi*(2+f) gives the quotient's rounding error.
    den, den_lo = d.fast_two_sum(d.const(2.0), f)
    s = d.div(f, den)
    s_lo = d.div(d.fma(d.neg(s), den_lo, d.fma(d.neg(s), den, f)), den)
    z = d.mul(s, s)
    r = d.mul(z, d.horner(z, d.table(LOG)))  # log(1+f) = 2s + s*R(s^2)
    ln2_hi, ln2_lo = d.table(LN2_POW)
    hi, lo = d.two_sum(d.mul(e, d.const(ln2_hi)), d.add(s, s))  # e*ln2_hi is exact
    lo = d.add(lo, d.fma(s, r, d.fma(e, d.const(ln2_lo), d.add(s_lo, s_lo))))
    return d.fast_two_sum(hi, lo)


def _exp_double_double(d: FloatOps, hi: ir.Value, lo: ir.Value) -> ir.Value:
    """``exp(hi + lo)`` (f64) for ``|lo| <= ulp(hi)``; ``hi`` may be ±inf (-> inf / 0) but not NaN."""
    clamped = d.clamp(hi, *_EXP_CLAMP_F64)
    lo = d.select(d.cmp("==", clamped, hi), lo, d.const(0.0))  # lo is meaningless once hi is clamped
    k, r, c = reduce_ln2(d, clamped)
    p = d.add(d.const(1.0), expm1_poly(d, r))
    p = d.fma(d.add(c, lo), p, p)  # exp(r + c + lo) ~= exp(r) * (1 + c + lo)
    return d.scale(p, d.to_int(k))


def _pow_f64(d: FloatOps, x: ir.Value, y: ir.Value) -> ir.Value:
    b = d.b
    ax = d.fabs(x)
    ordinary = b.and_(d.is_finite(ax), d.cmp(">", ax, 0.0))
    log_hi, log_lo = _log_double_double(d, d.select(ordinary, ax, d.const(1.0)))
    # log 0 = -inf, log inf = inf (and NaN stays NaN, fixed up below).
    log_hi = d.select(ordinary, log_hi, d.select(d.cmp("==", ax, 0.0), d.const(float("-inf")), ax))
    log_lo = d.select(ordinary, log_lo, d.const(0.0))
    p_hi, p_lo = d.two_prod(y, log_hi)
    p_lo = d.fma(y, log_lo, p_lo)
    p_hi = d.select(d.is_nan(p_hi), d.const(0.0), p_hi)  # only for |x| == 1, y = ±inf, fixed below
    result = _exp_double_double(d, p_hi, p_lo)

    y_int = d.cmp("==", d.trunc(y), y)  # true for ±inf, false for NaN
    half_y = d.mul(y, d.const(0.5))
    y_odd = b.and_(y_int, d.cmp("!=", d.trunc(half_y), half_y))
    result = d.select(d.cmp("==", ax, 1.0), d.const(1.0), result)
    result = d.select(b.and_(y_odd, d.signbit(x)), d.neg(result), result)
    negative_base = b.and_(d.cmp("<", x, 0.0), d.is_finite(x))
    non_integer_exponent = b.and_(d.is_finite(y), b.not_(y_int))
    nan = d.const(float("nan"))
    result = d.select(b.and_(negative_base, non_integer_exponent), nan, result)
    result = d.select(b.or_(d.is_nan(x), d.is_nan(y)), nan, result)
    return d.select(b.or_(d.cmp("==", x, 1.0), d.cmp("==", y, 0.0)), d.const(1.0), result)


def emit_pow(builder: ir.IRBuilder, x: ir.Value, y: ir.Value) -> ir.Value:
    """``x^y`` with C99 semantics (see the module docstring); f32 is computed in double, its
    operands widened exactly even while the run flushes denormals (:func:`_widen_exactly`)."""
    m = FloatOps(builder, x)
    if m.fmt.name == "f64":
        return _pow_f64(m, x, y)
    d = FloatOps(builder, F64_FORMAT)
    return builder.fptrunc(_pow_f64(d, _widen_exactly(builder, x), _widen_exactly(builder, y)), m.ty)


def _widen_exactly(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """An f32 as a double, denormals included. XLA decides pow's special cases on the operands'
    bits (``pow(-1, 1e-39)`` is NaN: a negative base, an exponent that is not an integer), but
    ``fpext`` reads a denormal as zero while the run flushes denormals (DAZ), which would make it
    ``pow(-1, 0) = 1``. So a denormal's value is rebuilt from its bits with integer operations,
    which DAZ does not touch: mantissa x 2^-149 is exact, and normal, in double."""
    i32, f64 = ir.IntType(32), ir.DoubleType()
    bits = b.bitcast(x, i32)
    magnitude = b.and_(bits, ir.Constant(i32, 0x7FFFFFFF))
    denormal = b.and_(b.icmp_unsigned("!=", magnitude, ir.Constant(i32, 0)),
                      b.icmp_unsigned("<", magnitude, ir.Constant(i32, 0x00800000)))
    value = b.fmul(b.uitofp(magnitude, f64), ir.Constant(f64, 2.0 ** -149))
    signed = b.select(b.icmp_signed("<", bits, ir.Constant(i32, 0)), b.fneg(value), value)
    return b.select(denormal, signed, b.fpext(x, f64))
