"""Reverse-mode rules for window operations and convolutions (JAX's transpose rules).

* ``reduce_window`` sum (``avg_pool``, ``cumsum``): a stride-1 window sum over the
  cotangent, dilated by the strides and padded (:func:`conv_vjp_lhs_padding`).
* ``reduce_window`` prod (``cumprod``): the same window sum applied to
  ``ct * out``, divided by ``x`` -- like ``reduce_prod``, not defined where ``x == 0``.
* ``reduce_window`` max (``max_pool``): ``select-and-scatter`` sends each window's
  cotangent to the window's maximum. Its own transpose (for ``grad(grad(max_pool))``)
  *gathers* from the maximum: a variadic ``reduce-window`` over ``(x, ct)`` pairs that
  keeps the pair with the larger ``x`` (JAX's ``select_and_gather_add``).
* ``conv_general_dilated``: a convolution of the cotangent with the spatially reversed
  kernel (d/d input), and of the input with the cotangent (d/d kernel). With
  ``feature_group_count = G > 1`` (grouped/depthwise convolutions) the group axis
  is first moved between the kernel's (or input's) dimensions with a reshape, as
  JAX does, so each group is transposed on its own.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from xla_teach.frontend import lax_ops as L
from xla_teach.frontend import primitives as P
from xla_teach.frontend.autodiff import needs_grad
from xla_teach.frontend.autodiff_rules import defvjp, pad_primitive
from xla_teach.frontend.errors import CompilationError
from xla_teach.frontend.tracer import Primitive, Tracer, bind
from xla_teach.hlo.attributes import ConvDimensionNumbers
from xla_teach.hlo.builder import XlaBuilder, XlaOp
from xla_teach.hlo.shape import Shape


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
        padded = pad_primitive(ct, np.zeros((), ct.dtype), [(lo, hi, s - 1) for (lo, hi), s in zip(pads, strides,
                                                                                           strict=True)])
        return [bind(P.reduce_window_p, padded, kind="sum", window=tuple(window),
                     strides=tuple(base_dilation or ones), padding=((0, 0),) * x.ndim,
                     window_dilation=window_dilation)]
    if kind == "prod":
        spread = _reduce_window(L.mul(ct, out), xs, out, "sum", window, strides, padding, base_dilation,
                                window_dilation)[0]
        return [L.div(spread, x)]
    if kind == "max" and not base_dilation and not window_dilation:
        return [bind(P.select_and_scatter_add_p, ct, x, window=tuple(window), strides=tuple(strides),
                     padding=tuple(padding))]
    raise CompilationError(f"differentiating reduce_window ({kind})", "no reverse-mode rule for this window "
                           "reduction (only sum, prod, and max without dilation, are differentiable)",
                           "use a sum/mean, product or max window", location=None)


def _select_and_gather_add(b: XlaBuilder, ct: XlaOp, operand: XlaOp, *, window: Sequence[int],
                           strides: Sequence[int], padding: Sequence[tuple[int, int]]) -> XlaOp:
    """Per window, the ``ct`` value at the window's (first) maximum of ``operand``."""
    etype = operand.shape.element_type
    sub = b.create_sub_builder("select_gather")
    acc_x, acc_ct = sub.parameter(0, Shape.scalar(etype), "acc_x"), sub.parameter(1, Shape.scalar(etype), "acc_ct")
    x, ct_now = sub.parameter(2, Shape.scalar(etype), "x"), sub.parameter(3, Shape.scalar(etype), "ct")
    better = sub.compare(x, acc_x, "GT")
    comp = sub.build_computation(sub.tuple([sub.select(better, x, acc_x), sub.select(better, ct_now, acc_ct)]))
    inits = [b.constant(P.init_value("max", etype.dtype)), b.constant(np.zeros((), etype.dtype))]
    result = b.reduce_window([operand, ct], inits, comp, window, strides, list(padding))
    return b.get_tuple_element(result, 1)


select_and_gather_add_p = Primitive("select_and_gather_add", _select_and_gather_add)


@defvjp("select_and_scatter_add")
def _select_and_scatter_add(ct: Tracer, xs: list[Tracer], out: Tracer, window: Sequence[int],
                            strides: Sequence[int], padding: Sequence[tuple[int, int]]) -> list[Tracer | None]:
    """Linear in the source; piecewise constant in the operand (which only picks)."""
    return [bind(select_and_gather_add_p, ct, xs[1], window=window, strides=strides, padding=padding), None]


@defvjp(select_and_gather_add_p)
def _select_and_gather_add_rule(ct: Tracer, xs: list[Tracer], out: Tracer, window: Sequence[int],
                                strides: Sequence[int], padding: Sequence[tuple[int, int]]) -> list[Tracer | None]:
    return [bind(P.select_and_scatter_add_p, ct, xs[1], window=window, strides=strides, padding=padding), None]


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


def _reshape_axis_out_of(src: int, size1: int, x: Tracer) -> Tracer:
    """Split axis ``src`` of ``x`` into ``(size1, rest)`` (JAX's helper)."""
    shape = list(x.shape)
    shape[src:src + 1] = [size1, shape[src] // size1]
    return bind(P.reshape_p, x, new_sizes=tuple(shape))


def _reshape_axis_into(src: int, dst: int, x: Tracer) -> Tracer:
    """Merge axis ``src`` into axis ``dst`` as its major part (JAX's helper); ``dst``
    counts the axes without ``src``."""
    perm = [i for i in range(x.ndim) if i != src]
    perm.insert(dst, src)
    shape = [x.shape[i] for i in range(x.ndim) if i != src]
    shape[dst] *= x.shape[src]
    return bind(P.reshape_p, L.transpose(x, perm), new_sizes=tuple(shape))


@defvjp("conv_general_dilated")
def _conv(ct: Tracer, xs: list[Tracer], out: Tracer, strides: Sequence[int], padding: Sequence[tuple[int, int]],
          lhs_dilation: Sequence[int], rhs_dilation: Sequence[int], dim_labels: str,
          feature_group_count: int = 1) -> list[Tracer | None]:
    lhs, rhs = xs
    groups = feature_group_count
    lhs_spec, rhs_spec, out_spec = _specs(dim_labels)
    lhs_sp = [lhs.shape[d] for d in lhs_spec[2:]]
    rhs_sp = [rhs.shape[d] for d in rhs_spec[2:]]
    out_sp = [ct.shape[d] for d in out_spec[2:]]
    ct_lhs = ct_rhs = None
    # d/d lhs: a convolution of the cotangent with the spatially reversed kernel. With G
    # groups, the kernel's output features (G x O/G) become G x (its input features).
    if needs_grad(lhs):
        kernel = rhs
        if groups > 1:
            kernel = _reshape_axis_into(rhs_spec[0], rhs_spec[1], _reshape_axis_out_of(rhs_spec[0], groups, rhs))
        pads = conv_vjp_lhs_padding(lhs_sp, rhs_sp, strides, out_sp, padding, lhs_dilation, rhs_dilation)
        reversed_kernel = bind(P.reverse_p, kernel, dimensions=tuple(rhs_spec[2:]))
        ct_lhs = bind(P.conv_general_dilated_p, ct, reversed_kernel, strides=tuple(lhs_dilation),
                      padding=tuple(pads), lhs_dilation=tuple(strides), rhs_dilation=tuple(rhs_dilation),
                      dim_labels=_labels(out_spec, _swap(rhs_spec), lhs_spec), feature_group_count=groups)
    # d/d rhs: a convolution of the input with the cotangent (batch and feature roles
    # swapped). With G groups, the input's feature groups move into its batch axis.
    if needs_grad(rhs):
        source = lhs
        if groups > 1:
            source = _reshape_axis_into(lhs_spec[1], lhs_spec[0], _reshape_axis_out_of(lhs_spec[1], groups, lhs))
        lhs_d = _dilate_shape(lhs_sp, lhs_dilation)
        rhs_d = _dilate_shape(rhs_sp, rhs_dilation)
        out_d = _dilate_shape(out_sp, strides)
        pads_lo = [lo for lo, _ in padding]
        pads_hi = [od - ld + (rd - lo - 1) for od, ld, rd, lo in zip(out_d, lhs_d, rhs_d, pads_lo, strict=True)]
        ct_rhs = bind(P.conv_general_dilated_p, source, ct, strides=tuple(rhs_dilation),
                      padding=tuple(zip(pads_lo, pads_hi, strict=True)), lhs_dilation=tuple(lhs_dilation),
                      rhs_dilation=tuple(strides), dim_labels=_labels(_swap(lhs_spec), _swap(out_spec),
                                                                      _swap(rhs_spec)),
                      feature_group_count=groups)
    return [ct_lhs, ct_rhs]
