"""Shape inference for data movement: broadcast, reshape, transpose, slices, concatenate,
pad, reverse, copy and bitcast.

None of these change element types. ``broadcast`` and ``reshape`` cannot know
their output dimensions from the operand alone: they read them from
``result_dims`` / ``declared_shape`` (see :meth:`OpContext.wanted_dims`) and
check that they are consistent with the operand.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from xla_teach.hlo.attributes import PaddingDim, SliceDim
from xla_teach.hlo.errors import shape_text
from xla_teach.hlo.shape import Shape
from xla_teach.hlo.shape_inference.context import OpContext, check_dimension_list

Rule = Callable[[OpContext], Shape]


def infer_broadcast(ctx: OpContext) -> Shape:
    """HLO ``broadcast``: operand dim i becomes output dim ``dimensions[i]`` (same size);
    the other output dims are new. The output dims come from ``result_dims``."""
    ctx.expect_operand_count(1)
    operand = ctx.array_operand(0)
    out_dims = ctx.wanted_dims()
    dimensions = ctx.int_list("dimensions")
    if len(dimensions) != operand.rank:
        raise ctx.fail(f"dimensions={{{','.join(map(str, dimensions))}}} must list one output dimension per "
                       f"operand dimension (operand {shape_text(operand)})")
    check_dimension_list(ctx, dimensions, len(out_dims), "dimensions")
    for i, out_dim in enumerate(dimensions):
        if out_dims[out_dim] != operand.dimensions[i]:
            raise ctx.fail(f"operand dimension {i} (size {operand.dimensions[i]}) maps to output dimension "
                           f"{out_dim} of size {out_dims[out_dim]}; sizes must be equal")
    return Shape.array(operand.element_type, out_dims)


def infer_reshape(ctx: OpContext) -> Shape:
    """Any dims with the same element count (taken from ``result_dims``)."""
    ctx.expect_operand_count(1)
    operand = ctx.array_operand(0)
    out_dims = ctx.wanted_dims()
    if math.prod(out_dims) != operand.element_count():
        raise ctx.fail(f"cannot reshape {shape_text(operand)} ({operand.element_count()} elements) to "
                       f"[{','.join(map(str, out_dims))}] ({math.prod(out_dims)} elements)")
    inferred = ctx.attrs.get("inferred_dimension")
    if inferred is not None and not 0 <= inferred < len(out_dims):
        raise ctx.fail(f"inferred_dimension={inferred} is out of range for rank {len(out_dims)}")
    return Shape.array(operand.element_type, out_dims)


def infer_transpose(ctx: OpContext) -> Shape:
    """``out.dims[i] = in.dims[dimensions[i]]``; ``dimensions`` is a permutation."""
    ctx.expect_operand_count(1)
    operand = ctx.array_operand(0)
    perm = ctx.int_list("dimensions")
    if sorted(perm) != list(range(operand.rank)):
        raise ctx.fail(f"dimensions={{{','.join(map(str, perm))}}} is not a permutation of the "
                       f"{operand.rank} dimensions of {shape_text(operand)}")
    return Shape.array(operand.element_type, tuple(operand.dimensions[p] for p in perm))


def infer_slice(ctx: OpContext) -> Shape:
    """Per dim ``ceil((limit - start) / stride)`` elements; ``0 <= start <= limit <= size``."""
    ctx.expect_operand_count(1)
    operand = ctx.array_operand(0)
    spec = ctx.attr("slice")
    if not all(isinstance(d, SliceDim) for d in spec):
        raise ctx.fail(f"attribute 'slice' must be a list of SliceDim, got {spec!r}")
    if len(spec) != operand.rank:
        raise ctx.fail(f"slice has {len(spec)} entries but the operand {shape_text(operand)} has rank {operand.rank}")
    out = []
    for i, (d, size) in enumerate(zip(spec, operand.dimensions, strict=True)):
        if d.stride < 1:
            raise ctx.fail(f"slice dimension {i}: stride {d.stride} must be positive")
        if not 0 <= d.start <= d.limit <= size:
            raise ctx.fail(f"slice dimension {i}: [{d.start}:{d.limit}] is out of bounds for size {size}")
        out.append(-(-(d.limit - d.start) // d.stride))
    return Shape.array(operand.element_type, tuple(out))


def _check_scalar_indices(ctx: OpContext, first: int, count: int) -> None:
    """Operands ``first .. first+count-1`` are scalar start indices of one integer type."""
    if len(ctx.operands) != first + count:
        raise ctx.fail(f"needs {count} scalar start indices (one per operand dimension), "
                       f"got {len(ctx.operands) - first}")
    indices = ctx.operands[first:]
    for i, index in enumerate(indices):
        if not (index.is_scalar and index.element_type.is_integral):
            raise ctx.fail(f"start index {i} must be an integer scalar, got {shape_text(index)}")
    if len({s.element_type for s in indices}) > 1:
        raise ctx.fail("all start indices must have the same element type")


def infer_dynamic_slice(ctx: OpContext) -> Shape:
    operand = ctx.array_operand(0)
    sizes = ctx.int_list("dynamic_slice_sizes")
    _check_scalar_indices(ctx, 1, operand.rank)
    if len(sizes) != operand.rank:
        raise ctx.fail(f"dynamic_slice_sizes has {len(sizes)} entries for the rank-{operand.rank} operand")
    for i, (size, bound) in enumerate(zip(sizes, operand.dimensions, strict=True)):
        if not 0 <= size <= bound:
            raise ctx.fail(f"slice size {size} of dimension {i} is not within [0, {bound}]")
    return Shape.array(operand.element_type, sizes)


def infer_dynamic_update_slice(ctx: OpContext) -> Shape:
    operand, update = ctx.array_operand(0), ctx.array_operand(1, "update")
    _check_scalar_indices(ctx, 2, operand.rank)
    if update.element_type is not operand.element_type:
        raise ctx.fail(f"update {shape_text(update)} and operand {shape_text(operand)} have different element types")
    if update.rank != operand.rank or any(u > o for u, o in zip(update.dimensions, operand.dimensions, strict=True)):
        raise ctx.fail(f"update {shape_text(update)} must have the operand's rank and fit inside "
                       f"{shape_text(operand)}")
    return operand


def infer_concatenate(ctx: OpContext) -> Shape:
    """All dims equal except ``dimensions[0]``, which adds up."""
    if not ctx.operands:
        raise ctx.fail("needs at least one operand")
    shapes = [ctx.array_operand(i) for i in range(len(ctx.operands))]
    dims = ctx.int_list("dimensions")
    first = shapes[0]
    if len(dims) != 1:
        raise ctx.fail(f"dimensions must hold exactly one dimension, got {list(dims)}")
    axis = dims[0]
    if first.rank == 0:
        raise ctx.fail("cannot concatenate scalars")
    check_dimension_list(ctx, dims, first.rank, "dimensions")
    for s in shapes[1:]:
        if s.element_type is not first.element_type:
            raise ctx.fail(f"operands {shape_text(first)} and {shape_text(s)} have different element types")
        if s.rank != first.rank or any(
            a != b for i, (a, b) in enumerate(zip(s.dimensions, first.dimensions, strict=True)) if i != axis
        ):
            raise ctx.fail(f"operands {shape_text(first)} and {shape_text(s)} differ outside dimension {axis}")
    out = list(first.dimensions)
    out[axis] = sum(s.dimensions[axis] for s in shapes)
    return Shape.array(first.element_type, tuple(out))


def padded_size(size: int, p: PaddingDim) -> int:
    """``lo + hi + n + (n-1)*interior`` (no interior padding around an empty dim)."""
    return p.low + p.high + size + max(size - 1, 0) * p.interior


def infer_pad(ctx: OpContext) -> Shape:
    ctx.expect_operand_count(2)
    operand, value = ctx.array_operand(0), ctx.array_operand(1, "padding value")
    if not value.is_scalar or value.element_type is not operand.element_type:
        raise ctx.fail(f"the padding value must be a scalar of the operand's type, got {shape_text(value)}")
    padding = ctx.attr("padding")
    if len(padding) != operand.rank:
        raise ctx.fail(f"padding has {len(padding)} entries but the operand {shape_text(operand)} has "
                       f"rank {operand.rank}")
    out = []
    for i, (size, p) in enumerate(zip(operand.dimensions, padding, strict=True)):
        if p.interior < 0:
            raise ctx.fail(f"dimension {i}: interior padding {p.interior} must not be negative")
        new_size = padded_size(size, p)
        if new_size < 0:
            raise ctx.fail(f"dimension {i}: padding {p.low}_{p.high}_{p.interior} of size {size} gives "
                           f"negative size {new_size}")
        out.append(new_size)
    return Shape.array(operand.element_type, tuple(out))


def infer_reverse(ctx: OpContext) -> Shape:
    ctx.expect_operand_count(1)
    operand = ctx.array_operand(0)
    check_dimension_list(ctx, ctx.int_list("dimensions"), operand.rank, "dimensions")
    return operand


def infer_copy(ctx: OpContext) -> Shape:
    """Identity on shapes (arrays or tuples)."""
    ctx.expect_operand_count(1)
    return ctx.operands[0]


def infer_bitcast(ctx: OpContext) -> Shape:
    """The declared shape, which must occupy exactly as many bytes as the operand."""
    ctx.expect_operand_count(1)
    operand = ctx.array_operand(0)
    result = ctx.declared()
    if not result.is_array or result.byte_size() != operand.byte_size():
        raise ctx.fail(f"bitcast from {shape_text(operand)} ({operand.byte_size()} bytes) to "
                       f"{shape_text(result)} ({result.byte_size()} bytes) changes the size")
    return result


DATA_MOVEMENT_RULES: dict[str, Rule] = {
    "broadcast": infer_broadcast,
    "reshape": infer_reshape,
    "transpose": infer_transpose,
    "slice": infer_slice,
    "dynamic-slice": infer_dynamic_slice,
    "dynamic-update-slice": infer_dynamic_update_slice,
    "concatenate": infer_concatenate,
    "pad": infer_pad,
    "reverse": infer_reverse,
    "copy": infer_copy,
    "bitcast": infer_bitcast,
}
