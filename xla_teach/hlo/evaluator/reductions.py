"""``reduce``, ``reduce-window`` and ``select-and-scatter`` (§7 of the semantics).

**reduce, general path**: for every output position, ``acc = init`` and then
``acc = f(acc, x)`` for each reduced element in row-major order -- vectorised over the
output positions, with ``f`` evaluated per element by :meth:`HloEvaluator.apply_elementwise`.
Variadic reduces (N operands, N inits) carry N accumulators and return a tuple.

**reduce, fast path**: when ``f`` is one associative op of its two parameters (add,
multiply, maximum, minimum, and, or, xor), the elements are combined pairwise as a tree
with that op's whole-array function and the result combined with ``init`` once. Same op,
same rounding per step, same init handling; only the grouping differs, which XLA allows
(so float sums may differ from the general path in the last bits; everything else is
bit-identical).

**reduce-window**: pad the operand with ``init`` (edge padding and base-dilation holes),
then fold the window positions in row-major order: for window offset ``k`` the values are
one strided view of the padded array, so the fold is vectorised over all outputs.

**select-and-scatter**: for each window, fold ``select(best, candidate)`` over its
in-bounds elements in row-major order (true keeps ``best``, so ``GE`` picks the first
maximum), then ``out[picked] = scatter(out[picked], source[window])``.
"""

from __future__ import annotations

import itertools
import math
from typing import TYPE_CHECKING

import numpy as np

from xla_teach.hlo.attributes import PaddingDim, Window, WindowDimension
from xla_teach.hlo.evaluator.data_movement import pad_array
from xla_teach.hlo.evaluator.fast_paths import tree_reduce_last_axis
from xla_teach.hlo.evaluator.indexing import combine_into
from xla_teach.hlo.evaluator.registry import Value, register

if TYPE_CHECKING:
    from xla_teach.hlo.evaluator.core import HloEvaluator
    from xla_teach.hlo.ir import HloComputation, HloInstruction


def fold(
    ev: HloEvaluator, comp: HloComputation, inits: list[np.ndarray], steps: list[list[np.ndarray]]
) -> list[np.ndarray]:
    """``acc = inits; for values in steps: acc = comp(*acc, *values)`` elementwise."""
    accumulators = list(inits)
    for values in steps:
        accumulators = ev.apply_elementwise(comp, accumulators + values)
    return accumulators


def _as_result(arrays: list[np.ndarray]) -> Value:
    return arrays[0] if len(arrays) == 1 else tuple(arrays)


# ---- reduce ---------------------------------------------------------------------------
@register("reduce")
def handle_reduce(ev: HloEvaluator, instr: HloInstruction, operands: list[Value]) -> Value:
    count = len(operands) // 2
    arrays, inits = operands[:count], operands[count:]
    reduced = sorted(instr.dimensions)
    kept = [d for d in range(arrays[0].ndim) if d not in reduced]
    out_dims = tuple(arrays[0].shape[d] for d in kept)
    reduced_count = math.prod(arrays[0].shape[d] for d in reduced)
    # Move the reduced dimensions last and flatten them: [kept..., reduced elements].
    flat = [np.transpose(a, kept + reduced).reshape(out_dims + (reduced_count,)) for a in arrays]
    init_arrays = [np.broadcast_to(init, out_dims) for init in inits]

    pattern = ev.scalar_pattern(instr.to_apply)
    if count == 1 and pattern is not None and pattern.is_associative_fold() and reduced_count > 0:

        def combine(a: np.ndarray, b: np.ndarray) -> np.ndarray:
            return pattern.apply([a, b])[0]

        partial = tree_reduce_last_axis(combine, flat[0])
        return np.asarray(combine(init_arrays[0], partial))

    steps = [[a[..., i] for a in flat] for i in range(reduced_count)]
    results = fold(ev, instr.to_apply, init_arrays, steps)
    return _as_result([np.array(r, copy=True) for r in results])


# ---- reduce-window --------------------------------------------------------------------
def window_output_size(n: int, dim: WindowDimension) -> int:
    """``floor((padded - effective_window) / stride) + 1`` (0 if the window does not fit)."""
    dilated = (n - 1) * dim.base_dilation + 1 if n > 0 else 0
    padded = dilated + dim.padding_low + dim.padding_high
    effective = (dim.size - 1) * dim.window_dilation + 1
    if padded < effective:
        return 0
    return (padded - effective) // dim.stride + 1


def window_views(padded: np.ndarray, window: Window, out_dims: tuple[int, ...]) -> list[np.ndarray]:
    """For each window offset in row-major order, the strided view of ``padded`` holding
    that offset's element of every window: ``view[o] = padded[o*stride + k*dilation]``."""
    views = []
    for offset in itertools.product(*(range(d.size) for d in window.dimensions)):
        index = []
        for k, d, out in zip(offset, window.dimensions, out_dims, strict=True):
            start = k * d.window_dilation
            index.append(slice(start, start + (out - 1) * d.stride + 1, d.stride) if out > 0 else slice(0, 0))
        views.append(padded[tuple(index)])
    return views


def base_padding(window: Window) -> list[PaddingDim]:
    """Edge padding plus base dilation (``lhs_dilate - 1`` holes) as a ``pad`` spec."""
    return [PaddingDim(d.padding_low, d.padding_high, d.base_dilation - 1) for d in window.dimensions]


@register("reduce-window")
def handle_reduce_window(ev: HloEvaluator, instr: HloInstruction, operands: list[Value]) -> Value:
    count = len(operands) // 2
    arrays, inits = operands[:count], operands[count:]
    window: Window = instr.attr("window")
    out_dims = tuple(window_output_size(n, d) for n, d in zip(arrays[0].shape, window.dimensions, strict=True))
    # Padding cells and dilation holes hold init, so they contribute init to the fold.
    padded = [pad_array(a, init, base_padding(window)) for a, init in zip(arrays, inits, strict=True)]
    per_operand_views = [window_views(p, window, out_dims) for p in padded]
    steps = [list(step) for step in zip(*per_operand_views, strict=True)]
    init_arrays = [np.broadcast_to(init, out_dims) for init in inits]
    results = fold(ev, instr.to_apply, init_arrays, steps)
    return _as_result([np.array(r, copy=True) for r in results])


# ---- select-and-scatter ---------------------------------------------------------------
@register("select-and-scatter")
def handle_select_and_scatter(ev: HloEvaluator, instr: HloInstruction, operands: list[Value]) -> Value:
    operand, source, init = operands
    window: Window = instr.attr("window")
    if any(d.base_dilation != 1 for d in window.dimensions):
        raise NotImplementedError("select-and-scatter with base dilation")
    out_dims = source.shape
    # Pad the operand, a validity mask and the flat position of each element the same way,
    # so one strided view per window offset gives candidate value, validity and position.
    padding = base_padding(window)
    values = pad_array(operand, np.zeros((), operand.dtype), padding)
    valid = pad_array(np.ones(operand.shape, bool), np.array(False), padding)
    position = pad_array(np.arange(operand.size).reshape(operand.shape), np.array(-1), padding)
    candidates = zip(
        window_views(values, window, out_dims),
        window_views(valid, window, out_dims),
        window_views(position, window, out_dims),
        strict=True,
    )
    best_value = np.zeros(out_dims, operand.dtype)
    best_position = np.full(out_dims, -1, np.int64)
    have = np.zeros(out_dims, bool)
    for value, is_valid, pos in candidates:
        # Take the candidate where there is no best yet, or select(best, candidate) is false.
        (keep_best,) = ev.apply_elementwise(instr.attr("select"), [best_value, value])
        take = is_valid & (~have | ~keep_best)
        best_value = np.where(take, value, best_value)
        best_position = np.where(take, pos, best_position)
        have |= is_valid
    result = np.full(operand.size, init, operand.dtype)
    chosen = have.reshape(-1)
    (result,) = combine_into(
        ev, instr.attr("scatter"), [result], best_position.reshape(-1)[chosen], [source.reshape(-1)[chosen]]
    )
    return result.reshape(operand.shape)
