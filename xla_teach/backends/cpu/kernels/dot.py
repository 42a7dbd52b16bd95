"""Dot kernels: a BLAS call for large products, emitted loops for small ones.

The strategy is chosen before code generation (pass ``dot-strategy``) and is
written into the dot's ``backend_config`` so the optimized HLO shows it:

* ``"blas"`` -- one ``cblas_sgemm``/``cblas_dgemm`` call per batch into NumPy's
  OpenBLAS, with the transposes folded into the call's ``Trans`` flags;
* ``"loops"`` -- a tiled i-k-j loop nest: blocks of ``TILE_I`` rows x ``TILE_J`` columns
  x ``TILE_K`` of the contraction, so a block of the right operand stays in cache while
  it is reused for every row of the block; inside a block the j loop walks contiguous rows
  of the right operand and the output, so it vectorizes. Split across threads by rows;
* ``"elemental"`` -- one inner-product loop per output element (any dimension
  numbers, f16/bf16 accumulated in f32).

An output fusion (``kOutput``: dot + bias + relu ...) first writes the product
into the output buffer, then applies the epilogue in place, element by element.
"""

from __future__ import annotations

import math

from llvmlite import ir

from xla_teach.backends.cpu.blas import CBLAS_NO_TRANS, CBLAS_ROW_MAJOR, CBLAS_TRANS, find_blas
from xla_teach.backends.cpu.kernels.loop import emit_loop_kernel
from xla_teach.backends.cpu.kernels.partitions import choose_gemm_partitions, choose_partitions
from xla_teach.backends.cpu.runtime_library import library_function
from xla_teach.backends.llvm import elemental_ops as ops
from xla_teach.backends.llvm.elemental_emitter import ElementalEmitter, delinearize_physical
from xla_teach.backends.llvm.elemental_windows import dot_index_maps
from xla_teach.backends.llvm.gemm import StridedGemm, find_dot, gemm_shape, strided_gemm
from xla_teach.backends.llvm.ir_array import IrArray, IrIndex, i64, linearize, unflatten
from xla_teach.backends.llvm.ir_types import F32, F64, I32, I64, PTR, compute_type
from xla_teach.backends.llvm.kernel_context import KernelContext, operand_loader
from xla_teach.backends.llvm.loops import (
    VECTOR_BYTES,
    copy_bytes,
    element_bytes,
    for_each_index,
    for_range,
    load_lanes,
    splat,
    store_lanes,
    vector_loop,
)
from xla_teach.hlo.backend_config import backend_config_field
from xla_teach.hlo.ir import HloInstruction
from xla_teach.hlo.types import PrimitiveType
from xla_teach.passes.scheduling.in_place import dot_addend_parameter

BLAS_MIN_FLOPS = 48**3  # below this, emitted loops beat the call overhead
SPLIT_COLUMNS_BELOW_ROWS = 64  # a product with fewer rows (and more columns) is split by columns
TILE_I, TILE_J, TILE_K = 8, 256, 128  # loop tiles: a TILE_K x TILE_J block of B is 128 KiB in f32


def choose_dot_strategy(dot: HloInstruction) -> str:
    return explain_dot_strategy(dot)[0]


def explain_dot_strategy(dot: HloInstruction) -> tuple[str, str]:
    """``(strategy, why)``: the choice of :func:`choose_dot_strategy` and its reason, which the
    ``dot-strategy`` pass writes into its notes."""
    etype = dot.shape.element_type
    if not all(op.shape.element_type is etype for op in dot.operands):
        return "elemental", "one inner product per element: the operands have another element type"
    contracted = math.prod(dot.operand(0).shape.dimensions[d] for d in dot.attr("lhs_contracting_dims"))
    flops = dot.shape.element_count() * contracted
    view = strided_gemm(dot)
    blas_type = etype in (PrimitiveType.F32, PrimitiveType.F64)
    if blas_type and view is not None and flops >= BLAS_MIN_FLOPS and find_blas() is not None:
        return "blas", _describe_gemm(view)
    if not blas_type:
        why_not_blas = f"BLAS has no {etype.name.lower()} product"
    elif view is None:
        why_not_blas = "no grouping of its dimensions is a matrix in memory"
    elif flops < BLAS_MIN_FLOPS:
        why_not_blas = f"{flops} multiply-adds, under the {BLAS_MIN_FLOPS} that pay for a BLAS call"
    else:
        why_not_blas = "no BLAS library was found"
    gemm = gemm_shape(dot)
    if gemm is not None and gemm.batch == 1 and etype not in (PrimitiveType.F16, PrimitiveType.BF16,
                                                                PrimitiveType.PRED):
        return "loops", f"a {gemm.m}x{gemm.k} @ {gemm.k}x{gemm.n} product in tiled loops ({why_not_blas})"
    return "elemental", f"one inner product per element ({why_not_blas})"


def _describe_gemm(view: StridedGemm) -> str:
    """``"one gemm 1024x256 @ 256x1024 (rows of lhs [8,128] folded by layout), B transposed in the call"``."""
    product = f"{view.m}x{view.k} @ {view.k}x{view.n}"
    calls = view.batch * view.summed
    text = f"{calls} gemms {product}" if calls > 1 or view.batch_sizes else f"one gemm {product}"
    if view.collapsed:
        text += f" ({'; '.join(view.collapsed)} folded by layout)"
    if view.looped:
        text += f" (looping over {'; '.join(view.looped)}" + (
            f", {view.summed} products added into each result" if view.sum_sizes else "") + ")"
    transposed = [name for name, t in (("A", view.trans_a), ("B", view.trans_b)) if t]
    if transposed:
        text += f", {' and '.join(transposed)} transposed in the call"
    # A matrix's stored rows are as long as its columns (op(A) = A) or its rows (op(A) = A^T).
    strided = [name for name, ld, width in (("A", view.lda, view.m if view.trans_a else view.k),
                                            ("B", view.ldb, view.k if view.trans_b else view.n)) if ld > width]
    if strided:
        text += f", {' and '.join(strided)} read with a row stride"
    return text


def dot_strategy(dot: HloInstruction) -> str:
    return backend_config_field(dot, "dot_strategy") or choose_dot_strategy(dot)


def emit_dot_kernel(ctx: KernelContext) -> tuple[int, int]:
    dot = find_dot(ctx)
    assert dot is not None
    strategy = dot_strategy(dot)
    view = strided_gemm(dot) if strategy == "blas" and find_blas() is not None else None
    gemm = gemm_shape(dot) if strategy == "loops" else None
    # A strategy written by hand (or before a later pass changed a layout) that the dot cannot take
    # falls back to the element loop rather than failing.
    if view is None and (gemm is None or gemm.batch != 1):
        return emit_loop_kernel(ctx)
    out = ctx.output_arrays[0]
    # The product is written in the dot's own shape; an epilogue may end in a bitcast to another
    # (XLA's fusions do: f32[1024,768] dot, bitcast to f32[8,128,768]) over the same bytes.
    product = out if tuple(out.shape.dimensions) == tuple(dot.shape.dimensions) else IrArray(out.base, dot.shape)
    epilogue = _epilogue_emitter(ctx, dot, product) if ctx.hero() is not dot else None
    addend = dot_addend_parameter(ctx.instr)
    if view is not None and addend is not None and product is out and view.batch * view.summed * view.m * view.n * \
            view.k > 0:
        # add(acc, dot): acc's bytes in the output (unless it is acc's own buffer), then gemm
        # with beta = 1 adds the product to them -- no epilogue pass over the output
        ctx.vector_code = True
        return _emit_blas(ctx, dot, view, out, None, ctx.operand_arrays[addend])
    if view is not None:
        ctx.vector_code = epilogue is None  # calls only, or an epilogue loop for LLVM to vectorize
        return _emit_blas(ctx, dot, view, out, epilogue)
    return _emit_ikj(ctx, dot, ctx.emitter(), product, epilogue, out)


def _epilogue_index(b: ir.IRBuilder, at: IrIndex, out: IrArray) -> IrIndex:
    """The index in the fusion's result of the element the dot computes at ``at``: the same one
    when the epilogue keeps the dot's shape, else the element at the same position in memory (the
    epilogue's shape changes are bitcasts)."""
    if tuple(out.shape.dimensions) == tuple(at.shape.dimensions):
        return IrIndex(at.dims, out.shape)
    position = linearize(b, at)
    return IrIndex(delinearize_physical(b, position, out.shape).dims, out.shape, position)


def _operand_pointer(ctx: KernelContext, dot: HloInstruction, i: int) -> ir.Value:
    operand = dot.operand(i)
    if ctx.instr.opcode == "fusion":
        assert operand.opcode == "parameter", "BLAS dots read fusion parameters directly"
        return ctx.operand_arrays[operand.parameter_number].base
    return ctx.operand_arrays[i].base


def _emit_blas(ctx: KernelContext, dot: HloInstruction, view: StridedGemm, out: IrArray,
               epilogue: ElementalEmitter | None, addend: IrArray | None = None) -> tuple[int, int]:
    """One ``gemm`` per batch index, or -- for a single product -- on the rows ``begin .. end`` of
    the output, so that the CPU's threads split a product between them (OpenBLAS itself runs one
    thread: see ``blas.py``). A fused epilogue then runs over the same rows.

    The operands are the :func:`strided_gemm` view of the dot: ``x @ W`` on ``f32[8,128,256]``
    activations is one product of 1024 rows, and attention's ``bqhd x bkhd`` reads each (b, h)
    matrix with a row stride of ``h * d`` elements -- no copy either way.

    ``addend``: the result is ``addend + dot`` (:func:`dot_addend_parameter`): each part first
    copies its rows of ``addend`` into the output when the two are different buffers, and the
    gemms add into them (``beta = 1``)."""
    b = ctx.b
    is_double = dot.shape.element_type is PrimitiveType.F64
    fty = F64 if is_double else F32
    a_ptr, b_ptr = _operand_pointer(ctx, dot, 0), _operand_pointer(ctx, dot, 1)
    flops = view.batch * view.summed * view.m * view.n * view.k
    if flops == 0:
        _zero_fill(ctx, out)
        return 1, 1

    def element(base: ir.Value, offset: ir.Value) -> ir.Value:
        return b.gep(base, [offset], inbounds=True, source_etype=fty)

    one = ir.Constant(fty, 1.0) if addend is not None else None

    def gemm(rows: ir.Value, a: ir.Value, bm: ir.Value, c: ir.Value, cols: ir.Value | None = None) -> None:
        if addend is not None:  # the block of C this call writes starts as the addend's
            _copy_rows_unless_same(b, addend.base, out.base, c, rows, view.n if cols is None else cols, view.ldc, fty)
        cols = cols if cols is not None else i64(view.n)
        if not view.sum_sizes:
            call_gemm(b, is_double, rows, cols, i64(view.k), a, i64(view.lda), bm, i64(view.ldb), c,
                      i64(view.ldc), trans_a=view.trans_a, trans_b=view.trans_b, beta=one)
        else:  # contracted dimensions memory does not fold into k: add the products up (beta 1 after the first)
            with for_range(b, i64(view.summed), "sum") as si:
                where = unflatten(b, si, list(view.sum_sizes))
                beta = one if one is not None else b.select(
                    b.icmp_signed("==", si, i64(0)), ir.Constant(fty, 0.0), ir.Constant(fty, 1.0))
                call_gemm(b, is_double, rows, cols, i64(view.k),
                          element(a, _offset(b, where, view.a.sum_strides)), i64(view.lda),
                          element(bm, _offset(b, where, view.b.sum_strides)), i64(view.ldb), c, i64(view.ldc),
                          trans_a=view.trans_a, trans_b=view.trans_b, beta=beta)
        _flush_rows(b, c, rows, cols, view.ldc, fty)

    begin, end = ctx.kb.begin, ctx.kb.end
    if (not view.batch_sizes and epilogue is None
            and view.m < SPLIT_COLUMNS_BELOW_ROWS <= view.n):
        # Few rows, many columns (an RNN step's 32 x 1024 gates): the threads split the columns, so
        # each reads only its part of B -- splitting 32 rows would have both read all of it. With
        # an addend each thread first copies its columns of it (when it is another buffer).
        gemm(i64(view.m), a_ptr, element(b_ptr, b.mul(begin, i64(view.b.col_stride))),
             element(out.base, b.mul(begin, i64(view.c.col_stride))), cols=b.sub(end, begin))
        return view.n, choose_gemm_partitions(view.n // 64, flops)
    if not view.batch_sizes:
        # Rows begin .. end of op(A) and of C (of a transposed A they are its columns).
        gemm(b.sub(end, begin), element(a_ptr, b.mul(begin, i64(view.a.row_stride))), b_ptr,
             element(out.base, b.mul(begin, i64(view.c.row_stride))))
        if epilogue is not None:
            _run_epilogue_rows(ctx, dot, out, epilogue, begin, end)
        return view.m, choose_gemm_partitions(view.m, flops)
    with for_range(b, end, "batch", begin) as bi:
        index = unflatten(b, bi, list(view.batch_sizes))
        gemm(i64(view.m), element(a_ptr, _offset(b, index, view.a.batch_strides)),
             element(b_ptr, _offset(b, index, view.b.batch_strides)),
             element(out.base, _offset(b, index, view.c.batch_strides)))
    if epilogue is not None:  # an epilogue over whole batches: one partition
        root = ctx.hero()
        for_each_index(b, out.shape, lambda index: out.store(b, epilogue.value_at(root, index), index), "epilogue")
        return view.batch, 1
    return view.batch, choose_gemm_partitions(view.batch, flops)


def _copy_rows_unless_same(b: ir.IRBuilder, source_base: ir.Value, out_base: ir.Value, c: ir.Value, rows: ir.Value,
                           n: int | ir.Value, ldc: int, fty: ir.Type) -> None:
    """Copy the ``rows x n`` block at ``c`` (in the output; ``n`` columns, a number or -- for a
    thread's share of the columns -- a value) from the same place in the addend's buffer, unless
    the output is that buffer (the fusion runs in place)."""
    size = 8 if fty == F64 else 4
    differ = b.icmp_unsigned("!=", b.ptrtoint(source_base, I64), b.ptrtoint(out_base, I64))
    with b.if_then(differ):
        offset = b.sub(b.ptrtoint(c, I64), b.ptrtoint(out_base, I64))  # bytes from the output's start
        source = b.gep(source_base, [offset], inbounds=True, source_etype=ir.IntType(8))
        if isinstance(n, int) and ldc == n:
            copy_bytes(b, c, source, b.mul(rows, i64(n * size)))
        else:
            width = i64(n * size) if isinstance(n, int) else b.mul(n, i64(size))
            with for_range(b, rows, "addend_row") as r:
                step = b.mul(r, i64(ldc * size))
                copy_bytes(b, b.gep(c, [step], inbounds=True, source_etype=ir.IntType(8)),
                           b.gep(source, [step], inbounds=True, source_etype=ir.IntType(8)), width)


def _offset(b: ir.IRBuilder, index: list[ir.Value], strides: tuple[int, ...]) -> ir.Value:
    """Elements from the base to ``index`` along dimensions of ``strides`` (a stride 0 for a
    dimension the operand does not have)."""
    total: ir.Value = i64(0)
    for i, stride in zip(index, strides, strict=True):
        if stride:
            total = b.add(total, b.mul(i, i64(stride)))
    return total


def _flush_rows(b: ir.IRBuilder, c: ir.Value, rows: ir.Value, n: ir.Value, ldc: int, fty: ir.Type) -> None:
    """Flush the denormals of the ``rows x n`` product just written at ``c``: one run of
    ``rows * n`` floats when its rows are adjacent, else row by row (never the gaps between rows,
    which may be another thread's results)."""
    if isinstance(n, ir.Constant) and n.constant == ldc:
        flush_denormals(b, c, b.mul(rows, n), fty)
        return
    with for_range(b, rows, "flush_row") as r:
        flush_denormals(b, b.gep(c, [b.mul(r, i64(ldc))], inbounds=True, source_etype=fty), n, fty)


def _run_epilogue_rows(ctx: KernelContext, dot: HloInstruction, out: IrArray, epilogue: ElementalEmitter,
                       begin: ir.Value, end: ir.Value) -> None:
    """The fused epilogue over rows ``begin .. end`` of the product, each row taken back to the
    output's own dimensions (the lhs free dimensions, then the rhs free dimensions)."""
    b = ctx.b
    _, _, lf, _, _, rf = dot_index_maps(dot)
    row_sizes = [dot.operand(0).shape.dimensions[d] for d in lf]
    col_sizes = [dot.operand(1).shape.dimensions[d] for d in rf]
    root = ctx.hero()
    with for_range(b, end, "epilogue.row", begin) as i:
        rows = unflatten(b, i, row_sizes)
        with for_range(b, i64(math.prod(col_sizes)), "epilogue.col") as j:
            index = _epilogue_index(b, IrIndex(tuple(rows + unflatten(b, j, col_sizes)), dot.shape), out)
            out.store(b, epilogue.value_at(root, index), index)


def call_gemm(b: ir.IRBuilder, is_double: bool, m: ir.Value, n: ir.Value, k: ir.Value, a: ir.Value, lda: ir.Value,
              bmat: ir.Value, ldb: ir.Value, c: ir.Value, ldc: ir.Value, *, trans_a: bool = False,
              trans_b: bool = False, beta: ir.Value | None = None) -> None:
    """Emit ``C = op(A) @ op(B) + beta C`` as one row-major ``cblas_sgemm``/``cblas_dgemm`` call
    (sizes and leading dimensions are i64 values; alpha 1, beta 0 unless given)."""
    blas = find_blas()
    assert blas is not None
    fty = F64 if is_double else F32
    ity = I64 if blas.int_bits == 64 else I32
    name = blas.dgemm if is_double else blas.sgemm
    fnty = ir.FunctionType(ir.VoidType(), [I32, I32, I32, ity, ity, ity, fty, PTR, ity, PTR, ity, fty, PTR, ity])
    fn = b.module.globals.get(name) or ir.Function(b.module, fnty, name)

    def size(v: ir.Value) -> ir.Value:
        return v if ity == I64 else b.trunc(v, ity)

    b.call(fn, [ir.Constant(I32, CBLAS_ROW_MAJOR), ir.Constant(I32, CBLAS_TRANS if trans_a else CBLAS_NO_TRANS),
                ir.Constant(I32, CBLAS_TRANS if trans_b else CBLAS_NO_TRANS), size(m), size(n), size(k),
                ir.Constant(fty, 1.0), a, size(lda), bmat, size(ldb), beta if beta is not None else
                ir.Constant(fty, 0.0), c, size(ldc)])


def flush_denormals(b: ir.IRBuilder, base: ir.Value, count: ir.Value, fty: ir.Type) -> None:
    """Multiply ``count`` floats at ``base`` by 1.0 on the calling thread: a call to the runtime
    library's ``xla_teach_flush_denormals_f32`` (or ``_f64``), compiled once per process.

    OpenBLAS computes part of a large product on threads of its own, created when it was
    loaded, whose control register does not flush denormals. A multiply by 1.0 gives each
    result the caller's mode: a denormal becomes ``±0`` while the run flushes denormals (as XLA's
    CPU runtime does) and stays as it is otherwise. The loop is the same after every BLAS call,
    so it is a library function (``backends/cpu/runtime_library.py``) rather than code that LLVM
    optimizes again in every kernel (two of attention's 24 ms of LLVM time).
    """
    suffix = "f64" if fty == F64 else "f32"
    fn = library_function(b.module, f"xla_teach_flush_denormals_{suffix}", FLUSH_SIGNATURE,
                          lambda f: _build_flush_denormals(f, fty))
    b.call(fn, [base, count])


FLUSH_SIGNATURE = ir.FunctionType(ir.VoidType(), [PTR, I64])


def _build_flush_denormals(fn: ir.Function, fty: ir.Type) -> None:
    """``void f(float *base, i64 count)``: ``base[i] *= 1.0`` for every ``i < count``. LLVM would
    delete ``x * 1.0``, so the 1.0 comes through an empty inline ``asm`` that LLVM cannot see
    through (the multiply stays, and vectorizes). ``llvm.canonicalize`` means the same, but this
    LLVM cannot select it for every vector width. The loop is written with vectors already
    (:func:`vector_loop`)."""
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    base, count = fn.args
    ity = ir.IntType(64 if fty == F64 else 32)
    opaque = ir.InlineAsm(ir.FunctionType(ity, [ity]), "", "=r,0", side_effect=False)
    one_bits = 0x3FF0000000000000 if fty == F64 else 0x3F800000
    one = b.bitcast(b.call(opaque, [ir.Constant(ity, one_bits)]), fty)
    ones = splat(one, VECTOR_BYTES // element_bytes(fty), b)

    def scale(i: ir.Value, lanes: int) -> None:
        x = load_lanes(b, base, i, fty, lanes)
        store_lanes(b, b.fmul(x, ones if lanes > 1 else one), base, i, fty)

    vector_loop(b, count, fty, "ftz", scale)
    b.ret_void()


def _zero_fill(ctx: KernelContext, out: IrArray) -> None:
    zero = ir.Constant(compute_type(out.shape.element_type), 0)
    for_each_index(ctx.b, out.shape, lambda index: out.store(ctx.b, zero, index), "zero")


def _emit_ikj(ctx: KernelContext, dot: HloInstruction, em: ElementalEmitter, out: IrArray,
              epilogue: ElementalEmitter | None, result: IrArray) -> tuple[int, int]:
    """out[i, j] = sum_k A[i, k] * B[k, j] with j innermost (one GEMM, no batch); a fused
    epilogue is applied to each finished row, inside the thread's own rows, into ``result`` (the
    fusion's result: ``out`` itself, or the same bytes in the shape the epilogue bitcasts to)."""
    gemm = gemm_shape(dot)
    assert gemm is not None and gemm.batch == 1
    b = ctx.b
    lhs, rhs = dot.operand(0), dot.operand(1)
    lb, lc, lf, _, rc, rf = dot_index_maps(dot)
    etype = dot.shape.element_type
    zero = ir.Constant(compute_type(etype), 0)

    def lhs_at(i: ir.Value, k: ir.Value) -> ir.Value:
        index = [i64(0)] * lhs.shape.rank
        index[lc[0]] = k
        if lf:
            index[lf[0]] = i
        return em.value_at(lhs, IrIndex(tuple(index), lhs.shape))

    def rhs_at(k: ir.Value, j: ir.Value) -> ir.Value:
        index = [i64(0)] * rhs.shape.rank
        index[rc[0]] = k
        if rf:
            index[rf[0]] = j
        return em.value_at(rhs, IrIndex(tuple(index), rhs.shape))

    def out_index(i: ir.Value, j: ir.Value) -> IrIndex:
        # Batch dimensions come first in a dot's result; here they all have size 1.
        dims = [i64(0)] * len(lb) + ([i] if lf else []) + ([j] if rf else [])
        return IrIndex(tuple(dims), out.shape)

    def tile_end(start: ir.Value, size: int, stop: ir.Value) -> ir.Value:
        end = b.add(start, i64(size))
        return b.select(b.icmp_signed("<", end, stop), end, stop)

    def tiles(start: ir.Value, stop: ir.Value, size: int, name: str):  # type: ignore[no-untyped-def]
        """``for (t = start; t < stop; t += size)`` as a loop over tile numbers."""
        count = b.sdiv(b.add(b.sub(stop, start), i64(size - 1)), i64(size))
        return _TileLoop(b, start, count, size, name)

    n, k_total = i64(gemm.n), i64(gemm.k)
    with tiles(ctx.kb.begin, ctx.kb.end, TILE_I, "it") as i0:
        i1 = tile_end(i0, TILE_I, ctx.kb.end)
        with for_range(b, i1, "iz", i0) as i:
            with for_range(b, n, "j0") as j:
                out.store(b, zero, out_index(i, j))
        with tiles(i64(0), n, TILE_J, "jt") as j0:
            j1 = tile_end(j0, TILE_J, n)
            with tiles(i64(0), k_total, TILE_K, "kt") as k0:  # k tiles in order: the same sums as untiled
                k1 = tile_end(k0, TILE_K, k_total)
                with for_range(b, i1, "i", i0) as i:
                    with for_range(b, k1, "k", k0) as k:
                        a = lhs_at(i, k)
                        with for_range(b, j1, "j", j0) as j:
                            acc = out.load(b, out_index(i, j))
                            product = ops.emit_binary(b, "multiply", a, rhs_at(k, j), etype)
                            out.store(b, ops.emit_binary(b, "add", acc, product, etype), out_index(i, j))
        if epilogue is not None:
            root = ctx.hero()
            with for_range(b, i1, "ie", i0) as i:
                with for_range(b, n, "je") as j:
                    index = _epilogue_index(b, out_index(i, j), result)
                    result.store(b, epilogue.value_at(root, index), index)
    return gemm.m, choose_partitions(gemm.m, gemm.m * gemm.n * gemm.k)


class _TileLoop:
    """A counted loop over ``count`` tiles; the body sees each tile's start ``first + t * size``."""

    def __init__(self, b: ir.IRBuilder, first: ir.Value, count: ir.Value, size: int, name: str) -> None:
        self.b, self.first, self.count, self.size, self.name = b, first, count, size, name

    def __enter__(self) -> ir.Value:
        self._loop = for_range(self.b, self.count, self.name)
        t = self._loop.__enter__()
        return self.b.add(self.first, self.b.mul(t, i64(self.size)))

    def __exit__(self, *exc: object) -> None:
        self._loop.__exit__(*exc)


def _epilogue_emitter(ctx: KernelContext, dot: HloInstruction, out: IrArray) -> ElementalEmitter:
    """Generators for the fused epilogue, reading the dot's value back from ``out``."""
    gens = {}
    for param in ctx.instr.fused_computation.parameter_instructions:
        gens[param.unique_id] = operand_loader(ctx, ctx.operand_arrays[param.parameter_number])
    gens[dot.unique_id] = operand_loader(ctx, out)
    return ElementalEmitter(ctx.b, gens)
