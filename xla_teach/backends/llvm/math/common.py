"""Shared machinery for the math emitters: float formats, constants, intrinsics, polynomials, bit tricks.

Everything here emits *straight-line* IR: no branches, no loops, and no calls except a handful of
LLVM intrinsics that lower to single instructions on x86 and NVPTX alike (``llvm.fma``,
``llvm.fabs``, ``llvm.sqrt``, ``llvm.floor``, ``llvm.ceil``, ``llvm.trunc``, ``llvm.roundeven``,
``llvm.rint``, ``llvm.copysign``, ``llvm.minnum``, ``llvm.maxnum``).  Special cases are merged in
with ``select``.  That is what lets LLVM's loop vectorizer turn ``out[i] = exp(in[i])`` into SIMD
code, and what makes the same IR valid for the GPU, which has no libm.

The emitters are written once for both ``float`` and ``double``, and for vectors of them:
:class:`FloatOps` bundles an ``IRBuilder`` with the :class:`FloatFormat` of the value being
computed (and its number of lanes), so that ``m.const(0.5)`` or ``m.pow2i(k)`` produce the right
type and bit layout -- ``<8 x float>`` splats for the CPU's row kernels, which compute eight
elements at once with the same instructions (``vector_emitter.py``).

Binary floating point in one paragraph: a finite non-zero float is ``(-1)^s * 1.f * 2^e`` with a
``mantissa_bits``-bit fraction ``f`` and an exponent stored with a ``bias`` (127 / 1023).  The
stored exponent 0 means zero or subnormal (``0.f * 2^(1-bias)``); the all-ones exponent means
infinity (``f == 0``) or NaN.  Hence ``2^k`` for an integer ``k`` is just the integer
``(k + bias) << mantissa_bits`` reinterpreted as a float, as long as ``k`` is a normal exponent.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from llvmlite import ir

from xla_teach.backends.llvm.ir_types import constant_like

ALLOWED_INTRINSICS = (
    "llvm.fma", "llvm.fabs", "llvm.sqrt", "llvm.floor", "llvm.ceil", "llvm.trunc", "llvm.roundeven",
    "llvm.rint", "llvm.copysign", "llvm.minnum", "llvm.maxnum",
)  # fmt: skip
_ARITY = {"llvm.fma": 3, "llvm.copysign": 2, "llvm.minnum": 2, "llvm.maxnum": 2}


@dataclass(frozen=True)
class FloatFormat:
    """The IEEE-754 binary format of ``float`` (binary32) or ``double`` (binary64)."""

    name: str  # "f32" / "f64": the key of the coefficient tables
    ftype: ir.Type
    itype: ir.IntType  # the integer type of the same width, for bit tricks
    mantissa_bits: int  # stored fraction bits: 23 / 52 (precision is one more)
    bias: int  # exponent bias: 127 / 1023

    @property
    def precision(self) -> int:
        return self.mantissa_bits + 1

    @property
    def min_normal(self) -> float:
        return 2.0 ** (1 - self.bias)


F32_FORMAT = FloatFormat("f32", ir.FloatType(), ir.IntType(32), 23, 127)
F64_FORMAT = FloatFormat("f64", ir.DoubleType(), ir.IntType(64), 52, 1023)


def format_of(value: ir.Value | ir.Type) -> FloatFormat:
    """The format of a ``float`` or ``double`` value (or type), or of a vector of them; anything
    else is an error."""
    ty = value if isinstance(value, ir.Type) else value.type
    if isinstance(ty, ir.VectorType):
        ty = ty.element
    if isinstance(ty, ir.FloatType):
        return F32_FORMAT
    if isinstance(ty, ir.DoubleType):
        return F64_FORMAT
    raise TypeError(f"math emitters take float or double scalars or vectors, got {ty}")


def lanes_of(ty: ir.Type) -> int:
    """How many values a value of type ``ty`` holds: its lanes for a vector, else 1."""
    return ty.count if isinstance(ty, ir.VectorType) else 1


def declare_intrinsic(module: ir.Module, name: str, types: Sequence[ir.Type], fnty: ir.FunctionType) -> ir.Function:
    """``module.declare_intrinsic`` that also takes vector types (``llvm.fma.v8f32``), which
    llvmlite's does not know how to name."""
    if not any(isinstance(t, ir.VectorType) for t in types):
        return module.declare_intrinsic(name, list(types), fnty)

    def suffix(t: ir.Type) -> str:
        if isinstance(t, ir.VectorType):
            return f"v{t.count}{t.element.intrinsic_name}"
        return t.intrinsic_name

    full = ".".join([name, *(suffix(t) for t in types)])
    existing = module.globals.get(full)
    return existing if isinstance(existing, ir.Function) else ir.Function(module, fnty, full)


class FloatOps:
    """An ``IRBuilder`` plus a float format: terse arithmetic for the emitters.

    Comparisons are *ordered* (false when an operand is NaN), as in C.
    """

    def __init__(self, builder: ir.IRBuilder, fmt: FloatFormat | ir.Value | ir.Type) -> None:
        self.b = builder
        self.fmt = fmt if isinstance(fmt, FloatFormat) else format_of(fmt)
        # A vector value (a row kernel's ``<8 x float>``) makes every operation a vector one.
        self.lanes = 1 if isinstance(fmt, FloatFormat) else lanes_of(fmt if isinstance(fmt, ir.Type) else fmt.type)
        self.ty = self.fmt.ftype if self.lanes == 1 else ir.VectorType(self.fmt.ftype, self.lanes)
        self.ity = self.fmt.itype if self.lanes == 1 else ir.VectorType(self.fmt.itype, self.lanes)

    # -- constants -------------------------------------------------------------------------
    def const(self, value: float) -> ir.Constant:
        return constant_like(self.ty, value)

    def iconst(self, value: int) -> ir.Constant:
        return constant_like(self.ity, value)

    def table(self, per_format: dict) -> object:
        """``per_format[fmt.name]``: pick this format's entry of a coefficient table."""
        return per_format[self.fmt.name]

    # -- arithmetic ------------------------------------------------------------------------
    def add(self, a: ir.Value, c: ir.Value) -> ir.Value:
        return self.b.fadd(a, c)

    def sub(self, a: ir.Value, c: ir.Value) -> ir.Value:
        return self.b.fsub(a, c)

    def mul(self, a: ir.Value, c: ir.Value) -> ir.Value:
        return self.b.fmul(a, c)

    def div(self, a: ir.Value, c: ir.Value) -> ir.Value:
        return self.b.fdiv(a, c)

    def neg(self, a: ir.Value) -> ir.Value:
        return self.b.fneg(a)

    def intrinsic(self, name: str, *args: ir.Value) -> ir.Value:
        """Call one of :data:`ALLOWED_INTRINSICS` on operands of this format."""
        assert name in ALLOWED_INTRINSICS, name
        fnty = ir.FunctionType(self.ty, [self.ty] * _ARITY.get(name, 1))
        return self.b.call(declare_intrinsic(self.b.module, name, [self.ty], fnty), list(args))

    def fma(self, a: ir.Value, c: ir.Value, d: ir.Value) -> ir.Value:
        """``a * c + d`` with a single rounding."""
        return self.intrinsic("llvm.fma", a, c, d)

    def fabs(self, a: ir.Value) -> ir.Value:
        return self.intrinsic("llvm.fabs", a)

    def sqrt(self, a: ir.Value) -> ir.Value:
        return self.intrinsic("llvm.sqrt", a)

    def floor(self, a: ir.Value) -> ir.Value:
        return self.intrinsic("llvm.floor", a)

    def trunc(self, a: ir.Value) -> ir.Value:
        return self.intrinsic("llvm.trunc", a)

    def roundeven(self, a: ir.Value) -> ir.Value:
        return self.intrinsic("llvm.roundeven", a)

    def copysign(self, magnitude: ir.Value, sign: ir.Value) -> ir.Value:
        return self.intrinsic("llvm.copysign", magnitude, sign)

    def minnum(self, a: ir.Value, c: ir.Value) -> ir.Value:
        """The smaller operand; if one operand is NaN, the other one."""
        return self.intrinsic("llvm.minnum", a, c)

    def maxnum(self, a: ir.Value, c: ir.Value) -> ir.Value:
        return self.intrinsic("llvm.maxnum", a, c)

    def clamp(self, a: ir.Value, lo: float, hi: float) -> ir.Value:
        """``a`` clamped to ``[lo, hi]``; NaN becomes ``lo`` (callers patch NaN back in)."""
        return self.minnum(self.maxnum(a, self.const(lo)), self.const(hi))

    def select(self, cond: ir.Value, a: ir.Value, c: ir.Value) -> ir.Value:
        return self.b.select(cond, a, c)

    # -- comparisons and classification -----------------------------------------------------
    def cmp(self, op: str, a: ir.Value, c: ir.Value | float) -> ir.Value:
        """Ordered comparison (``op`` in ``< <= > >= == !=``) against a value or a constant."""
        rhs = c if isinstance(c, ir.Value) else self.const(c)
        return self.b.fcmp_ordered(op, a, rhs)

    def is_nan(self, a: ir.Value) -> ir.Value:
        return self.b.fcmp_unordered("uno", a, a)

    def is_zero_bits(self, a: ir.Value) -> ir.Value:
        """``a`` is +0.0 or -0.0, tested on its bits (a denormal is not zero here, even while
        the run flushes denormals)."""
        return self.b.icmp_unsigned("==", self.b.shl(self.to_bits(a), self.iconst(1)), self.iconst(0))

    def is_inf(self, a: ir.Value) -> ir.Value:
        return self.cmp("==", self.fabs(a), float("inf"))

    def is_finite(self, a: ir.Value) -> ir.Value:
        """``|a| < inf``: false for infinities and (being an ordered compare) for NaN."""
        return self.cmp("<", self.fabs(a), float("inf"))

    def signbit(self, a: ir.Value) -> ir.Value:
        """True for negative numbers, -0.0, -inf and NaNs with the sign bit set."""
        return self.b.icmp_signed("<", self.to_bits(a), self.iconst(0))

    # -- bits ----------------------------------------------------------------------------------
    def to_bits(self, a: ir.Value) -> ir.Value:
        return self.b.bitcast(a, self.ity)

    def from_bits(self, bits: ir.Value) -> ir.Value:
        return self.b.bitcast(bits, self.ty)

    def to_int(self, a: ir.Value) -> ir.Value:
        """Float -> signed integer of the same width. ``a`` must be integral and in range."""
        return self.b.fptosi(a, self.ity)

    def pow2i(self, k: ir.Value) -> ir.Value:
        """``2^k`` for an integer ``k`` in the normal exponent range ``[1 - bias, bias]``."""
        biased = self.b.add(k, self.iconst(self.fmt.bias))
        return self.from_bits(self.b.shl(biased, self.iconst(self.fmt.mantissa_bits)))

    def scale(self, a: ir.Value, k: ir.Value) -> ir.Value:
        """``a * 2^k`` (ldexp) for ``|k|`` up to about twice the bias.

        ``2^k`` itself may not be representable (``2^128`` overflows a float, ``2^-140`` is
        subnormal), so multiply by ``2^(k//2)`` and then ``2^(k - k//2)``: both factors are normal
        numbers, the first product is exact, and the second rounds once -- so results that
        overflow become inf and results in the subnormal range are correctly rounded.
        """
        half = self.b.ashr(k, self.iconst(1))
        return self.mul(self.mul(a, self.pow2i(half)), self.pow2i(self.b.sub(k, half)))

    # -- polynomials ---------------------------------------------------------------------------
    def value(self, v: float | ir.Value) -> ir.Value:
        """A constant for a Python number; an ``ir.Value`` passes through."""
        return v if isinstance(v, ir.Value) else self.const(v)

    def horner(self, x: ir.Value, coeffs: Sequence[float | ir.Value]) -> ir.Value:
        """``c0 + x*(c1 + x*(c2 + ...))``, one FMA per coefficient (coefficients low to high).

        Coefficients may be run-time values, e.g. ``select``-ed per piece of a piecewise fit.
        """
        acc = self.value(coeffs[-1])
        for c in reversed(coeffs[:-1]):
            acc = self.fma(acc, x, self.value(c))
        return acc


    # -- error-free transformations (double-"word" arithmetic) --------------------------------------
    def two_sum(self, a: ir.Value, c: ir.Value) -> tuple[ir.Value, ir.Value]:
        """``(s, e)`` with ``s = fl(a + c)`` and ``a + c = s + e`` exactly (Knuth; any magnitudes)."""
        s = self.add(a, c)
        a_part = self.sub(s, c)
        c_part = self.sub(s, a_part)
        return s, self.add(self.sub(a, a_part), self.sub(c, c_part))

    def fast_two_sum(self, a: ir.Value, c: ir.Value) -> tuple[ir.Value, ir.Value]:
        """Like :meth:`two_sum` but requires ``|a| >= |c|`` (Dekker): three operations."""
        s = self.add(a, c)
        return s, self.sub(c, self.sub(s, a))

    def two_prod(self, a: ir.Value, c: ir.Value) -> tuple[ir.Value, ir.Value]:
        """``(p, e)`` with ``p = fl(a * c)`` and ``a * c = p + e`` exactly: the FMA computes ``e``."""
        p = self.mul(a, c)
        return p, self.fma(a, c, self.neg(p))


# ---------------------------------------------------------------------------------------------
# Small public helpers
# ---------------------------------------------------------------------------------------------
def emit_is_finite(builder: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """``i1``: true unless ``x`` is ±inf or NaN."""
    return FloatOps(builder, x).is_finite(x)


def emit_round_half_even(builder: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """Round to the nearest integer, ties to even (``llvm.roundeven``; numpy's ``rint``)."""
    return FloatOps(builder, x).roundeven(x)


def emit_round_half_away(builder: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """Round to the nearest integer, ties away from zero (C ``round``; XLA ``round-nearest-afz``).

    The textbook ``floor(|x| + 0.5)`` is wrong for the float just below 0.5: ``0.49999997 + 0.5``
    rounds up to ``1.0``.  Instead split ``|x|`` into ``trunc(|x|)`` and its fraction, which is
    exact, and add one when the fraction is at least one half.  Signs (and -0.0) are restored with
    copysign; NaN and infinities pass through (their fraction is NaN, so nothing is added).
    """
    m = FloatOps(builder, x)
    ax = m.fabs(x)
    whole = m.trunc(ax)
    bump = m.cmp(">=", m.sub(ax, whole), 0.5)
    rounded = m.select(bump, m.add(whole, m.const(1.0)), whole)
    return m.copysign(rounded, x)
