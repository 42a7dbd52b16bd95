"""Convolution and pooling ops for graphs, with their gradients (TensorFlow's names and layouts).

NumPy has no convolution, so these ops are the exception to "written once in NumPy terms"
(:mod:`~xla_teach.graph.op_registry`): each has two kernels, as in TensorFlow.

* The **eager kernel** (NumPy, what the op-by-op executor runs) writes a convolution as a sum
  over the kernel's taps: for each tap ``(i, j)`` the input shifted by ``(i, j)`` (a strided
  view of the padded input, no copy) times the tap's ``[in, out]`` matrix -- ``kh * kw``
  matrix products, each one BLAS call. The gradients are the same sum read the other way:
  the input's gradient adds each tap's ``dy @ w[i, j].T`` back at its shift, the filter's
  gradient for tap ``(i, j)`` is ``shifted_input.T @ dy``. Max pooling takes the maximum of
  the taps; its gradient goes, in each window, to the first tap (row-major) that holds the
  maximum, as TensorFlow's CPU kernel does.
* The **XLA kernel** (what a cluster lowers to) is :func:`xla_teach.nn.conv2d` (one HLO
  ``convolution``) and :func:`xla_teach.nn.max_pool` (a ``reduce-window``); the gradients are
  their VJPs, as tf2xla builds them: ``convolution``\\ s for both convolution gradients and a
  ``select-and-scatter`` for the pooling gradient (its ``ge`` selection also keeps the first
  maximum).

Layouts are TensorFlow's defaults: images NHWC, filters HWIO. ``padding`` is ``"SAME"`` or
``"VALID"``; ``strides`` and ``ksize`` are ``[1, sh, sw, 1]``. ``Conv2DBackpropInput`` takes
the input's shape as the attribute ``input_sizes`` (TensorFlow passes it as a constant tensor).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np


def _window(size: int, k: int, stride: int, padding: str) -> tuple[int, int, int]:
    """(output size, padding before, padding after) of one spatial dimension, TensorFlow's rule."""
    if padding == "VALID":
        return (size - k) // stride + 1, 0, 0
    if padding != "SAME":
        raise ValueError(f"padding must be 'SAME' or 'VALID', got {padding!r}")
    out = -(-size // stride)
    total = max((out - 1) * stride + k - size, 0)
    return out, total // 2, total - total // 2


def _geometry(shape: Sequence[int], kh: int, kw: int, strides: Sequence[int],
              padding: str) -> tuple[int, int, tuple[tuple[int, int], ...]]:
    (ho, top, bottom), (wo, left, right) = (_window(shape[1], kh, strides[1], padding),
                                            _window(shape[2], kw, strides[2], padding))
    return ho, wo, ((0, 0), (top, bottom), (left, right), (0, 0))


def _taps(padded: np.ndarray, kh: int, kw: int, strides: Sequence[int], ho: int,
          wo: int) -> Iterator[tuple[int, int, np.ndarray]]:
    """Each tap ``(i, j)`` with the view of ``padded`` it reads: ``[n, ho, wo, c]``."""
    sh, sw = strides[1], strides[2]
    for i in range(kh):
        for j in range(kw):
            yield i, j, padded[:, i:i + sh * (ho - 1) + 1:sh, j:j + sw * (wo - 1) + 1:sw, :]


def _unpadded(padded: np.ndarray, pads: tuple[tuple[int, int], ...], shape: Sequence[int]) -> np.ndarray:
    """The ``shape`` block of ``padded`` that the padding ``pads`` surrounds (a copy)."""
    (_, (top, _), (left, _), _) = pads
    return padded[:, top:top + shape[1], left:left + shape[2], :].copy()


def conv2d_eager(x: np.ndarray, w: np.ndarray, strides: Sequence[int] = (1, 1, 1, 1),
                 padding: str = "VALID") -> np.ndarray:
    kh, kw, _, out = w.shape
    ho, wo, pads = _geometry(x.shape, kh, kw, strides, padding)
    y = np.zeros((x.shape[0], ho, wo, out), np.result_type(x, w))
    for i, j, tap in _taps(np.pad(x, pads), kh, kw, strides, ho, wo):
        y += tap @ w[i, j]
    return y


def conv2d_backprop_input_eager(w: np.ndarray, dy: np.ndarray, input_sizes: Sequence[int],
                                strides: Sequence[int] = (1, 1, 1, 1), padding: str = "VALID") -> np.ndarray:
    kh, kw = w.shape[:2]
    _, _, pads = _geometry(input_sizes, kh, kw, strides, padding)
    padded = np.zeros([s + lo + hi for s, (lo, hi) in zip(input_sizes, pads, strict=True)], np.result_type(w, dy))
    for i, j, tap in _taps(padded, kh, kw, strides, dy.shape[1], dy.shape[2]):
        tap += dy @ w[i, j].T  # the view writes into ``padded``
    return _unpadded(padded, pads, input_sizes)


def conv2d_backprop_filter_eager(x: np.ndarray, dy: np.ndarray, filter_sizes: Sequence[int],
                                 strides: Sequence[int] = (1, 1, 1, 1), padding: str = "VALID") -> np.ndarray:
    kh, kw, cin, out = filter_sizes
    _, _, pads = _geometry(x.shape, kh, kw, strides, padding)
    dw = np.zeros(tuple(filter_sizes), np.result_type(x, dy))
    rows = dy.reshape(-1, out)
    for i, j, tap in _taps(np.pad(x, pads), kh, kw, strides, dy.shape[1], dy.shape[2]):
        dw[i, j] = tap.reshape(-1, cin).T @ rows
    return dw


def max_pool_eager(x: np.ndarray, ksize: Sequence[int], strides: Sequence[int],
                   padding: str = "VALID") -> np.ndarray:
    ho, wo, pads = _geometry(x.shape, ksize[1], ksize[2], strides, padding)
    padded = np.pad(x, pads, constant_values=-np.inf) if padding == "SAME" else x
    y = np.full((x.shape[0], ho, wo, x.shape[3]), -np.inf, x.dtype)
    for _, _, tap in _taps(padded, ksize[1], ksize[2], strides, ho, wo):
        np.maximum(y, tap, out=y)
    return y


def max_pool_grad_eager(x: np.ndarray, y: np.ndarray, dy: np.ndarray, ksize: Sequence[int],
                        strides: Sequence[int], padding: str = "VALID") -> np.ndarray:
    ho, wo, pads = _geometry(x.shape, ksize[1], ksize[2], strides, padding)
    padded = np.pad(x, pads, constant_values=-np.inf) if padding == "SAME" else x
    dx = np.zeros(padded.shape, dy.dtype)
    taken = np.zeros(y.shape, bool)
    grads = list(_taps(dx, ksize[1], ksize[2], strides, ho, wo))
    for (_, _, tap), (_, _, grad) in zip(_taps(padded, ksize[1], ksize[2], strides, ho, wo), grads, strict=True):
        first = (tap == y) & ~taken
        grad += np.where(first, dy, 0)
        taken |= first
    return _unpadded(dx, pads, x.shape)


# ---- XLA kernels ----------------------------------------------------------------------------------
def _conv2d_xla(x: Any, w: Any, strides: Sequence[int] = (1, 1, 1, 1), padding: str = "VALID") -> Any:
    from xla_teach import nn

    return nn.conv2d(x, w, stride=(strides[1], strides[2]), padding=padding)


def _backprop_input_xla(w: Any, dy: Any, input_sizes: Sequence[int], strides: Sequence[int] = (1, 1, 1, 1),
                        padding: str = "VALID") -> Any:
    import xla_teach.numpy as xnp
    from xla_teach.frontend.autodiff import vjp

    # linear in the input: the VJP at any point (zeros) is the gradient
    _, back = vjp(lambda x: _conv2d_xla(x, w, strides, padding), xnp.zeros(tuple(input_sizes), dy.dtype))
    return back(dy)[0]


def _backprop_filter_xla(x: Any, dy: Any, filter_sizes: Sequence[int], strides: Sequence[int] = (1, 1, 1, 1),
                         padding: str = "VALID") -> Any:
    import xla_teach.numpy as xnp
    from xla_teach.frontend.autodiff import vjp

    _, back = vjp(lambda w: _conv2d_xla(x, w, strides, padding), xnp.zeros(tuple(filter_sizes), dy.dtype))
    return back(dy)[0]


def _max_pool_xla(x: Any, ksize: Sequence[int], strides: Sequence[int], padding: str = "VALID") -> Any:
    from xla_teach import nn

    return nn.max_pool(x, (ksize[1], ksize[2]), (strides[1], strides[2]), padding)


def _max_pool_grad_xla(x: Any, y: Any, dy: Any, ksize: Sequence[int], strides: Sequence[int],
                       padding: str = "VALID") -> Any:
    from xla_teach.frontend.autodiff import vjp

    _, back = vjp(lambda v: _max_pool_xla(v, ksize, strides, padding), x)
    return back(dy)[0]


def two_kernels(eager: Any, xla: Any) -> Any:
    """``compute(m, ...)``: the NumPy kernel when ``m`` is NumPy, else the XLA kernel."""
    def compute(m: Any, *inputs: Any, **attrs: Any) -> Any:
        return eager(*inputs, **attrs) if m is np else xla(*inputs, **attrs)

    return compute


# op name -> (eager kernel, XLA kernel); op_registry registers them
KERNELS = {
    "Conv2D": (conv2d_eager, _conv2d_xla),
    "Conv2DBackpropInput": (conv2d_backprop_input_eager, _backprop_input_xla),
    "Conv2DBackpropFilter": (conv2d_backprop_filter_eager, _backprop_filter_xla),
    "MaxPool": (max_pool_eager, _max_pool_xla),
    "MaxPoolGrad": (max_pool_grad_eager, _max_pool_grad_xla),
}
