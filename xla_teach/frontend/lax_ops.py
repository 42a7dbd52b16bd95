"""The primitives as functions, for the rules that differentiate them (what JAX's rules call
``lax``): each binds one primitive, nothing more.

The NumPy API (``numpy_api*.py``) promotes dtypes and broadcasts shapes before it binds a
primitive; a rule needs none of that, because the operands it meets already agree -- the NumPy
API made them so on the way forward, and a cotangent has its primal's shape and dtype. So here a
binary op takes operands of one shape and dtype, and a Python number stands for a constant of
the other operand's dtype, broadcast to its shape::

    mul(ct, cos(x))        # -> mul(ct, cos(x)), as bound
    add(out, 1.0)          # -> add(out, broadcast(constant(1), shape of out))

This module sits just above ``primitives.py`` and below the NumPy API, so the rules
(``autodiff_rules*.py``, ``control_flow_autodiff.py``) depend on primitives only.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from xla_teach.frontend import dtypes
from xla_teach.frontend import primitives as P
from xla_teach.frontend.tracer import Tracer, bind, current_context

Operand = Tracer | float | int | bool


def full(shape: Sequence[int], value: Any, dtype: Any) -> Tracer:
    """``value`` of ``dtype`` everywhere in ``shape``: a scalar constant, broadcast."""
    context = current_context()
    assert context is not None, "a rule runs while a program is traced"
    scalar = context.constant(np.asarray(value, dtype=dtypes.canonicalize(dtype)))
    return bind(P.broadcast_in_dim_p, scalar, shape=tuple(shape), dims=()) if len(shape) else scalar


def full_like(x: Tracer, value: Any, dtype: Any = None) -> Tracer:
    return full(x.shape, value, x.dtype if dtype is None else dtype)


def zeros_like(x: Tracer, dtype: Any = None) -> Tracer:
    return full_like(x, 0, dtype)


def ones_like(x: Tracer, dtype: Any = None) -> Tracer:
    return full_like(x, 1, dtype)


def _operands(*xs: Operand) -> list[Tracer]:
    """The tracers as they are; each Python number as a constant shaped like the first tracer."""
    like = next(x for x in xs if isinstance(x, Tracer))
    return [x if isinstance(x, Tracer) else full_like(like, x) for x in xs]


def _unary(name: str) -> Any:
    primitive = P.PRIMITIVES[name]

    def op(x: Tracer) -> Tracer:
        return bind(primitive, x)

    op.__name__ = name
    return op


def _binary(name: str) -> Any:
    primitive = P.PRIMITIVES[name]

    def op(x: Operand, y: Operand) -> Tracer:
        return bind(primitive, *_operands(x, y))

    op.__name__ = name
    return op


add, sub, mul, div = _binary("add"), _binary("sub"), _binary("mul"), _binary("div")
logical_and = _binary("and")
neg, exp, log, sin, cos = _unary("neg"), _unary("exp"), _unary("log"), _unary("sin"), _unary("cos")
sign, floor, abs = _unary("sign"), _unary("floor"), _unary("abs")  # noqa: A001 - lax's name


def compare(x: Operand, y: Operand, direction: str) -> Tracer:
    """``direction``: EQ, NE, LT, LE, GT or GE (HLO's)."""
    return bind(P.compare_p, *_operands(x, y), direction=direction)


def select(pred: Tracer, on_true: Operand, on_false: Operand) -> Tracer:
    return bind(P.select_p, pred, *_operands(on_true, on_false))


def convert(x: Tracer, dtype: Any) -> Tracer:
    dtype = dtypes.canonicalize(dtype)
    return x if x.dtype == dtype else bind(P.convert_p, x, dtype=dtype)


def reduce_sum(x: Tracer, axes: Sequence[int] | None = None) -> Tracer:
    """Summed over ``axes`` (all of them by default)."""
    axes = tuple(range(x.ndim)) if axes is None else tuple(axes)
    return bind(P.PRIMITIVES["reduce_sum"], x, axes=axes) if axes else x


def transpose(x: Tracer, permutation: Sequence[int]) -> Tracer:
    return bind(P.transpose_p, x, permutation=tuple(int(p) for p in permutation))


def sort_by(keys: Tracer, *values: Tracer, dimension: int) -> list[Tracer]:
    """``values`` reordered along ``dimension`` as sorting ``keys`` (stable) would reorder them."""
    return list(bind(P.sort_p, keys, *values, dimension=dimension))[1:]
