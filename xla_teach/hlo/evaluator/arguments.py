"""Checking and converting the arguments a caller passes for a computation's parameters.

NumPy arrays (and NumPy scalars) must already have exactly the parameter's dtype and
dimensions: the evaluator never converts them silently. Python scalars and (nested)
lists are converted when the conversion is exact (``3`` -> s32 or f32, ``0.5`` -> bf16),
and rejected otherwise (``0.1`` is not exactly an f32; ``300`` is not a u8).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from xla_teach.hlo.evaluator.numeric import is_float
from xla_teach.hlo.evaluator.registry import TOKEN, Token, Value
from xla_teach.hlo.ir import HloComputation, HloInstruction
from xla_teach.hlo.shape import Shape


def check_arguments(comp: HloComputation, args: Sequence[Any],
                    params: Sequence[HloInstruction] | None = None) -> list[Value]:
    """Validate ``args`` against ``comp``'s parameters (``params``, when the caller already has
    them in order); returns them as evaluator values."""
    params = comp.parameter_instructions if params is None else params
    if isinstance(args, (str, bytes, np.ndarray)) or not isinstance(args, Sequence):
        raise TypeError(f"computation '{comp.name}' takes its arguments as a list (one array per parameter), "
                        f"got {type(args).__name__}")
    if len(args) != len(params):
        expected = ", ".join(f"{p.name}: {p.shape.to_text(print_layout=False)}" for p in params)
        raise ValueError(
            f"computation '{comp.name}' takes {len(params)} argument(s) ({expected}), got {len(args)}"
        )
    values: list[Value] = []
    for arg, p in zip(args, params, strict=True):
        shape = p.shape
        if type(arg) is np.ndarray and shape.is_array and arg.shape == shape.dimensions and arg.dtype == shape.dtype:
            values.append(arg)  # the common case, without building the error messages' texts
        else:
            values.append(convert_argument(arg, shape, f"parameter {p.parameter_number} '{p.name}'"))
    return values


def convert_argument(arg: Any, shape: Shape, what: str) -> Value:
    """One argument for a parameter of ``shape``; ``what`` names it in error messages."""
    expected = shape.to_text(print_layout=False)
    if shape.is_tuple:
        if not isinstance(arg, tuple | list) or len(arg) != len(shape.tuple_shapes):
            raise ValueError(f"{what}: expected a tuple {expected}, got {_describe(arg)}")
        return tuple(
            convert_argument(element, element_shape, f"{what} element {i}")
            for i, (element, element_shape) in enumerate(zip(arg, shape.tuple_shapes, strict=True))
        )
    if shape.is_token:
        if arg is not None and not isinstance(arg, Token):
            raise ValueError(f"{what}: expected a token, got {_describe(arg)}")
        return TOKEN
    if isinstance(arg, np.ndarray | np.generic):
        array = np.asarray(arg)
        if array.dtype != shape.dtype or array.shape != shape.dimensions:
            raise ValueError(f"{what}: expected {expected}, got {_describe(array)}")
        return array
    return _convert_python_value(arg, shape, what)


def _convert_python_value(arg: Any, shape: Shape, what: str) -> np.ndarray:
    expected = shape.to_text(print_layout=False)
    try:
        raw = np.asarray(arg)
    except ValueError as error:  # ragged nested lists
        raise ValueError(f"{what}: expected {expected}, got a value NumPy cannot read ({error})") from None
    if raw.dtype.kind not in "biuf":
        raise ValueError(f"{what}: expected {expected}, got {_describe(arg)}")
    if raw.shape != shape.dimensions:
        raise ValueError(f"{what}: expected {expected}, got a Python value of shape {list(raw.shape)}")
    with np.errstate(all="ignore"):
        converted = raw.astype(shape.dtype)
    if not _same_values(converted, raw):
        raise ValueError(
            f"{what}: the Python value {arg!r} is not exactly representable as {expected}; "
            f"pass a NumPy array of dtype {shape.dtype} to choose the rounding yourself"
        )
    return converted


def _same_values(converted: np.ndarray, raw: np.ndarray) -> bool:
    """Compare as exact Python numbers (int and float compare exactly in Python)."""
    if is_float(converted.dtype):
        converted = converted.astype(np.float64)  # exact widening, including bf16
    for new, old in zip(converted.reshape(-1).tolist(), raw.reshape(-1).tolist(), strict=True):
        both_nan = isinstance(new, float) and isinstance(old, float) and math.isnan(new) and math.isnan(old)
        if new != old and not both_nan:
            return False
    return True


def _describe(value: Any) -> str:
    if isinstance(value, np.ndarray):
        return f"an array of dtype {value.dtype} and shape {list(value.shape)}"
    if isinstance(value, tuple | list):
        return f"a {type(value).__name__} of {len(value)} element(s)"
    return f"{type(value).__name__} {value!r}"
