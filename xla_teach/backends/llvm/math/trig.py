"""Trigonometric functions: sin, cos, tan (argument reduction + two kernels) and atan2.

**Argument reduction** (Cody & Waite).  Write ``x = j*(pi/2) + r`` with ``j = roundeven(x * 2/pi)``
and ``|r| <= pi/4``.  ``pi/2`` is not a float, so it is split into three floats
``p1 + p2 + p3`` (``coefficients.PIO2``) carrying ~3x the precision, and

    r = fma(-j, p3, fma(-j, p2, fma(-j, p1, x)))

The first FMA is exact (``x`` and ``j*p1`` nearly cancel, and the FMA rounds only once); each
later step subtracts a much smaller correction.  The result is accurate while ``j*(p1+p2+p3)``
still matches ``j*pi/2`` to well below ``ulp(r)``, i.e. for ``|x|`` up to about ``2^19`` in f32
and ``2^30`` in f64 -- comfortably past the promised ``|x| <= 1e5``.  (The worst case is an
``x`` very close to a multiple of ``pi/2``, where ``r`` is tiny; for floats up to 1e5 it is never
smaller than about ``2^-28``.)

Past ``2^17`` (f32) and ``2^28`` (f64) the reduction switches to **Payne-Hanek**
(``payne_hanek.py``): the bits of ``2/pi`` that matter for ``x``'s exponent come from a table,
and ``x * 2/pi mod 4`` is computed exactly, so sin/cos/tan stay within a few ulp for every
finite float, up to ``3.4e38`` and ``1.8e308``.  Both reductions run for every element (the
code is branch-free so that it vectorizes) and a ``select`` keeps the right one.

**Kernels** on ``|r| <= pi/4``: ``sin r = r + r^3 S(r^2)`` and ``cos r = 1 - r^2/2 + r^4 C(r^2)``
(minimax polynomials; cos computes ``1 - r^2/2`` with its rounding error added back).  The
quadrant ``j mod 4`` picks ``±sin r`` or ``±cos r``; tan is ``sin r / cos r`` or
``-cos r / sin r``.

**atan2** reduces to ``atan(t)``, ``t = min(|x|,|y|) / max(|x|,|y|) in [0, 1]``; for
``t > tan(pi/8)``, ``atan(t) = pi/4 + atan((t-1)/(t+1))``, leaving ``|u| <= tan(pi/8)`` for the
odd polynomial ``atan u = u + u^3 A(u^2)``.  The octant bookkeeping turns the answer into
``k*pi/4 ± atan(u)`` for an integer ``k`` in 0..4, evaluated with two FMAs against a hi/lo split
of pi/4; ``copysign`` with ``y`` gives the lower half-plane.  Zeros and infinities fall out of
the same formulas once ``0/0`` and ``inf/inf`` are replaced by 0 and 1.
"""

from __future__ import annotations

from llvmlite import ir

from xla_teach.backends.llvm.math.coefficients import ATAN, COS, PIO2, PIO4, SIN, TWO_OVER_PI
from xla_teach.backends.llvm.math.common import FloatOps
from xla_teach.backends.llvm.math.payne_hanek import reduce_payne_hanek

_FAR_ABOVE = {"f32": 17, "f64": 28}  # log2 of the |x| past which Payne-Hanek takes over
_TAN_PI_8 = 0.41421356237309503  # tan(pi/8) = sqrt(2) - 1, rounded


def reduce_pio2(m: FloatOps, x: ir.Value) -> tuple[ir.Value, ir.Value, ir.Value]:
    """``(r, dr, j)``: ``x = j*pi/2 + r + dr`` with ``|r| <= ~pi/4``, ``|dr| <= ulp(r)/2`` and ``j``
    integral (as a float).  ``x`` must be finite.

    ``r1 = x - j*p1`` is exact (one FMA).  The remaining correction ``c = j*(p2 + p3)`` is formed
    as a double-word ``c_hi + c_lo`` (the FMA recovers the rounding error of ``j*p2``), and
    ``r1 - c_hi`` is computed with TwoSum, so that the rounding errors of the subtraction are not
    lost either: they end up in ``dr``, which the sin/cos kernels fold back in.
    """
    p1, p2, p3 = m.table(PIO2)
    j = m.roundeven(m.mul(x, m.const(m.table(TWO_OVER_PI))))
    r1 = m.fma(m.neg(j), m.const(p1), x)  # exact
    c_hi = m.mul(j, m.const(p2))
    c_lo = m.fma(j, m.const(p3), m.fma(j, m.const(p2), m.neg(c_hi)))
    r, err = m.two_sum(r1, m.neg(c_hi))
    r, dr = m.fast_two_sum(r, m.sub(err, c_lo))
    return r, dr, j


def _mod4(m: FloatOps, j: ir.Value) -> ir.Value:
    """``j mod 4`` for an integral float ``j`` (however large): ``j - 4*floor(j/4)``, exact."""
    return m.sub(j, m.mul(m.const(4.0), m.floor(m.mul(j, m.const(0.25)))))


def _reduce(m: FloatOps, x: ir.Value) -> tuple[ir.Value, ir.Value, ir.Value]:
    """Reduction for sin/cos/tan: ``(r, dr, q)`` with ``q = j mod 4`` as an integer; non-finite x -> 0.

    Cody-Waite for ordinary arguments, Payne-Hanek (``payne_hanek.py``) past ``_FAR_ABOVE``; both
    are computed for every element and one is selected, which keeps the code branch-free.
    """
    x = m.select(m.is_finite(x), x, m.const(0.0))
    r, dr, j = reduce_pio2(m, x)
    q = m.to_int(_mod4(m, j))
    far_above = _FAR_ABOVE[m.fmt.name]
    r_far, dr_far, q_far = reduce_payne_hanek(m, x, first_exponent=m.fmt.bias + far_above)
    far = m.cmp(">", m.fabs(x), 2.0**far_above)
    return m.select(far, r_far, r), m.select(far, dr_far, dr), m.b.select(far, q_far, q)


def _sin_kernel(m: FloatOps, r: ir.Value, dr: ir.Value, z: ir.Value) -> ir.Value:
    """``sin(r + dr) ~= r + (r^3 S(r^2) + dr)``: the tail is small, so only the last add rounds."""
    return m.add(r, m.fma(m.mul(r, z), m.horner(z, m.table(SIN)), dr))


def _cos_kernel(m: FloatOps, r: ir.Value, dr: ir.Value, z: ir.Value) -> ir.Value:
    """``cos(r + dr) ~= w + ((1 - w - r^2/2) + r^4 C(r^2) - r*dr)`` with ``w = fl(1 - r^2/2)``."""
    half_z = m.mul(z, m.const(0.5))
    w = m.sub(m.const(1.0), half_z)
    lost = m.sub(m.sub(m.const(1.0), w), half_z)  # the rounding error of w, exactly
    tail = m.fma(m.mul(z, z), m.horner(z, m.table(COS)), m.fma(m.neg(r), dr, lost))
    return m.add(w, tail)


def _quadrant(m: FloatOps, q: ir.Value, bit: int) -> ir.Value:
    return m.b.icmp_unsigned("!=", m.b.and_(q, m.iconst(bit)), m.iconst(0))


def _sin_or_cos(builder: ir.IRBuilder, x: ir.Value, shift: int) -> ir.Value:
    """sin(x + shift*pi/2): shift 0 is sin, shift 1 is cos."""
    m = FloatOps(builder, x)
    r, dr, q = _reduce(m, x)
    q = builder.add(q, m.iconst(shift))
    z = m.mul(r, r)
    value = m.select(_quadrant(m, q, 1), _cos_kernel(m, r, dr, z), _sin_kernel(m, r, dr, z))
    value = m.select(_quadrant(m, q, 2), m.neg(value), value)
    value = m.clamp(value, -1.0, 1.0)  # a kernel may round a hair past 1
    return m.select(m.is_finite(x), value, m.const(float("nan")))


def emit_sin(builder: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """``sin(x)``: sin(±0) = ±0, sin(±inf) = sin(NaN) = NaN."""
    m = FloatOps(builder, x)
    return m.select(m.cmp("==", x, 0.0), x, _sin_or_cos(builder, x, 0))


def emit_cos(builder: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """``cos(x)``: cos(±inf) = cos(NaN) = NaN."""
    return _sin_or_cos(builder, x, 1)


def emit_tan(builder: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """``tan(x) = sin r / cos r`` (even quadrant) or ``-cos r / sin r`` (odd); tan(±0) = ±0."""
    m = FloatOps(builder, x)
    r, dr, q = _reduce(m, x)
    z = m.mul(r, r)
    s, c = _sin_kernel(m, r, dr, z), _cos_kernel(m, r, dr, z)
    odd = _quadrant(m, q, 1)
    value = m.div(m.select(odd, m.neg(c), s), m.select(odd, s, c))
    value = m.select(m.cmp("==", x, 0.0), x, value)
    return m.select(m.is_finite(x), value, m.const(float("nan")))


def emit_atan2(builder: ir.IRBuilder, y: ir.Value, x: ir.Value) -> ir.Value:
    """``atan2(y, x)`` in ``[-pi, pi]`` with C99's table of signed zeros and infinities.

    Zero operands are recognised by their bits, before any arithmetic, as XLA does: while the
    run flushes denormals, a denormal ``y`` over a zero ``x`` still gives ±pi/2, and two denormals
    give the 0/0 of the division below -- NaN, XLA's answer."""
    m = FloatOps(builder, y)
    ax, ay = m.fabs(x), m.fabs(y)
    x_zero, y_zero = m.is_zero_bits(x), m.is_zero_bits(y)
    swap = builder.or_(builder.and_(x_zero, builder.not_(y_zero)), m.cmp(">", ay, ax))  # above the diagonal
    big, small = m.select(swap, ay, ax), m.select(swap, ax, ay)
    t = m.select(builder.or_(x_zero, y_zero), m.const(0.0), m.div(small, big))  # a zero: atan(0) or pi/2
    t = m.select(builder.and_(m.is_inf(ax), m.is_inf(ay)), m.const(1.0), t)  # inf/inf -> 1
    upper = m.cmp(">", t, _TAN_PI_8)
    u = m.select(upper, m.div(m.sub(t, m.const(1.0)), m.add(t, m.const(1.0))), t)
    z = m.mul(u, u)
    p = m.fma(m.mul(u, z), m.horner(z, m.table(ATAN)), u)  # atan(u); atan(t) = upper*pi/4 + p
    # Octants: angle = k*pi/4 + sign*p with
    #   x >= 0, below diagonal: atan(t)        -> k = upper,     +p
    #   x >= 0, above diagonal: pi/2 - atan(t) -> k = 2 - upper, -p
    #   x <  0, above diagonal: pi/2 + atan(t) -> k = 2 + upper, +p
    #   x <  0, below diagonal: pi - atan(t)   -> k = 4 - upper, -p
    # ("x < 0" includes -0.0: atan2(+0, -0) = pi.)
    neg_x = m.signbit(x)
    up = m.select(upper, m.const(1.0), m.const(0.0))
    k_pos = m.select(swap, m.sub(m.const(2.0), up), up)
    k_neg = m.select(swap, m.add(m.const(2.0), up), m.sub(m.const(4.0), up))
    k = m.select(neg_x, k_neg, k_pos)
    signed_p = m.select(builder.xor(swap, neg_x), m.neg(p), p)
    pio4_hi, pio4_lo = m.table(PIO4)
    angle = m.fma(k, m.const(pio4_hi), m.fma(k, m.const(pio4_lo), signed_p))
    angle = m.copysign(angle, y)
    return m.select(builder.or_(m.is_nan(x), m.is_nan(y)), m.const(float("nan")), angle)
