"""Convolution as blocked im2col: a patch matrix built a block of rows at a time, in cache, and
multiplied by the kernel with one BLAS ``gemm`` per block.

A convolution's output element is a dot product between the window of input values it reads
(every kernel offset x every input feature) and one column of the kernel. Stacking those windows
as the rows of a *patch matrix* turns the whole convolution into a matrix product::

    patches[(n, o...), (k..., c)] = input[n, o * stride + k * dilation - pad_low, c]   (0 off the image)
    out[(n, o...), f] = sum over (k..., c) of patches[(n, o...), (k..., c)] * kernel[(k..., c), f]

The kernel already lies as that matrix (``[K..., I, O]`` is ``[(K..., I), O]`` in row-major
order), and so does the output (``[N, O..., F]`` is ``[(N, O...), F]``), so the BLAS writes the
result where it belongs. What costs is the patch matrix itself: for a 3x3 convolution it holds
every input value nine times -- 55 MiB for 8 images of 56x56x64 -- and writing it to memory and
reading it back takes as long as the product. So this kernel never builds all of it. It takes
``block_rows`` output positions at a time (a few hundred: the block is at most 1 MiB, so it
stays in the core's cache), copies their windows into a block on the stack, one contiguous run
of ``C`` features per kernel offset (zeros where the window hangs over the padding), and calls
``gemm`` for that block::

    for each block of rows r0 .. r1:
      for r in r0 .. r1:                       # (n, o...) = unflatten(r)
        for each kernel offset k...:           # one run of C features
          p = o * stride + k * window_dilation - pad_low      (per spatial dimension)
          if every p is on the (base-dilated) image:  copy input[n, p / base_dilation, :]
          else:                                        fill with zeros
      out[r0:r1, :] = block @ kernel            # cblas_sgemm, M = r1 - r0

This is what XLA's CPU runtime does through Eigen's spatial convolution, whose "input mapper"
packs patches in blocks inside its matrix product. No temporary buffer is needed; the product
runs at the speed of a square ``gemm`` because ``K`` (taps x features) is large, and the
CPU's threads take blocks in turn (8x56x56x64, 3x3, to 64 features: 18.9 ms for the whole patch
matrix in memory and one product, 7.9 ms in blocks, XLA 12 ms).

The kernel takes the canonical layout (input ``[N, S..., C]``, kernel ``[K..., I, O]``, output
``[N, O..., F]``, all row-major): the ``conv-canonicalization`` pass puts every other layout
there with transposes and marks the convolution ``"conv_strategy":"im2col_gemm"``.

**Padding and non-finite weights.** Padding cells take no part in a convolution's products: a NaN
or inf weight over one adds nothing, as XLA computes it. In the patch block they are zeros that
``gemm`` multiplies, and ``0 x inf`` is NaN. So a convolution that reads padding (or the holes of
a base dilation) first checks its weights -- ``w - w == 0`` for every weight, one pass over the
kernel, tiny next to the product -- and when one is not finite computes its rows element by
element, exactly as written, instead::

    if every weight is finite:  the blocks above
    else:                       for each row r, feature f:  out[r, f] = the window's sum, skipping padding
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from llvmlite import ir

from xla_teach.backends.cpu.blas import find_blas
from xla_teach.backends.cpu.kernels.dot import call_gemm, flush_denormals
from xla_teach.backends.cpu.kernels.partitions import choose_gemm_partitions
from xla_teach.backends.llvm.ir_array import IrArray, IrIndex, i64, unflatten
from xla_teach.backends.llvm.ir_types import F32, F64, I1, I64, PTR
from xla_teach.backends.llvm.kernel_context import KernelContext, LoopRange
from xla_teach.backends.llvm.loops import (
    VECTOR_BYTES,
    element_bytes,
    for_range,
    load_lanes,
    splat,
    stack_slot,
    vector_loop,
)
from xla_teach.hlo.backend_config import backend_config_field
from xla_teach.hlo.ir import HloInstruction
from xla_teach.hlo.types import PrimitiveType

IM2COL_GEMM = "im2col_gemm"
MAX_BLOCK_ROWS = 256
MAX_BLOCK_BYTES = 1 << 20  # the patch block lives on the stack and in the core's cache


@dataclass(frozen=True)
class ConvGeometry:
    """A canonical convolution's sizes: input ``[batch, *spatial, features]``, kernel
    ``[*taps, features, out_features]``, output ``[batch, *out_spatial, out_features]``."""

    batch: int
    spatial: tuple[int, ...]
    features: int
    taps: tuple[int, ...]
    out_features: int
    out_spatial: tuple[int, ...]
    stride: tuple[int, ...]
    pad_low: tuple[int, ...]
    base_dilation: tuple[int, ...]
    window_dilation: tuple[int, ...]
    is_double: bool

    @property
    def rows(self) -> int:
        return self.batch * math.prod(self.out_spatial)

    @property
    def depth(self) -> int:
        return math.prod(self.taps) * self.features

    @property
    def block_rows(self) -> int:
        row_bytes = self.depth * (8 if self.is_double else 4)
        return max(1, min(MAX_BLOCK_ROWS, MAX_BLOCK_BYTES // max(row_bytes, 1), self.rows))


def is_canonical(conv: HloInstruction) -> bool:
    """Input ``[N, S..., C]``, kernel ``[K..., I, O]``, output ``[N, O..., F]``, row-major."""
    d = conv.attr("dim_labels")
    rank = conv.shape.rank
    spatial = tuple(range(1, rank - 1))
    return (d.input_batch_dimension == 0 and d.input_feature_dimension == rank - 1
            and tuple(d.input_spatial_dimensions) == spatial
            and tuple(d.kernel_spatial_dimensions) == tuple(range(rank - 2))
            and d.kernel_input_feature_dimension == rank - 2 and d.kernel_output_feature_dimension == rank - 1
            and d.output_batch_dimension == 0 and d.output_feature_dimension == rank - 1
            and tuple(d.output_spatial_dimensions) == spatial
            and all(s.has_default_layout() for s in (conv.shape, conv.operand(0).shape, conv.operand(1).shape)))


def im2col_unsupported(conv: HloInstruction) -> str | None:
    """Why this kernel cannot compute ``conv`` in any layout (None: it can, once canonical)."""
    if int(conv.attr("feature_group_count")) != 1 or int(conv.attr("batch_group_count")) != 1:
        return "grouped"
    window = conv.attr("window").dimensions
    if any(d.window_reversal for d in window):
        return "reversed window"
    etype = conv.shape.element_type
    if etype not in (PrimitiveType.F32, PrimitiveType.F64) or any(o.shape.element_type is not etype
                                                                   for o in conv.operands):
        return "not an f32/f64 product"
    if find_blas() is None:
        return "no BLAS library (the scipy-openblas64 package)"
    return None


def conv_strategy(conv: HloInstruction) -> str:
    """The ``conv_strategy`` written into the convolution's backend_config ("" when none)."""
    return backend_config_field(conv, "conv_strategy")


def im2col_geometry(conv: HloInstruction) -> ConvGeometry | None:
    """The geometry when this kernel computes ``conv``: canonical, marked ``im2col_gemm``."""
    if conv.opcode != "convolution" or conv_strategy(conv) != IM2COL_GEMM:
        return None
    if im2col_unsupported(conv) is not None or not is_canonical(conv):
        return None
    x, w = conv.operand(0).shape.dimensions, conv.operand(1).shape.dimensions
    window = conv.attr("window").dimensions
    return ConvGeometry(
        batch=x[0], spatial=tuple(x[1:-1]), features=x[-1], taps=tuple(w[:-2]), out_features=w[-1],
        out_spatial=tuple(conv.shape.dimensions[1:-1]), stride=tuple(d.stride for d in window),
        pad_low=tuple(d.padding_low for d in window), base_dilation=tuple(d.base_dilation for d in window),
        window_dilation=tuple(d.window_dilation for d in window),
        is_double=conv.shape.element_type is PrimitiveType.F64)


def reads_padding(conv: HloInstruction) -> bool:
    """Whether the convolution's windows reach padding cells (padding, or holes of a base dilation)."""
    return any(d.padding_low or d.padding_high or d.base_dilation != 1 for d in conv.attr("window").dimensions)


def _all_finite(b: ir.IRBuilder, base: ir.Value, count: int, fty: ir.Type) -> ir.Value:
    """i1: is every one of ``count`` floats at ``base`` finite? ``x - x`` is 0 for a finite
    ``x`` and NaN for an inf or NaN, so the sum of ``x - x`` over them all is 0 exactly when
    every one is finite (summed a vector at a time, then across the lanes)."""
    lanes = VECTOR_BYTES // element_bytes(fty)
    sums = stack_slot(b, ir.VectorType(fty, lanes), "finite_lanes")
    rest = stack_slot(b, fty, "finite_rest")
    b.store(splat(ir.Constant(fty, 0.0), lanes), sums)
    b.store(ir.Constant(fty, 0.0), rest)

    def add(i: ir.Value, n: int) -> None:
        x = load_lanes(b, base, i, fty, n)
        slot = sums if n > 1 else rest
        b.store(b.fadd(b.load(slot), b.fsub(x, x)), slot)

    vector_loop(b, i64(count), fty, "weight", add)
    total, vector = b.load(rest), b.load(sums)
    for lane in range(lanes):
        total = b.fadd(total, b.extract_element(vector, ir.Constant(ir.IntType(32), lane)))
    return b.fcmp_ordered("==", total, ir.Constant(fty, 0.0))


def _memory_intrinsic(module: ir.Module, name: str, args: list[ir.Type]) -> ir.Function:
    existing = module.globals.get(name)
    if isinstance(existing, ir.Function):
        return existing
    return ir.Function(module, ir.FunctionType(ir.VoidType(), args), name)


def emit_im2col_gemm_kernel(ctx: KernelContext) -> tuple[int, int]:
    """One loop step per block of output rows (module docstring); the CPU's threads share the
    blocks, each with a patch block on its own stack (OpenBLAS runs on the calling thread)."""
    g = im2col_geometry(ctx.instr)
    assert g is not None, f"{ctx.instr.name} is not a canonical im2col_gemm convolution"
    b = ctx.b
    fty = F64 if g.is_double else F32
    blocks = -(-g.rows // g.block_rows)
    if not reads_padding(ctx.instr):
        _emit_blocks(ctx, g)
    else:
        finite = _all_finite(b, ctx.operand_arrays[1].base, math.prod(ctx.instr.operand(1).shape.dimensions), fty)
        with b.if_else(finite) as (blocks_with_gemm, element_by_element):
            with blocks_with_gemm:
                _emit_blocks(ctx, g)
            with element_by_element:
                x, w = (a.base for a in ctx.operand_arrays)
                b.call(_exact_rows_function(ctx, g), [x, w, ctx.output_arrays[0].base, ctx.kb.begin, ctx.kb.end])
    return blocks, choose_gemm_partitions(blocks, g.rows * g.depth * g.out_features)


def _block_rows(b: ir.IRBuilder, blk: ir.Value, g: ConvGeometry) -> tuple[ir.Value, ir.Value]:
    """The first and one-past-last output row of block ``blk``."""
    r0 = b.mul(blk, i64(g.block_rows))
    r1 = b.add(r0, i64(g.block_rows))
    return r0, b.select(b.icmp_signed("<", r1, i64(g.rows)), r1, i64(g.rows))


def _exact_rows_function(ctx: KernelContext, g: ConvGeometry) -> ir.Function:
    """``void <kernel>.exact(x, w, out, begin, end)``: the blocks' rows element by element. A
    path for a rare case (a NaN or inf weight), so LLVM is told not to optimize it (``optnone``,
    ``cold``): optimizing its nest of window loops cost more compile time than the rest together."""
    module = ctx.b.module
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [PTR, PTR, PTR, I64, I64]),
                     f"{ctx.b.function.name}.exact")
    for attribute in ("noinline", "optnone", "cold", "nounwind"):
        fn.attributes.add(attribute)
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    x, w, out, begin, end = fn.args
    operands = [IrArray(base, array.shape) for base, array in zip((x, w), ctx.operand_arrays, strict=True)]
    rows = KernelContext(LoopRange(b, module, begin, end), ctx.instr, operands,
                         [IrArray(out, ctx.output_arrays[0].shape)])
    _emit_exact_rows(rows, g)
    b.ret_void()
    return fn


def _emit_exact_rows(ctx: KernelContext, g: ConvGeometry) -> None:
    """The blocks' rows element by element, by the elemental emitter (windows skip padding)."""
    b = ctx.b
    conv, out = ctx.instr, ctx.output_arrays[0]
    em = ctx.emitter()
    with for_range(b, ctx.kb.end, "block", ctx.kb.begin) as blk:
        r0, r1 = _block_rows(b, blk, g)
        with for_range(b, r1, "row", r0) as r:
            n, *o = unflatten(b, r, [g.batch, *g.out_spatial])
            with for_range(b, i64(g.out_features), "feature") as f:
                index = IrIndex((n, *o, f), conv.shape, b.add(b.mul(r, i64(g.out_features)), f))
                out.store(b, em.value_at(conv, index), index)


def _emit_blocks(ctx: KernelContext, g: ConvGeometry) -> None:
    """The blocked im2col loop of the module docstring."""
    b = ctx.b
    fty, elem = (F64, 8) if g.is_double else (F32, 4)
    depth = g.depth
    run_bytes = i64(g.features * elem)
    memcpy = _memory_intrinsic(b.module, "llvm.memcpy.p0.p0.i64", [PTR, PTR, I64, I1])
    memset = _memory_intrinsic(b.module, "llvm.memset.p0.i64", [PTR, ir.IntType(8), I64, I1])
    no = ir.Constant(I1, 0)
    x_base, w_base = ctx.operand_arrays[0].base, ctx.operand_arrays[1].base
    out_base = ctx.output_arrays[0].base
    patches = stack_slot(b, ir.ArrayType(fty, g.block_rows * depth), "patches")

    def element(base: ir.Value, index: ir.Value) -> ir.Value:
        return b.gep(base, [index], inbounds=True, source_etype=fty)

    with for_range(b, ctx.kb.end, "block", ctx.kb.begin) as blk:
        r0, r1 = _block_rows(b, blk, g)
        with for_range(b, r1, "row", r0) as r:
            n, *o = unflatten(b, r, [g.batch, *g.out_spatial])
            starts = [b.sub(b.mul(oi, i64(s)), i64(p)) for oi, s, p in zip(o, g.stride, g.pad_low, strict=True)]
            row_start = b.mul(b.sub(r, r0), i64(depth))

            def copy_tap(ks: list[ir.Value]) -> None:
                t = ks[0] if ks else i64(0)  # the tap's number: its offset in the row is t * features
                for k, taps in zip(ks[1:], g.taps[1:], strict=True):
                    t = b.add(b.mul(t, i64(taps)), k)
                valid: ir.Value = ir.Constant(I1, 1)
                source = n
                for start, k, size, wd, bd in zip(starts, ks, g.spatial, g.window_dilation, g.base_dilation,
                                                  strict=True):
                    p = b.add(start, b.mul(k, i64(wd)))  # a position on the base-dilated image
                    valid = b.and_(valid, b.icmp_signed(">=", p, i64(0)))
                    valid = b.and_(valid, b.icmp_signed("<=", p, i64((size - 1) * bd)))
                    if bd != 1:
                        valid = b.and_(valid, b.icmp_signed("==", b.srem(p, i64(bd)), i64(0)))
                        p = b.sdiv(p, i64(bd))
                    source = b.add(b.mul(source, i64(size)), b.select(valid, p, i64(0)))
                dst = element(patches, b.add(row_start, b.mul(t, i64(g.features))))
                with b.if_else(valid) as (on_image, off_image):
                    with on_image:
                        b.call(memcpy, [dst, element(x_base, b.mul(source, i64(g.features))), run_bytes, no])
                    with off_image:
                        b.call(memset, [dst, ir.Constant(ir.IntType(8), 0), run_bytes, no])

            def taps(level: int, ks: list[ir.Value]) -> None:
                if level == len(g.taps):
                    copy_tap(ks)
                    return
                # only the innermost tap loop may be unrolled: all nine copies of a 3x3 kernel's
                # tap (memcpy and memset expanded inline) doubled the kernel's compile time
                innermost = level == len(g.taps) - 1
                with for_range(b, i64(g.taps[level]), f"tap{level}", unroll=innermost) as k:
                    taps(level + 1, [*ks, k])

            taps(0, [])
        m = b.sub(r1, r0)
        out_block = element(out_base, b.mul(r0, i64(g.out_features)))
        call_gemm(b, g.is_double, m, i64(g.out_features), i64(depth), patches, i64(depth),
                  w_base, i64(g.out_features), out_block, i64(g.out_features))
        flush_denormals(b, out_block, b.mul(m, i64(g.out_features)), fty)
