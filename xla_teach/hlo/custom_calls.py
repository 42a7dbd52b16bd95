"""Python implementations of ``custom-call`` targets.

A ``custom-call`` names an opaque function by string::

    %r = f32[4] custom-call(%x), custom_call_target="xla_teach.identity"

XLA looks the name up in a registry of C functions; xla_teach keeps a registry of Python
functions that the interpreter (and later the CPU backend, through a callback) calls. A
target receives the operand values (NumPy arrays, or tuples for tuple operands) and
returns an array, or a tuple of arrays for a tuple-shaped custom-call; the caller converts
the result to the declared element type and checks its dimensions.

    register_custom_call_target("my.double", lambda x: 2 * x)

    @register_custom_call_target("my.swap")
    def swap(a, b):
        return (b, a)

Built-in targets: ``xla_teach.identity`` (returns its operand, or a tuple of its operands
when there are several) and ``xla_teach.print`` (prints its operands, returns the first).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, overload

CustomCallFn = Callable[..., Any]

_TARGETS: dict[str, CustomCallFn] = {}


class UnknownCustomCallTargetError(LookupError):
    """No Python function is registered under the requested target name."""


@overload
def register_custom_call_target(name: str, fn: None = None, *, replace: bool = False) -> Callable[
    [CustomCallFn], CustomCallFn]: ...


@overload
def register_custom_call_target(name: str, fn: CustomCallFn, *, replace: bool = False) -> CustomCallFn: ...


def register_custom_call_target(
    name: str, fn: CustomCallFn | None = None, *, replace: bool = False
) -> CustomCallFn | Callable[[CustomCallFn], CustomCallFn]:
    """Register ``fn`` as the target ``name``; without ``fn`` it returns a decorator.

    Registering a taken name is an error unless ``replace=True``.
    """

    def add(function: CustomCallFn) -> CustomCallFn:
        if not callable(function):
            raise TypeError(f"custom-call target '{name}' must be callable, got {type(function).__name__}")
        if name in _TARGETS and not replace and _TARGETS[name] is not function:
            raise ValueError(f"custom-call target '{name}' is already registered (pass replace=True to override)")
        _TARGETS[name] = function
        return function

    if fn is None:
        return add
    return add(fn)


def unregister_custom_call_target(name: str) -> None:
    """Remove a target (mainly for tests); unknown names are ignored."""
    _TARGETS.pop(name, None)


def get_custom_call_target(name: str) -> CustomCallFn:
    """The function registered as ``name``; a clear error listing the known ones otherwise."""
    try:
        return _TARGETS[name]
    except KeyError:
        known = ", ".join(sorted(_TARGETS)) or "none"
        raise UnknownCustomCallTargetError(
            f"no Python implementation of custom-call target '{name}' (registered targets: {known}); "
            f"add one with xla_teach.hlo.custom_calls.register_custom_call_target"
        ) from None


def registered_custom_call_targets() -> list[str]:
    return sorted(_TARGETS)


# ---- built-in targets -----------------------------------------------------------------
@register_custom_call_target("xla_teach.identity")
def _identity(*operands: Any) -> Any:
    return operands[0] if len(operands) == 1 else tuple(operands)


@register_custom_call_target("xla_teach.print")
def _print(*operands: Any) -> Any:
    for i, operand in enumerate(operands):
        print(f"xla_teach.print operand {i}: {operand}")
    return operands[0]
