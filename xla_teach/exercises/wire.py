"""What crosses between the grader and the student's process: JSON, with NumPy arrays as ``.npy``.

Only plain data crosses: numbers, strings, lists, dicts and arrays. Arrays travel as the bytes
of an ``.npy`` file (base64), read back with ``allow_pickle=False`` -- never as a pickle, which
would let the student's process run code in the grader's.
"""

from __future__ import annotations

import base64
import io
from typing import Any

import numpy as np

_ARRAY = "__ndarray__"


def encode(value: Any) -> Any:
    """``value`` as JSON-ready data (arrays become ``{"__ndarray__": base64 .npy}``)."""
    if isinstance(value, np.ndarray | np.generic):
        buffer = io.BytesIO()
        np.save(buffer, np.asarray(value), allow_pickle=False)
        return {_ARRAY: base64.b64encode(buffer.getvalue()).decode("ascii")}
    if isinstance(value, dict):
        return {str(k): encode(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [encode(v) for v in value]
    if value is None or isinstance(value, bool | int | float | str):
        return value
    raise TypeError(f"cannot send a {type(value).__name__} between the grader and the student's process")


def decode(value: Any) -> Any:
    """The inverse of :func:`encode`; anything but plain data raises ``ValueError``."""
    if isinstance(value, dict):
        if set(value) == {_ARRAY}:
            return np.load(io.BytesIO(base64.b64decode(value[_ARRAY])), allow_pickle=False)
        return {k: decode(v) for k, v in value.items()}
    if isinstance(value, list):
        return [decode(v) for v in value]
    if value is None or isinstance(value, bool | int | float | str):
        return value
    raise ValueError(f"unexpected {type(value).__name__} in a message")
