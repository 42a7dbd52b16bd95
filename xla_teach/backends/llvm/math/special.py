"""The activation-function family: tanh, logistic (sigmoid) and erf.

**tanh.**  For ``a = |x|``, ``tanh(a) = (e^{2a} - 1) / (e^{2a} + 1) = E / (E + 2)`` with
``E = expm1(2a)``.  Using expm1 rather than exp avoids the cancellation of ``e^{2a} - 1`` for small
``a`` (then ``E ~= 2a`` and ``tanh(a) ~= a``, to full relative accuracy), and for large ``a`` the
quotient tends to 1.  ``a`` is clamped where tanh rounds to 1 (9.1 for f32, 19.1 for f64) so ``E``
never overflows; the sign comes back with copysign (so tanh(-0) = -0) and NaN with a select.

**logistic** ``1 / (1 + e^{-x})``.  With ``t = e^{-|x|} in (0, 1]`` (which cannot overflow):
``logistic(x) = 1 / (1 + t)`` for ``x >= 0`` and ``t / (1 + t)`` for ``x < 0``, i.e. one division
``select(x < 0, t, 1) / (1 + t)``.  For very negative ``x``, ``t`` is tiny (even subnormal) and the
result is ``~t`` -- never ``inf/inf`` or ``0 * inf`` NaNs.

**erf.**  Two regimes, both computed and ``select``-ed (straight-line code):

* ``|x| < 1``: ``erf(x) = x * P(x^2)``, an odd minimax polynomial (7 / 12 terms).
* ``|x| >= 1``: ``erf(x) = 1 - erfc(x)`` with ``erfc(x) = exp(-x^2) * G(x)``.  ``G(x) = e^{x^2}
  erfc(x)`` is smooth and slowly varying (``~ 1/(x sqrt(pi))``), so a polynomial in ``1/x`` fits it
  well.  f32 uses one piece on ``[1, 4]``; f64 uses ``P(x - 1)`` on ``[1, 2]`` and ``P(1/x)`` on
  ``[2, 5.93]``, evaluated by *one* Horner loop whose variable and coefficients are ``select``-ed
  per lane.  Errors in erfc only count relative to ``erf ~ 1``, so the fit weight is
  ``exp(-x^2) / erf(x)``.  ``x^2`` is split into ``hi + lo`` exactly (two_prod) and
  ``exp(-hi - lo) = exp(-hi) * (1 - lo)``, because the rounding error of ``x^2`` would otherwise be
  magnified by up to ``x^2`` in the exponential.  Beyond the clamp (4 / 5.93) erf rounds to ±1.
"""

from __future__ import annotations

from llvmlite import ir

from xla_teach.backends.llvm.math.coefficients import ERF_SMALL, ERFC_FAR_F32, ERFC_FAR_F64, ERFC_NEAR
from xla_teach.backends.llvm.math.common import FloatOps
from xla_teach.backends.llvm.math.exp_log import exp_kernel, expm1_kernel

# tanh(a) rounds to 1 beyond these (1 - tanh(a) ~= 2 e^{-2a} < 2^-(precision+1)).
_TANH_CLAMP = {"f32": 9.5, "f64": 19.5}
# erf(x) rounds to 1 beyond these (erfc(x) < 2^-(precision+1)); also the end of the erfc fits.
_ERF_CLAMP = {"f32": 4.0, "f64": 5.93}


def emit_tanh(builder: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """``tanh(x) = copysign(E / (E + 2), x)``, ``E = expm1(2|x|)``; tanh(±inf) = ±1.

    Below ``|x| < 0.0004`` (f32; 1e-8 in f64) ``tanh(x)`` rounds to ``x`` itself and is returned
    as it is, as XLA does: a denormal ``x`` then survives even while denormals are flushed."""
    m = FloatOps(builder, x)
    a = m.minnum(m.fabs(x), m.const(m.table(_TANH_CLAMP)))  # NaN -> clamp; patched below
    big_e = expm1_kernel(m, m.add(a, a))
    result = m.copysign(m.div(big_e, m.add(big_e, m.const(2.0))), x)
    tiny = m.cmp("<", m.fabs(x), 0.0004 if m.fmt.name == "f32" else 1e-8)
    return m.select(builder.or_(m.is_nan(x), tiny), x, result)


def emit_logistic(builder: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """``1 / (1 + exp(-x))`` without overflow: logistic(-inf) = 0, logistic(inf) = 1."""
    m = FloatOps(builder, x)
    t = exp_kernel(m, m.neg(m.fabs(x)))
    numerator = m.select(m.cmp("<", x, 0.0), t, m.const(1.0))
    result = m.div(numerator, m.add(m.const(1.0), t))
    return m.select(m.is_nan(x), x, result)


def _erfc_scaled_poly(m: FloatOps, a: ir.Value) -> ir.Value:
    """``G(a) = e^{a^2} erfc(a)`` for ``a`` in ``[1, clamp]``, piecewise over the fitted intervals."""
    if m.fmt.name == "f32":
        return m.horner(m.div(m.const(1.0), a), m.table(ERFC_FAR_F32))
    near = m.cmp("<", a, 2.0)
    v = m.select(near, m.sub(a, m.const(1.0)), m.div(m.const(1.0), a))
    near_c, far_c = m.table(ERFC_NEAR), m.table(ERFC_FAR_F64)
    n = max(len(near_c), len(far_c))
    near_c, far_c = list(near_c) + [0.0] * (n - len(near_c)), list(far_c) + [0.0] * (n - len(far_c))
    coeffs = [m.select(near, m.const(c_near), m.const(c_far)) for c_near, c_far in zip(near_c, far_c, strict=True)]
    return m.horner(v, coeffs)


def emit_erf(builder: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """The error function ``2/sqrt(pi) * integral_0^x exp(-t^2) dt``; erf(±inf) = ±1, erf(±0) = ±0."""
    m = FloatOps(builder, x)
    a = m.fabs(x)
    # |x| < 1: odd polynomial.
    small = m.mul(a, m.horner(m.mul(a, a), m.table(ERF_SMALL)))
    # |x| >= 1: 1 - exp(-a^2) G(a), with a clamped into the fitted interval (NaN -> 1; patched below).
    ac = m.clamp(a, 1.0, m.table(_ERF_CLAMP))
    sq_hi, sq_lo = m.two_prod(ac, ac)
    e = exp_kernel(m, m.neg(sq_hi))
    e = m.fma(e, m.neg(sq_lo), e)  # exp(-hi - lo) ~= exp(-hi) * (1 - lo)
    large = m.sub(m.const(1.0), m.mul(e, _erfc_scaled_poly(m, ac)))
    result = m.copysign(m.select(m.cmp("<", a, 1.0), small, large), x)
    return m.select(m.is_nan(x), x, result)
