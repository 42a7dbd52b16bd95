"""Reverse-mode rules: for each primitive, cotangents of the inputs from the
cotangent of the output (a vector-Jacobian product).

A rule is ``rule(cts, inputs, outputs, **params) -> [ct_input_0, ...]`` where
``cts`` has one cotangent per output (None when no gradient reaches that output)
and a returned None means "no gradient for this input". Rules are written with the
``xnp`` functions and primitives, so the backward pass is ordinary traced HLO --
and can itself be differentiated. Most rules are the textbook derivatives; the
structural ones (``dot_general``, ``pad``, ``slice``) follow JAX's transpose rules.
Windows and convolutions have theirs in :mod:`~xla_teach.frontend.autodiff_rules_window`,
gather/scatter/sort in :mod:`~xla_teach.frontend.autodiff_rules_indexing`, loops and
conditionals in :mod:`~xla_teach.frontend.control_flow_autodiff`.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from xla_teach.frontend import dtypes
from xla_teach.frontend import lax_ops as L
from xla_teach.frontend import primitives as P
from xla_teach.frontend.autodiff import needs_grad
from xla_teach.frontend.tracer import Primitive, Tracer, bind

Rule = Callable[..., Sequence[Tracer | None]]


def defvjp(prim: str | Primitive, single: bool = True) -> Callable[[Rule], Rule]:
    """Attach a rule to a primitive (given by name, or itself). ``single``: the rule
    takes ``(ct, inputs, out)``."""
    target = P.PRIMITIVES[prim] if isinstance(prim, str) else prim

    def register(rule: Rule) -> Rule:
        if single:
            target.vjp = lambda cts, inputs, outputs, **params: rule(cts[0], inputs, outputs[0], **params)
        else:
            target.vjp = rule
        return rule
    return register


# ---- primitives with no rule, and why ----------------------------------------------------------
# Only float values carry cotangents, so a rule is never asked of these; if one ever is, the error
# says why (tests/frontend/test_autodiff_coverage.py checks every primitive has a rule or a reason).
_BITS = "its operands and result are integers or booleans, which carry no gradient"
NO_GRADIENT: dict[str, str] = {
    **dict.fromkeys(("not", "and", "or", "xor", "shift_left", "shift_right_arithmetic", "shift_right_logical"),
                    _BITS),
    **dict.fromkeys(("compare", "is_finite", "reduce_and", "reduce_or"), "its result is a boolean, which carries "
                    "no gradient"),
    "argreduce": "its result is an index, an integer: no gradient (differentiate the value it picks instead, "
                 "e.g. with take_along_axis)",
    "iota": "it has no operands: nothing to differentiate",
    "rng_bit_generator": "its results are random bits (integers) and the generator's state: no gradient",
    "bitcast_convert_type": "it reinterprets the bits: the result is not a smooth function of the input's value "
                            "(JAX gives it no gradient either)",
}
for _name, _reason in NO_GRADIENT.items():
    P.PRIMITIVES[_name].nondiff_reason = _reason


# ---- elementwise -------------------------------------------------------------------------------
def _zero_grad(ct: Tracer, inputs: list[Tracer], out: Tracer) -> list[None]:
    return [None] * len(inputs)


for _name in ("sign", "floor", "ceil", "round"):
    defvjp(_name)(_zero_grad)

defvjp("add")(lambda ct, xs, out: [ct, ct])
defvjp("sub")(lambda ct, xs, out: [ct, L.neg(ct)])
defvjp("neg")(lambda ct, xs, out: [L.neg(ct)])
defvjp("mul")(lambda ct, xs, out: [L.mul(ct, xs[1]), L.mul(ct, xs[0])])
defvjp("div")(lambda ct, xs, out: [L.div(ct, xs[1]), L.neg(L.div(L.mul(ct, out), xs[1]))])
defvjp("exp")(lambda ct, xs, out: [L.mul(ct, out)])
defvjp("log")(lambda ct, xs, out: [L.div(ct, xs[0])])
defvjp("log1p")(lambda ct, xs, out: [L.div(ct, L.add(xs[0], 1.0))])
defvjp("expm1")(lambda ct, xs, out: [L.mul(ct, L.add(out, 1.0))])
defvjp("tanh")(lambda ct, xs, out: [L.mul(ct, L.sub(1.0, L.mul(out, out)))])
defvjp("logistic")(lambda ct, xs, out: [L.mul(ct, L.mul(out, L.sub(1.0, out)))])
defvjp("sqrt")(lambda ct, xs, out: [L.div(L.mul(ct, 0.5), out)])
defvjp("rsqrt")(lambda ct, xs, out: [L.mul(ct, L.mul(-0.5, L.div(out, xs[0])))])
defvjp("cbrt")(lambda ct, xs, out: [L.div(ct, L.mul(3.0, L.mul(out, out)))])
defvjp("abs")(lambda ct, xs, out: [L.mul(ct, L.sign(xs[0]))])
defvjp("sin")(lambda ct, xs, out: [L.mul(ct, L.cos(xs[0]))])
defvjp("cos")(lambda ct, xs, out: [L.neg(L.mul(ct, L.sin(xs[0])))])
defvjp("tan")(lambda ct, xs, out: [L.mul(ct, L.add(1.0, L.mul(out, out)))])
defvjp("erf")(lambda ct, xs, out: [L.mul(ct, L.mul(2.0 / math.sqrt(math.pi),
                                                           L.exp(L.neg(L.mul(xs[0], xs[0])))))])


@defvjp("pow")
def _pow(ct: Tracer, xs: list[Tracer], out: Tracer) -> list[Tracer]:
    x, y = xs
    dx = L.mul(ct, L.mul(y, bind(P.PRIMITIVES["pow"], x, L.sub(y, 1.0))))
    safe_log = L.log(L.select(L.compare(x, 0.0, "GT"), x, 1.0))  # d/dy x**y = log(x) x**y, 0 where x <= 0
    return [dx, L.mul(ct, L.mul(out, safe_log))]


@defvjp("rem")
def _rem(ct: Tracer, xs: list[Tracer], out: Tracer) -> list[Tracer]:
    """``rem(x, y) = x - y * trunc(x / y)``; the truncated quotient is piecewise constant."""
    x, y = xs
    q = L.div(x, y)
    return [ct, L.neg(L.mul(ct, L.mul(L.sign(q), L.floor(L.abs(q)))))]


@defvjp("atan2")
def _atan2(ct: Tracer, xs: list[Tracer], out: Tracer) -> list[Tracer]:
    y, x = xs
    denom = L.add(L.mul(x, x), L.mul(y, y))
    return [L.div(L.mul(ct, x), denom), L.neg(L.div(L.mul(ct, y), denom))]


def _minmax(pick_first: str) -> Rule:
    """Ties split the cotangent half and half (as JAX does)."""
    def rule(ct: Tracer, xs: list[Tracer], out: Tracer) -> list[Tracer]:
        x, y = xs
        first = L.convert(bind(P.compare_p, x, y, direction=pick_first), ct.dtype)
        tie = L.convert(L.compare(x, y, "EQ"), ct.dtype)
        wx = L.add(first, L.mul(tie, 0.5))
        return [L.mul(ct, wx), L.mul(ct, L.sub(1.0, wx))]
    return rule


defvjp("max")(_minmax("GT"))
defvjp("min")(_minmax("LT"))


@defvjp("select_n")
def _select(ct: Tracer, xs: list[Tracer], out: Tracer) -> list[Tracer | None]:
    pred = xs[0]
    zero = L.zeros_like(ct)
    return [None, bind(P.select_p, pred, ct, zero), bind(P.select_p, pred, zero, ct)]


@defvjp("convert_element_type")
def _convert(ct: Tracer, xs: list[Tracer], out: Tracer, dtype: Any) -> list[Tracer | None]:
    if not dtypes.is_float(xs[0].dtype):
        return [None]
    return [L.convert(ct, xs[0].dtype)]


# ---- shapes -----------------------------------------------------------------------------------------
def _unbroadcast(ct: Tracer, operand_shape: Sequence[int], dims: Sequence[int]) -> Tracer:
    """Sum ``ct`` over the output dims a ``broadcast`` created; transpose back if the
    operand dims were mapped out of order."""
    summed_axes = tuple(d for d in range(ct.ndim) if d not in dims)
    out = bind(P.PRIMITIVES["reduce_sum"], ct, axes=summed_axes) if summed_axes else ct
    order = sorted(dims)
    perm = [order.index(d) for d in dims]
    if perm != list(range(len(perm))):
        out = bind(P.transpose_p, out, permutation=tuple(perm))
    return out


defvjp("broadcast_in_dim")(lambda ct, xs, out, shape, dims: [_unbroadcast(ct, xs[0].shape, dims)])
defvjp("reshape")(lambda ct, xs, out, new_sizes: [bind(P.reshape_p, ct, new_sizes=xs[0].shape)])
defvjp("transpose")(lambda ct, xs, out, permutation: [bind(P.transpose_p, ct,
                                                           permutation=tuple(int(i) for i in np.argsort(permutation)))])
defvjp("rev")(lambda ct, xs, out, dimensions: [bind(P.reverse_p, ct, dimensions=dimensions)])


def pad_primitive(ct: Tracer, value: Any, config: Sequence[tuple[int, int, int]]) -> Tracer:
    padding = L.convert(value, ct.dtype) if isinstance(value, Tracer) else L.full((), value, ct.dtype)
    return bind(P.pad_p, ct, padding, config=tuple(tuple(int(v) for v in c) for c in config))


@defvjp("slice")
def _slice(ct: Tracer, xs: list[Tracer], out: Tracer, start: Sequence[int], limit: Sequence[int],
           strides: Sequence[int]) -> list[Tracer]:
    shape = xs[0].shape
    real_limits = [s + (0 if n == 0 else 1 + (n - 1) * st) for s, n, st in zip(start, ct.shape, strides, strict=True)]
    config = [(s, d - lim, st - 1) for s, d, lim, st in zip(start, shape, real_limits, strides, strict=True)]
    return [pad_primitive(ct, np.zeros((), ct.dtype), config)]


@defvjp("pad")
def _pad_rule(ct: Tracer, xs: list[Tracer], out: Tracer, config: Sequence[tuple[int, int, int]]) -> list[Tracer]:
    unpadded = pad_primitive(ct, np.zeros((), ct.dtype), [(-lo, -hi, 0) for lo, hi, _ in config])
    t_operand = bind(P.slice_p, unpadded, start=(0,) * ct.ndim, limit=unpadded.shape,
                     strides=tuple(interior + 1 for _, _, interior in config))
    t_value = L.sub(L.reduce_sum(ct), L.reduce_sum(t_operand))
    return [t_operand, t_value]


@defvjp("concatenate")
def _concatenate(ct: Tracer, xs: list[Tracer], out: Tracer, dimension: int) -> list[Tracer]:
    pieces, offset = [], 0
    for x in xs:
        start, limit = [0] * ct.ndim, list(ct.shape)
        start[dimension], limit[dimension] = offset, offset + x.shape[dimension]
        pieces.append(bind(P.slice_p, ct, start=tuple(start), limit=tuple(limit), strides=(1,) * ct.ndim))
        offset += x.shape[dimension]
    return pieces


@defvjp("dynamic_slice")
def _dynamic_slice(ct: Tracer, xs: list[Tracer], out: Tracer, sizes: Sequence[int]) -> list[Tracer | None]:
    x, idx = xs[0], xs[1:]
    return [bind(P.dynamic_update_slice_p, L.zeros_like(x), ct, *idx)] + [None] * len(idx)


@defvjp("dynamic_update_slice")
def _dynamic_update_slice(ct: Tracer, xs: list[Tracer], out: Tracer) -> list[Tracer | None]:
    update, idx = xs[1], xs[2:]
    ct_x = bind(P.dynamic_update_slice_p, ct, L.zeros_like(update), *idx)
    ct_update = bind(P.dynamic_slice_p, ct, *idx, sizes=update.shape)
    return [ct_x, ct_update] + [None] * len(idx)


# ---- reductions -----------------------------------------------------------------------------------
def _broadcast_back(v: Tracer, shape: Sequence[int], axes: Sequence[int]) -> Tracer:
    kept = tuple(d for d in range(len(shape)) if d not in axes)
    return bind(P.broadcast_in_dim_p, v, shape=tuple(shape), dims=kept)


defvjp("reduce_sum")(lambda ct, xs, out, axes: [_broadcast_back(ct, xs[0].shape, axes)])


def _reduce_extremum(ct: Tracer, xs: list[Tracer], out: Tracer, axes: Sequence[int]) -> list[Tracer]:
    """The cotangent goes to the positions equal to the max (shared among ties)."""
    x = xs[0]
    mask = L.convert(L.compare(x, _broadcast_back(out, x.shape, axes), "EQ"), ct.dtype)
    count = bind(P.PRIMITIVES["reduce_sum"], mask, axes=tuple(axes))
    return [L.mul(_broadcast_back(L.div(ct, count), x.shape, axes), mask)]


defvjp("reduce_max")(_reduce_extremum)
defvjp("reduce_min")(_reduce_extremum)


@defvjp("reduce_prod")
def _reduce_prod(ct: Tracer, xs: list[Tracer], out: Tracer, axes: Sequence[int]) -> list[Tracer]:
    """``d prod / d x_i = prod / x_i`` (not defined where x_i = 0; JAX has a safer rule)."""
    x = xs[0]
    return [L.div(_broadcast_back(L.mul(ct, out), x.shape, axes), x)]


# ---- contractions ------------------------------------------------------------------------------------
def _ranges_like(*xs: Sequence[int]) -> list[list[int]]:
    out, start = [], 0
    for x in xs:
        out.append(list(range(start, start + len(x))))
        start += len(x)
    return out


def _remaining(n: int, *removed: Sequence[int]) -> list[int]:
    gone = set(itertools.chain(*removed))
    return [i for i in range(n) if i not in gone]


def _dot_transpose_lhs(g: Tracer, x_ndim: int, y: Tracer, xc: Sequence[int], yc: Sequence[int],
                       xb: Sequence[int], yb: Sequence[int], swap_ans: bool = False) -> Tracer:
    x_kept = _remaining(x_ndim, xc, xb)
    y_kept = _remaining(y.ndim, yc, yb)
    if swap_ans:
        ans_batch, ans_y, _ = _ranges_like(xb, y_kept, x_kept)
    else:
        ans_batch, _, ans_y = _ranges_like(xb, x_kept, y_kept)
    x_contract_sorted_by_y = [xc[i] for i in np.argsort(yc)]
    out_axes = np.argsort(list(xb) + x_kept + x_contract_sorted_by_y)
    product = bind(P.dot_general_p, g, y, contracting=(tuple(ans_y), tuple(y_kept)), batch=(tuple(ans_batch),
                                                                                           tuple(yb)))
    return L.transpose(product, [int(a) for a in out_axes])


@defvjp("dot_general")
def _dot_general(ct: Tracer, xs: list[Tracer], out: Tracer, contracting: Any, batch: Any) -> list[Tracer]:
    x, y = xs
    (xc, yc), (xb, yb) = contracting, batch
    return [_dot_transpose_lhs(ct, x.ndim, y, xc, yc, xb, yb) if needs_grad(x) else None,
            _dot_transpose_lhs(ct, y.ndim, x, yc, xc, yb, xb, swap_ans=True) if needs_grad(y) else None]
