"""Element types and type promotion of ``xla_teach.numpy``.

The rules (documented in ``docs/frontend.md``):

* **Arrays keep their dtype.** A ``float64`` NumPy array passed to ``jit`` becomes an
  ``f64`` parameter; nothing is silently narrowed.
* **Defaults are 32-bit**, as in JAX: Python floats and ``xnp.zeros``/``xnp.linspace``
  default to ``float32``, Python ints and ``xnp.arange`` to ``int32``.
* **Python scalars are weakly typed**: they take the type of the array they meet
  (``x * 2.0`` stays ``f16`` for an ``f16`` x; ``i * 2`` stays ``s8`` for an ``s8`` i).
  A Python float meeting an integer array gives ``float32``.
* **Array-array promotion follows NumPy**, with one difference taken from JAX:
  mixing an integer and a floating array gives the floating type
  (``int32 + float32 -> float32``; NumPy says ``float64``), and ``bfloat16`` with
  ``float16`` gives ``float32``.
* True division of integers gives ``float32`` (NumPy: ``float64``).
"""

from __future__ import annotations

from collections.abc import Sequence

import ml_dtypes
import numpy as np

from xla_teach.hlo.types import PrimitiveType

float32 = np.dtype(np.float32)
int32 = np.dtype(np.int32)
bool_ = np.dtype(np.bool_)
bfloat16 = np.dtype(ml_dtypes.bfloat16)

DEFAULT_FLOAT = float32
DEFAULT_INT = int32


def canonicalize(dtype: object) -> np.dtype:
    """A NumPy dtype that has an HLO element type, else a ValueError."""
    if isinstance(dtype, str) and dtype in {t.value for t in PrimitiveType}:
        return PrimitiveType.from_name(dtype).dtype
    if dtype is float:
        return DEFAULT_FLOAT
    if dtype is int:
        return DEFAULT_INT
    if dtype is bool:
        return bool_
    try:
        dt = np.dtype(dtype)  # type: ignore[call-overload]
    except TypeError:
        raise ValueError(f"{dtype!r} is not a dtype") from None
    try:
        PrimitiveType.from_dtype(dt)
    except TypeError:
        raise ValueError(f"dtype {dt} has no HLO element type (supported: bool, int8..64, uint8..64, "
                         "float16, bfloat16, float32, float64)") from None
    return dt


def is_float(dtype: np.dtype) -> bool:
    return np.dtype(dtype).kind == "f" or np.dtype(dtype) == bfloat16


def is_int(dtype: np.dtype) -> bool:
    return np.dtype(dtype).kind in "iu"


def python_scalar_dtype(value: bool | int | float) -> np.dtype:
    """The default dtype a (weakly typed) Python scalar stands for."""
    if isinstance(value, bool):
        return bool_
    if isinstance(value, int):
        return DEFAULT_INT
    if isinstance(value, float):
        return DEFAULT_FLOAT
    raise ValueError(f"{type(value).__name__} is not a supported Python scalar (complex numbers are not supported)")


def _promote_strong(dtypes: Sequence[np.dtype]) -> np.dtype:
    floats = [d for d in dtypes if is_float(d)]
    if floats:
        if all(d == floats[0] for d in floats):
            return floats[0]
        if bfloat16 in floats:  # bf16 with f16 -> f32; with a wider float -> that float
            others = [d for d in floats if d != bfloat16]
            return np.result_type(np.float32, *others)
        return np.result_type(*floats)
    ints = [d for d in dtypes if is_int(d)]
    if ints:
        return np.result_type(*ints)
    return bool_


def result_type(*operands: tuple[np.dtype, bool]) -> tuple[np.dtype, bool]:
    """Promote ``(dtype, weak)`` pairs; returns the result dtype and whether it is weak."""
    strong = [d for d, weak in operands if not weak]
    weak = [d for d, w in operands if w]
    if not strong:
        return _promote_strong(weak), True
    base = _promote_strong(strong)
    for d in weak:
        if is_float(d) and not is_float(base):
            base = DEFAULT_FLOAT
        elif is_int(d) and base == bool_:
            base = DEFAULT_INT
    return base, False
