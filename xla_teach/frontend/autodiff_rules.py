"""Reverse-mode rules: for each primitive, cotangents of the inputs from the
cotangent of the output (a vector-Jacobian product).

A rule is ``rule(cts, inputs, outputs, **params) -> [ct_input_0, ...]`` where
``cts`` has one cotangent per output (None when no gradient reaches that output)
and a returned None means "no gradient for this input". Rules are written with the
``xnp`` functions and primitives, so the backward pass is ordinary traced HLO --
and can itself be differentiated. Most rules are the textbook derivatives; the
structural ones (``dot_general``, ``conv_general_dilated``, ``gather``, ``pad``,
``reduce_window``) follow JAX's transpose rules.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from xla_teach.frontend import dtypes
from xla_teach.frontend import primitives as P
from xla_teach.frontend.autodiff import needs_grad
from xla_teach.frontend.errors import CompilationError
from xla_teach.frontend.numpy_api import (
    add,
    astype,
    cos,
    equal,
    exp,
    greater,
    greater_equal,
    less_equal,
    log,
    logical_and,
    multiply,
    negative,
    sign,
    sin,
    subtract,
    true_divide,
    where,
    zeros,
    zeros_like,
)
from xla_teach.frontend.numpy_api_reduce import argsort
from xla_teach.frontend.numpy_api_reduce import sum as xsum
from xla_teach.frontend.numpy_api_shape import transpose
from xla_teach.frontend.tracer import Tracer, bind
from xla_teach.hlo.attributes import ConvDimensionNumbers

Rule = Callable[..., Sequence[Tracer | None]]


def defvjp(name: str, single: bool = True) -> Callable[[Rule], Rule]:
    """Attach a rule to a primitive. ``single``: the rule takes ``(ct, inputs, out)``."""
    def register(rule: Rule) -> Rule:
        if single:
            P.PRIMITIVES[name].vjp = lambda cts, inputs, outputs, **params: rule(cts[0], inputs, outputs[0],
                                                                                    **params)
        else:
            P.PRIMITIVES[name].vjp = rule
        return rule
    return register


# ---- elementwise -------------------------------------------------------------------------------
def _zero_grad(ct: Tracer, inputs: list[Tracer], out: Tracer) -> list[None]:
    return [None] * len(inputs)


for _name in ("sign", "floor", "ceil", "round"):
    defvjp(_name)(_zero_grad)

defvjp("add")(lambda ct, xs, out: [ct, ct])
defvjp("sub")(lambda ct, xs, out: [ct, negative(ct)])
defvjp("neg")(lambda ct, xs, out: [negative(ct)])
defvjp("mul")(lambda ct, xs, out: [multiply(ct, xs[1]), multiply(ct, xs[0])])
defvjp("div")(lambda ct, xs, out: [true_divide(ct, xs[1]), negative(true_divide(multiply(ct, out), xs[1]))])
defvjp("exp")(lambda ct, xs, out: [multiply(ct, out)])
defvjp("log")(lambda ct, xs, out: [true_divide(ct, xs[0])])
defvjp("log1p")(lambda ct, xs, out: [true_divide(ct, add(xs[0], 1.0))])
defvjp("expm1")(lambda ct, xs, out: [multiply(ct, add(out, 1.0))])
defvjp("tanh")(lambda ct, xs, out: [multiply(ct, subtract(1.0, multiply(out, out)))])
defvjp("logistic")(lambda ct, xs, out: [multiply(ct, multiply(out, subtract(1.0, out)))])
defvjp("sqrt")(lambda ct, xs, out: [true_divide(multiply(ct, 0.5), out)])
defvjp("rsqrt")(lambda ct, xs, out: [multiply(ct, multiply(-0.5, true_divide(out, xs[0])))])
defvjp("cbrt")(lambda ct, xs, out: [true_divide(ct, multiply(3.0, multiply(out, out)))])
defvjp("abs")(lambda ct, xs, out: [multiply(ct, sign(xs[0]))])
defvjp("sin")(lambda ct, xs, out: [multiply(ct, cos(xs[0]))])
defvjp("cos")(lambda ct, xs, out: [negative(multiply(ct, sin(xs[0])))])
defvjp("tan")(lambda ct, xs, out: [multiply(ct, add(1.0, multiply(out, out)))])
defvjp("erf")(lambda ct, xs, out: [multiply(ct, multiply(2.0 / math.sqrt(math.pi),
                                                           exp(negative(multiply(xs[0], xs[0])))))])


@defvjp("pow")
def _pow(ct: Tracer, xs: list[Tracer], out: Tracer) -> list[Tracer]:
    x, y = xs
    dx = multiply(ct, multiply(y, bind(P.PRIMITIVES["pow"], x, subtract(y, 1.0))))
    safe_log = log(where(greater(x, 0.0), x, 1.0))  # d/dy x**y = log(x) x**y, 0 where x <= 0
    return [dx, multiply(ct, multiply(out, safe_log))]


@defvjp("atan2")
def _atan2(ct: Tracer, xs: list[Tracer], out: Tracer) -> list[Tracer]:
    y, x = xs
    denom = add(multiply(x, x), multiply(y, y))
    return [true_divide(multiply(ct, x), denom), negative(true_divide(multiply(ct, y), denom))]


def _minmax(pick_first: str) -> Rule:
    """Ties split the cotangent half and half (as JAX does)."""
    def rule(ct: Tracer, xs: list[Tracer], out: Tracer) -> list[Tracer]:
        x, y = xs
        first = astype(bind(P.compare_p, x, y, direction=pick_first), ct.dtype)
        tie = astype(equal(x, y), ct.dtype)
        wx = add(first, multiply(tie, 0.5))
        return [multiply(ct, wx), multiply(ct, subtract(1.0, wx))]
    return rule


defvjp("max")(_minmax("GT"))
defvjp("min")(_minmax("LT"))


@defvjp("select_n")
def _select(ct: Tracer, xs: list[Tracer], out: Tracer) -> list[Tracer | None]:
    pred = xs[0]
    zero = zeros_like(ct)
    return [None, bind(P.select_p, pred, ct, zero), bind(P.select_p, pred, zero, ct)]


@defvjp("convert_element_type")
def _convert(ct: Tracer, xs: list[Tracer], out: Tracer, dtype: Any) -> list[Tracer | None]:
    if not dtypes.is_float(xs[0].dtype):
        return [None]
    return [astype(ct, xs[0].dtype)]


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


def _pad(ct: Tracer, value: Any, config: Sequence[tuple[int, int, int]]) -> Tracer:
    return bind(P.pad_p, ct, astype(value, ct.dtype), config=tuple(tuple(int(v) for v in c) for c in config))


@defvjp("slice")
def _slice(ct: Tracer, xs: list[Tracer], out: Tracer, start: Sequence[int], limit: Sequence[int],
           strides: Sequence[int]) -> list[Tracer]:
    shape = xs[0].shape
    real_limits = [s + (0 if n == 0 else 1 + (n - 1) * st) for s, n, st in zip(start, ct.shape, strides, strict=True)]
    config = [(s, d - lim, st - 1) for s, d, lim, st in zip(start, shape, real_limits, strides, strict=True)]
    return [_pad(ct, np.zeros((), ct.dtype), config)]


@defvjp("pad")
def _pad_rule(ct: Tracer, xs: list[Tracer], out: Tracer, config: Sequence[tuple[int, int, int]]) -> list[Tracer]:
    unpadded = _pad(ct, np.zeros((), ct.dtype), [(-lo, -hi, 0) for lo, hi, _ in config])
    t_operand = bind(P.slice_p, unpadded, start=(0,) * ct.ndim, limit=unpadded.shape,
                     strides=tuple(interior + 1 for _, _, interior in config))
    t_value = subtract(xsum(ct), xsum(t_operand))
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
    return [bind(P.dynamic_update_slice_p, zeros_like(x), ct, *idx)] + [None] * len(idx)


@defvjp("dynamic_update_slice")
def _dynamic_update_slice(ct: Tracer, xs: list[Tracer], out: Tracer) -> list[Tracer | None]:
    update, idx = xs[1], xs[2:]
    ct_x = bind(P.dynamic_update_slice_p, ct, zeros_like(update), *idx)
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
    mask = astype(equal(x, _broadcast_back(out, x.shape, axes)), ct.dtype)
    count = bind(P.PRIMITIVES["reduce_sum"], mask, axes=tuple(axes))
    return [multiply(_broadcast_back(true_divide(ct, count), x.shape, axes), mask)]


defvjp("reduce_max")(_reduce_extremum)
defvjp("reduce_min")(_reduce_extremum)


@defvjp("reduce_prod")
def _reduce_prod(ct: Tracer, xs: list[Tracer], out: Tracer, axes: Sequence[int]) -> list[Tracer]:
    """``d prod / d x_i = prod / x_i`` (not defined where x_i = 0; JAX has a safer rule)."""
    x = xs[0]
    return [true_divide(_broadcast_back(multiply(ct, out), x.shape, axes), x)]


def _dilate_shape(shape: Sequence[int], dilation: Sequence[int]) -> list[int]:
    return [0 if d == 0 else 1 + r * (d - 1) for d, r in zip(shape, dilation, strict=True)]


def conv_vjp_lhs_padding(in_shape: Sequence[int], window: Sequence[int], strides: Sequence[int],
                         out_shape: Sequence[int], padding: Sequence[tuple[int, int]],
                         lhs_dilation: Sequence[int], rhs_dilation: Sequence[int]) -> list[tuple[int, int]]:
    """Padding that makes a stride-1 window pass over the (dilated) cotangent produce the
    input's shape: the transpose of a strided, padded window op (JAX's helper)."""
    lhs_d = _dilate_shape(in_shape, lhs_dilation)
    rhs_d = _dilate_shape(window, rhs_dilation)
    out_d = _dilate_shape(out_shape, strides)
    before = [r - lo - 1 for r, (lo, _) in zip(rhs_d, padding, strict=True)]
    after = [ld + r - 1 - od - b for ld, r, od, b in zip(lhs_d, rhs_d, out_d, before, strict=True)]
    return list(zip(before, after, strict=True))


@defvjp("reduce_window")
def _reduce_window(ct: Tracer, xs: list[Tracer], out: Tracer, kind: str, window: Sequence[int],
                   strides: Sequence[int], padding: Sequence[tuple[int, int]], base_dilation: Any = None,
                   window_dilation: Any = None) -> list[Tracer]:
    x = xs[0]
    ones = [1] * x.ndim
    if kind == "sum":
        pads = conv_vjp_lhs_padding(x.shape, window, strides, ct.shape, padding, base_dilation or ones,
                                    window_dilation or ones)
        padded = _pad(ct, np.zeros((), ct.dtype), [(lo, hi, s - 1) for (lo, hi), s in zip(pads, strides,
                                                                                           strict=True)])
        return [bind(P.reduce_window_p, padded, kind="sum", window=tuple(window),
                     strides=tuple(base_dilation or ones), padding=((0, 0),) * x.ndim,
                     window_dilation=window_dilation)]
    if kind == "max" and not base_dilation and not window_dilation:
        return [bind(P.select_and_scatter_add_p, ct, x, window=tuple(window), strides=tuple(strides),
                     padding=tuple(padding))]
    raise CompilationError(f"differentiating reduce_window ({kind})", "no reverse-mode rule for this window "
                           "reduction (only sum, and max without dilation, are differentiable)",
                           "use a sum/mean or max window", location=None)


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
    return transpose(product, [int(a) for a in out_axes])


@defvjp("dot_general")
def _dot_general(ct: Tracer, xs: list[Tracer], out: Tracer, contracting: Any, batch: Any) -> list[Tracer]:
    x, y = xs
    (xc, yc), (xb, yb) = contracting, batch
    return [_dot_transpose_lhs(ct, x.ndim, y, xc, yc, xb, yb) if needs_grad(x) else None,
            _dot_transpose_lhs(ct, y.ndim, x, yc, xc, yb, xb, swap_ans=True) if needs_grad(y) else None]


def _specs(dim_labels: str) -> tuple[list[int], list[int], list[int]]:
    d = ConvDimensionNumbers.from_text(dim_labels)
    return ([d.input_batch_dimension, d.input_feature_dimension, *d.input_spatial_dimensions],
            [d.kernel_output_feature_dimension, d.kernel_input_feature_dimension, *d.kernel_spatial_dimensions],
            [d.output_batch_dimension, d.output_feature_dimension, *d.output_spatial_dimensions])


def _labels(lhs: Sequence[int], rhs: Sequence[int], out: Sequence[int]) -> str:
    def one(spec: Sequence[int], first: str, second: str) -> str:
        chars = [""] * len(spec)
        chars[spec[0]], chars[spec[1]] = first, second
        for k, d in enumerate(spec[2:]):
            chars[d] = str(k)
        return "".join(chars)
    return f"{one(lhs, 'b', 'f')}_{one(rhs, 'o', 'i')}->{one(out, 'b', 'f')}"


def _swap(spec: Sequence[int]) -> list[int]:
    return [spec[1], spec[0], *spec[2:]]


@defvjp("conv_general_dilated")
def _conv(ct: Tracer, xs: list[Tracer], out: Tracer, strides: Sequence[int], padding: Sequence[tuple[int, int]],
          lhs_dilation: Sequence[int], rhs_dilation: Sequence[int], dim_labels: str,
          feature_group_count: int = 1) -> list[Tracer]:
    if feature_group_count != 1:
        raise CompilationError("differentiating a grouped convolution", "feature_group_count > 1 has no "
                               "reverse-mode rule in xla_teach", "use feature_group_count=1", location=None)
    lhs, rhs = xs
    lhs_spec, rhs_spec, out_spec = _specs(dim_labels)
    lhs_sp = [lhs.shape[d] for d in lhs_spec[2:]]
    rhs_sp = [rhs.shape[d] for d in rhs_spec[2:]]
    out_sp = [ct.shape[d] for d in out_spec[2:]]
    ct_lhs = ct_rhs = None
    # d/d lhs: a convolution of the cotangent with the spatially reversed kernel.
    if needs_grad(lhs):
        ct_lhs = _conv_lhs(ct, rhs, lhs_sp, rhs_sp, out_sp, strides, padding, lhs_dilation, rhs_dilation,
                           lhs_spec, rhs_spec, out_spec)
    # d/d rhs: a convolution of the input with the cotangent (batch and feature roles swapped).
    if needs_grad(rhs):
        ct_rhs = _conv_rhs(ct, lhs, lhs_sp, rhs_sp, out_sp, strides, padding, lhs_dilation, rhs_dilation,
                           lhs_spec, rhs_spec, out_spec)
    return [ct_lhs, ct_rhs]


def _conv_lhs(ct: Tracer, rhs: Tracer, lhs_sp: list[int], rhs_sp: list[int], out_sp: list[int],
              strides: Sequence[int], padding: Sequence[tuple[int, int]], lhs_dilation: Sequence[int],
              rhs_dilation: Sequence[int], lhs_spec: list[int], rhs_spec: list[int], out_spec: list[int]) -> Tracer:
    pads = conv_vjp_lhs_padding(lhs_sp, rhs_sp, strides, out_sp, padding, lhs_dilation, rhs_dilation)
    reversed_kernel = bind(P.reverse_p, rhs, dimensions=tuple(rhs_spec[2:]))
    ct_lhs = bind(P.conv_general_dilated_p, ct, reversed_kernel, strides=tuple(lhs_dilation), padding=tuple(pads),
                  lhs_dilation=tuple(strides), rhs_dilation=tuple(rhs_dilation),
                  dim_labels=_labels(out_spec, _swap(rhs_spec), lhs_spec))
    return ct_lhs


def _conv_rhs(ct: Tracer, lhs: Tracer, lhs_sp: list[int], rhs_sp: list[int], out_sp: list[int],
              strides: Sequence[int], padding: Sequence[tuple[int, int]], lhs_dilation: Sequence[int],
              rhs_dilation: Sequence[int], lhs_spec: list[int], rhs_spec: list[int], out_spec: list[int]) -> Tracer:
    lhs_d = _dilate_shape(lhs_sp, lhs_dilation)
    rhs_d = _dilate_shape(rhs_sp, rhs_dilation)
    out_d = _dilate_shape(out_sp, strides)
    pads_lo = [lo for lo, _ in padding]
    pads_hi = [od - ld + (rd - lo - 1) for od, ld, rd, lo in zip(out_d, lhs_d, rhs_d, pads_lo, strict=True)]
    ct_rhs = bind(P.conv_general_dilated_p, lhs, ct, strides=tuple(rhs_dilation),
                  padding=tuple(zip(pads_lo, pads_hi, strict=True)), lhs_dilation=tuple(lhs_dilation),
                  rhs_dilation=tuple(strides), dim_labels=_labels(_swap(lhs_spec), _swap(out_spec), _swap(rhs_spec)))
    return ct_rhs


# ---- gather / scatter / sort ------------------------------------------------------------------------
@defvjp("gather")
def _gather(ct: Tracer, xs: list[Tracer], out: Tracer, offset_dims: Sequence[int],
            collapsed_slice_dims: Sequence[int], start_index_map: Sequence[int],
            slice_sizes: Sequence[int]) -> list[Tracer | None]:
    """The transpose of a gather is a scatter-add of the cotangent into zeros."""
    x, indices = xs
    ct_x = bind(P.scatter_p, zeros(x.shape, x.dtype), indices, ct, mode="add", update_window_dims=offset_dims,
                inserted_window_dims=collapsed_slice_dims, scatter_dims_to_operand_dims=start_index_map)
    return [ct_x, None]


@defvjp("scatter")
def _scatter(ct: Tracer, xs: list[Tracer], out: Tracer, mode: str, update_window_dims: Sequence[int],
             inserted_window_dims: Sequence[int], scatter_dims_to_operand_dims: Sequence[int]) -> list[Any]:
    x, indices, updates = xs
    if mode not in ("set", "add"):
        raise CompilationError(f"differentiating x.at[...].{mode}(...)", "only .set and .add updates have "
                               "reverse-mode rules in xla_teach", "express the update with .set/.add and "
                               "xnp arithmetic", location=None)
    window_dims = [d for d in range(x.ndim) if d not in inserted_window_dims]
    slice_sizes = [1] * x.ndim
    for k, d in enumerate(window_dims):
        slice_sizes[d] = updates.shape[update_window_dims[k]]
    ct_updates = bind(P.gather_p, ct, indices, offset_dims=tuple(update_window_dims),
                      collapsed_slice_dims=tuple(inserted_window_dims),
                      start_index_map=tuple(scatter_dims_to_operand_dims), slice_sizes=tuple(slice_sizes))
    # A scatter drops out-of-range updates, a gather clamps: dropped updates get no gradient.
    valid = None
    for k, d in enumerate(scatter_dims_to_operand_dims):
        column = bind(P.slice_p, indices, start=(0,) * (indices.ndim - 1) + (k,),
                      limit=indices.shape[:-1] + (k + 1,), strides=(1,) * indices.ndim)
        column = bind(P.reshape_p, column, new_sizes=indices.shape[:-1])
        ok = logical_and(greater_equal(column, 0), less_equal(column, x.shape[d] - slice_sizes[d]))
        valid = ok if valid is None else logical_and(valid, ok)
    if valid is not None:
        batch_dims = tuple(d for d in range(updates.ndim) if d not in update_window_dims)
        mask = bind(P.broadcast_in_dim_p, valid, shape=updates.shape, dims=batch_dims)
        ct_updates = where(mask, ct_updates, zeros_like(ct_updates))
    if mode == "add":
        return [ct, None, ct_updates]
    ct_x = bind(P.scatter_p, ct, indices, zeros_like(updates), mode="set", update_window_dims=update_window_dims,
                inserted_window_dims=inserted_window_dims, scatter_dims_to_operand_dims=scatter_dims_to_operand_dims)
    return [ct_x, None, ct_updates]


@defvjp("sort", single=False)
def _sort(cts: list[Tracer | None], xs: list[Tracer], outs: list[Tracer], dimension: int) -> list[Tracer | None]:
    """Values moved from position perm[j] to j; their cotangents move back with the
    inverse permutation (``argsort(perm)``)."""
    from xla_teach.frontend.indexing import take_along_axis

    perm = outs[-1]
    inverse = argsort(perm, axis=dimension)
    return [None if ct is None else take_along_axis(ct, inverse, dimension) for ct in cts]
