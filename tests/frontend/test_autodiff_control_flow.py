"""Gradients through fori_loop, scan, cond and switch against finite differences, the
HLO they produce (stored carries, a backward loop), and the while_loop error."""

from __future__ import annotations

import numpy as np
import pytest

import xla_teach
import xla_teach.numpy as xnp
from tests.frontend.frontend_test_utils import check_grad

rng = np.random.default_rng(7)
X = rng.normal(size=(2, 3))  # float64: finite differences are then accurate to ~1e-7
W = rng.normal(size=(2, 3))
T = np.arange(6.0).reshape(2, 3) / 5
TIGHT = dict(rtol=1e-4, atol=1e-5)


def test_fori_loop_gradient_of_carry_and_closure():
    def f(x, w):
        return xnp.sum(xnp.fori_loop(1, 4, lambda i, v: xnp.tanh(v * w + i * 0.1) * x, x) * T)

    check_grad(f, X, W, argnum=0, **TIGHT)
    check_grad(f, X, W, argnum=1, **TIGHT)


def test_fori_loop_pytree_state_with_int_counter():
    def f(x):
        def body(i, s):
            return {"v": s["v"] * xnp.cos(s["v"]) + x * s["n"], "n": s["n"] + 1}
        out = xnp.fori_loop(0, 3, body, {"v": x, "n": 1})
        return xnp.sum(out["v"] * T) * out["n"]

    check_grad(f, X, **TIGHT)


@pytest.mark.parametrize("reverse", [False, True])
def test_scan_gradient_of_init_xs_and_closure(reverse):
    def f(c0, xs, w):
        def step(c, x):
            c = xnp.sin(c) * x + w
            return c, (c * x).sum()
        carry, ys = xnp.scan(step, c0, xs, reverse=reverse)
        return xnp.sum(carry * w) + xnp.sum(ys * xnp.arange(4.0))

    c0, xs, w = rng.normal(size=3), rng.normal(size=(4, 3)), rng.normal(size=3)
    for argnum in range(3):
        check_grad(f, c0, xs, w, argnum=argnum, **TIGHT)


def test_scan_with_only_ys_used():
    f = lambda xs: xnp.sum(xnp.scan(lambda c, x: (c + x, c * x), xnp.zeros_like(xs[0]), xs)[1] ** 2)  # noqa: E731
    check_grad(f, rng.normal(size=(5, 3)), **TIGHT)


@pytest.mark.parametrize("x0", [0.7, -0.7])
def test_cond_gradient_takes_the_branch_that_ran(x0):
    def f(x, w):
        return xnp.sum(xnp.cond(x[0, 0] > 0, lambda a: xnp.exp(a) * w, lambda a: a ** 3 - w, x) * T)

    x = X.copy()
    x[0, 0] = x0
    check_grad(f, x, W, argnum=0, **TIGHT)
    check_grad(f, x, W, argnum=1, **TIGHT)


@pytest.mark.parametrize("index", [0, 1, 2, 5])
def test_switch_gradient(index):
    def f(x, k):
        branches = [lambda a: xnp.sin(a), lambda a: a * x[0, 0], lambda a: xnp.sum(a ** 2) + a]
        return xnp.sum(xnp.switch(k, branches, x) * T)

    check_grad(f, X, np.int32(index), **TIGHT)


def test_nested_control_flow():
    def f(x):
        def body(i, v):
            return xnp.cond(i % 2 == 0, lambda a: a * x[1], lambda a: xnp.tanh(a), v)
        carry, ys = xnp.scan(lambda c, r: (xnp.fori_loop(0, 3, body, c * r), c), x[0], x)
        return xnp.sum(carry) + xnp.sum(ys * T)

    check_grad(f, X, **TIGHT)


def test_second_order_through_loops_and_cond():
    def inner(x):
        y = xnp.fori_loop(0, 3, lambda i, v: v * xnp.sin(x), x)
        return xnp.sum(xnp.cond(xnp.sum(x) > 0, lambda a: a ** 2, lambda a: a * 3, y))

    def first(x):
        return xnp.sum(xla_teach.grad(inner)(x) * T)

    check_grad(first, X, **TIGHT)
    check_grad(first, -X, **TIGHT)


def test_backward_loop_reads_the_stored_carries():
    def f(x):
        return xnp.sum(xnp.fori_loop(0, 5, lambda i, v: xnp.sin(v) * x, x))

    forward = xla_teach.jit(f).lower(X).as_text()
    backward = xla_teach.jit(xla_teach.grad(f)).lower(X).as_text()
    assert forward.count(" while(") == 1 and "f64[5,2,3]" not in forward  # nothing stored without a gradient
    assert backward.count(" while(") == 2
    assert "f64[5,2,3]" in backward  # one stored carry per iteration
    assert "dynamic-update-slice(" in backward and "dynamic-slice(" in backward
    assert "transpose(fori_loop)" in backward


def test_while_loop_gradient_is_a_clear_error_at_the_loop():
    def f(x):
        return xnp.sum(xnp.while_loop(lambda v: xnp.sum(v) < 10.0, lambda v: v * 2.0, x))  # the loop line

    with pytest.raises(xla_teach.CompilationError, match="trip count") as info:
        xla_teach.grad(f)(np.abs(X) + 0.1)
    err = info.value
    assert "while_loop" in err.operation and "fori_loop" in err.suggestion
    assert err.location is not None and err.location.text.endswith("# the loop line")
    with pytest.raises(xla_teach.CompilationError, match="fori_loop with a traced bound"):
        xla_teach.grad(lambda x, n: xnp.sum(xnp.fori_loop(0, n, lambda i, v: v * x, x)))(X, np.int32(3))


def test_loop_independent_of_the_input_needs_no_stored_carries():
    ok = lambda x: xnp.sum(x * xnp.fori_loop(0, 3, lambda i, v: v + 1.0, 0.0))  # noqa: E731
    np.testing.assert_allclose(xla_teach.grad(ok)(X), np.full_like(X, 3.0))
    # and a while_loop the gradient does not reach is fine
    ok2 = lambda x: xnp.sum(x) * xnp.while_loop(lambda v: v < 5.0, lambda v: v + 2.0, 0.0)  # noqa: E731
    np.testing.assert_allclose(xla_teach.grad(ok2)(X), np.full_like(X, 6.0))


def test_loops_that_run_zero_times() -> None:
    """Regression: the never-run body was still lowered with a one-element slice of an empty
    buffer, which shape inference rejected (``dynamic-slice ... not within [0, 0]``)."""
    x = np.array([1.5, -2.0], np.float32)
    grad = xla_teach.grad(lambda a: xnp.sum(xnp.fori_loop(0, 0, lambda i, c: c * 2.0, a)))(x)
    np.testing.assert_array_equal(grad, [1.0, 1.0])  # the identity
    for run in (lambda f, *a: f(*a), lambda f, *a: xla_teach.jit(f)(*a)):
        carry, ys = run(lambda c0, xs: xnp.scan(lambda c, e: (c + e, e * 2), c0, xs), np.full(2, 3, np.float32),
                        np.zeros((0, 2), np.float32))
        np.testing.assert_array_equal(carry, [3.0, 3.0])
        assert ys.shape == (0, 2) and ys.dtype == np.float32
    g_carry, g_xs = xla_teach.grad(lambda c0, xs: xnp.scan(lambda c, e: (c * e, e), c0, xs)[0], argnums=(0, 1))(
        np.float32(2), np.zeros((0,), np.float32))
    assert float(g_carry) == 1.0 and g_xs.shape == (0,)
