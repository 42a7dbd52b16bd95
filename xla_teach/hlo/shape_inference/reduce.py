"""Shape inference for reductions and sorting: reduce, reduce-window,
select-and-scatter, sort and topk.

Variadic ``reduce`` / ``reduce-window`` take N inputs followed by N init values;
the result is one array per input (a tuple when N > 1) whose element type is the
**init value's** type. The reducer computation takes 2N scalars -- the N running
accumulators first, then the N new input values -- and returns N scalars.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from xla_teach.hlo.errors import shape_text, shapes_text
from xla_teach.hlo.shape import Shape
from xla_teach.hlo.shape_inference.context import (
    OpContext,
    check_dimension_list,
    check_predicate_computation,
    check_reducer,
    same_dims,
    scalars,
    window_output_dims,
)
from xla_teach.hlo.types import PrimitiveType

Rule = Callable[[OpContext], Shape]


def _tuple_if_many(shapes: Sequence[Shape]) -> Shape:
    return shapes[0] if len(shapes) == 1 else Shape.make_tuple(list(shapes))


def _inputs_and_inits(ctx: OpContext) -> tuple[list[Shape], list[Shape]]:
    """Split ``(in_0..in_N-1, init_0..init_N-1)``; inputs share dims, inits are scalars."""
    count = len(ctx.operands)
    if count < 2 or count % 2:
        raise ctx.fail(f"needs N inputs followed by N init values (an even number >= 2), got {count} operand(s)")
    n = count // 2
    inputs = [ctx.array_operand(i, "input") for i in range(n)]
    inits = [ctx.array_operand(n + i, "init value") for i in range(n)]
    if not same_dims(inputs):
        raise ctx.fail(f"all inputs must have the same dimensions, got {shapes_text(inputs)}")
    for i, init in enumerate(inits):
        if not init.is_scalar:
            raise ctx.fail(f"init value {i} must be a scalar, got {shape_text(init)}")
    return inputs, inits


def infer_reduce(ctx: OpContext) -> Shape:
    """Drop the reduced ``dimensions``, keep the others in order."""
    inputs, inits = _inputs_and_inits(ctx)
    dims = ctx.int_list("dimensions")
    check_dimension_list(ctx, dims, inputs[0].rank, "dimensions")
    check_reducer(ctx, ctx.computation("to_apply"), [s.element_type for s in inits],
                  [s.element_type for s in inputs])
    kept = tuple(size for i, size in enumerate(inputs[0].dimensions) if i not in dims)
    return _tuple_if_many([Shape.array(init.element_type, kept) for init in inits])


def infer_reduce_window(ctx: OpContext) -> Shape:
    """One output element per window position (see ``window_output_size``)."""
    inputs, inits = _inputs_and_inits(ctx)
    out_dims = window_output_dims(ctx, inputs[0].dimensions, ctx.window())
    check_reducer(ctx, ctx.computation("to_apply"), [s.element_type for s in inits],
                  [s.element_type for s in inputs])
    return _tuple_if_many([Shape.array(init.element_type, out_dims) for init in inits])


def infer_select_and_scatter(ctx: OpContext) -> Shape:
    """``select-and-scatter(operand, source, init)`` has the operand's shape; ``source`` has
    the shape reduce-window would give; ``select`` is ``(T, T) -> pred[]`` on operand
    elements and ``scatter`` a reducer from source elements into init's type."""
    ctx.expect_operand_count(3)
    operand, source, init = (ctx.array_operand(i) for i in range(3))
    if not init.is_scalar:
        raise ctx.fail(f"the init value must be a scalar, got {shape_text(init)}")
    window_dims = window_output_dims(ctx, operand.dimensions, ctx.window())
    if source.dimensions != window_dims:
        raise ctx.fail(f"source {shape_text(source)} must have the window output dimensions "
                       f"[{','.join(map(str, window_dims))}] of operand {shape_text(operand)}")
    element = Shape.scalar(operand.element_type)
    check_predicate_computation(ctx, ctx.computation("select"), [element, element], "select")
    check_reducer(ctx, ctx.computation("scatter"), [init.element_type], [source.element_type], "scatter")
    if init.element_type is not operand.element_type:
        raise ctx.fail(f"init value {shape_text(init)} must have the operand's element type")
    return operand


def infer_sort(ctx: OpContext) -> Shape:
    """Sorted copies of the operands; the comparator sees ``(a0[i], a0[j], a1[i], a1[j], ...)``."""
    if not ctx.operands:
        raise ctx.fail("needs at least one operand")
    shapes = [ctx.array_operand(i) for i in range(len(ctx.operands))]
    if not same_dims(shapes):
        raise ctx.fail(f"all operands must have the same dimensions, got {shapes_text(shapes)}")
    dims = ctx.int_list("dimensions")
    if len(dims) != 1:
        raise ctx.fail(f"dimensions must hold exactly one dimension, got {list(dims)}")
    check_dimension_list(ctx, dims, shapes[0].rank, "dimensions")
    pairs = [t for s in shapes for t in (s.element_type, s.element_type)]
    check_predicate_computation(ctx, ctx.computation("to_apply"), scalars(pairs), "to_apply")
    return _tuple_if_many(shapes)


def infer_topk(ctx: OpContext) -> Shape:
    """``(values, s32 indices)``, both with the last dim replaced by ``k``."""
    ctx.expect_operand_count(1)
    operand = ctx.array_operand(0)
    k = ctx.int_attr("k")
    if operand.rank == 0:
        raise ctx.fail("topk needs an operand of rank >= 1")
    if not 0 <= k <= operand.dimensions[-1]:
        raise ctx.fail(f"k={k} is not within [0, {operand.dimensions[-1]}] (the last dimension of "
                       f"{shape_text(operand)})")
    dims = operand.dimensions[:-1] + (k,)
    return Shape.make_tuple([Shape.array(operand.element_type, dims), Shape.array(PrimitiveType.S32, dims)])


REDUCTION_RULES: dict[str, Rule] = {
    "reduce": infer_reduce,
    "reduce-window": infer_reduce_window,
    "select-and-scatter": infer_select_and_scatter,
    "sort": infer_sort,
    "topk": infer_topk,
}
