"""The other elementwise opcodes: ``compare select clamp convert bitcast-convert
reduce-precision`` (XLA's operation semantics as measured on XLA:CPU; tests/hlo/ pins each case).

``compare`` works by mapping both operands to *comparison keys* whose natural NumPy order
is the requested comparison's order (:func:`comparison_keys`); ``sort``'s fast path uses
the same keys, so both agree by construction.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from xla_teach.hlo.evaluator.elementwise_binary import maximum, minimum
from xla_teach.hlo.evaluator.numeric import (
    PRED,
    convert_array,
    is_float,
    is_signed,
    is_unsigned,
    reduce_precision,
    signed_of,
    total_order_key,
    unsigned_of,
    widen,
)
from xla_teach.hlo.evaluator.registry import Value, register

if TYPE_CHECKING:
    from xla_teach.hlo.evaluator.core import HloEvaluator
    from xla_teach.hlo.ir import HloInstruction

COMPARISONS: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "EQ": np.equal,
    "NE": np.not_equal,
    "LT": np.less,
    "LE": np.less_equal,
    "GT": np.greater,
    "GE": np.greater_equal,
}


# ---- compare --------------------------------------------------------------------------
def comparison_keys(x: np.ndarray, comparison_type: str | None) -> np.ndarray:
    """Values whose NumPy ordering is the ordering ``compare`` uses for ``comparison_type``.

    * floats, FLOAT (the default): IEEE order on the widened values (NaN is unordered);
    * floats, TOTALORDER: integers from :func:`numeric.total_order_key`;
    * integers: SIGNED/UNSIGNED reinterpret the bits when they differ from the type;
    * pred: false < true.
    """
    x = np.asarray(x)
    if is_float(x.dtype):
        if comparison_type == "TOTALORDER":
            return total_order_key(x)
        return widen(x)
    if comparison_type == "UNSIGNED" and is_signed(x.dtype):
        return x.view(unsigned_of(x.dtype))
    if comparison_type == "SIGNED" and is_unsigned(x.dtype):
        return x.view(signed_of(x.dtype))
    return x


def compare_arrays(a: np.ndarray, b: np.ndarray, direction: str, comparison_type: str | None = None) -> np.ndarray:
    """``compare(a, b), direction=..., type=...`` as a pred array."""
    return COMPARISONS[direction](comparison_keys(a, comparison_type), comparison_keys(b, comparison_type))


@register("compare")
def handle_compare(ev: HloEvaluator, instr: HloInstruction, operands: list[Value]) -> Value:
    return compare_arrays(operands[0], operands[1], instr.attr("direction"), instr.attrs.get("type"))


# ---- select / clamp -------------------------------------------------------------------
@register("select")
def handle_select(ev: HloEvaluator, instr: HloInstruction, operands: list[Value]) -> Value:
    """``select(pred, on_true, on_false)``; pred may be a scalar; tuples need a scalar pred."""
    pred, on_true, on_false = operands
    if isinstance(on_true, tuple):
        return on_true if bool(pred) else on_false
    return np.where(pred, on_true, on_false)


@register("clamp")
def handle_clamp(ev: HloEvaluator, instr: HloInstruction, operands: list[Value]) -> Value:
    """``clamp(lo, x, hi) = min(max(x, lo), hi)``; lo/hi may be scalars; NaN propagates and
    ``lo > hi`` gives ``hi``."""
    low, x, high = operands
    low = np.broadcast_to(low, x.shape)
    high = np.broadcast_to(high, x.shape)
    return minimum(maximum(x, low), high)


# ---- conversions ----------------------------------------------------------------------
@register("convert")
def handle_convert(ev: HloEvaluator, instr: HloInstruction, operands: list[Value]) -> Value:
    return convert_array(operands[0], instr.shape.dtype)


if sys.byteorder != "little":  # pragma: no cover - every supported host is little-endian
    raise ImportError("the HLO evaluator's bitcast-convert assumes a little-endian host")


@register("bitcast-convert")
def handle_bitcast_convert(ev: HloEvaluator, instr: HloInstruction, operands: list[Value]) -> Value:
    """Reinterpret the bits. A narrower result gains a minor-most dimension holding the
    pieces of one element, low half first (little-endian); a wider result consumes one.

    Reading the row-major bytes as the new type and reshaping does exactly that.
    """
    x = np.ascontiguousarray(operands[0])
    target = instr.shape.dtype
    if target == PRED:  # a byte is true when it is nonzero
        return x.reshape(-1).view(np.uint8).reshape(instr.shape.dimensions) != 0
    return x.reshape(-1).view(target).reshape(instr.shape.dimensions)


@register("reduce-precision")
def handle_reduce_precision(ev: HloEvaluator, instr: HloInstruction, operands: list[Value]) -> Value:
    return reduce_precision(operands[0], int(instr.attr("exponent_bits")), int(instr.attr("mantissa_bits")))
