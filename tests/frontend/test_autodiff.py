"""Reverse-mode autodiff: every differentiable operation against finite differences,
and the transformations' API (argnums, has_aux, pytrees, higher order, vjp, jvp).
More operations in test_autodiff_ops.py; loops and conditionals in
test_autodiff_control_flow.py."""

from __future__ import annotations

import re

import numpy as np
import pytest

import xla_teach
import xla_teach.nn as nn
import xla_teach.numpy as xnp
from tests.frontend.frontend_test_utils import check_grad, numerical_grad
from xla_teach import jvp, vjp
from xla_teach.frontend.autodiff import stop_gradient

rng = np.random.default_rng(4)
X = rng.normal(size=(3, 4)).astype(np.float32)
POS = (rng.random(size=(3, 4)) + 0.5).astype(np.float32)
W = rng.normal(size=(4, 5)).astype(np.float32)
T = np.arange(12, dtype=np.float32).reshape(3, 4) / 10  # a fixed weighting, so sums are not symmetric

ELEMENTWISE = {
    "add_sub_mul_div": lambda x: xnp.sum((x + 1.5) * (x - 0.5) / (x * x + 1.0) * T),
    "exp": lambda x: xnp.sum(xnp.exp(x) * T),
    "log": lambda x: xnp.sum(xnp.log(x * x + 1) * T),
    "log1p_expm1": lambda x: xnp.sum(xnp.log1p(x * x) + xnp.expm1(x) * T),
    "tanh_sigmoid": lambda x: xnp.sum(xnp.tanh(x) * T + nn.sigmoid(x)),
    "sqrt_cbrt": lambda x: xnp.sum(xnp.sqrt(x * x + 1) * T + xnp.cbrt(x * x + 1)),
    "sin_cos_tan": lambda x: xnp.sum(xnp.sin(x) * T + xnp.cos(x) + xnp.tan(x * 0.3)),
    "abs": lambda x: xnp.sum(xnp.abs(x) * T),
    "power": lambda x: xnp.sum((x * x + 1) ** 1.7 * T + x ** 3),
    "arctan2": lambda x: xnp.sum(xnp.arctan2(x, T + 0.5)),
    "maximum_minimum": lambda x: xnp.sum(xnp.maximum(x, 0.1) * T + xnp.minimum(x, T)),
    "where_clip": lambda x: xnp.sum(xnp.where(x > 0, x ** 2, -3 * x) + xnp.clip(x, -0.5, 0.5) * T),
    "astype": lambda x: xnp.sum(x.astype(np.float64) ** 2 * T),
    "erf_gelu": lambda x: xnp.sum(nn.gelu(x, approximate=False) * T + nn.gelu(x)),
    "broadcasting": lambda x: xnp.sum((x - xnp.mean(x, axis=0)) ** 2 * xnp.arange(4.0) + x[:, :1] * x),
}


@pytest.mark.parametrize("name", list(ELEMENTWISE))
def test_elementwise_gradients(name):
    check_grad(ELEMENTWISE[name], X)


REDUCTIONS = {
    "sum_axes": lambda x: xnp.sum(xnp.sum(x, axis=1) ** 2) + xnp.sum(x, keepdims=True)[0, 0] ** 2,
    "mean_var_std": lambda x: x.var() + xnp.std(x, axis=1).sum() + xnp.mean(x * T, axis=0).sum() ** 2,
    "max_min": lambda x: xnp.sum(xnp.max(x, axis=0) * xnp.arange(4.0)) + xnp.min(x) ** 2,
    "prod": lambda x: xnp.sum(xnp.prod(x, axis=1) * xnp.arange(3.0)),
    "logsumexp_softmax": lambda x: xnp.sum(nn.logsumexp(x, axis=1)) + xnp.sum(nn.softmax(x) * T)
    + xnp.sum(nn.log_softmax(x, axis=0) * T),
    "cumsum": lambda x: xnp.sum(xnp.cumsum(x, axis=1) ** 2),
    "sort": lambda x: xnp.sum(xnp.sort(x, axis=1) * T),
}


@pytest.mark.parametrize("name", list(REDUCTIONS))
def test_reduction_gradients(name):
    check_grad(REDUCTIONS[name], X)


SHAPES = {
    "matmul": lambda x: xnp.sum(xnp.tanh(x @ W)),
    "matmul_vector": lambda x: xnp.sum((x @ W[:, 0]) ** 2) + xnp.sum(x[0] @ x.T),
    "batched_einsum": lambda x: xnp.sum(xnp.einsum("ij,kj,jl->ikl", x, x * T, W) ** 2),
    "dot_general_transposed": lambda x: xnp.sum(xnp.tensordot(x, x * T, axes=([0], [0])) ** 2),
    "reshape_transpose": lambda x: xnp.sum(x.reshape(2, 6).T.reshape(4, 3) * T.T),
    "slices": lambda x: xnp.sum(x[1:, ::2] * x[:2, 1::2] ** 3) + x[0, 0] + xnp.sum(x[::-1, 2] * x[:, -1]),
    "pad_concat_stack": lambda x: xnp.sum(xnp.concatenate([xnp.pad(x, ((1, 0), (2, 1))), xnp.ones((4, 7))], 0) ** 2
                                          * xnp.arange(7.0)) + xnp.sum(xnp.stack([x, x * 2], 1) ** 2),
    "flip_expand_squeeze_broadcast": lambda x: xnp.sum(xnp.flip(x, 1) * T + xnp.broadcast_to(x[None], (2, 3, 4)) ** 2)
    + xnp.sum(xnp.squeeze(xnp.expand_dims(x, 0)) ** 3),
    "gather": lambda x: xnp.sum(x[[0, 2, 2], :] * x[:, [3, 1, 0, 0]] ** 2) + xnp.sum(x[:, [1, 2]][[1, 2], [0, 1]]),
    "take_along_axis": lambda x: xnp.sum(xnp.take_along_axis(x, xnp.argsort(x, axis=0), 0) * T),
    "dynamic_index": lambda x: xnp.sum(x[xnp.argmax(x[:, 0])] ** 2),
    "at_set_add": lambda x: xnp.sum(x.at[1, 2].set(3.0) ** 2 + x.at[[0, 0], [1, 3]].add(x[2, :2]) ** 3),
    "at_set_strided": lambda x: xnp.sum(x.at[:, ::2].set(x[:, 1::2] * 2) ** 2 * T),
    "dynamic_update_slice": lambda x: xnp.sum(xnp.dynamic_update_slice(x, x[:1, :2] * 5, (2, 1)) ** 2 * T),
}


@pytest.mark.parametrize("name", list(SHAPES))
def test_structural_gradients(name):
    check_grad(SHAPES[name], X)


@pytest.mark.parametrize("stride,padding,dilation", [((1, 1), "VALID", (1, 1)), ((2, 1), "SAME", (1, 1)),
                                                     ((1, 2), "SAME", (2, 1)), ((2, 2), "VALID", (1, 2))])
def test_conv2d_gradients(stride, padding, dilation):
    x = rng.normal(size=(1, 6, 5, 2)).astype(np.float32)
    w = rng.normal(size=(3, 2, 2, 3)).astype(np.float32)

    def loss(x, w):
        return xnp.sum(nn.conv2d(x, w, stride, padding, dilation) ** 2)

    check_grad(loss, x, w, argnum=0, rtol=1e-2, atol=5e-2)
    check_grad(loss, x, w, argnum=1, rtol=1e-2, atol=5e-2)


def test_conv2d_nchw_gradient():
    x = rng.normal(size=(2, 2, 5, 5)).astype(np.float32)
    w = rng.normal(size=(3, 2, 3, 3)).astype(np.float32)
    check_grad(lambda x, w: xnp.sum(nn.conv2d(x, w, 2, "SAME", data_format="NCHW") ** 2), x, w, argnum=1,
               atol=5e-2)


@pytest.mark.parametrize("padding", ["VALID", "SAME"])
def test_pooling_gradients(padding):
    x = rng.normal(size=(1, 5, 5, 2)).astype(np.float32)
    weights = rng.normal(size=(1, 3, 3, 2)).astype(np.float32)
    weights = weights[:, :2, :2] if padding == "VALID" else weights
    check_grad(lambda x: xnp.sum(nn.max_pool(x, 2, 2, padding) * weights), x)
    check_grad(lambda x: xnp.sum(nn.avg_pool(x, (2, 3), 2, padding) ** 2), x)


def test_value_and_grad_argnums_and_pytrees():
    params = {"w": W, "b": np.zeros(5, np.float32)}

    def loss(params, x):
        return xnp.mean((x @ params["w"] + params["b"]) ** 2)

    value, grads = xla_teach.jit(xla_teach.value_and_grad(loss), backend="interpreter")(params, X)
    np.testing.assert_allclose(value, np.mean((X @ W) ** 2), rtol=1e-5)
    assert set(grads) == {"w", "b"}
    np.testing.assert_allclose(grads["w"], X.T @ (2 * (X @ W)) / 15, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(grads["b"], (2 * (X @ W)).sum(0) / 15, rtol=1e-4, atol=1e-6)
    g_params, g_x = xla_teach.grad(loss, argnums=(0, 1))(params, X)  # eager: compiles itself
    np.testing.assert_allclose(g_x, 2 * (X @ W) @ W.T / 15, rtol=1e-4, atol=1e-6)


def test_has_aux_and_unused_argument():
    def loss(x, y):
        return xnp.sum(x ** 2), {"norm": xnp.sqrt(xnp.sum(x ** 2))}

    (value, aux), g = xla_teach.jit(xla_teach.value_and_grad(loss, has_aux=True), backend="interpreter")(X, X)
    np.testing.assert_allclose(aux["norm"], np.sqrt(value), rtol=1e-6)
    g_y = xla_teach.grad(lambda x, y: xnp.sum(x), argnums=1)(X, X)
    np.testing.assert_array_equal(g_y, np.zeros_like(X))


def test_second_derivative():
    x = np.linspace(-2, 2, 7, dtype=np.float32)
    d2 = xla_teach.jit(xla_teach.grad(lambda x: xnp.sum(xla_teach.grad(lambda y: xnp.sum(xnp.sin(y) * y))(x))),
                       backend="interpreter")(x)
    np.testing.assert_allclose(d2, 2 * np.cos(x) - x * np.sin(x), rtol=1e-5, atol=1e-6)


def test_vjp_and_jvp_inside_jit():
    def f(x):
        return xnp.tanh(x @ W)

    def both(x, ct, tangent):
        out, pullback = vjp(f, x)
        primal, tangent_out = jvp(f, (x,), (tangent,))
        return out, pullback(ct)[0], tangent_out

    ct = rng.normal(size=(3, 5)).astype(np.float32)
    tangent = rng.normal(size=(3, 4)).astype(np.float32)
    out, x_ct, t_out = xla_teach.jit(both, backend="interpreter")(X, ct, tangent)
    dtanh = 1 - np.tanh(X @ W) ** 2
    np.testing.assert_allclose(out, np.tanh(X @ W), rtol=1e-5)
    np.testing.assert_allclose(x_ct, (ct * dtanh) @ W.T, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(t_out, dtanh * (tangent @ W), rtol=1e-4, atol=1e-5)


def test_stop_gradient():
    g = xla_teach.grad(lambda x: xnp.sum(x * stop_gradient(x)))(X)
    np.testing.assert_allclose(g, X)


def test_gradient_is_hlo_in_the_same_module():
    text = xla_teach.jit(xla_teach.grad(lambda x: xnp.sum(xnp.tanh(x @ W)))).lower(X).as_text()
    assert "HloModule jit_grad_lambda" in text
    assert 'op_name="jit(grad_lambda)/transpose(jvp(lambda))/transpose(dot_general)/dot_general"' in text
    assert text.count(" dot(") == 2  # the forward dot and the one for d/dx


def test_grad_argument_errors():
    with pytest.raises(ValueError, match="float scalar"):
        xla_teach.grad(lambda x: x * 2)(X)
    with pytest.raises(ValueError, match="floating-point"):
        xla_teach.grad(lambda x: xnp.sum(x).astype(np.float32))(np.arange(3))


def test_numerical_grad_helper_is_an_independent_oracle():
    np.testing.assert_allclose(numerical_grad(lambda v: float(np.sum(v ** 3)), np.array([1.0, 2.0])), [3, 12],
                               rtol=1e-5)


def test_named_scope_names_forward_and_backward_instructions():
    """As in JAX: the forward pass of value_and_grad is under jvp(loss), its transpose under
    transpose(jvp(loss)), and a named_scope inside the loss shows in both (the backward
    instructions of a layer sit in that layer's scope)."""

    def loss(w, x):
        with xla_teach.named_scope("layer1"):
            h = xnp.tanh(x @ w)
        return xnp.sum(h)

    def step(w, x):
        value, g = xla_teach.value_and_grad(loss)(w, x)
        return value, w - 0.1 * g

    text = xla_teach.jit(step).lower(W, X).as_text()
    names = set(re.findall(r'op_name="([^"]*)"', text))
    assert "jit(step)/jvp(loss)/layer1/dot_general" in names and "jit(step)/jvp(loss)/reduce_sum" in names
    assert "jit(step)/transpose(jvp(loss))/layer1/transpose(dot_general)/dot_general" in names
    assert "jit(step)/transpose(jvp(loss))/transpose(reduce_sum)/broadcast_in_dim" in names
    assert "jit(step)/sub" in names  # the update, outside the differentiated function
    with xla_teach.named_scope("outside"):  # outside a trace it does nothing
        assert float(xnp.sum(xnp.ones(3))) == 3.0
