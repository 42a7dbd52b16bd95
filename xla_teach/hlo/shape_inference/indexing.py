"""Shape inference for ``gather`` and ``scatter``.

Both read a list of start indices. ``index_vector_dim`` says which dimension of the
indices array holds one index *vector*; if it equals the indices' rank the indices
are treated as having an extra trailing dimension of size 1. The other dimensions
of the indices are the "batch" (gather) or "scatter" (scatter) dimensions.

Worked example (gather rows): operand ``f32[8,6]``, indices ``s32[5,1]``,
``index_vector_dim=1``, ``start_index_map={0}``, ``slice_sizes={1,6}``,
``collapsed_slice_dims={0}``, ``offset_dims={1}`` -> ``f32[5,6]``.
"""

from __future__ import annotations

from collections.abc import Callable

from xla_teach.hlo.errors import shape_text, shapes_text
from xla_teach.hlo.shape import Shape
from xla_teach.hlo.shape_inference.context import OpContext, check_dimension_list, check_reducer, same_dims

Rule = Callable[[OpContext], Shape]


def _expanded_indices(ctx: OpContext, indices: Shape) -> tuple[int, tuple[int, ...], list[int]]:
    """``(index_vector_dim, expanded index dims, batch dims)``; batch dims = expanded dims
    without the index-vector dimension."""
    if not indices.element_type.is_integral:
        raise ctx.fail(f"indices {shape_text(indices)} must have an integer element type")
    vector_dim = ctx.int_attr("index_vector_dim")
    if not 0 <= vector_dim <= indices.rank:
        raise ctx.fail(f"index_vector_dim={vector_dim} is out of range for indices {shape_text(indices)}")
    expanded = indices.dimensions + (1,) if vector_dim == indices.rank else indices.dimensions
    batch = [size for d, size in enumerate(expanded) if d != vector_dim]
    return vector_dim, expanded, batch


def _check_batching_dims(ctx: OpContext, operand_dims: tuple[int, ...], index_dims: tuple[int, ...],
                         operand: Shape, expanded: tuple[int, ...], vector_dim: int) -> None:
    """Newer "batching" dims pair an operand dim with an indices dim of the same size."""
    check_dimension_list(ctx, operand_dims, operand.rank, "operand batching dims", sorted_=True)
    check_dimension_list(ctx, index_dims, len(expanded), "indices batching dims")
    if len(operand_dims) != len(index_dims) or vector_dim in index_dims:
        raise ctx.fail("operand and indices batching dims must pair up and not include index_vector_dim")
    for od, idx in zip(operand_dims, index_dims, strict=True):
        if operand.dimensions[od] != expanded[idx]:
            raise ctx.fail(f"batching dimension sizes differ: operand dim {od} vs indices dim {idx}")


def infer_gather(ctx: OpContext) -> Shape:
    ctx.expect_operand_count(2)
    operand, indices = ctx.array_operand(0), ctx.array_operand(1, "indices")
    vector_dim, expanded, batch = _expanded_indices(ctx, indices)
    offset_dims = ctx.int_list("offset_dims")
    collapsed = ctx.int_list("collapsed_slice_dims")
    start_index_map = ctx.int_list("start_index_map")
    operand_batching = ctx.int_list("operand_batching_dims")
    slice_sizes = ctx.int_list("slice_sizes")

    if len(start_index_map) != expanded[vector_dim]:
        raise ctx.fail(f"start_index_map has {len(start_index_map)} entries but an index vector of "
                       f"{shape_text(indices)} has {expanded[vector_dim]}")
    check_dimension_list(ctx, start_index_map, operand.rank, "start_index_map")
    check_dimension_list(ctx, collapsed, operand.rank, "collapsed_slice_dims", sorted_=True)
    _check_batching_dims(ctx, operand_batching, ctx.int_list("start_indices_batching_dims"), operand,
                         expanded, vector_dim)
    if set(collapsed) & set(operand_batching):
        raise ctx.fail("a dimension cannot be both collapsed and a batching dimension")
    if len(slice_sizes) != operand.rank:
        raise ctx.fail(f"slice_sizes has {len(slice_sizes)} entries for operand {shape_text(operand)}")
    for d, (size, bound) in enumerate(zip(slice_sizes, operand.dimensions, strict=True)):
        if not 0 <= size <= bound:
            raise ctx.fail(f"slice size {size} of dimension {d} is not within [0, {bound}]")
        if d in collapsed or d in operand_batching:
            if size > 1:
                raise ctx.fail(f"collapsed/batching dimension {d} must have slice size 0 or 1, not {size}")

    offset_sizes = [s for d, s in enumerate(slice_sizes) if d not in collapsed and d not in operand_batching]
    if len(offset_dims) != len(offset_sizes):
        raise ctx.fail(f"offset_dims has {len(offset_dims)} entries but the slice keeps {len(offset_sizes)} "
                       "dimensions (slice_sizes without collapsed and batching dims)")
    out_rank = len(offset_dims) + len(batch)
    check_dimension_list(ctx, offset_dims, out_rank, "offset_dims", sorted_=True)
    offset_iter, batch_iter = iter(offset_sizes), iter(batch)
    out = tuple(next(offset_iter) if d in offset_dims else next(batch_iter) for d in range(out_rank))
    return Shape.array(operand.element_type, out)


def infer_scatter(ctx: OpContext) -> Shape:
    """``scatter(operands..., indices, updates...)``: the result has the operands' shapes."""
    count = len(ctx.operands)
    if count < 3 or count % 2 == 0:
        raise ctx.fail(f"needs N operands, the indices and N updates (an odd number >= 3), got {count}")
    n = (count - 1) // 2
    operands = [ctx.array_operand(i) for i in range(n)]
    indices = ctx.array_operand(n, "indices")
    updates = [ctx.array_operand(n + 1 + i, "updates") for i in range(n)]
    if not same_dims(operands) or not same_dims(updates):
        raise ctx.fail(f"all operands and all updates must have the same dimensions: {shapes_text(ctx.operands)}")
    for o, u in zip(operands, updates, strict=True):
        if o.element_type is not u.element_type:
            raise ctx.fail(f"operand {shape_text(o)} and updates {shape_text(u)} have different element types")
    operand, update = operands[0], updates[0]
    vector_dim, expanded, scatter_dims = _expanded_indices(ctx, indices)
    window_dims = ctx.int_list("update_window_dims")
    inserted = ctx.int_list("inserted_window_dims")
    to_operand = ctx.int_list("scatter_dims_to_operand_dims")
    input_batching = ctx.int_list("input_batching_dims")

    check_dimension_list(ctx, window_dims, update.rank, "update_window_dims", sorted_=True)
    check_dimension_list(ctx, inserted, operand.rank, "inserted_window_dims", sorted_=True)
    _check_batching_dims(ctx, input_batching, ctx.int_list("scatter_indices_batching_dims"), operand,
                         expanded, vector_dim)
    if set(inserted) & set(input_batching):
        raise ctx.fail("a dimension cannot be both an inserted window dim and a batching dim")
    if len(to_operand) != expanded[vector_dim]:
        raise ctx.fail(f"scatter_dims_to_operand_dims has {len(to_operand)} entries but an index vector of "
                       f"{shape_text(indices)} has {expanded[vector_dim]}")
    check_dimension_list(ctx, to_operand, operand.rank, "scatter_dims_to_operand_dims")
    if len(window_dims) + len(inserted) + len(input_batching) != operand.rank:
        raise ctx.fail(f"update_window_dims + inserted_window_dims + input_batching_dims must cover the "
                       f"{operand.rank} operand dimensions")
    if update.rank != len(window_dims) + len(scatter_dims):
        raise ctx.fail(f"updates {shape_text(update)} must have rank {len(window_dims) + len(scatter_dims)} "
                       f"(window dims + scatter dims of the indices)")
    operand_window_dims = [d for d in range(operand.rank) if d not in inserted and d not in input_batching]
    for ud, od in zip(window_dims, operand_window_dims, strict=True):
        if update.dimensions[ud] > operand.dimensions[od]:
            raise ctx.fail(f"update window dimension {ud} (size {update.dimensions[ud]}) is larger than operand "
                           f"dimension {od} (size {operand.dimensions[od]})")
    update_scatter_dims = [s for d, s in enumerate(update.dimensions) if d not in window_dims]
    if update_scatter_dims != scatter_dims:
        raise ctx.fail(f"the scatter dims of updates {shape_text(update)} {update_scatter_dims} must equal the "
                       f"batch dims of indices {shape_text(indices)} {scatter_dims}")
    types = [o.element_type for o in operands]
    check_reducer(ctx, ctx.computation("to_apply"), types, types)
    return operands[0] if n == 1 else Shape.make_tuple(operands)


INDEXING_RULES: dict[str, Rule] = {
    "gather": infer_gather,
    "scatter": infer_scatter,
}
