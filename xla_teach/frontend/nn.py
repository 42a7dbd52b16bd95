"""``xla_teach.nn``: activations, softmax family, convolution, pooling, dropout.

Everything is built from ``xnp`` functions and primitives, so it traces to HLO
(``convolution``, ``reduce-window``, ``rng-bit-generator``...) and differentiates
with :func:`xla_teach.grad`.

Layouts: images are ``NHWC`` (TensorFlow's and JAX's default) or ``NCHW``
(PyTorch's); kernels are ``HWIO`` with NHWC and ``OIHW`` with NCHW. Padding is
``"VALID"`` (none), ``"SAME"`` (output size ``ceil(input / stride)``, extra cell at
the end, as XLA's ``MakePadding``) or explicit ``(low, high)`` pairs per spatial dim.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from xla_teach.frontend import primitives as P
from xla_teach.frontend.autodiff import stop_gradient
from xla_teach.frontend.numpy_api import (
    ArrayLike,
    add,
    api,
    exp,
    isfinite,
    lift,
    log,
    log1p,
    maximum,
    multiply,
    one_hot,
    subtract,
    tanh,
    true_divide,
    where,
)
from xla_teach.frontend.numpy_api_reduce import max as xmax
from xla_teach.frontend.numpy_api_reduce import sum as xsum
from xla_teach.frontend.numpy_api_shape import normalize_axes
from xla_teach.frontend.random import PRNGKey, normal, split, uniform
from xla_teach.frontend.tracer import Tracer, bind
from xla_teach.hlo.builder.ops import make_padding

__all__ = ["PRNGKey", "avg_pool", "conv2d", "dropout", "elu", "gelu", "leaky_relu", "log_softmax", "logsumexp",
           "max_pool", "normal", "one_hot", "relu", "sigmoid", "silu", "softmax", "softplus", "split", "uniform"]


# ---- activations ------------------------------------------------------------------------------
@api
def relu(x: ArrayLike) -> Tracer:
    return maximum(x, 0.0) if not _is_int(x) else maximum(x, 0)


def _is_int(x: ArrayLike) -> bool:
    t = lift(x)
    return np.dtype(t.dtype).kind in "iu"


@api
def sigmoid(x: ArrayLike) -> Tracer:
    """``1 / (1 + exp(-x))`` as HLO's ``logistic``."""
    from xla_teach.frontend.numpy_api import to_inexact

    return bind(P.PRIMITIVES["logistic"], to_inexact(x))


@api
def gelu(x: ArrayLike, approximate: bool = True) -> Tracer:
    """Gaussian error linear unit; ``approximate=True`` is the tanh form (JAX's default)."""
    t = lift(x)
    if approximate:
        inner = multiply(math.sqrt(2.0 / math.pi), add(t, multiply(0.044715, t * t * t)))
        return multiply(multiply(0.5, t), add(1.0, tanh(inner)))
    erf = bind(P.PRIMITIVES["erf"], multiply(t, 1.0 / math.sqrt(2.0)))
    return multiply(multiply(0.5, t), add(1.0, erf))


@api
def silu(x: ArrayLike) -> Tracer:
    return multiply(x, sigmoid(x))


@api
def softplus(x: ArrayLike) -> Tracer:
    """``log(1 + exp(x))`` computed without overflow."""
    t = lift(x)
    return add(maximum(t, 0.0), log1p(exp(multiply(-1.0, abs_(t)))))


def abs_(t: Tracer) -> Tracer:
    from xla_teach.frontend.numpy_api import absolute

    return absolute(t)


@api
def leaky_relu(x: ArrayLike, negative_slope: float = 0.01) -> Tracer:
    t = lift(x)
    return where(t >= 0, t, multiply(t, negative_slope))


@api
def elu(x: ArrayLike, alpha: float = 1.0) -> Tracer:
    t = lift(x)
    from xla_teach.frontend.numpy_api import expm1

    return where(t > 0, t, multiply(alpha, expm1(where(t > 0, 0.0, t))))


# ---- softmax family ----------------------------------------------------------------------------
def _shifted(x: ArrayLike, axis: int | Sequence[int]) -> tuple[Tracer, Tracer, tuple[int, ...]]:
    """``x - max(x)`` (the max is a constant for the gradient: it cancels out)."""
    t = lift(x)
    axes = normalize_axes(axis, t.ndim)
    m = stop_gradient(xmax(t, axes, keepdims=True))
    m = where(isfinite(m), m, 0.0)
    return subtract(t, m), m, axes


@api
def logsumexp(x: ArrayLike, axis: int | Sequence[int] | None = None, keepdims: bool = False) -> Tracer:
    shifted, m, axes = _shifted(x, axis)
    out = add(log(xsum(exp(shifted), axes, keepdims=True)), m)
    if not keepdims:
        from xla_teach.frontend.numpy_api_shape import squeeze

        out = squeeze(out, axes)
    return out


@api
def softmax(x: ArrayLike, axis: int | Sequence[int] = -1) -> Tracer:
    shifted, _, axes = _shifted(x, axis)
    unnormalized = exp(shifted)
    return true_divide(unnormalized, xsum(unnormalized, axes, keepdims=True))


@api
def log_softmax(x: ArrayLike, axis: int | Sequence[int] = -1) -> Tracer:
    shifted, _, axes = _shifted(x, axis)
    return subtract(shifted, log(xsum(exp(shifted), axes, keepdims=True)))


# ---- convolution and pooling -------------------------------------------------------------------
_LAYOUTS = {"NHWC": ("b01f_01io->b01f", (1, 2)), "NCHW": ("bf01_oi01->bf01", (2, 3))}


def _pair(v: int | Sequence[int], what: str) -> tuple[int, int]:
    if isinstance(v, int):
        return (v, v)
    if len(v) != 2:
        raise ValueError(f"{what} must be an int or a pair, got {v!r}")
    return (int(v[0]), int(v[1]))


def _layout(data_format: str) -> tuple[str, tuple[int, int]]:
    if data_format not in _LAYOUTS:
        raise ValueError(f"data_format must be 'NHWC' or 'NCHW', got {data_format!r}")
    return _LAYOUTS[data_format]


@api
def conv2d(x: ArrayLike, kernel: ArrayLike, stride: int | Sequence[int] = 1, padding: Any = "VALID",
           dilation: int | Sequence[int] = 1, data_format: str = "NHWC", feature_group_count: int = 1) -> Tracer:
    """2-D convolution (cross-correlation, as in every ML framework) lowered to one HLO
    ``convolution``. ``kernel`` is HWIO for NHWC, OIHW for NCHW."""
    from xla_teach.frontend.numpy_api import promote

    t, k = promote(x, kernel)
    if t.ndim != 4 or k.ndim != 4:
        raise ValueError(f"conv2d needs rank-4 input and kernel, got {t.shape} and {k.shape}")
    labels, spatial = _layout(data_format)
    strides, dilations = _pair(stride, "stride"), _pair(dilation, "dilation")
    kernel_spatial = (k.shape[0], k.shape[1]) if data_format == "NHWC" else (k.shape[2], k.shape[3])
    in_features = t.shape[3] if data_format == "NHWC" else t.shape[1]
    kernel_in = k.shape[2] if data_format == "NHWC" else k.shape[1]
    if in_features != kernel_in * feature_group_count:
        raise ValueError(f"conv2d: the input has {in_features} features but the kernel expects "
                         f"{kernel_in} x feature_group_count={feature_group_count}")
    dilated = [(w - 1) * d + 1 for w, d in zip(kernel_spatial, dilations, strict=True)]
    pads = make_padding([t.shape[d] for d in spatial], dilated, strides, padding)
    return bind(P.conv_general_dilated_p, t, k, strides=strides, padding=tuple(pads), lhs_dilation=(1, 1),
                rhs_dilation=dilations, dim_labels=labels, feature_group_count=feature_group_count)


def _pool_window(t: Tracer, window: int | Sequence[int], strides: int | Sequence[int] | None, padding: Any,
                 data_format: str) -> tuple[tuple[int, ...], tuple[int, ...], tuple[tuple[int, int], ...]]:
    _, spatial = _layout(data_format)
    win = _pair(window, "window")
    st = _pair(strides if strides is not None else win, "strides")
    full_win, full_st = [1] * 4, [1] * 4
    for k, d in enumerate(spatial):
        full_win[d], full_st[d] = win[k], st[k]
    if isinstance(padding, str):
        pads = make_padding(t.shape, full_win, full_st, padding)
    else:
        pads = [(0, 0)] * 4
        for k, d in enumerate(spatial):
            pads[d] = tuple(padding[k])
    return tuple(full_win), tuple(full_st), tuple((int(lo), int(hi)) for lo, hi in pads)


@api
def max_pool(x: ArrayLike, window: int | Sequence[int], strides: int | Sequence[int] | None = None,
             padding: Any = "VALID", data_format: str = "NHWC") -> Tracer:
    """Max over each window: HLO ``reduce-window`` with ``maximum`` (padding cells are -inf)."""
    t = lift(x)
    win, st, pads = _pool_window(t, window, strides, padding, data_format)
    return bind(P.reduce_window_p, t, kind="max", window=win, strides=st, padding=pads)


@api
def avg_pool(x: ArrayLike, window: int | Sequence[int], strides: int | Sequence[int] | None = None,
             padding: Any = "VALID", data_format: str = "NHWC", count_include_pad: bool = True) -> Tracer:
    """Mean over each window: a ``reduce-window`` sum divided by the window size (or, with
    ``count_include_pad=False``, by the number of real cells in the window)."""
    t = lift(x)
    win, st, pads = _pool_window(t, window, strides, padding, data_format)
    total = bind(P.reduce_window_p, t, kind="sum", window=win, strides=st, padding=pads)
    if count_include_pad:
        return true_divide(total, float(np.prod(win)))
    from xla_teach.frontend.numpy_api import ones_like

    counts = bind(P.reduce_window_p, ones_like(t), kind="sum", window=win, strides=st, padding=pads)
    return true_divide(total, counts)


@api
def dropout(x: ArrayLike, rate: float, key: ArrayLike, deterministic: bool = False) -> Tracer:
    """Zero each element with probability ``rate`` and scale the rest by ``1 / (1 - rate)``.
    ``key`` (from :func:`PRNGKey`/:func:`split`) decides which: same key, same mask."""
    t = lift(x)
    if deterministic or rate == 0.0:
        return t
    if not 0.0 <= rate < 1.0:
        raise ValueError(f"dropout rate must be in [0, 1), got {rate}")
    keep = uniform(key, t.shape) >= rate
    return where(keep, true_divide(t, 1.0 - rate), 0.0)
