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
when there are several), ``xla_teach.print`` (prints its operands, returns the first), and
XLA's own ``TopK``, which XLA CPU's optimized HLO uses for ``lax.top_k``. A target registered
with ``needs_result_shape=True`` also receives ``result_shape=`` (``TopK`` reads k from it).

The sharding annotations JAX writes into a module *before* it is partitioned -- ``Sharding``
(``with_sharding_constraint`` and every sharded value: its ``sharding=`` attribute carries the
sharding), and Shardy's ``xla.sdy.FuncResultSharding`` and ``xla.sdy.ShardingConstraint`` --
change no value: run on one device, the module computes the global result, and these return
their operand.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, overload

import numpy as np

CustomCallFn = Callable[..., Any]

_TARGETS: dict[str, CustomCallFn] = {}
_NEEDS_RESULT_SHAPE: set[str] = set()


class UnknownCustomCallTargetError(LookupError):
    """No Python function is registered under the requested target name."""


@overload
def register_custom_call_target(name: str, fn: None = None, *, replace: bool = False,
                                needs_result_shape: bool = False) -> Callable[[CustomCallFn], CustomCallFn]: ...


@overload
def register_custom_call_target(name: str, fn: CustomCallFn, *, replace: bool = False,
                                needs_result_shape: bool = False) -> CustomCallFn: ...


def register_custom_call_target(
    name: str, fn: CustomCallFn | None = None, *, replace: bool = False, needs_result_shape: bool = False
) -> CustomCallFn | Callable[[CustomCallFn], CustomCallFn]:
    """Register ``fn`` as the target ``name``; without ``fn`` it returns a decorator.

    Registering a taken name is an error unless ``replace=True``. With ``needs_result_shape``,
    calls pass the custom-call's shape as ``result_shape=``.
    """

    def add(function: CustomCallFn) -> CustomCallFn:
        if not callable(function):
            raise TypeError(f"custom-call target '{name}' must be callable, got {type(function).__name__}")
        if name in _TARGETS and not replace and _TARGETS[name] is not function:
            raise ValueError(f"custom-call target '{name}' is already registered (pass replace=True to override)")
        _TARGETS[name] = function
        if needs_result_shape:
            _NEEDS_RESULT_SHAPE.add(name)
        else:
            _NEEDS_RESULT_SHAPE.discard(name)
        return function

    if fn is None:
        return add
    return add(fn)


def unregister_custom_call_target(name: str) -> None:
    """Remove a target (mainly for tests); unknown names are ignored."""
    _TARGETS.pop(name, None)


def get_custom_call_target(name: str, result_shape: Any = None) -> CustomCallFn:
    """The function registered as ``name`` (called with the operands; for a target that needs it,
    ``result_shape`` is bound); a clear error listing the known ones otherwise."""
    try:
        function = _TARGETS[name]
    except KeyError:
        known = ", ".join(sorted(_TARGETS)) or "none"
        raise UnknownCustomCallTargetError(
            f"no Python implementation of custom-call target '{name}' (registered targets: {known}); "
            f"add one with xla_teach.hlo.custom_calls.register_custom_call_target"
        ) from None
    if name in _NEEDS_RESULT_SHAPE:
        if result_shape is None:
            raise ValueError(f"custom-call target '{name}' needs the call's result shape")
        return functools.partial(function, result_shape=result_shape)
    return function


def registered_custom_call_targets() -> list[str]:
    return sorted(_TARGETS)


# ---- built-in targets -----------------------------------------------------------------
@register_custom_call_target("xla_teach.identity")
def _identity(*operands: Any) -> Any:
    return operands[0] if len(operands) == 1 else tuple(operands)


for _annotation in ("Sharding", "xla.sdy.FuncResultSharding", "xla.sdy.ShardingConstraint"):
    register_custom_call_target(_annotation, _identity)


@register_custom_call_target("xla_teach.print")
def _print(*operands: Any) -> Any:
    for i, operand in enumerate(operands):
        print(f"xla_teach.print operand {i}: {operand}")
    return operands[0]


@register_custom_call_target("TopK", needs_result_shape=True)
def _top_k(x: np.ndarray, *, result_shape: Any) -> tuple[np.ndarray, np.ndarray]:
    """XLA's ``TopK``: the k largest elements of each row (last dimension) in descending order,
    and their indices (s32). The order is total, as XLA's comparator makes it: NaN above +inf,
    +0.0 above -0.0; equal elements keep their order (the lower index first), as in ``lax.top_k``."""
    k = result_shape.tuple_shapes[0].dimensions[-1]
    x = np.asarray(x)
    if x.dtype.kind == "f" or x.dtype.name in ("bfloat16", "float8_e4m3fn", "float8_e5m2"):
        bits = x.view(np.dtype(f"int{x.dtype.itemsize * 8}")).astype(np.int64)
        key = np.where(bits < 0, bits ^ np.int64((1 << (x.dtype.itemsize * 8 - 1)) - 1), bits)
    else:
        key = x.astype(np.int64) if x.dtype.kind in "iub" else x
    order = np.argsort(-key, axis=-1, kind="stable")[..., :k]
    return np.take_along_axis(x, order, axis=-1), order.astype(np.int32)
