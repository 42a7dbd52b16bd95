"""fori_loop, while_loop, scan, cond and switch lower to HLO while/conditional."""

from __future__ import annotations

import numpy as np
import pytest

import xla_teach
import xla_teach.numpy as xnp
from tests.frontend.frontend_test_utils import assert_matches, run

X = np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)


def test_fori_loop_with_closure_matches_python_loop():
    def f(x, w):
        return xnp.fori_loop(0, 5, lambda i, v: v * 0.5 + w * i, x)

    def ref(x, w):
        for i in range(5):
            x = x * 0.5 + w * np.float32(i)
        return x

    w = np.full((2, 3), 0.25, np.float32)
    assert_matches(f, ref, X, w)
    text = xla_teach.jit(f).lower(X, w).as_text()
    assert " while(" in text and "body=" in text


def test_fori_loop_with_traced_bounds_and_pytree_state():
    def f(x, n):
        return xnp.fori_loop(0, n, lambda i, s: {"acc": s["acc"] + x, "count": s["count"] + 1},
                             {"acc": xnp.zeros_like(x), "count": 0})

    out = run(f, X, np.int32(4))
    np.testing.assert_allclose(out["acc"], 4 * X, rtol=1e-6)
    assert out["count"] == 4 and out["count"].dtype == np.int32


def test_while_loop_runs_until_the_condition_fails():
    def collatz_steps(n):
        def body(state):
            n, steps = state
            return xnp.where(n % 2 == 0, n // 2, 3 * n + 1), steps + 1
        return xnp.while_loop(lambda s: s[0] != 1, body, (n, 0))[1]

    for n in (1, 6, 27):
        steps, m = 0, n
        while m != 1:
            m, steps = (m // 2 if m % 2 == 0 else 3 * m + 1), steps + 1
        assert run(collatz_steps, np.int32(n)) == steps


def test_nested_loops_capture_from_every_level():
    def f(x):
        def outer(i, acc):
            return xnp.fori_loop(0, 3, lambda j, a: a + x * (i + 1), acc)
        return xnp.fori_loop(0, 2, outer, xnp.zeros_like(x))

    assert_matches(f, lambda x: x * 9, X)


def test_scan_cumulative_and_stacked_outputs():
    xs = np.arange(12, dtype=np.float32).reshape(4, 3)

    def f(xs):
        return xnp.scan(lambda c, x: (c + x, (c * 2, x.sum())), xnp.zeros(3), xs)

    carry, (doubled, sums) = run(f, xs)
    prefix = np.concatenate([np.zeros((1, 3)), np.cumsum(xs, 0)[:-1]])
    np.testing.assert_allclose(carry, xs.sum(0))
    np.testing.assert_allclose(doubled, 2 * prefix)
    np.testing.assert_allclose(sums, xs.sum(1))


def test_scan_reverse_and_pytree_xs():
    xs = {"a": np.arange(4, dtype=np.float32), "b": np.ones((4, 2), np.float32)}
    carry, ys = run(lambda xs: xnp.scan(lambda c, x: (c + x["a"], c), np.float32(0), xs, reverse=True), xs)
    carry_ref, ys_ref = np.float32(0), [None] * 4
    for i in reversed(range(4)):
        ys_ref[i] = carry_ref
        carry_ref = carry_ref + xs["a"][i]
    np.testing.assert_allclose(ys, ys_ref)
    assert carry == carry_ref


def test_cond_runs_one_branch():
    def f(x):
        return xnp.cond(xnp.sum(x) > 0, lambda a, b: a * b, lambda a, b: a - b, x, 2.0)

    assert_matches(f, lambda x: x * 2, X + 1)
    assert_matches(f, lambda x: x - 2, X - 1)
    text = xla_teach.jit(f).lower(X).as_text()
    assert "conditional(" in text and "true_computation=" in text


def test_cond_with_closures_and_pytree_outputs():
    def f(x, flag):
        y = x * 3
        return xnp.cond(flag, lambda: {"v": y, "n": xnp.sum(x)}, lambda: {"v": -y, "n": xnp.float32(0)})

    out = run(f, X, True)
    np.testing.assert_allclose(out["v"], X * 3)
    out = run(f, X, np.bool_(False))
    np.testing.assert_allclose(out["v"], -X * 3)
    assert out["n"] == 0


def test_switch_clamps_the_index():
    branches = [lambda x: x + 1, lambda x: x * 10, lambda x: -x]
    for i, expected in [(0, X + 1), (1, X * 10), (2, -X), (7, -X), (-3, X + 1)]:
        assert_matches(lambda x, i: xnp.switch(i, branches, x), lambda x, i, e=expected: e, X, np.int32(i))


def test_branches_with_different_shapes_are_a_compilation_error():
    with pytest.raises(xla_teach.CompilationError, match="branches return different"):
        run(lambda x: xnp.cond(x[0, 0] > 0, lambda: x, lambda: x[0]), X)


def test_loop_state_must_keep_its_shape():
    with pytest.raises(xla_teach.CompilationError, match="keep its shape"):
        run(lambda x: xnp.fori_loop(0, 2, lambda i, v: xnp.concatenate([v, v]), x), X)


def test_loops_run_eagerly_outside_jit():
    assert xnp.fori_loop(0, 4, lambda i, v: v + i, np.int32(0)) == 6
