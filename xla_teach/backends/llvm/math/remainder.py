"""fmod (HLO's ``remainder``) exactly, for targets without a C library: the GPU.

On a CPU LLVM's ``frem`` is a call to libm's ``fmod``. On NVPTX it is expanded as
``x - trunc(x / y) * y``, which is wrong once the quotient needs more digits than the type has
(``fmod(1e30, 3)``) or overflows (a denormal divisor), and for infinities. ``fmod``'s result is
always exactly representable, and the schoolbook way computes it exactly with integers: write
``|x| = mx * 2^ex`` and ``|y| = my * 2^ey`` with integer mantissas of ``M + 1`` bits (a denormal's
mantissa shifted up by its leading zeros, ``ctlz``), then long division, one bit of quotient per
step::

    for (; ex > ey; ex--):  if mx >= my: mx -= my;   mx <<= 1
    if mx >= my: mx -= my
    result = mx * 2^ey, renormalised, with x's sign

At most ``ex - ey`` steps: about 280 for f32, 2100 for f64, only when the quotient is that large.
This is the one function of the library with a loop (the others are straight-line code).
Special cases as C99 says: NaN for x = ±inf, y = ±0 or a NaN operand; ``x`` itself when
``|x| < |y|`` (y = ±inf included); a zero with x's sign when the division is exact.
"""

from __future__ import annotations

from llvmlite import ir

from xla_teach.backends.llvm.math.common import declare_intrinsic


def emit_fmod(b: ir.IRBuilder, x: ir.Value, y: ir.Value) -> ir.Value:
    """``fmod(x, y)`` of two f32 or f64 scalars (f16 and bf16 come here as f32), exactly."""
    ftype = x.type
    width = 64 if isinstance(ftype, ir.DoubleType) else 32
    mantissa = 52 if width == 64 else 23
    itype = ir.IntType(width)

    def const(value: int) -> ir.Constant:
        return ir.Constant(itype, value)

    sign_mask = const(1 << (width - 1))
    inf_bits = const(((1 << (width - mantissa - 1)) - 1) << mantissa)
    implicit = const(1 << mantissa)
    ux, uy = b.bitcast(x, itype), b.bitcast(y, itype)
    sign = b.and_(ux, sign_mask)
    ax, ay = b.and_(ux, b.not_(sign_mask)), b.and_(uy, b.not_(sign_mask))
    ctlz = declare_intrinsic(b.module, "llvm.ctlz", [itype], ir.FunctionType(itype, [itype, ir.IntType(1)]))

    def split(a: ir.Value) -> tuple[ir.Value, ir.Value]:
        """(mantissa with its leading 1 at bit M, unbiased-by-one exponent) of a nonzero |value|."""
        exponent = b.lshr(a, const(mantissa))
        normal_mantissa = b.or_(b.and_(a, b.sub(implicit, const(1))), implicit)
        shift = b.sub(b.call(ctlz, [a, ir.Constant(ir.IntType(1), 0)]), const(width - mantissa - 1))
        shift = b.select(b.icmp_signed(">", shift, const(0)), shift, const(0))
        denormal_mantissa = b.shl(a, shift)
        is_denormal = b.icmp_unsigned("==", exponent, const(0))
        return (b.select(is_denormal, denormal_mantissa, normal_mantissa),
                b.select(is_denormal, b.sub(const(1), shift), exponent))

    mx0, ex0 = split(ax)
    my, ey = split(ay)
    # Inputs whose result is a special case still run the loop (bounded: ex - ey < 2^(width-mantissa-1)
    # + mantissa) on whatever they split into; a select drops what it computed.
    entry = b.block
    header = b.append_basic_block("fmod.header")
    body = b.append_basic_block("fmod.step")
    done = b.append_basic_block("fmod.done")
    b.branch(header)
    b.position_at_end(header)
    mx = b.phi(itype, "fmod.mx")
    ex = b.phi(itype, "fmod.ex")
    mx.add_incoming(mx0, entry)
    ex.add_incoming(ex0, entry)
    b.cbranch(b.icmp_signed(">", ex, ey), body, done)
    b.position_at_end(body)
    difference = b.sub(mx, my)
    reduced = b.select(b.icmp_signed(">=", difference, const(0)), difference, mx)
    mx.add_incoming(b.shl(reduced, const(1)), body)
    ex.add_incoming(b.sub(ex, const(1)), body)
    b.branch(header)
    b.position_at_end(done)
    difference = b.sub(mx, my)
    rest = b.select(b.icmp_signed(">=", difference, const(0)), difference, mx)
    # Renormalise: bring the leading 1 back to bit M (rest < 2^(M+1), so only left shifts).
    lead = b.sub(b.call(ctlz, [rest, ir.Constant(ir.IntType(1), 0)]), const(width - mantissa - 1))
    lead = b.select(b.icmp_signed(">", lead, const(0)), lead, const(0))
    normalised = b.shl(rest, b.select(b.icmp_unsigned("<", lead, const(width)), lead, const(0)))
    exponent = b.sub(ey, lead)
    as_normal = b.or_(b.sub(normalised, implicit), b.shl(exponent, const(mantissa)))
    down = b.sub(const(1), exponent)  # a denormal result: shift the mantissa down instead
    as_denormal = b.lshr(normalised, b.select(b.icmp_unsigned("<", down, const(width)), down, const(width - 1)))
    magnitude = b.select(b.icmp_signed(">", exponent, const(0)), as_normal, as_denormal)
    magnitude = b.select(b.icmp_unsigned("==", rest, const(0)), const(0), magnitude)
    result = b.bitcast(b.or_(magnitude, sign), ftype)
    nan = b.bitcast(b.or_(inf_bits, const(1 << (mantissa - 1))), ftype)
    invalid = b.or_(b.or_(b.icmp_unsigned(">=", ax, inf_bits), b.icmp_unsigned(">", ay, inf_bits)),
                    b.icmp_unsigned("==", ay, const(0)))
    smaller = b.icmp_unsigned("<", ax, ay)
    return b.select(invalid, nan, b.select(smaller, x, result))
