"""``dot`` and ``convolution`` (§8 of the semantics).

Both accumulate in a type chosen from the *result* element type:

* float results: f32 (f64 if the result or an operand is f64); operands are widened to it
  exactly (f16/bf16 -> f32, ``s8 -> f32`` ...), and an f16/bf16 result is rounded once at
  the end;
* integer results: operands are first converted to the result type (``s8 x s8 -> s32``
  sign-extends before multiplying), then accumulated in u64 -- unsigned arithmetic wraps
  modulo 2**64, so keeping the low bits at the end is exactly the two's complement wrap.

**dot** arranges each operand as ``[batch, rows, contracted]`` / ``[batch, contracted,
cols]`` and calls ``np.matmul``; the output is batch dims, lhs free dims, rhs free dims.

**convolution** is written as the definition reads: bring both operands to a canonical
layout (input ``[N, C, spatial...]``, kernel ``[O, I, spatial...]``), pad and dilate the
input with zeros (exactly ``pad`` with interior padding ``lhs_dilate - 1``), and then, for
every output spatial position, take the input patch under the (``rhs_dilate``-strided)
window and contract it with the kernel, group by group.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from xla_teach.hlo.attributes import ConvDimensionNumbers, PaddingDim, Window
from xla_teach.hlo.evaluator.data_movement import pad_array
from xla_teach.hlo.evaluator.numeric import F32, F64, PRED, convert_array, is_float, to_float_dtype
from xla_teach.hlo.evaluator.registry import Value, register

if TYPE_CHECKING:
    from xla_teach.hlo.evaluator.core import HloEvaluator
    from xla_teach.hlo.ir import HloInstruction


def to_accumulation(operands: list[np.ndarray], result_dtype: np.dtype) -> list[np.ndarray]:
    """Both operands in the accumulation type for ``result_dtype`` (see the module doc)."""
    if is_float(result_dtype):
        wide = result_dtype == F64 or any(x.dtype == F64 for x in operands)
        return [convert_array(x, F64 if wide else F32) for x in operands]
    converted = [convert_array(x, result_dtype) if x.dtype != result_dtype else x for x in operands]
    if result_dtype == PRED:  # or-of-ands: count the true products, test for nonzero at the end
        converted = [x.astype(np.uint8) for x in converted]
    return [x.astype(np.uint64) for x in converted]


def from_accumulation(x: np.ndarray, result_dtype: np.dtype) -> np.ndarray:
    if result_dtype == PRED:
        return x != 0
    if is_float(result_dtype):
        return to_float_dtype(x, result_dtype)
    return x.astype(result_dtype)  # keeps the low bits: two's complement wrap


# ---- dot ------------------------------------------------------------------------------
@register("dot")
def handle_dot(ev: HloEvaluator, instr: HloInstruction, operands: list[Value]) -> Value:
    result_dtype = instr.shape.dtype
    lhs, rhs = to_accumulation(operands, result_dtype)
    lhs_batch, lhs_contracting = list(instr.attr("lhs_batch_dims")), list(instr.attr("lhs_contracting_dims"))
    rhs_batch, rhs_contracting = list(instr.attr("rhs_batch_dims")), list(instr.attr("rhs_contracting_dims"))
    lhs_free = [d for d in range(lhs.ndim) if d not in lhs_batch and d not in lhs_contracting]
    rhs_free = [d for d in range(rhs.ndim) if d not in rhs_batch and d not in rhs_contracting]

    def sizes(x: np.ndarray, dims: list[int]) -> tuple[int, ...]:
        return tuple(x.shape[d] for d in dims)

    batch = math.prod(sizes(lhs, lhs_batch))
    rows, cols = math.prod(sizes(lhs, lhs_free)), math.prod(sizes(rhs, rhs_free))
    contracted = math.prod(sizes(lhs, lhs_contracting))
    lhs3 = np.transpose(lhs, lhs_batch + lhs_free + lhs_contracting).reshape(batch, rows, contracted)
    rhs3 = np.transpose(rhs, rhs_batch + rhs_contracting + rhs_free).reshape(batch, contracted, cols)
    product = np.matmul(lhs3, rhs3)
    out_dims = sizes(lhs, lhs_batch) + sizes(lhs, lhs_free) + sizes(rhs, rhs_free)
    return from_accumulation(product.reshape(out_dims), result_dtype)


# ---- convolution ----------------------------------------------------------------------
@register("convolution")
def handle_convolution(ev: HloEvaluator, instr: HloInstruction, operands: list[Value]) -> Value:
    result_dtype = instr.shape.dtype
    lhs, rhs = to_accumulation(operands, result_dtype)
    dnums: ConvDimensionNumbers = instr.attr("dim_labels")
    window: Window = instr.attr("window")
    feature_groups = int(instr.attr("feature_group_count"))
    batch_groups = int(instr.attr("batch_group_count"))
    if feature_groups > 1 and batch_groups > 1:
        raise ValueError("feature_group_count and batch_group_count cannot both exceed 1")

    # Canonical layouts: input [N, C, S...], kernel [O, I, K...].
    inputs = np.transpose(lhs, [dnums.input_batch_dimension, dnums.input_feature_dimension,
                                *dnums.input_spatial_dimensions])
    kernel = np.transpose(rhs, [dnums.kernel_output_feature_dimension, dnums.kernel_input_feature_dimension,
                                *dnums.kernel_spatial_dimensions])
    reversed_axes = [2 + k for k, d in enumerate(window.dimensions) if d.window_reversal]
    if reversed_axes:
        kernel = np.flip(kernel, axis=reversed_axes)

    # Padding and lhs dilation place the input in a bigger grid; the new cells are holes that
    # take no part in any product (XLA skips them: a NaN or inf weight over a hole adds nothing).
    no_pad = PaddingDim(0, 0, 0)
    padding = [no_pad, no_pad] + [PaddingDim(d.padding_low, d.padding_high, d.base_dilation - 1)
                                  for d in window.dimensions]
    padded = pad_array(inputs, np.zeros((), inputs.dtype), padding)
    real = pad_array(np.ones((1, 1, *inputs.shape[2:]), np.bool_), np.zeros((), np.bool_), padding)[0, 0]

    kernel_sizes = kernel.shape[2:]
    out_spatial = []
    for k, d in enumerate(window.dimensions):
        effective = (kernel_sizes[k] - 1) * d.window_dilation + 1
        out_spatial.append(max(0, (padded.shape[2 + k] - effective) // d.stride + 1))
    batch, out_features = inputs.shape[0] // batch_groups, kernel.shape[0]
    out = np.zeros((batch, out_features, *out_spatial), inputs.dtype)

    for position in np.ndindex(*out_spatial):
        window_index = [slice(None), slice(None)]
        for k, d in enumerate(window.dimensions):
            start = position[k] * d.stride
            window_index.append(slice(start, start + (kernel_sizes[k] - 1) * d.window_dilation + 1, d.window_dilation))
        patch = padded[tuple(window_index)]  # [N, C, K...]
        present = real[tuple(window_index[2:])]  # [K...]: False over holes
        weights = kernel if present.all() else np.where(present, kernel, np.zeros((), kernel.dtype))
        out[(slice(None), slice(None), *position)] = _contract_patch(patch, weights, feature_groups, batch_groups)

    # Back from [N, O, S...] to the output's dimension order.
    canonical = [dnums.output_batch_dimension, dnums.output_feature_dimension, *dnums.output_spatial_dimensions]
    return from_accumulation(np.transpose(out, np.argsort(canonical)), result_dtype)


def _contract_patch(patch: np.ndarray, kernel: np.ndarray, feature_groups: int, batch_groups: int) -> np.ndarray:
    """``out[n, o] = sum over (i, k...) of patch[n, i, k...] * kernel[o, i, k...]`` within
    each group; returns [N_out, O].

    * ``feature_group_count = G``: input features and output features split into G
      contiguous groups; output group g only sees input group g (depthwise: G = C).
    * ``batch_group_count = B``: input batch and output features split into B contiguous
      groups; output group b only sees batch group b; output batch = N / B.
    """
    n, out_features = patch.shape[0], kernel.shape[0]
    window_size = math.prod(patch.shape[2:])
    if batch_groups > 1:
        # [B, N/B, C*K] x [B, O/B, C*K] -> [B, N/B, O/B]
        inner = patch.shape[1] * window_size
        p = patch.reshape(batch_groups, n // batch_groups, inner)
        k = kernel.reshape(batch_groups, out_features // batch_groups, inner)
        result = np.matmul(p, np.swapaxes(k, 1, 2))
        return np.transpose(result, (1, 0, 2)).reshape(n // batch_groups, out_features)
    # [G, N, C/G*K] x [G, O/G, C/G*K] -> [G, N, O/G]
    in_per_group = patch.shape[1] // feature_groups
    inner = in_per_group * window_size
    p = patch.reshape(n, feature_groups, in_per_group, window_size).transpose(1, 0, 2, 3)
    p = p.reshape(feature_groups, n, inner)
    k = kernel.reshape(feature_groups, out_features // feature_groups, inner)
    result = np.matmul(p, np.swapaxes(k, 1, 2))
    return np.transpose(result, (1, 0, 2)).reshape(n, out_features)
