"""Elemental generators that loop: reduce, reduce-window, dot, convolution, map,
gather, bitcast-convert across widths, and tuple plumbing inside fusions (each registered
with ``@generates``, in the elemental emitter's one table).

"The value at index i" of a reduction is itself a loop over the reduced
elements, accumulating with the reducer computation emitted inline. The same
holds for a window of reduce-window, the contracting dimensions of a dot, and
the kernel window of a convolution. These generators are the general (and
obviously correct) lowering; the kernel emitters add faster strategies (row and
column reductions, tiled or BLAS dots) where the shape allows.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable

from llvmlite import ir

from xla_teach.backends.llvm import elemental_ops as ops
from xla_teach.backends.llvm.elemental_emitter import (
    ElementalEmitter,
    Generator,
    clamp_index,
    generates,
    widen_index,
)
from xla_teach.backends.llvm.ir_array import IrIndex, i64
from xla_teach.backends.llvm.ir_types import I1, compute_type, storage_type
from xla_teach.backends.llvm.loops import for_range, stack_slot, unroll_level
from xla_teach.backends.llvm.scalar_computation import emit_scalar_computation
from xla_teach.hlo.ir import HloInstruction
from xla_teach.hlo.types import PrimitiveType


def loop_nest(b: ir.IRBuilder, sizes: list[int], name: str, body: Callable[[list[ir.Value]], None],
              unroll: bool = True, accumulates: bool = False) -> None:
    """Nested counted loops over ``sizes`` (outermost first); ``unroll=False`` asks LLVM to unroll
    none of them -- and, for a loop that ``accumulates`` and is long enough, to vectorize the
    innermost with interleaved vectors (``for_range(interleave=True)``)."""
    values: list[ir.Value] = []

    def nest(level: int) -> None:
        if level == len(sizes):
            body(values)
            return
        may_unroll = unroll and unroll_level(sizes, level)
        innermost = level == len(sizes) - 1
        interleave = accumulates and not unroll and innermost and sizes[level] >= INTERLEAVED_LOOP_SIZE
        with for_range(b, i64(sizes[level]), f"{name}{level}", unroll=may_unroll, interleave=interleave) as i:
            values.append(i)
            nest(level + 1)
            values.pop()

    if all(s > 0 for s in sizes):
        nest(0)


def _accumulators(em: ElementalEmitter, inits: list[ir.Value], name: str) -> list[ir.AllocaInstr]:
    slots = []
    for k, value in enumerate(inits):
        slot = stack_slot(em.b, value.type, f"{name}.acc{k}")
        em.b.store(value, slot)
        slots.append(slot)
    return slots


def _scalar(em: ElementalEmitter, instr: HloInstruction) -> ir.Value:
    return em.value_at(instr, IrIndex.scalar(instr.shape))


# ---------------------------------------------------------------------------------------
# reduce
# ---------------------------------------------------------------------------------------
@generates("reduce")
def reduce_generator(em: ElementalEmitter, instr: HloInstruction) -> Generator:
    n = instr.operand_count // 2
    inputs, inits = instr.operands[:n], instr.operands[n:]
    reduced = sorted(instr.dimensions)
    in_shape = inputs[0].shape
    kept = [d for d in range(in_shape.rank) if d not in reduced]
    # Loop over reduced dims major-to-minor in the input's layout (contiguous innermost).
    loop_dims = [d for d in reversed(in_shape.minor_to_major()) if d in reduced]
    b = em.b

    def gen(index: IrIndex) -> ir.Value | tuple[ir.Value, ...]:
        accs = _accumulators(em, [_scalar(em, init) for init in inits], instr.name)

        def body(loop_values: list[ir.Value]) -> None:
            full: list[ir.Value] = [i64(0)] * in_shape.rank
            for d, v in zip(kept, index.dims, strict=True):
                full[d] = v
            for d, v in zip(loop_dims, loop_values, strict=True):
                full[d] = v
            values = [em.value_at(inp, IrIndex(tuple(full), inp.shape)) for inp in inputs]
            current = [b.load(acc) for acc in accs]
            new = emit_scalar_computation(b, instr.to_apply, current + values, reassociate=True)
            for acc, value in zip(accs, new, strict=True):
                b.store(value, acc)

        loop_nest(b, [in_shape.dimensions[d] for d in loop_dims], f"{instr.name}.r", body)
        results = [b.load(acc) for acc in accs]
        return results[0] if n == 1 else tuple(results)

    return gen


# ---------------------------------------------------------------------------------------
# reduce-window
# ---------------------------------------------------------------------------------------
INTERLEAVED_LOOP_SIZE = 128  # a shorter innermost loop is left to LLVM's own choice of interleaving
SMALL_WINDOW = 16  # a window of at most this many elements is emitted as straight-line code


def always_inside(dim, out_size: int, size: int) -> bool:
    """Does every window element of every output position fall on a real element along this
    dimension (no padding reached, no base dilation)? Then it needs no bounds check."""
    if dim.base_dilation != 1:
        return False
    last = (out_size - 1) * dim.stride + (dim.size - 1) * dim.window_dilation - dim.padding_low
    return dim.padding_low <= 0 and last < size


def window_position(b: ir.IRBuilder, out: ir.Value, k: ir.Value | int, dim, size: int,
                    checked: bool = True) -> tuple[ir.Value, ir.Value | None]:
    """Input position of window element ``k`` at output position ``out`` along one dimension,
    and whether it falls on a real element (not padding, not a base-dilation hole); ``None``
    and no clamping when ``checked`` is false (the dimension is :func:`always_inside`). A
    ``k`` known at compile time folds into one constant offset."""
    scaled = out if dim.stride == 1 else b.mul(out, i64(dim.stride))
    if isinstance(k, int):
        offset = k * dim.window_dilation - dim.padding_low
        pos = scaled if offset == 0 else b.add(scaled, i64(offset))
    else:
        pos = b.sub(b.add(scaled, b.mul(k, i64(dim.window_dilation))), i64(dim.padding_low))
    if not checked:
        return pos, None
    ok = b.icmp_signed(">=", pos, i64(0))
    if dim.base_dilation != 1:
        ok = b.and_(ok, b.icmp_signed("==", b.srem(pos, i64(dim.base_dilation)), i64(0)))
        pos = b.sdiv(pos, i64(dim.base_dilation))
    ok = b.and_(ok, b.icmp_signed("<", pos, i64(size)))
    return clamp_index(b, pos, size), ok


@generates("reduce-window")
def reduce_window_generator(em: ElementalEmitter, instr: HloInstruction) -> Generator:
    """Each output element folds its window with the reducer. Only what the window needs is
    emitted: dimensions where the window is one element wide get no loop, dimensions whose
    windows never reach padding get no bounds check, and a small window (a 2x2 or 3x3 pool)
    is unrolled into straight-line code with its accumulator in registers -- less IR for LLVM
    to simplify (max-pooling compiled 2x faster) and nothing left for it to guess."""
    n = instr.operand_count // 2
    inputs, inits = instr.operands[:n], instr.operands[n:]
    window = instr.attr("window").dimensions
    in_shape = inputs[0].shape
    checked = [not always_inside(wd, instr_dim, in_dim) for wd, instr_dim, in_dim in
               zip(window, _result_shape(instr).dimensions, in_shape.dimensions, strict=True)]
    looped = [d for d, wd in enumerate(window) if wd.size > 1]  # the others: element 0 only
    b = em.b

    def gen(index: IrIndex) -> ir.Value | tuple[ir.Value, ...]:
        init_values = [_scalar(em, init) for init in inits]

        def fold(ks: dict[int, ir.Value | int], current: list[ir.Value]) -> list[ir.Value]:
            inside: ir.Value | None = None
            source = []
            for d, wd in enumerate(window):
                k = ks.get(d, 0)
                if wd.window_reversal:
                    k = wd.size - 1 - k if isinstance(k, int) else b.sub(i64(wd.size - 1), k)
                pos, ok = window_position(b, index.dims[d], k, wd, in_shape.dimensions[d], checked[d])
                source.append(pos)
                if ok is not None:
                    inside = ok if inside is None else b.and_(inside, ok)
            if in_shape.element_count() == 0:  # every window element is padding; clamping can't make
                values = list(init_values)     # an index into an empty array safe, so load nothing
            else:
                values = [em.value_at(inp, IrIndex(tuple(source), inp.shape)) for inp in inputs]
                if inside is not None:
                    values = [b.select(inside, v, init) for v, init in zip(values, init_values, strict=True)]
            return emit_scalar_computation(b, instr.to_apply, current + values)

        sizes = [window[d].size for d in looped]
        if math.prod(sizes) <= SMALL_WINDOW:
            results = list(init_values)
            for combo in itertools.product(*(range(size) for size in sizes)):
                results = fold(dict(zip(looped, combo, strict=True)), results)
        else:
            accs = _accumulators(em, init_values, instr.name)

            def body(ks: list[ir.Value]) -> None:
                new = fold(dict(zip(looped, ks, strict=True)), [b.load(acc) for acc in accs])
                for acc, value in zip(accs, new, strict=True):
                    b.store(value, acc)

            loop_nest(b, sizes, f"{instr.name}.w", body)
            results = [b.load(acc) for acc in accs]
        return results[0] if n == 1 else tuple(results)

    return gen


def _result_shape(instr: HloInstruction):  # type: ignore[no-untyped-def]
    """The (first) result's shape of a possibly variadic reduce-window."""
    return instr.shape.tuple_shapes[0] if instr.shape.is_tuple else instr.shape


# ---------------------------------------------------------------------------------------
# dot
# ---------------------------------------------------------------------------------------
def dot_index_maps(instr: HloInstruction) -> tuple[list[int], list[int], list[int], list[int], list[int], list[int]]:
    """(lhs batch, lhs contracting, lhs free, rhs batch, rhs contracting, rhs free) dimensions."""
    lhs, rhs = instr.operand(0).shape, instr.operand(1).shape
    lb, lc = list(instr.attr("lhs_batch_dims")), list(instr.attr("lhs_contracting_dims"))
    rb, rc = list(instr.attr("rhs_batch_dims")), list(instr.attr("rhs_contracting_dims"))
    lf = [d for d in range(lhs.rank) if d not in lb and d not in lc]
    rf = [d for d in range(rhs.rank) if d not in rb and d not in rc]
    return lb, lc, lf, rb, rc, rf


def dot_operand_at(em: ElementalEmitter, operand: HloInstruction, batch_map: list[int], batch: list[ir.Value],
                   contracting: list[int], free: list[int], k: ir.Value, m: ir.Value) -> ir.Value:
    """Element (batch..., contracting ``k``, free ``m``) of a GEMM-shaped dot operand, read through the
    elemental emitter (so a fused operand is computed, a parameter loaded, in any layout)."""
    index: list[ir.Value] = [i64(0)] * operand.shape.rank
    for d, v in zip(batch_map, batch, strict=True):
        index[d] = v
    index[contracting[0]] = k
    if free:
        index[free[0]] = m
    return em.value_at(operand, IrIndex(tuple(index), operand.shape))


def accumulation_type(ptype: PrimitiveType) -> PrimitiveType:
    """f16/bf16 products accumulate in f32; everything else in its own type."""
    return PrimitiveType.F32 if ptype in (PrimitiveType.F16, PrimitiveType.BF16) else ptype


@generates("dot")
def dot_generator(em: ElementalEmitter, instr: HloInstruction) -> Generator:
    lhs, rhs = instr.operand(0), instr.operand(1)
    lb, lc, lf, rb, rc, rf = dot_index_maps(instr)
    out_type = instr.shape.element_type
    acc_type = accumulation_type(out_type)
    b = em.b

    def gen(index: IrIndex) -> ir.Value:
        nb = len(lb)
        batch, lfree, rfree = index.dims[:nb], index.dims[nb:nb + len(lf)], index.dims[nb + len(lf):]
        acc = _accumulators(em, [ir.Constant(compute_type(acc_type), 0)], instr.name)[0]

        def body(ks: list[ir.Value]) -> None:
            li: list[ir.Value] = [i64(0)] * lhs.shape.rank
            ri: list[ir.Value] = [i64(0)] * rhs.shape.rank
            for dims, values, target in ((lb, batch, li), (lf, lfree, li), (lc, ks, li),
                                         (rb, batch, ri), (rf, rfree, ri), (rc, ks, ri)):
                for d, v in zip(dims, values, strict=True):
                    target[d] = v
            x = ops.emit_convert(b, em.value_at(lhs, IrIndex(tuple(li), lhs.shape)), lhs.shape.element_type,
                                 acc_type)
            y = ops.emit_convert(b, em.value_at(rhs, IrIndex(tuple(ri), rhs.shape)), rhs.shape.element_type,
                                 acc_type)
            product = ops.emit_binary(b, "multiply", x, y, acc_type)
            b.store(ops.emit_binary(b, "add", b.load(acc), product, acc_type, reassociate=True), acc)

        loop_nest(b, [lhs.shape.dimensions[d] for d in lc], f"{instr.name}.k", body)
        return ops.emit_convert(b, b.load(acc), acc_type, out_type)

    return gen


# ---------------------------------------------------------------------------------------
# convolution
# ---------------------------------------------------------------------------------------
@generates("convolution")
def convolution_generator(em: ElementalEmitter, instr: HloInstruction) -> Generator:
    lhs, rhs = instr.operand(0), instr.operand(1)
    dn = instr.attrs["dim_labels"]
    window = instr.attr("window").dimensions
    groups = int(instr.attr("feature_group_count"))
    batch_groups = int(instr.attr("batch_group_count"))
    in_features_per_group = rhs.shape.dimensions[dn.kernel_input_feature_dimension]
    out_features = rhs.shape.dimensions[dn.kernel_output_feature_dimension]
    out_batch = instr.shape.dimensions[dn.output_batch_dimension]
    out_type = instr.shape.element_type
    acc_type = accumulation_type(out_type)
    b = em.b

    def gen(index: IrIndex) -> ir.Value:
        o = index.dims[dn.output_feature_dimension]
        n = index.dims[dn.output_batch_dimension]
        feature_group = b.sdiv(o, i64(out_features // groups))
        batch_group = b.sdiv(o, i64(out_features // batch_groups))
        in_batch = b.add(n, b.mul(batch_group, i64(out_batch)))
        acc = _accumulators(em, [ir.Constant(compute_type(acc_type), 0)], instr.name)[0]
        sizes = [in_features_per_group] + [wd.size for wd in window]

        def body(loop: list[ir.Value]) -> None:
            i, ks = loop[0], loop[1:]
            li: list[ir.Value] = [i64(0)] * lhs.shape.rank
            ri: list[ir.Value] = [i64(0)] * rhs.shape.rank
            li[dn.input_batch_dimension] = in_batch
            li[dn.input_feature_dimension] = b.add(b.mul(feature_group, i64(in_features_per_group)), i)
            ri[dn.kernel_input_feature_dimension] = i
            ri[dn.kernel_output_feature_dimension] = o
            inside = ir.Constant(I1, 1)
            for s, (k, wd) in enumerate(zip(ks, window, strict=True)):
                out_pos = index.dims[dn.output_spatial_dimensions[s]]
                in_dim = dn.input_spatial_dimensions[s]
                kk = b.sub(i64(wd.size - 1), k) if wd.window_reversal else k
                pos, ok = window_position(b, out_pos, k, wd, lhs.shape.dimensions[in_dim])
                li[in_dim] = pos
                ri[dn.kernel_spatial_dimensions[s]] = kk
                inside = b.and_(inside, ok)
            x = ops.emit_convert(b, em.value_at(lhs, IrIndex(tuple(li), lhs.shape)), lhs.shape.element_type,
                                 acc_type)
            y = ops.emit_convert(b, em.value_at(rhs, IrIndex(tuple(ri), rhs.shape)), rhs.shape.element_type,
                                 acc_type)
            product = ops.emit_binary(b, "multiply", x, y, acc_type)
            product = b.select(inside, product, ir.Constant(product.type, 0))
            b.store(ops.emit_binary(b, "add", b.load(acc), product, acc_type, reassociate=True), acc)

        # An empty input (a zero-sized spatial dimension that padding turns into output positions)
        # contributes only zeros: skip the loop rather than load from the empty buffer.
        if lhs.shape.element_count() and rhs.shape.element_count():
            loop_nest(b, sizes, f"{instr.name}.k", body)
        return ops.emit_convert(b, b.load(acc), acc_type, out_type)

    return gen


# ---------------------------------------------------------------------------------------
# map, gather, bitcast-convert, tuples
# ---------------------------------------------------------------------------------------
@generates("map")
def map_generator(em: ElementalEmitter, instr: HloInstruction) -> Generator:
    def gen(index: IrIndex) -> ir.Value:
        args = [em.value_at(op, IrIndex(index.dims, op.shape)) for op in instr.operands]
        return emit_scalar_computation(em.b, instr.to_apply, args)[0]

    return gen


@generates("gather")
def gather_generator(em: ElementalEmitter, instr: HloInstruction) -> Generator:
    operand, indices = instr.operand(0), instr.operand(1)
    offset_dims = list(instr.attrs["offset_dims"])
    collapsed = set(instr.attrs["collapsed_slice_dims"])
    start_map = list(instr.attrs["start_index_map"])
    op_batching = list(instr.attr("operand_batching_dims"))
    idx_batching = list(instr.attr("start_indices_batching_dims"))
    ivd = int(instr.attrs["index_vector_dim"])
    slice_sizes = list(instr.attrs["slice_sizes"])
    out_rank = instr.shape.rank
    batch_dims = [d for d in range(out_rank) if d not in offset_dims]
    implicit = ivd == indices.shape.rank
    idx_rank = indices.shape.rank
    # indices dims other than index_vector_dim, in order, pair with output batch dims
    idx_batch_positions = [d for d in range(idx_rank) if d != ivd]
    window_dims = [d for d in range(operand.shape.rank) if d not in collapsed and d not in op_batching]
    signed = indices.shape.element_type.is_signed_int
    b = em.b

    def gen(index: IrIndex) -> ir.Value:
        batch_values = [index.dims[d] for d in batch_dims]
        position: list[ir.Value] = [i64(0)] * idx_rank
        for d, v in zip(idx_batch_positions, batch_values, strict=True):
            position[d] = v
        start: list[ir.Value] = [i64(0)] * operand.shape.rank
        for k, od in enumerate(start_map):
            if not implicit:
                position[ivd] = i64(k)
            raw = em.value_at(indices, IrIndex(tuple(position), indices.shape))
            start[od] = widen_index(b, raw, signed)
        for od, idd in zip(op_batching, idx_batching, strict=True):
            start[od] = batch_values[idx_batch_positions.index(idd)]
        source = []
        offsets = dict(zip(window_dims, [index.dims[d] for d in offset_dims], strict=True))
        for d in range(operand.shape.rank):
            clamped = start[d]
            if d not in op_batching:
                from xla_teach.backends.llvm.elemental_emitter import clamp_range

                clamped = clamp_range(b, start[d], 0, operand.shape.dimensions[d] - slice_sizes[d])
            source.append(b.add(clamped, offsets[d]) if d in offsets else clamped)
        return em.value_at(operand, IrIndex(tuple(source), operand.shape))

    return gen


@generates("bitcast-convert")
def bitcast_convert_generator(em: ElementalEmitter, instr: HloInstruction) -> Generator:
    operand = instr.operand(0)
    src, dst = operand.shape.element_type, instr.shape.element_type
    b = em.b
    if src.bit_width == dst.bit_width:
        return lambda index: ops.emit_bitcast_convert(b, em.value_at(operand, IrIndex(index.dims, operand.shape)),
                                                      src, dst)
    from xla_teach.backends.llvm.ir_types import exact_storage, from_storage

    src_bits, dst_bits = ir.IntType(src.bit_width), ir.IntType(dst.bit_width)
    ratio = max(src.bit_width, dst.bit_width) // min(src.bit_width, dst.bit_width)

    def as_int(value: ir.Value, ptype: PrimitiveType, ity: ir.IntType) -> ir.Value:
        raw = exact_storage(b, value, ptype)
        return raw if raw.type == ity else (b.bitcast(raw, ity) if not isinstance(raw.type, ir.IntType)
                                            else b.zext(raw, ity) if raw.type.width < ity.width else raw)

    def from_int(raw: ir.Value, ptype: PrimitiveType) -> ir.Value:
        storage = storage_type(ptype)
        if storage != raw.type:
            raw = b.bitcast(raw, storage) if not isinstance(storage, ir.IntType) else b.trunc(raw, storage)
        return from_storage(b, raw, ptype)

    def narrower(index: IrIndex) -> ir.Value:  # one source element -> `ratio` pieces (low first)
        whole = as_int(em.value_at(operand, IrIndex(index.dims[:-1], operand.shape)), src, src_bits)
        shift = b.mul(index.dims[-1], ir.Constant(ir.IntType(64), dst.bit_width))
        piece = b.trunc(b.lshr(whole, b.trunc(shift, src_bits) if src_bits.width < 64 else shift), dst_bits)
        return from_int(piece, dst)

    def wider(index: IrIndex) -> ir.Value:  # `ratio` source elements -> one wide value
        total = ir.Constant(dst_bits, 0)
        for k in range(ratio):
            part = as_int(em.value_at(operand, IrIndex(index.dims + (i64(k),), operand.shape)), src, src_bits)
            total = b.or_(total, b.shl(b.zext(part, dst_bits), ir.Constant(dst_bits, k * src.bit_width)))
        return from_int(total, dst)

    return narrower if dst.bit_width < src.bit_width else wider


@generates("tuple")
def tuple_generator(em: ElementalEmitter, instr: HloInstruction) -> Generator:
    def gen(index: IrIndex) -> tuple[ir.Value, ...]:
        return tuple(em.value_at(op, IrIndex(index.dims, op.shape)) for op in instr.operands)

    return gen  # type: ignore[return-value]


@generates("get-tuple-element")
def gte_generator(em: ElementalEmitter, instr: HloInstruction) -> Generator:
    source = instr.operand(0)
    k = instr.tuple_index
    return lambda index: em.value_at(source, IrIndex(index.dims, source.shape))[k]


