"""Scalar semantics of every elementwise HLO opcode, as LLVM IR.

Each function takes operand values in their compute type (see
:mod:`ir_types`) and returns the result value. The semantics are exactly the
reference interpreter's (and XLA:CPU's, which tests/hlo/ pins case by case):

* integers wrap; ``x / 0`` is -1 (signed) or all ones (unsigned), ``x % 0 = x``,
  ``INT_MIN / -1 = INT_MIN``, ``INT_MIN % -1 = 0`` -- never LLVM's undefined
  behaviour, so the divisor is made safe before ``sdiv``;
* shifts by ``>= bit width`` give 0 (or all sign bits for arithmetic shifts);
* ``maximum``/``minimum`` propagate NaN and order -0 < +0 (``llvm.maximum``);
* float-to-int ``convert`` truncates, saturates, and maps NaN to 0;
* f16/bf16 are computed in f32 and rounded back after every op.

Transcendental functions come from :mod:`xla_teach.backends.llvm.math`, which
emits branch-free polynomial code that vectorizes on CPUs and runs on GPUs.
"""

from __future__ import annotations

from llvmlite import ir

from xla_teach.backends.llvm import math as xmath
from xla_teach.backends.llvm.ir_types import I1, compute_type, constant_like, round_to_type
from xla_teach.backends.llvm.math.common import declare_intrinsic
from xla_teach.hlo.types import PrimitiveType

P = PrimitiveType


def _intrinsic(b: ir.IRBuilder, name: str, args: list[ir.Value], n_types: int = 1) -> ir.Value:
    ty = args[0].type
    fnty = ir.FunctionType(ty, [a.type for a in args])
    fn = declare_intrinsic(b.module, name, [ty] * n_types, fnty)
    return b.call(fn, args)


def _const_like(v: ir.Value, value: float | int) -> ir.Constant:
    return constant_like(v.type, value)


def _int_min(width: int) -> int:
    return 1 << (width - 1)


# ---------------------------------------------------------------------------------------
# Unary
# ---------------------------------------------------------------------------------------
_FLOAT_UNARY = {
    "exponential": xmath.emit_exp,
    "exponential-minus-one": xmath.emit_expm1,
    "log": xmath.emit_log,
    "log-plus-one": xmath.emit_log1p,
    "sine": xmath.emit_sin,
    "cosine": xmath.emit_cos,
    "tan": xmath.emit_tan,
    "tanh": xmath.emit_tanh,
    "logistic": xmath.emit_logistic,
    "erf": xmath.emit_erf,
    "cbrt": xmath.emit_cbrt,
    "sqrt": xmath.emit_sqrt,
    "rsqrt": xmath.emit_rsqrt,
}


def emit_unary(b: ir.IRBuilder, opcode: str, x: ir.Value, ptype: PrimitiveType) -> ir.Value:
    """``opcode`` applied to ``x`` of element type ``ptype`` (result in the same type,
    except ``is-finite`` which returns i1)."""
    if ptype.is_float:
        if opcode == "is-finite":  # a pred: nothing to round
            return _float_unary(b, opcode, x)
        return round_to_type(b, _float_unary(b, opcode, x), ptype)
    return _int_unary(b, opcode, x, ptype)


def _float_unary(b: ir.IRBuilder, opcode: str, x: ir.Value) -> ir.Value:
    if opcode in _FLOAT_UNARY:
        return _FLOAT_UNARY[opcode](b, x)
    if opcode == "abs":
        return _intrinsic(b, "llvm.fabs", [x])
    if opcode == "negate":
        return b.fneg(x)
    if opcode == "floor":
        return _intrinsic(b, "llvm.floor", [x])
    if opcode == "ceil":
        return _intrinsic(b, "llvm.ceil", [x])
    if opcode == "round-nearest-afz":
        return xmath.emit_round_half_away(b, x)
    if opcode == "round-nearest-even":
        return xmath.emit_round_half_even(b, x)
    if opcode == "sign":
        # XLA's formula: copysign(x != 0 ? 1 : 0, x), NaN stays NaN. Zeros keep their sign, and
        # a denormal is +-0 while denormals are flushed (the compare reads it as zero).
        nonzero = b.uitofp(b.fcmp_ordered("one", x, _const_like(x, 0.0)), x.type)
        signed = _intrinsic(b, "llvm.copysign", [nonzero, x])
        return b.select(b.fcmp_unordered("uno", x, x), x, signed)
    if opcode == "is-finite":
        return xmath.emit_is_finite(b, x)
    raise NotImplementedError(f"float unary op {opcode}")


def _int_unary(b: ir.IRBuilder, opcode: str, x: ir.Value, ptype: PrimitiveType) -> ir.Value:
    if opcode == "not":
        return b.not_(x)
    if ptype is P.PRED:
        raise NotImplementedError(f"{opcode} on pred")
    zero = _const_like(x, 0)
    if opcode == "negate":
        return b.sub(zero, x)
    if opcode == "abs":
        if ptype.is_unsigned_int:
            return x
        return b.select(b.icmp_signed("<", x, zero), b.sub(zero, x), x)
    if opcode == "sign":
        if ptype.is_unsigned_int:
            return b.zext(b.icmp_unsigned("!=", x, zero), x.type)
        pos = b.zext(b.icmp_signed(">", x, zero), x.type)
        neg = b.zext(b.icmp_signed("<", x, zero), x.type)
        return b.sub(pos, neg)
    if opcode == "popcnt":
        return _intrinsic(b, "llvm.ctpop", [x])
    if opcode == "count-leading-zeros":
        fn = b.module.declare_intrinsic("llvm.ctlz", [x.type, I1])
        return b.call(fn, [x, ir.Constant(I1, 0)])
    raise NotImplementedError(f"integer unary op {opcode} on {ptype.value}")


# ---------------------------------------------------------------------------------------
# Binary
# ---------------------------------------------------------------------------------------
def emit_binary(b: ir.IRBuilder, opcode: str, x: ir.Value, y: ir.Value, ptype: PrimitiveType,
                reassociate: bool = False) -> ir.Value:
    """``x opcode y``; ``reassociate`` lets LLVM reorder float adds/multiplies (reductions)."""
    if ptype.is_float:
        return round_to_type(b, _float_binary(b, opcode, x, y, reassociate), ptype)
    return _int_binary(b, opcode, x, y, ptype)


def _float_binary(b: ir.IRBuilder, opcode: str, x: ir.Value, y: ir.Value, reassociate: bool) -> ir.Value:
    flags = ("reassoc",) if reassociate else ()
    if opcode == "add":
        return b.fadd(x, y, flags=flags)
    if opcode == "subtract":
        return b.fsub(x, y)
    if opcode == "multiply":
        return b.fmul(x, y, flags=flags)
    if opcode == "divide":
        return b.fdiv(x, y)
    if opcode == "remainder":
        return _fmod(b, x, y)
    if opcode == "maximum":
        return _intrinsic(b, "llvm.maximum", [x, y])
    if opcode == "minimum":
        return _intrinsic(b, "llvm.minimum", [x, y])
    if opcode == "power":
        return xmath.emit_pow(b, x, y)
    if opcode == "atan2":
        return xmath.emit_atan2(b, x, y)
    raise NotImplementedError(f"float binary op {opcode}")


def _fmod(b: ir.IRBuilder, x: ir.Value, y: ir.Value) -> ir.Value:
    """C's ``fmod`` (XLA's ``remainder``: the sign of ``x``).

    LLVM's ``frem`` is a call to libm's ``fmod`` on a CPU, which is exact. On NVPTX LLVM expands
    it as ``x - trunc(x / y) * y``: +-inf for ``fmod(+-inf, y)`` (NaN is right), NaN for
    ``fmod(x, +-inf)`` (``x`` is right), and wrong digits once ``x / y`` needs more than the type
    has -- found by the fuzz against XLA's GPU, whose ``fmodf`` (libdevice's) is exact. For the GPU,
    :func:`~xla_teach.backends.llvm.math.emit_fmod` computes it exactly instead."""
    if "nvptx" not in str(b.module.triple) or isinstance(x.type, ir.VectorType):
        return b.frem(x, y)
    if isinstance(x.type, ir.HalfType):  # exact in f32, and fmod's result is representable in f16
        wide = ir.FloatType()
        return b.fptrunc(xmath.emit_fmod(b, b.fpext(x, wide), b.fpext(y, wide)), x.type)
    return xmath.emit_fmod(b, x, y)


def _int_binary(b: ir.IRBuilder, opcode: str, x: ir.Value, y: ir.Value, ptype: PrimitiveType) -> ir.Value:
    signed = ptype.is_signed_int
    if opcode == "and":
        return b.and_(x, y)
    if opcode == "or":
        return b.or_(x, y)
    if opcode == "xor":
        return b.xor(x, y)
    if ptype is P.PRED:
        if opcode in ("maximum", "add"):
            return b.or_(x, y)
        if opcode in ("minimum", "multiply"):
            return b.and_(x, y)
        raise NotImplementedError(f"{opcode} on pred")
    width = ptype.bit_width
    if opcode == "add":
        return b.add(x, y)
    if opcode == "subtract":
        return b.sub(x, y)
    if opcode == "multiply":
        return b.mul(x, y)
    if opcode == "maximum":
        cmp = b.icmp_signed(">", x, y) if signed else b.icmp_unsigned(">", x, y)
        return b.select(cmp, x, y)
    if opcode == "minimum":
        cmp = b.icmp_signed("<", x, y) if signed else b.icmp_unsigned("<", x, y)
        return b.select(cmp, x, y)
    if opcode in ("divide", "remainder"):
        return _int_div_rem(b, opcode, x, y, signed, width)
    if opcode in ("shift-left", "shift-right-logical", "shift-right-arithmetic"):
        return _shift(b, opcode, x, y, width)
    if opcode == "power":
        return _int_power(b, x, y, signed, width)
    raise NotImplementedError(f"integer binary op {opcode} on {ptype.value}")


def _int_div_rem(b: ir.IRBuilder, opcode: str, x: ir.Value, y: ir.Value, signed: bool, width: int) -> ir.Value:
    zero, one, all_ones = _const_like(x, 0), _const_like(x, 1), _const_like(x, (1 << width) - 1)
    y_is_zero = b.icmp_unsigned("==", y, zero)
    if signed:
        overflow = b.and_(b.icmp_unsigned("==", x, _const_like(x, _int_min(width))),
                          b.icmp_unsigned("==", y, all_ones))
        bad = b.or_(y_is_zero, overflow)
        safe_y = b.select(bad, one, y)
        if opcode == "divide":
            q = b.sdiv(x, safe_y)
            return b.select(y_is_zero, all_ones, b.select(overflow, x, q))
        r = b.srem(x, safe_y)
        return b.select(y_is_zero, x, b.select(overflow, zero, r))
    safe_y = b.select(y_is_zero, one, y)
    if opcode == "divide":
        return b.select(y_is_zero, all_ones, b.udiv(x, safe_y))
    return b.select(y_is_zero, x, b.urem(x, safe_y))


def _shift(b: ir.IRBuilder, opcode: str, x: ir.Value, y: ir.Value, width: int) -> ir.Value:
    too_far = b.icmp_unsigned(">=", y, _const_like(y, width))
    amount = b.select(too_far, _const_like(y, 0), y)
    if opcode == "shift-left":
        return b.select(too_far, _const_like(x, 0), b.shl(x, amount))
    if opcode == "shift-right-logical":
        return b.select(too_far, _const_like(x, 0), b.lshr(x, amount))
    sign_fill = b.ashr(x, _const_like(x, width - 1))
    return b.select(too_far, sign_fill, b.ashr(x, amount))


def _int_power(b: ir.IRBuilder, x: ir.Value, y: ir.Value, signed: bool, width: int) -> ir.Value:
    """Square-and-multiply over every exponent bit (straight-line, wraps like the hardware)."""
    one, zero = _const_like(x, 1), _const_like(x, 0)
    result, base = one, x
    for bit in range(width):
        is_set = b.trunc(b.lshr(y, _const_like(y, bit)), I1)
        result = b.select(is_set, b.mul(result, base), result)
        base = b.mul(base, base)
    if not signed:
        return result
    negative = b.icmp_signed("<", y, zero)
    minus_one = _const_like(x, (1 << width) - 1)
    # Negative exponent: 1^-n = 1, (-1)^-n = +-1 by parity, anything else truncates to 0.
    odd = b.trunc(y, I1)
    neg_result = b.select(b.icmp_unsigned("==", x, one), one,
                          b.select(b.icmp_unsigned("==", x, minus_one), b.select(odd, minus_one, one), zero))
    return b.select(negative, neg_result, result)


# ---------------------------------------------------------------------------------------
# compare, select, clamp
# ---------------------------------------------------------------------------------------
_FLOAT_PREDICATES = {"EQ": "oeq", "NE": "une", "LT": "olt", "LE": "ole", "GT": "ogt", "GE": "oge"}
_INT_PREDICATES = {"EQ": "==", "NE": "!=", "LT": "<", "LE": "<=", "GT": ">", "GE": ">="}


def emit_compare(b: ir.IRBuilder, direction: str, cmp_type: str | None, x: ir.Value, y: ir.Value,
                 ptype: PrimitiveType) -> ir.Value:
    if ptype.is_float:
        if cmp_type == "TOTALORDER":
            return _total_order_compare(b, direction, x, y)
        return b.fcmp_unordered("une", x, y) if direction == "NE" else b.fcmp_ordered(
            _FLOAT_PREDICATES[direction], x, y)
    pred = _INT_PREDICATES[direction]
    if cmp_type == "SIGNED" or (cmp_type is None and ptype.is_signed_int):
        return b.icmp_signed(pred, x, y)
    return b.icmp_unsigned(pred, x, y)


def _total_order_compare(b: ir.IRBuilder, direction: str, x: ir.Value, y: ir.Value) -> ir.Value:
    """-NaN < -inf < ... < -0 < +0 < ... < +inf < +NaN, by comparing sign-magnitude integers."""
    ity = ir.IntType(64 if isinstance(x.type, ir.DoubleType) else 32)

    def key(v: ir.Value) -> ir.Value:
        bits = b.bitcast(v, ity)
        sign_mask = b.ashr(bits, ir.Constant(ity, ity.width - 1))
        return b.xor(bits, b.lshr(sign_mask, ir.Constant(ity, 1)))

    return b.icmp_signed(_INT_PREDICATES[direction], key(x), key(y))


def emit_clamp(b: ir.IRBuilder, lo: ir.Value, x: ir.Value, hi: ir.Value, ptype: PrimitiveType) -> ir.Value:
    """``min(max(x, lo), hi)`` with the maximum/minimum semantics above."""
    return emit_binary(b, "minimum", emit_binary(b, "maximum", x, lo, ptype), hi, ptype)


# ---------------------------------------------------------------------------------------
# Conversions
# ---------------------------------------------------------------------------------------
def emit_convert(b: ir.IRBuilder, x: ir.Value, src: PrimitiveType, dst: PrimitiveType) -> ir.Value:
    dst_ty = compute_type(dst)
    if src is dst:
        return x
    if dst is P.PRED:
        if src.is_float:
            return b.fcmp_unordered("une", x, ir.Constant(x.type, 0.0))
        return b.icmp_unsigned("!=", x, _const_like(x, 0))
    if src is P.PRED:
        return b.uitofp(x, dst_ty) if dst.is_float else b.zext(x, dst_ty)
    if src.is_float and dst.is_float:
        if x.type == dst_ty:
            return round_to_type(b, x, dst)
        widened = b.fpext(x, dst_ty) if isinstance(dst_ty, ir.DoubleType) else b.fptrunc(x, dst_ty)
        return round_to_type(b, widened, dst)
    if dst.is_float:
        value = b.sitofp(x, dst_ty) if src.is_signed_int else b.uitofp(x, dst_ty)
        return round_to_type(b, value, dst)
    if src.is_float:
        return _float_to_int(b, x, dst)
    # int -> int: keep the low bits, or extend by the source's signedness.
    if dst.bit_width < src.bit_width:
        return b.trunc(x, dst_ty)
    if dst.bit_width > src.bit_width:
        return b.sext(x, dst_ty) if src.is_signed_int else b.zext(x, dst_ty)
    return x


def _float_to_int(b: ir.IRBuilder, x: ir.Value, dst: PrimitiveType) -> ir.Value:
    dst_ty = compute_type(dst)
    width = dst.bit_width
    if dst.is_signed_int:
        lo_int, hi_int = -(1 << (width - 1)), (1 << (width - 1)) - 1
        too_big = b.fcmp_ordered("oge", x, ir.Constant(x.type, float(1 << (width - 1))))
        too_small = b.fcmp_ordered("olt", x, ir.Constant(x.type, -float(1 << (width - 1))))
    else:
        lo_int, hi_int = 0, (1 << width) - 1
        too_big = b.fcmp_ordered("oge", x, ir.Constant(x.type, float(1 << width)))
        too_small = b.fcmp_ordered("ole", x, ir.Constant(x.type, -1.0))
    is_nan = b.fcmp_unordered("uno", x, x)
    bad = b.or_(b.or_(too_big, too_small), is_nan)
    safe = b.select(bad, ir.Constant(x.type, 0.0), x)
    value = b.fptosi(safe, dst_ty) if dst.is_signed_int else b.fptoui(safe, dst_ty)
    value = b.select(too_big, ir.Constant(dst_ty, hi_int & ((1 << width) - 1)), value)
    return b.select(too_small, ir.Constant(dst_ty, lo_int & ((1 << width) - 1)), value)


def emit_bitcast_convert(b: ir.IRBuilder, x: ir.Value, src: PrimitiveType, dst: PrimitiveType) -> ir.Value:
    """Reinterpret the bits (same bit width only; width changes are handled by index mapping)."""
    from xla_teach.backends.llvm.ir_types import exact_storage, from_storage, storage_type

    raw = exact_storage(b, x, src)
    if raw.type != storage_type(dst):
        raw = b.bitcast(raw, storage_type(dst))
    return from_storage(b, raw, dst)


_FLOAT_FORMATS = {PrimitiveType.F16: (5, 10), PrimitiveType.BF16: (8, 7), PrimitiveType.F32: (8, 23),
                  PrimitiveType.F64: (11, 52)}


def emit_reduce_precision(b: ir.IRBuilder, x: ir.Value, ptype: PrimitiveType, exponent_bits: int,
                          mantissa_bits: int) -> ir.Value:
    """Round ``x`` to the nearest value (ties to even) of a float format with ``exponent_bits`` /
    ``mantissa_bits`` and back, keeping the target's subnormals; overflow gives +-inf, NaN stays NaN.

    Computed in f64 (exact for every source type): with ``e = max(exponent(x), min_exponent)`` the
    representable neighbours of ``x`` are the multiples of ``q = 2^(e - M)``, so
    ``roundeven(x / q) * q`` is the rounded value -- both scalings are exact powers of two.
    """
    from xla_teach.backends.llvm.math.common import FloatOps

    src_exponent, src_mantissa = _FLOAT_FORMATS[ptype]
    e_bits, m_bits = min(exponent_bits, src_exponent), min(mantissa_bits, src_mantissa)
    if (e_bits, m_bits) == (src_exponent, src_mantissa):
        return x
    d = FloatOps(b, ir.DoubleType())
    v = x if isinstance(x.type, ir.DoubleType) else b.fpext(x, ir.DoubleType())
    max_exponent = 2 ** (e_bits - 1) - 1
    min_exponent = 1 - max_exponent
    biased = b.and_(b.lshr(d.to_bits(v), d.iconst(52)), d.iconst(0x7FF))
    unbiased = b.sub(biased, d.iconst(1023))
    exponent = b.select(b.icmp_signed("<", unbiased, d.iconst(min_exponent)), d.iconst(min_exponent), unbiased)
    quantum = b.sub(exponent, d.iconst(m_bits))
    scaled = d.scale(v, b.neg(quantum))
    rounded = d.roundeven(scaled)
    if m_bits == 0:
        # No mantissa bits: "even" means an even biased exponent; a tie 1.5 * 2^e goes to 2^e or 2^(e+1).
        tie = d.cmp("==", d.fabs(scaled), 1.5)
        parity = b.and_(b.add(exponent, d.iconst(max_exponent)), d.iconst(1))
        target = b.select(b.icmp_signed("==", parity, d.iconst(0)), d.const(1.0), d.const(2.0))
        rounded = b.select(tie, d.copysign(target, scaled), rounded)
    result = d.scale(rounded, quantum)
    max_finite = (2.0 - 2.0 ** -m_bits) * 2.0 ** max_exponent
    result = b.select(d.cmp(">", d.fabs(result), max_finite), d.copysign(d.const(float("inf")), v), result)
    result = b.select(d.is_finite(v), result, v)
    if not isinstance(x.type, ir.DoubleType):
        result = b.fptrunc(result, x.type)
    return round_to_type(b, result, ptype)
