"""Clear errors for wrongly typed builder arguments.

Shape inference explains bad *shapes*; this module explains bad *arguments*: a list where an
``XlaOp`` belongs, a bare int where a sequence of dimensions belongs. Without it such a call
fails deep inside with ``AttributeError: 'list' object has no attribute 'rank'``; with it::

    >>> b.dot(x, [1, 2, 3])
    ShapeError: dot: argument 'rhs' must be an XlaOp (an op built by this builder), got list

:func:`explain_argument_errors` wraps every public method of a builder class:

1. before the call, each argument annotated ``XlaOp`` (or ``Sequence[XlaOp]``) is checked;
2. a ``TypeError``/``AttributeError``/``ValueError`` the method raises anyway (say ``int``
   given for a sequence of dimensions) becomes a :class:`ShapeError` naming the method, the
   operand shapes and the original complaint, chained to the original for the traceback.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any, TypeVar

from xla_teach.hlo.builder.base import XlaOp
from xla_teach.hlo.errors import ShapeError

T = TypeVar("T")
_OP_ANNOTATIONS = ("XlaOp",)
_OP_SEQUENCE_ANNOTATIONS = ("Sequence[XlaOp]", "list[XlaOp]")


def _check_op_arguments(name: str, signature: inspect.Signature, shown: str, args: tuple, kwargs: dict) -> None:
    try:
        bound = signature.bind(*args, **kwargs)
    except TypeError as err:
        raise ShapeError(name, [], f"{err} (signature: {shown})") from None
    for param_name, value in bound.arguments.items():
        annotation = signature.parameters[param_name].annotation
        if annotation in _OP_ANNOTATIONS and not isinstance(value, XlaOp):
            raise ShapeError(name, [], f"argument '{param_name}' must be an XlaOp (an op built by this "
                                       f"builder), got {type(value).__name__}")
        if annotation in _OP_SEQUENCE_ANNOTATIONS:
            if isinstance(value, XlaOp) or not hasattr(value, "__iter__"):
                raise ShapeError(name, [], f"argument '{param_name}' must be a sequence of XlaOps, "
                                           f"got {type(value).__name__}")
            for i, item in enumerate(value):
                if not isinstance(item, XlaOp):
                    raise ShapeError(name, [], f"argument '{param_name}'[{i}] must be an XlaOp, "
                                               f"got {type(item).__name__}")


def _explained(method: Callable[..., T], name: str) -> Callable[..., T]:
    """``method`` (called ``name`` on the class: aliases such as ``negate`` keep their name)."""
    signature = inspect.signature(method)
    shown = f"{name}{signature}".replace("'", "")  # annotations are strings here

    @functools.wraps(method)
    def wrapper(*args: Any, **kwargs: Any) -> T:
        _check_op_arguments(name, signature, shown, args, kwargs)
        try:
            return method(*args, **kwargs)
        except ShapeError:
            raise
        except (TypeError, AttributeError, ValueError) as err:
            shapes = [a.shape for a in args[1:] if isinstance(a, XlaOp)]
            raise ShapeError(name, shapes, f"bad argument: {err} (signature: {shown})") from err

    return wrapper


def explain_argument_errors(cls: type[T]) -> type[T]:
    """Class decorator: wrap every public method (see the module docstring)."""
    for attr in dir(cls):
        if attr.startswith("_"):
            continue
        value = inspect.getattr_static(cls, attr)
        if inspect.isfunction(value):
            setattr(cls, attr, _explained(value, attr))
    return cls
