"""Shape inference for ``dot`` and ``convolution``.

Both may produce a wider element type than their operands (``s8 x s8 -> s32``,
``bf16 x bf16 -> f32``): the *preferred element type* is read from
``result_element_type`` / ``declared_shape`` when given, as XLA's
``preferred_element_type``. Integer results may not be narrower than the operands.
"""

from __future__ import annotations

from collections.abc import Callable

from xla_teach.hlo.attributes import ConvDimensionNumbers
from xla_teach.hlo.errors import shape_text
from xla_teach.hlo.shape import Shape
from xla_teach.hlo.shape_inference.context import OpContext, check_dimension_list, window_output_dims
from xla_teach.hlo.types import PrimitiveType

Rule = Callable[[OpContext], Shape]


def contraction_result_type(ctx: OpContext, lhs: Shape, rhs: Shape) -> PrimitiveType:
    """The operands' common element type, or the preferred one when it is allowed."""
    a, b = lhs.element_type, rhs.element_type
    if a is not b and not (a.is_float and b.is_float):
        raise ctx.fail(f"operands {shape_text(lhs)} and {shape_text(rhs)} have different element types")
    natural = a if a.bit_width >= b.bit_width else b
    preferred = ctx.wanted_element_type(required=False)
    if preferred is None or preferred is natural:
        return natural
    if preferred.is_pred or (not natural.is_float and preferred.bit_width < natural.bit_width):
        raise ctx.fail(f"preferred element type {preferred.value} must not be narrower than "
                       f"the operand type {natural.value}")
    return preferred


def infer_dot(ctx: OpContext) -> Shape:
    """Output dims, in this order: batch dims (lhs order), lhs free dims, rhs free dims."""
    ctx.expect_operand_count(2)
    lhs, rhs = ctx.array_operand(0, "lhs"), ctx.array_operand(1, "rhs")
    lhs_batch, rhs_batch = ctx.int_list("lhs_batch_dims"), ctx.int_list("rhs_batch_dims")
    lhs_contract, rhs_contract = ctx.int_list("lhs_contracting_dims"), ctx.int_list("rhs_contracting_dims")
    if len(lhs_batch) != len(rhs_batch):
        raise ctx.fail(f"lhs has {len(lhs_batch)} batch dimension(s) but rhs has {len(rhs_batch)}")
    if len(lhs_contract) != len(rhs_contract):
        raise ctx.fail(f"lhs has {len(lhs_contract)} contracting dimension(s) but rhs has {len(rhs_contract)}")
    check_dimension_list(ctx, lhs_batch + lhs_contract, lhs.rank, "lhs batch and contracting dims")
    check_dimension_list(ctx, rhs_batch + rhs_contract, rhs.rank, "rhs batch and contracting dims")
    for kind, lhs_dims, rhs_dims in (("batch", lhs_batch, rhs_batch), ("contracting", lhs_contract, rhs_contract)):
        for ld, rd in zip(lhs_dims, rhs_dims, strict=True):
            if lhs.dimensions[ld] != rhs.dimensions[rd]:
                raise ctx.fail(f"{kind} dimension sizes differ: lhs dimension {ld} of {shape_text(lhs)} has size "
                               f"{lhs.dimensions[ld]} but rhs dimension {rd} of {shape_text(rhs)} has size "
                               f"{rhs.dimensions[rd]}")
    element_type = contraction_result_type(ctx, lhs, rhs)
    batch = [lhs.dimensions[d] for d in lhs_batch]
    lhs_free = [size for d, size in enumerate(lhs.dimensions) if d not in lhs_batch + lhs_contract]
    rhs_free = [size for d, size in enumerate(rhs.dimensions) if d not in rhs_batch + rhs_contract]
    return Shape.array(element_type, tuple(batch + lhs_free + rhs_free))


def infer_convolution(ctx: OpContext) -> Shape:
    """Batch / feature / spatial roles come from ``dim_labels``; spatial output sizes use
    the window formula; ``feature_group_count`` and ``batch_group_count`` split the
    features / the batch into groups."""
    ctx.expect_operand_count(2)
    lhs, rhs = ctx.array_operand(0, "lhs"), ctx.array_operand(1, "rhs")
    dnums = ctx.attr("dim_labels")
    if not isinstance(dnums, ConvDimensionNumbers):
        raise ctx.fail(f"attribute 'dim_labels' must be ConvDimensionNumbers, got {dnums!r}")
    window = ctx.window()
    groups, batch_groups = ctx.int_attr("feature_group_count"), ctx.int_attr("batch_group_count")
    spatial = len(dnums.input_spatial_dimensions)
    if lhs.rank != spatial + 2 or rhs.rank != spatial + 2:
        raise ctx.fail(f"dim_labels={dnums.to_text()} describes rank-{spatial + 2} arrays but lhs is "
                       f"{shape_text(lhs)} and rhs is {shape_text(rhs)}")
    if len(window.dimensions) != spatial:
        raise ctx.fail(f"window has {len(window.dimensions)} dimensions but there are {spatial} spatial dimensions")
    if groups < 1 or batch_groups < 1:
        raise ctx.fail(f"feature_group_count={groups} and batch_group_count={batch_groups} must be >= 1")
    if groups > 1 and batch_groups > 1:
        raise ctx.fail("feature_group_count and batch_group_count cannot both be > 1")

    in_batch = lhs.dimensions[dnums.input_batch_dimension]
    in_features = lhs.dimensions[dnums.input_feature_dimension]
    kernel_in = rhs.dimensions[dnums.kernel_input_feature_dimension]
    kernel_out = rhs.dimensions[dnums.kernel_output_feature_dimension]
    if in_features % groups or in_features // groups != kernel_in:
        raise ctx.fail(f"input features ({in_features}) / feature_group_count ({groups}) must equal the kernel's "
                       f"input features ({kernel_in}); lhs {shape_text(lhs)}, rhs {shape_text(rhs)}")
    if kernel_out % groups:
        raise ctx.fail(f"kernel output features ({kernel_out}) must be a multiple of feature_group_count ({groups})")
    if in_batch % batch_groups or kernel_out % batch_groups:
        raise ctx.fail(f"input batch ({in_batch}) and kernel output features ({kernel_out}) must be multiples of "
                       f"batch_group_count ({batch_groups})")
    for k, kernel_dim in enumerate(dnums.kernel_spatial_dimensions):
        if window.dimensions[k].size != rhs.dimensions[kernel_dim]:
            raise ctx.fail(f"window size {window.dimensions[k].size} of spatial dimension {k} differs from the "
                           f"kernel's size {rhs.dimensions[kernel_dim]} ({shape_text(rhs)})")

    base = [lhs.dimensions[d] for d in dnums.input_spatial_dimensions]
    spatial_out = window_output_dims(ctx, base, window)
    out = [0] * (spatial + 2)
    out[dnums.output_batch_dimension] = in_batch // batch_groups
    out[dnums.output_feature_dimension] = kernel_out
    for k, d in enumerate(dnums.output_spatial_dimensions):
        out[d] = spatial_out[k]
    return Shape.array(contraction_result_type(ctx, lhs, rhs), tuple(out))


CONTRACTION_RULES: dict[str, Rule] = {
    "dot": infer_dot,
    "convolution": infer_convolution,
}
