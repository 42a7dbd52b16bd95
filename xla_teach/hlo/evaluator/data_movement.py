"""Data-movement opcodes: values are copied around, never computed (§6 of the semantics).

``broadcast reshape transpose slice dynamic-slice dynamic-update-slice concatenate pad
reverse copy bitcast``. All of them work on *logical* indices, except ``bitcast``, which
reinterprets the buffer and therefore depends on the layouts of both shapes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from xla_teach.hlo.attributes import PaddingDim
from xla_teach.hlo.evaluator.registry import Value, register

if TYPE_CHECKING:
    from xla_teach.hlo.evaluator.core import HloEvaluator
    from xla_teach.hlo.ir import HloInstruction
    from xla_teach.hlo.shape import Shape


@register("broadcast")
def handle_broadcast(ev: HloEvaluator, instr: HloInstruction, operands: list[Value]) -> Value:
    """Operand dimension i becomes output dimension ``dimensions[i]``; the other output
    dimensions repeat the data: ``out[idx] = x[idx[d0], idx[d1], ...]``."""
    x = operands[0]
    mapped = instr.dimensions
    out_dims = instr.shape.dimensions
    # Order the operand's dims like their output positions, then give every output
    # dimension that is not mapped a size-1 axis and let NumPy repeat along it.
    order = sorted(range(len(mapped)), key=lambda i: mapped[i])
    x = np.transpose(x, order)
    expanded_shape = [1] * len(out_dims)
    for i in order:
        expanded_shape[mapped[i]] = operands[0].shape[i]
    return np.broadcast_to(x.reshape(expanded_shape), out_dims).copy()


@register("reshape")
def handle_reshape(ev: HloEvaluator, instr: HloInstruction, operands: list[Value]) -> Value:
    """Row-major logical order in, row-major logical order out (layouts do not matter)."""
    return np.reshape(operands[0], instr.shape.dimensions).copy()


@register("transpose")
def handle_transpose(ev: HloEvaluator, instr: HloInstruction, operands: list[Value]) -> Value:
    """``out.dims[i] = in.dims[p[i]]`` -- exactly NumPy's convention."""
    return np.transpose(operands[0], instr.dimensions).copy()


@register("reverse")
def handle_reverse(ev: HloEvaluator, instr: HloInstruction, operands: list[Value]) -> Value:
    return np.flip(operands[0], axis=instr.dimensions).copy()


@register("copy")
def handle_copy(ev: HloEvaluator, instr: HloInstruction, operands: list[Value]) -> Value:
    """Same values (a copy exists to change the layout or break aliasing). Copying a tuple
    copies its top-level table only, so its elements are passed through."""
    value = operands[0]
    return value if isinstance(value, tuple) else value.copy()


@register("concatenate")
def handle_concatenate(ev: HloEvaluator, instr: HloInstruction, operands: list[Value]) -> Value:
    return np.concatenate(operands, axis=instr.dimensions[0])


# ---- slicing --------------------------------------------------------------------------
@register("slice")
def handle_slice(ev: HloEvaluator, instr: HloInstruction, operands: list[Value]) -> Value:
    """Per dimension the elements ``start, start+stride, ... < limit``."""
    index = tuple(slice(d.start, d.limit, d.stride) for d in instr.attr("slice"))
    return operands[0][index].copy()


def clamped_starts(starts: Sequence[Value], operand_dims: Sequence[int], sizes: Sequence[int]) -> list[int]:
    """Dynamic start indices clamped to ``[0, dim - size]``: never out of bounds."""
    return [min(max(int(s), 0), dim - size) for s, dim, size in zip(starts, operand_dims, sizes, strict=True)]


@register("dynamic-slice")
def handle_dynamic_slice(ev: HloEvaluator, instr: HloInstruction, operands: list[Value]) -> Value:
    x, starts = operands[0], operands[1:]
    sizes = instr.attr("dynamic_slice_sizes")
    begin = clamped_starts(starts, x.shape, sizes)
    return x[tuple(slice(b, b + s) for b, s in zip(begin, sizes, strict=True))].copy()


@register("dynamic-update-slice")
def handle_dynamic_update_slice(ev: HloEvaluator, instr: HloInstruction, operands: list[Value]) -> Value:
    x, update, starts = operands[0], operands[1], operands[2:]
    begin = clamped_starts(starts, x.shape, update.shape)
    result = x.copy()
    result[tuple(slice(b, b + s) for b, s in zip(begin, update.shape, strict=True))] = update
    return result


# ---- pad ------------------------------------------------------------------------------
def pad_array(x: np.ndarray, pad_value: np.ndarray, padding: Sequence[PaddingDim]) -> np.ndarray:
    """XLA's pad: per dimension, first ``interior`` copies of ``pad_value`` between
    neighbours, then ``low``/``high`` cells at the edges; negative edges remove cells.
    Output size per dimension: ``low + high + n + (n-1)*interior`` (n > 0)."""
    for axis, pad in enumerate(padding):
        x = _pad_axis(x, axis, pad, pad_value)
    return x


def _pad_axis(x: np.ndarray, axis: int, pad: PaddingDim, pad_value: np.ndarray) -> np.ndarray:
    n = x.shape[axis]
    spread = n + (n - 1) * pad.interior if n > 0 else 0
    low, high = max(pad.low, 0), max(pad.high, 0)
    canvas_shape = list(x.shape)
    canvas_shape[axis] = low + spread + high
    canvas = np.full(canvas_shape, pad_value, dtype=x.dtype)
    placed = [slice(None)] * x.ndim
    placed[axis] = slice(low, low + spread, pad.interior + 1)
    canvas[tuple(placed)] = x
    cropped = [slice(None)] * x.ndim
    cropped[axis] = slice(max(-pad.low, 0), canvas_shape[axis] - max(-pad.high, 0))
    return canvas[tuple(cropped)]


@register("pad")
def handle_pad(ev: HloEvaluator, instr: HloInstruction, operands: list[Value]) -> Value:
    return pad_array(operands[0], operands[1], instr.attr("padding")).copy()


# ---- bitcast --------------------------------------------------------------------------
def _major_to_minor(shape: Shape) -> list[int]:
    return list(reversed(shape.minor_to_major()))


@register("bitcast")
def handle_bitcast(ev: HloEvaluator, instr: HloInstruction, operands: list[Value]) -> Value:
    """Reinterpret the operand's buffer with the result shape.

    1. lay the operand out in memory: its elements in *physical* order (major-to-minor,
       from its layout), as raw bytes;
    2. read those bytes as the result's element type, in the result's physical order;
    3. turn that physical array back into logical dimension order.

    With default (row-major) layouts on both sides this is just a reshape.
    """
    x = operands[0]
    source_order = _major_to_minor(instr.operand(0).shape)
    memory = np.ascontiguousarray(np.transpose(x, source_order)).reshape(-1).view(np.uint8)
    result_shape = instr.shape
    result_order = _major_to_minor(result_shape)
    physical = memory.view(result_shape.dtype).reshape([result_shape.dimensions[d] for d in result_order])
    return np.transpose(physical, np.argsort(result_order)).copy()
