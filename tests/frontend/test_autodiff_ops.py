"""Finite-difference checks (in float64) for the operations test_autodiff.py does not
cover: remainder, cumprod, rounding (zero gradients), activations, dropout, scatter
mul/min/max, grouped convolutions, second-order max_pool, jvp, and vjp/jvp outside jit."""

from __future__ import annotations

import numpy as np
import pytest

import xla_teach
import xla_teach.nn as nn
import xla_teach.numpy as xnp
from tests.frontend.frontend_test_utils import check_grad

rng = np.random.default_rng(11)
X = rng.normal(size=(3, 4))  # float64
POS = rng.random(size=(3, 4)) + 0.5
T = np.arange(12.0).reshape(3, 4) / 10
TIGHT = dict(rtol=1e-4, atol=1e-5)


def _away_from_integers(q: np.ndarray, margin: float = 0.02) -> bool:
    """Finite differences are only valid away from the jumps of floor/trunc."""
    return bool(np.all(np.abs(q - np.round(q)) > margin))


def test_remainder_gradient_in_both_arguments():
    x, y = 3 * X, POS
    assert _away_from_integers(x / y)  # the precondition of a smooth neighbourhood
    f = lambda x, y: xnp.sum(xnp.remainder(x, y) * T + (x % 0.7) ** 2)  # noqa: E731
    assert _away_from_integers(x / 0.7)
    check_grad(f, x, y, argnum=0, **TIGHT)
    check_grad(f, x, y, argnum=1, **TIGHT)


def test_floor_divide_and_rounding_have_zero_gradients():
    x = 2.5 * X
    assert _away_from_integers(x) and _away_from_integers(x / 0.3) and _away_from_integers(x - 0.5)
    rounding = lambda x: xnp.sum(xnp.sign(x) + xnp.floor(x) + xnp.ceil(x) + xnp.round(x) + x // 0.3)  # noqa: E731
    np.testing.assert_array_equal(xla_teach.grad(rounding)(x), np.zeros_like(x))
    # as factors they act as constants: d/dx (x * floor(x)) = floor(x)
    check_grad(lambda x: xnp.sum(x * xnp.floor(x) + x ** 2 * xnp.sign(x) + x * (x // 0.3) + xnp.round(x) * x),
               x, **TIGHT)


@pytest.mark.parametrize("axis", [0, 1, None])
def test_cumprod_gradient(axis):
    x = POS * np.where(X > 0, 1.0, -1.0)  # signs mixed, magnitudes away from 0
    check_grad(lambda x: xnp.sum(xnp.cumprod(x, axis=axis).reshape(3, 4) * T), x, **TIGHT)


ACTIVATIONS = {
    "relu": lambda x: nn.relu(x),
    "silu": lambda x: nn.silu(x),
    "elu": lambda x: nn.elu(x, alpha=0.7),
    "softplus": lambda x: nn.softplus(3 * x),
    "leaky_relu": lambda x: nn.leaky_relu(x, 0.2),
}


@pytest.mark.parametrize("name", list(ACTIVATIONS))
def test_activation_gradients(name):
    assert np.all(np.abs(X) > 0.01)  # away from the kinks at 0
    check_grad(lambda x: xnp.sum(ACTIVATIONS[name](x) * T), X, **TIGHT)


def test_dropout_gradient_with_a_fixed_key():
    key = nn.PRNGKey(3)
    f = lambda x: xnp.sum(nn.dropout(x, 0.4, key) * T)  # noqa: E731
    check_grad(f, X, **TIGHT)
    g = xla_teach.grad(f)(X)
    dropped = g == 0
    assert dropped.any() and (~dropped[T != 0]).any()  # the mask is really there
    np.testing.assert_allclose(g[~dropped], (T / 0.6)[~dropped], rtol=1e-12)


ROWS, COLS = np.array([0, 2, 0, 1]), np.array([1, 3, 1, 0])  # (0, 1) is hit twice


@pytest.mark.parametrize("mode", ["mul", "min", "max"])
def test_scatter_combiners_gradients(mode):
    updates = rng.normal(size=4) * 2
    x = X.copy()
    x[0, 1] = 0.3  # no ties between x and the updates (finite differences cannot see ties)

    def f(x, u):
        return xnp.sum(getattr(x.at[ROWS, COLS], mode)(u) * T ** 2) + xnp.sum(x.at[ROWS, COLS].get() * u)

    check_grad(f, x, updates, argnum=0, **TIGHT)
    check_grad(f, x, updates, argnum=1, **TIGHT)


def test_scatter_max_ties_share_the_cotangent():
    g_x, g_u = xla_teach.grad(lambda x, u: xnp.sum(x.at[np.array([1, 1])].max(u)), argnums=(0, 1))(
        np.array([0.0, 2.0, 0.0]), np.array([2.0, 1.0]))
    np.testing.assert_allclose(g_x, [1.0, 0.5, 1.0])
    np.testing.assert_allclose(g_u, [0.5, 0.0])


@pytest.mark.parametrize("data_format,groups,stride,padding", [("NHWC", 2, 1, "VALID"), ("NHWC", 4, 2, "SAME"),
                                                               ("NCHW", 2, (1, 2), "SAME")])
def test_grouped_and_depthwise_conv2d_gradients(data_format, groups, stride, padding):
    x = rng.normal(size=(2, 5, 4, 4) if data_format == "NHWC" else (2, 4, 5, 4))
    w = rng.normal(size=(3, 2, 4 // groups, 6 if groups == 2 else 4))  # HWIO
    if data_format == "NCHW":
        w = w.transpose(3, 2, 0, 1)  # OIHW

    def loss(x, w):
        return xnp.sum(nn.conv2d(x, w, stride, padding, data_format=data_format, feature_group_count=groups) ** 2)

    check_grad(loss, x, w, argnum=0, **TIGHT)
    check_grad(loss, x, w, argnum=1, **TIGHT)


def test_second_order_max_pool_and_more():
    x = rng.permutation(36).reshape(1, 6, 6, 1) / 7.0  # distinct values: no ties inside a window
    v = rng.normal(size=(1, 3, 3, 1))
    w = rng.normal(size=(1, 6, 6, 1))

    def first(x):
        return xnp.sum(xla_teach.grad(lambda y: xnp.sum(nn.max_pool(y, 2, 2) ** 3 * v))(x) * w)

    check_grad(first, x, **TIGHT)
    for f in (lambda y: xnp.sum(nn.logsumexp(y * T, axis=1)), lambda y: xnp.sum(xnp.cumprod(y, axis=1) * T),
              lambda y: xnp.sum(nn.softplus(y) * xnp.remainder(y, 0.9 + T))):
        check_grad(lambda x, f=f: xnp.sum(xla_teach.grad(f)(x) * T), POS, **TIGHT)


def test_jvp_matches_directional_finite_differences():
    def f(x, w):
        return {"a": xnp.tanh(x @ w), "b": xnp.cumprod(x, axis=0).sum() * w}

    x, w = POS, rng.normal(size=(4, 2))
    tx, tw = rng.normal(size=x.shape), rng.normal(size=w.shape)
    primal, tangent = xla_teach.jit(lambda *a: xla_teach.jvp(f, a[:2], a[2:]), backend="interpreter")(x, w, tx, tw)
    f64 = xla_teach.jit(f, backend="interpreter")
    eps = 1e-4
    up, down = f64(x + eps * tx, w + eps * tw), f64(x - eps * tx, w - eps * tw)
    for k in ("a", "b"):
        np.testing.assert_allclose(primal[k], f64(x, w)[k], rtol=1e-12)
        np.testing.assert_allclose(tangent[k], (up[k] - down[k]) / (2 * eps), rtol=1e-5, atol=1e-7)


def test_vjp_and_jvp_outside_jit_return_numpy_arrays():
    def f(x):
        return xnp.sin(x) * x[::-1]

    x = np.linspace(-1.0, 1.0, 5)
    out, pullback = xla_teach.vjp(f, x)
    assert isinstance(out, np.ndarray)
    np.testing.assert_allclose(out, np.sin(x) * x[::-1])
    ct = rng.normal(size=5)
    (g,) = pullback(ct)
    jac = np.diag(np.cos(x) * x[::-1]) + np.fliplr(np.diag(np.sin(x)))  # d f_i / d x_j
    assert isinstance(g, np.ndarray)
    np.testing.assert_allclose(g, ct @ jac, rtol=1e-12)
    primal, tangent = xla_teach.jvp(f, (x,), (ct,))
    assert isinstance(tangent, np.ndarray)
    np.testing.assert_allclose(primal, out)
    np.testing.assert_allclose(tangent, jac @ ct, rtol=1e-12)
    (value, pb, aux) = xla_teach.vjp(lambda x: (xnp.sum(x ** 2), x.max()), x, has_aux=True)
    np.testing.assert_allclose(pb(np.float64(1.0))[0], 2 * x)
    assert aux == x.max() and "vjp" in xla_teach.__all__ and "jvp" in xla_teach.__all__


def test_jvp_argument_errors():
    with pytest.raises(ValueError, match="one tangent per primal"):
        xla_teach.jvp(lambda x, y: x * y, (X, X), (X,))
    with pytest.raises(ValueError, match="tangent shapes"):
        xla_teach.jvp(lambda x: x * 2, (X,), (X[0],))
