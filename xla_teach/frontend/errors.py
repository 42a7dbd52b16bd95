"""``CompilationError``: what cannot be compiled, said where it happened.

XLA compiles a whole function for fixed shapes before any data exists. Some
Python code cannot be turned into such a program: a Python ``if`` on a traced
value needs the value *now*, ``xnp.nonzero`` returns an array whose length depends
on the data, ``float(x)`` asks for a number that only exists at run time. The
front end refuses these with a :class:`CompilationError` -- never a silent
fallback -- that names the operation, points at the user's line, explains why and
suggests the compilable alternative.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass

import numpy as np

_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_STDLIB_DIR = os.path.dirname(os.path.abspath(os.__file__))
# NumPy's own files: ``np.reshape(x, s)`` on a tracer passes through them before reaching xla_teach.
_NUMPY_DIR = os.path.dirname(os.path.abspath(np.__file__))


def _is_internal(filename: str) -> bool:
    """xla_teach's own files, NumPy's, and the standard library (contextlib, functools...)."""
    if filename.startswith((_PACKAGE_DIR + os.sep, _NUMPY_DIR + os.sep)):
        return True
    return filename.startswith(_STDLIB_DIR + os.sep) and "site-packages" not in filename


@dataclass(frozen=True)
class SourceLocation:
    """A line of the user's program (the first stack frame outside xla_teach)."""

    file: str
    line: int
    function: str
    text: str = ""

    def __str__(self) -> str:
        where = f"{self.file}:{self.line} in {self.function}"
        return f"{where}\n    {self.text}" if self.text else where


def user_frame(skip_package: bool = True) -> SourceLocation | None:
    """The innermost frame that is not xla_teach's own code (the user's line)."""
    frame = sys._getframe(1)
    while frame is not None:
        filename = os.path.abspath(frame.f_code.co_filename)
        if not (skip_package and _is_internal(filename)):
            return SourceLocation(frame.f_code.co_filename, frame.f_lineno, frame.f_code.co_name,
                                  _line_text(frame.f_code.co_filename, frame.f_lineno))
        frame = frame.f_back
    return None


def _line_text(filename: str, lineno: int) -> str:
    import linecache

    return linecache.getline(filename, lineno).strip()


class CompilationError(ValueError):
    """The traced function does something XLA cannot compile.

    Attributes: ``operation`` (what was attempted), ``reason`` (why it cannot be
    compiled), ``suggestion`` (what to write instead) and ``location`` (the user's
    source line, a :class:`SourceLocation` or None).
    """

    def __init__(self, operation: str, reason: str, suggestion: str = "",
                 location: SourceLocation | None = None) -> None:
        self.operation = operation
        self.reason = reason
        self.suggestion = suggestion
        self.location = location if location is not None else user_frame()
        lines = [f"{operation}: {reason}"]
        if self.location is not None:
            lines.append(f"  at {self.location}")
        if suggestion:
            lines.append(f"  Instead: {suggestion}")
        super().__init__("\n".join(lines))


def data_dependent_shape_error(operation: str, suggestion: str) -> CompilationError:
    """The error for operations whose *output shape* depends on the input values."""
    return CompilationError(
        operation,
        "the shape of the result depends on the values in the array, which are not known while the "
        "function is compiled (XLA programs have static shapes: every array's shape is fixed before "
        "any data is seen)",
        suggestion,
    )


def concretization_error(operation: str, what: str, suggestion: str) -> CompilationError:
    """The error for turning a traced value into a Python value (bool, int, float, NumPy array)."""
    return CompilationError(
        operation,
        f"{what} needs the value of a traced array, but while a function is being compiled its "
        "arrays are only shapes and dtypes -- their values exist only when the compiled program runs",
        suggestion,
    )


def describe_value(value: object) -> str:
    """A short description of a user's return value for error messages ("a float32[2] array",
    "a tuple of 3 items", "None")."""
    if value is None:
        return "None"
    aval = getattr(value, "aval", None)
    if aval is not None:
        return f"a {aval} array"
    if isinstance(value, np.ndarray):
        return f"a {value.dtype}{list(value.shape)} NumPy array"
    if isinstance(value, (tuple, list)):
        return f"a {type(value).__name__} of {len(value)} item{'s' if len(value) != 1 else ''}"
    return f"a {type(value).__name__}"


def expect_pair(value: object, what: str, pair: str) -> tuple[object, object]:
    """``value`` unpacked as a pair (tuple or list of two), or a ValueError naming ``what``
    (the user's call) and the expected ``pair`` (e.g. "(output, aux)")."""
    if not (isinstance(value, (tuple, list)) and len(value) == 2):
        raise ValueError(f"{what}: the function must return a pair {pair}, got {describe_value(value)}")
    return value[0], value[1]
