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

**One function for every convolution.** None of this depends on the sizes being known when the
code is compiled, and compiling it again for every convolution cost 40 ms of LLVM per convolution
(a program of one convolution took 46 ms to compile, XLA 7 ms: XLA calls Eigen's convolution,
compiled into XLA itself). So it is a function of the CPU runtime library
(``backends/cpu/runtime_library.py``) with every size an argument, one per element type and
number of spatial dimensions, compiled once per process; a convolution's kernel only calls it
with its sizes (:func:`geometry_words`). Run time pays little for sizes it reads from memory: a
block's first row is split into (image, position) by division once, the next rows step the
position on, and the runs of the common feature counts are copied by ``memcpy`` of a constant
size (a few vector moves), chosen by a ``switch``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from llvmlite import ir

from xla_teach.backends.cpu.blas import find_blas
from xla_teach.backends.cpu.kernels.dot import call_gemm, flush_denormals
from xla_teach.backends.cpu.kernels.partitions import choose_gemm_partitions
from xla_teach.backends.cpu.runtime_library import library_function
from xla_teach.backends.llvm.ir_array import i64, unflatten
from xla_teach.backends.llvm.ir_types import F32, F64, I1, I64, PTR, constant_global_array
from xla_teach.backends.llvm.kernel_context import KernelContext
from xla_teach.backends.llvm.loops import (
    VECTOR_BYTES,
    element_bytes,
    for_range,
    load_lanes,
    memory_intrinsic,
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
    row_bytes = patch_row_bytes(conv)
    if row_bytes > MAX_BLOCK_BYTES:
        return f"a patch row ({row_bytes} bytes) larger than a block ({MAX_BLOCK_BYTES} bytes)"
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


def patch_row_bytes(conv: HloInstruction) -> int:
    """Bytes of one row of the patch matrix: every tap of the kernel times every input feature."""
    d = conv.attr("dim_labels")
    kernel = conv.operand(1).shape
    taps = math.prod(kernel.dimensions[k] for k in d.kernel_spatial_dimensions)
    return taps * kernel.dimensions[d.kernel_input_feature_dimension] * conv.shape.element_type.byte_size


# ---- the kernel: a call into the runtime library -----------------------------------------------
def emit_im2col_gemm_kernel(ctx: KernelContext) -> tuple[int, int]:
    """One loop step per block of output rows (module docstring), done by the runtime library's
    convolution for this element type and number of spatial dimensions; the kernel passes the
    sizes (a constant array of :func:`geometry_words`). The CPU's threads share the blocks, each
    with a patch block on its own stack (OpenBLAS runs on the calling thread)."""
    g = im2col_geometry(ctx.instr)
    assert g is not None, f"{ctx.instr.name} is not a canonical im2col_gemm convolution"
    b = ctx.b
    dilated = any(d != 1 for d in g.base_dilation)
    fn = library_function(b.module, library_name(g), LIBRARY_SIGNATURE,
                          lambda f: _build_library_function(f, g.is_double, len(g.spatial), dilated))
    words = [ir.Constant(I64, w) for w in geometry_words(g, reads_padding(ctx.instr))]
    sizes = constant_global_array(b.module, f"{b.function.name}.geometry", I64, words)
    x, w = (a.base for a in ctx.operand_arrays)
    b.call(fn, [x, w, ctx.output_arrays[0].base, ctx.kb.begin, ctx.kb.end, b.bitcast(sizes, PTR)])
    ctx.vector_code = True  # a call: nothing for LLVM to vectorize
    blocks = -(-g.rows // g.block_rows)
    return blocks, choose_gemm_partitions(blocks, g.rows * g.depth * g.out_features)


# ---- the library function ----------------------------------------------------------------------
LIBRARY_SIGNATURE = ir.FunctionType(ir.VoidType(), [PTR, PTR, PTR, I64, I64, PTR])  # x, w, out, begin, end, sizes
HEAD = ("batch", "features", "out_features", "rows", "depth", "block_rows", "reads_padding")
PER_DIMENSION = ("spatial", "taps", "out_spatial", "stride", "pad_low", "base_dilation", "window_dilation")


def library_name(g: ConvGeometry) -> str:
    """One library function per element type, number of spatial dimensions, and whether the input
    is base-dilated (a test per tap that the others need not pay for)."""
    dilated = "_lhs_dilated" if any(d != 1 for d in g.base_dilation) else ""
    return f"xla_teach_conv_im2col_{'f64' if g.is_double else 'f32'}_{len(g.spatial)}d{dilated}"


def geometry_words(g: ConvGeometry, reads: bool) -> list[int]:
    """The sizes the library function reads, in the order of ``HEAD`` then ``PER_DIMENSION`` for each
    spatial dimension."""
    words = [g.batch, g.features, g.out_features, g.rows, g.depth, g.block_rows, int(reads)]
    for i in range(len(g.spatial)):
        words += [g.spatial[i], g.taps[i], g.out_spatial[i], g.stride[i], g.pad_low[i], g.base_dilation[i],
                  g.window_dilation[i]]
    return words


@dataclass
class ConvSizes:
    """The words of :func:`geometry_words`, loaded at run time (``dims``: one dict per spatial dimension)."""

    head: dict[str, ir.Value]
    dims: list[dict[str, ir.Value]]

    def __getattr__(self, name: str) -> ir.Value:
        return self.head[name]

    def each(self, name: str) -> list[ir.Value]:
        return [d[name] for d in self.dims]


def _load_sizes(b: ir.IRBuilder, sizes: ir.Value, rank: int) -> ConvSizes:
    def word(i: int) -> ir.Value:
        return b.load(b.gep(sizes, [i64(i)], inbounds=True, source_etype=I64), typ=I64)

    head = {name: word(i) for i, name in enumerate(HEAD)}
    dims = [{name: word(len(HEAD) + len(PER_DIMENSION) * d + i) for i, name in enumerate(PER_DIMENSION)}
            for d in range(rank)]
    return ConvSizes(head, dims)


def _build_library_function(fn: ir.Function, is_double: bool, rank: int, dilated: bool) -> None:
    """``void f(x, w, out, begin, end, sizes)``: blocks ``begin .. end`` of the convolution whose
    sizes are at ``sizes`` (``rank`` spatial dimensions, base-dilated or not). Weights are checked
    first when the windows read padding (module docstring); a non-finite one sends the rows
    element by element."""
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    x, w, out, begin, end, sizes_ptr = fn.args
    fty = F64 if is_double else F32
    sizes = _load_sizes(b, sizes_ptr, rank)
    exact = stack_slot(b, I1, "exact")
    b.store(ir.Constant(I1, 0), exact)
    with b.if_then(b.icmp_unsigned("!=", sizes.reads_padding, i64(0))):
        b.store(b.not_(_all_finite(b, w, b.mul(sizes.depth, sizes.out_features), fty)), exact)
    with b.if_else(b.load(exact)) as (element_by_element, blocks_with_gemm):
        with element_by_element:
            _emit_exact_rows(b, sizes, x, w, out, begin, end, fty, dilated)
        with blocks_with_gemm:
            _emit_blocks(b, sizes, x, w, out, begin, end, fty, dilated)
    b.ret_void()


def _all_finite(b: ir.IRBuilder, base: ir.Value, count: ir.Value, fty: ir.Type) -> ir.Value:
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

    vector_loop(b, count, fty, "weight", add)
    total, vector = b.load(rest), b.load(sums)
    for lane in range(lanes):
        total = b.fadd(total, b.extract_element(vector, ir.Constant(ir.IntType(32), lane)))
    return b.fcmp_ordered("==", total, ir.Constant(fty, 0.0))


def _block_rows(b: ir.IRBuilder, blk: ir.Value, sizes: ConvSizes) -> tuple[ir.Value, ir.Value]:
    """The first and one-past-last output row of block ``blk``."""
    r0 = b.mul(blk, sizes.block_rows)
    r1 = b.add(r0, sizes.block_rows)
    return r0, b.select(b.icmp_signed("<", r1, sizes.rows), r1, sizes.rows)


def _for_each_tap(b: ir.IRBuilder, sizes: ConvSizes, starts: list[ir.Value], n: ir.Value, dilated: bool,
                  body: Callable[[ir.Value, ir.Value, ir.Value], None]) -> None:
    """``body(t, valid, source)`` for every tap of the kernel: its number ``t`` (row-major over the
    taps), whether its window position is on the image, and that position's pixel number in the
    input (``n``'s image; 0 where not valid)."""
    dims = sizes.dims

    def nest(level: int, ks: list[ir.Value]) -> None:
        if level < len(dims):
            with for_range(b, dims[level]["taps"], f"tap{level}", unroll=False) as k:
                nest(level + 1, [*ks, k])
            return
        t: ir.Value = i64(0)
        valid: ir.Value = ir.Constant(I1, 1)
        source = n
        for start, k, d in zip(starts, ks, dims, strict=True):
            t = b.add(b.mul(t, d["taps"]), k)
            p = b.add(start, b.mul(k, d["window_dilation"]))  # a position on the base-dilated image
            valid = b.and_(valid, b.icmp_signed(">=", p, i64(0)))
            valid = b.and_(valid, b.icmp_signed("<=", p, d["last"]))
            if dilated:
                valid = b.and_(valid, b.icmp_signed("==", b.srem(p, d["base_dilation"]), i64(0)))
                p = b.sdiv(p, d["base_dilation"])
            source = b.add(b.mul(source, d["spatial"]), b.select(valid, p, i64(0)))
        body(t, valid, source)

    for d in dims:  # the last position on the base-dilated image
        d["last"] = b.mul(b.sub(d["spatial"], i64(1)), d["base_dilation"])
    nest(0, [])


def _window_starts(b: ir.IRBuilder, sizes: ConvSizes, o: list[ir.Value]) -> list[ir.Value]:
    return [b.sub(b.mul(oi, d["stride"]), d["pad_low"]) for oi, d in zip(o, sizes.dims, strict=True)]


COMMON_FEATURE_COUNTS = (1, 2, 3, 4, 8, 16, 32, 64, 128, 256, 512)


def _by_run_length(b: ir.IRBuilder, features: ir.Value, run_bytes: ir.Value, elem: int,
                   emit: Callable[[ir.Value], object]) -> None:
    """``emit(nbytes)`` for a copy of one run of ``features`` values, with ``nbytes`` a constant
    for the common feature counts (LLVM expands a ``memcpy`` of known size into a few vector moves;
    one of a size known only at run time is a call into the C library, per tap and row)."""
    after = b.append_basic_block("run.after")
    other = b.append_basic_block("run.other")
    switch = b.switch(features, other)
    for count in COMMON_FEATURE_COUNTS:
        case = b.append_basic_block(f"run.{count}")
        switch.add_case(i64(count), case)
        b.position_at_end(case)
        emit(i64(count * elem))
        b.branch(after)
    b.position_at_end(other)
    emit(run_bytes)
    b.branch(after)
    b.position_at_end(after)


def _emit_blocks(b: ir.IRBuilder, sizes: ConvSizes, x: ir.Value, w: ir.Value, out: ir.Value,
                 begin: ir.Value, end: ir.Value, fty: ir.Type, dilated: bool) -> None:
    """The blocked im2col loop of the module docstring. A block's first row is split into
    (image, output position) once; each next row steps the position on, carrying into the
    next dimension at its end (no division per row)."""
    elem = element_bytes(fty)
    run_bytes = b.mul(sizes.features, i64(elem))
    memcpy = memory_intrinsic(b.module, "llvm.memcpy.p0.p0.i64", [PTR, PTR, I64, I1])
    memset = memory_intrinsic(b.module, "llvm.memset.p0.i64", [PTR, ir.IntType(8), I64, I1])
    no = ir.Constant(I1, 0)
    patches = stack_slot(b, ir.ArrayType(fty, MAX_BLOCK_BYTES // elem), "patches")
    position = [stack_slot(b, I64, f"position{i}") for i in range(len(sizes.dims) + 1)]  # image, out...

    def element(base: ir.Value, index: ir.Value) -> ir.Value:
        return b.gep(base, [index], inbounds=True, source_etype=fty)

    with for_range(b, end, "block", begin) as blk:
        r0, r1 = _block_rows(b, blk, sizes)
        for slot, value in zip(position, unflatten(b, r0, [sizes.batch, *sizes.each("out_spatial")]), strict=True):
            b.store(value, slot)
        with for_range(b, r1, "row", r0) as r:
            n, *o = (b.load(slot) for slot in position)
            row_start = b.mul(b.sub(r, r0), sizes.depth)

            def copy_tap(t: ir.Value, valid: ir.Value, source: ir.Value) -> None:
                dst = element(patches, b.add(row_start, b.mul(t, sizes.features)))
                with b.if_else(valid) as (on_image, off_image):
                    with on_image:
                        src = element(x, b.mul(source, sizes.features))
                        _by_run_length(b, sizes.features, run_bytes, elem,
                                       lambda nbytes: b.call(memcpy, [dst, src, nbytes, no]))
                    with off_image:
                        _by_run_length(b, sizes.features, run_bytes, elem,
                                       lambda nbytes: b.call(memset, [dst, ir.Constant(ir.IntType(8), 0), nbytes, no]))

            _for_each_tap(b, sizes, _window_starts(b, sizes, o), n, dilated, copy_tap)
            carry: ir.Value = i64(1)  # the next row's position
            for slot, value, d in reversed(list(zip(position[1:], o, sizes.dims, strict=True))):
                stepped = b.add(value, carry)
                wraps = b.icmp_signed("==", stepped, d["out_spatial"])
                b.store(b.select(wraps, i64(0), stepped), slot)
                carry = b.zext(wraps, I64)
            b.store(b.add(n, carry), position[0])
        m = b.sub(r1, r0)
        out_block = element(out, b.mul(r0, sizes.out_features))
        call_gemm(b, fty == F64, m, sizes.out_features, sizes.depth, b.bitcast(patches, PTR), sizes.depth,
                  w, sizes.out_features, out_block, sizes.out_features)
        flush_denormals(b, out_block, b.mul(m, sizes.out_features), fty)


def _emit_exact_rows(b: ir.IRBuilder, sizes: ConvSizes, x: ir.Value, w: ir.Value, out: ir.Value,
                     begin: ir.Value, end: ir.Value, fty: ir.Type, dilated: bool) -> None:
    """The blocks' rows element by element: each output is its window's sum over the cells on the
    image only (a NaN or inf weight over padding adds nothing, as XLA computes it)."""
    acc = stack_slot(b, fty, "acc")

    def element(base: ir.Value, index: ir.Value) -> ir.Value:
        return b.load(b.gep(base, [index], inbounds=True, source_etype=fty), typ=fty)

    with for_range(b, end, "block", begin) as blk:
        r0, r1 = _block_rows(b, blk, sizes)
        with for_range(b, r1, "row", r0) as r:
            n, *o = unflatten(b, r, [sizes.batch, *sizes.each("out_spatial")])
            starts = _window_starts(b, sizes, o)
            with for_range(b, sizes.out_features, "feature") as f:
                b.store(ir.Constant(fty, 0.0), acc)

                def add_tap(t: ir.Value, valid: ir.Value, source: ir.Value) -> None:
                    with b.if_then(valid), for_range(b, sizes.features, "channel") as c:
                        xv = element(x, b.add(b.mul(source, sizes.features), c))
                        wv = element(w, b.add(b.mul(b.add(b.mul(t, sizes.features), c), sizes.out_features), f))
                        b.store(b.fadd(b.load(acc), b.fmul(xv, wv)), acc)

                _for_each_tap(b, sizes, starts, n, dilated, add_tap)
                address = b.gep(out, [b.add(b.mul(r, sizes.out_features), f)], inbounds=True, source_etype=fty)
                b.store(b.load(acc), address)
