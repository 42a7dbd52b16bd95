"""How HLO element types live in LLVM IR: in memory and in registers.

| HLO   | in memory (storage) | in registers (compute) |
|-------|---------------------|------------------------|
| pred  | i8 (0/1, as NumPy)  | i1                     |
| sN/uN | iN                  | iN (signedness is in the ops, not the type) |
| f16   | i16 bit pattern     | float, rounded back to f16 after every op |
| bf16  | i16 bit pattern     | float, rounded back to bf16 after every op |
| f32   | float               | float                  |
| f64   | double              | double                 |

f16 and bf16 are converted with integer arithmetic (round to nearest even),
not with LLVM's ``half`` type, so the same IR works on every CPU and on NVPTX
without library calls.
"""

from __future__ import annotations

from llvmlite import ir

from xla_teach.hlo.types import PrimitiveType

I1, I8, I16, I32, I64 = ir.IntType(1), ir.IntType(8), ir.IntType(16), ir.IntType(32), ir.IntType(64)
F32, F64 = ir.FloatType(), ir.DoubleType()
PTR = ir.PointerType()


class SplatConstant(ir.Constant):
    """A vector constant with the same value in every lane, written as LLVM's ``splat (float 0.5)``
    rather than llvmlite's list of eight, which is longer to print and for LLVM to parse."""

    def _get_reference(self) -> str:
        first = self.constant[0]
        return f"splat ({first.type} {first.get_reference()})"


def constant_like(ty: ir.Type, value: float | int) -> ir.Constant:
    """``value`` as a constant of type ``ty``: in every lane when ``ty`` is a vector."""
    if isinstance(ty, ir.VectorType):
        return SplatConstant(ty, value)  # llvmlite repeats one element constant
    return ir.Constant(ty, value)


def storage_type(ptype: PrimitiveType) -> ir.Type:
    if ptype is PrimitiveType.PRED:
        return I8
    if ptype in (PrimitiveType.F16, PrimitiveType.BF16):
        return I16
    if ptype is PrimitiveType.F32:
        return F32
    if ptype is PrimitiveType.F64:
        return F64
    return ir.IntType(ptype.bit_width)


def compute_type(ptype: PrimitiveType) -> ir.Type:
    if ptype is PrimitiveType.PRED:
        return I1
    if ptype in (PrimitiveType.F16, PrimitiveType.BF16, PrimitiveType.F32):
        return F32
    if ptype is PrimitiveType.F64:
        return F64
    return ir.IntType(ptype.bit_width)


def const(ptype: PrimitiveType, value: float | int | bool) -> ir.Constant:
    """A constant of ``ptype``'s compute type."""
    ty = compute_type(ptype)
    if ptype.is_float:
        return ir.Constant(ty, float(value))
    if ptype is PrimitiveType.PRED:
        return ir.Constant(I1, int(bool(value)))
    width = ptype.bit_width
    return ir.Constant(ty, int(value) & ((1 << width) - 1))


# ---------------------------------------------------------------------------------------
# f16 / bf16 <-> f32 with integer arithmetic
# ---------------------------------------------------------------------------------------
def bf16_bits_to_f32(b: ir.IRBuilder, bits: ir.Value) -> ir.Value:
    return b.bitcast(b.shl(b.zext(bits, I32), ir.Constant(I32, 16)), F32)


def f32_to_bf16_bits(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """Round to nearest even; a NaN becomes the canonical quiet NaN with its sign (``0x7FC0`` or
    ``0xFFC0``), as Eigen's and ml_dtypes' conversions -- and so the interpreter -- make it."""
    bits = b.bitcast(x, I32)
    lsb = b.and_(b.lshr(bits, ir.Constant(I32, 16)), ir.Constant(I32, 1))
    rounded = b.lshr(b.add(bits, b.add(ir.Constant(I32, 0x7FFF), lsb)), ir.Constant(I32, 16))
    is_nan = b.fcmp_unordered("uno", x, x)
    sign = b.and_(b.lshr(bits, ir.Constant(I32, 16)), ir.Constant(I32, 0x8000))
    canonical = b.or_(sign, ir.Constant(I32, 0x7FC0))
    return b.trunc(b.select(is_nan, canonical, rounded), I16)


def f16_bits_to_f32(b: ir.IRBuilder, bits: ir.Value) -> ir.Value:
    """Exact: normal, subnormal, zero, inf and NaN halves."""
    h = b.zext(bits, I32)
    sign = b.shl(b.and_(h, ir.Constant(I32, 0x8000)), ir.Constant(I32, 16))
    exponent = b.and_(b.lshr(h, ir.Constant(I32, 10)), ir.Constant(I32, 0x1F))
    mantissa = b.and_(h, ir.Constant(I32, 0x3FF))
    # Normal numbers: rebias the exponent (15 -> 127) and widen the mantissa.
    normal = b.or_(b.shl(b.add(exponent, ir.Constant(I32, 112)), ir.Constant(I32, 23)),
                   b.shl(mantissa, ir.Constant(I32, 13)))
    # Inf/NaN: all-ones exponent.
    special = b.or_(ir.Constant(I32, 0x7F800000), b.shl(mantissa, ir.Constant(I32, 13)))
    # Subnormals (and zero): mantissa * 2^-24, exact in f32.
    sub = b.fmul(b.uitofp(mantissa, F32), ir.Constant(F32, 2.0**-24))
    sub_bits = b.bitcast(sub, I32)
    is_zero_exp = b.icmp_unsigned("==", exponent, ir.Constant(I32, 0))
    is_max_exp = b.icmp_unsigned("==", exponent, ir.Constant(I32, 0x1F))
    magnitude = b.select(is_zero_exp, sub_bits, b.select(is_max_exp, special, normal))
    return b.bitcast(b.or_(sign, magnitude), F32)


def f32_to_f16_bits(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """Round to nearest even, with overflow to inf, subnormals and NaN."""
    c = lambda v: ir.Constant(I32, v)  # noqa: E731
    bits = b.bitcast(x, I32)
    sign = b.and_(b.lshr(bits, c(16)), c(0x8000))
    absbits = b.and_(bits, c(0x7FFFFFFF))
    absf = b.bitcast(absbits, F32)
    # Normal range: add the rounding bias to the f32 bits, then rebias the exponent.
    lsb = b.and_(b.lshr(absbits, c(13)), c(1))
    rounded = b.add(absbits, b.add(c(0xFFF), lsb))
    normal = b.sub(b.lshr(rounded, c(13)), c(112 << 10))
    # Subnormal halves (|x| < 2^-14): scale so the half mantissa lands in the low bits,
    # letting the FPU round to nearest even: |x| * 2^24 rounded to an integer.
    scaled = b.fmul(absf, ir.Constant(F32, 2.0**24))
    sub = b.fptoui(_round_even(b, scaled), I32)
    is_nan = b.icmp_unsigned(">", absbits, c(0x7F800000))
    too_big = b.icmp_unsigned(">=", absbits, c(0x477FF000))  # rounds to >= 65520 -> inf
    is_sub = b.icmp_unsigned("<", absbits, c(0x38800000))  # < 2^-14
    result = b.select(is_sub, sub, normal)
    result = b.select(too_big, c(0x7C00), result)
    nan = b.or_(c(0x7E00), b.and_(b.lshr(absbits, c(13)), c(0x3FF)))
    result = b.select(is_nan, nan, result)
    return b.trunc(b.or_(sign, result), I16)


def _round_even(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    fn = b.module.declare_intrinsic("llvm.roundeven", [x.type])
    return b.call(fn, [x])


# ---------------------------------------------------------------------------------------
# Loads and stores of one element
# ---------------------------------------------------------------------------------------
def to_storage(b: ir.IRBuilder, value: ir.Value, ptype: PrimitiveType) -> ir.Value:
    if ptype is PrimitiveType.PRED:
        return b.zext(value, I8)
    if ptype is PrimitiveType.F16:
        return f32_to_f16_bits(b, value)
    if ptype is PrimitiveType.BF16:
        return f32_to_bf16_bits(b, value)
    return value


def exact_storage(b: ir.IRBuilder, value: ir.Value, ptype: PrimitiveType) -> ir.Value:
    """The stored bits of an f16/bf16 value held widened in f32, kept exactly -- a NaN's payload
    and quiet bit included -- for ``bitcast-convert``, which reinterprets bits. (The value is
    exactly representable: every f16/bf16 result is rounded to its type when computed, so only
    NaNs would come out differently from :func:`to_storage`, which makes them canonical.)"""
    if ptype is PrimitiveType.BF16:
        return b.trunc(b.lshr(b.bitcast(value, I32), ir.Constant(I32, 16)), I16)
    if ptype is PrimitiveType.F16:
        bits = b.bitcast(value, I32)
        absbits = b.and_(bits, ir.Constant(I32, 0x7FFFFFFF))
        nan = b.or_(b.and_(b.lshr(bits, ir.Constant(I32, 16)), ir.Constant(I32, 0x8000)),
                    b.or_(ir.Constant(I32, 0x7C00), b.and_(b.lshr(absbits, ir.Constant(I32, 13)),
                                                           ir.Constant(I32, 0x3FF))))
        is_nan = b.icmp_unsigned(">", absbits, ir.Constant(I32, 0x7F800000))
        return b.select(is_nan, b.trunc(nan, I16), f32_to_f16_bits(b, value))
    return to_storage(b, value, ptype)


def from_storage(b: ir.IRBuilder, raw: ir.Value, ptype: PrimitiveType) -> ir.Value:
    if ptype is PrimitiveType.PRED:
        return b.icmp_unsigned("!=", raw, ir.Constant(I8, 0))
    if ptype is PrimitiveType.F16:
        return f16_bits_to_f32(b, raw)
    if ptype is PrimitiveType.BF16:
        return bf16_bits_to_f32(b, raw)
    return raw


def round_to_type(b: ir.IRBuilder, value: ir.Value, ptype: PrimitiveType) -> ir.Value:
    """For f16/bf16 computed in f32: round the f32 result to the narrow type and back."""
    if ptype in (PrimitiveType.F16, PrimitiveType.BF16):
        return from_storage(b, to_storage(b, value, ptype), ptype)
    return value


def constant_global_array(module: ir.Module, name: str, element: ir.Type, items: list[ir.Constant],
                          align: int = 16) -> ir.GlobalVariable:
    """A private, read-only array ``name`` in ``module`` (the existing one if already there):
    HLO constants, and tables the math library indexes."""
    if name in module.globals:
        return module.globals[name]
    array_type = ir.ArrayType(element, len(items))
    var = ir.GlobalVariable(module, array_type, name)
    var.global_constant = True
    var.linkage = "private"
    var.initializer = ir.Constant(array_type, items)
    var.align = align
    return var
