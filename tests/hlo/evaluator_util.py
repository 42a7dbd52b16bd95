"""Helpers for the evaluator tests: build tiny HLO modules from text and run them."""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np

from xla_teach.hlo.evaluator import HloEvaluator
from xla_teach.hlo.text.parser import parse_hlo

BF16 = ml_dtypes.bfloat16

_TYPE_NAMES = {
    np.dtype(np.bool_): "pred",
    np.dtype(np.int8): "s8",
    np.dtype(np.int16): "s16",
    np.dtype(np.int32): "s32",
    np.dtype(np.int64): "s64",
    np.dtype(np.uint8): "u8",
    np.dtype(np.uint16): "u16",
    np.dtype(np.uint32): "u32",
    np.dtype(np.uint64): "u64",
    np.dtype(np.float16): "f16",
    np.dtype(BF16): "bf16",
    np.dtype(np.float32): "f32",
    np.dtype(np.float64): "f64",
}


def type_name(dtype: Any) -> str:
    return _TYPE_NAMES[np.dtype(dtype)]


def shape_text(dtype: Any, dims: tuple[int, ...] | list[int]) -> str:
    return f"{type_name(dtype)}[{','.join(str(d) for d in dims)}]"


def run_hlo(text: str, *args: Any, fast: bool = True) -> Any:
    """Parse a module and evaluate its ENTRY; returns the result value (array or tuple)."""
    module = parse_hlo(text)
    return HloEvaluator(use_fast_paths=fast).evaluate_computation(module.entry, list(args))


def run_both(text: str, *args: Any) -> tuple[Any, Any]:
    """(fast-path result, general-path result)."""
    return run_hlo(text, *args, fast=True), run_hlo(text, *args, fast=False)


def run_op(opcode: str, *arrays: np.ndarray, result: str | None = None, attrs: str = "", fast: bool = True) -> Any:
    """One instruction applied to parameters holding ``arrays``.

    ``result`` is the result shape text; by default the first operand's shape.
    """
    arrays = tuple(np.asarray(a) for a in arrays)
    params = "\n".join(
        f"  p{i} = {shape_text(a.dtype, a.shape)} parameter({i})" for i, a in enumerate(arrays)
    )
    operands = ", ".join(f"p{i}" for i in range(len(arrays)))
    result = result or shape_text(arrays[0].dtype, arrays[0].shape)
    suffix = f", {attrs}" if attrs else ""
    text = f"HloModule test\n\nENTRY main {{\n{params}\n  ROOT r = {result} {opcode}({operands}){suffix}\n}}\n"
    return run_hlo(text, *arrays, fast=fast)


def bits_equal(actual: np.ndarray, expected: np.ndarray) -> bool:
    """Same dtype, shape and bit patterns, except that any NaN equals any NaN (sign and
    payload of a NaN are unspecified); so -0.0 != +0.0."""
    actual, expected = np.asarray(actual), np.asarray(expected)
    if actual.dtype != expected.dtype or actual.shape != expected.shape:
        return False
    width = actual.dtype.itemsize
    view = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[width]
    same_bits = np.ascontiguousarray(actual).view(view) == np.ascontiguousarray(expected).view(view)
    if actual.dtype.kind in "iub":
        return bool(np.all(same_bits))
    both_nan = np.isnan(actual.astype(np.float64)) & np.isnan(expected.astype(np.float64))
    return bool(np.all(same_bits | both_nan))


def assert_bits_equal(actual: np.ndarray, expected: np.ndarray) -> None:
    assert bits_equal(actual, expected), f"\nactual:   {actual!r}\nexpected: {expected!r}"
