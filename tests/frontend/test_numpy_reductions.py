"""Reductions, cumulative sums and sorting against NumPy."""

from __future__ import annotations

import numpy as np
import pytest

import xla_teach.numpy as xnp
from tests.frontend.frontend_test_utils import assert_matches, run

rng = np.random.default_rng(1)
X = rng.normal(size=(3, 4, 5)).astype(np.float32)
AXES = [None, 0, 1, -1, (0, 2), (1, 2)]


@pytest.mark.parametrize("name", ["sum", "prod", "max", "min", "mean", "var", "std"])
@pytest.mark.parametrize("axis", AXES)
@pytest.mark.parametrize("keepdims", [False, True])
def test_float_reductions(name, axis, keepdims):
    assert_matches(lambda x: getattr(xnp, name)(x, axis=axis, keepdims=keepdims),
                   lambda x: getattr(np, name)(x, axis=axis, keepdims=keepdims), X, rtol=2e-5, atol=2e-6)


@pytest.mark.parametrize("name", ["any", "all"])
@pytest.mark.parametrize("axis", AXES)
def test_boolean_reductions(name, axis):
    assert_matches(lambda x: getattr(xnp, name)(x > 0.5, axis=axis), lambda x: getattr(np, name)(x > 0.5, axis=axis),
                   X)
    assert_matches(lambda x: getattr(xnp, name)(x, axis=axis, keepdims=True),
                   lambda x: getattr(np, name)(x, axis=axis, keepdims=True), np.round(X))


@pytest.mark.parametrize("name", ["argmax", "argmin"])
@pytest.mark.parametrize("axis", [None, 0, 1, 2])
def test_argmax_argmin(name, axis):
    assert_matches(lambda x: getattr(xnp, name)(x, axis=axis), lambda x: getattr(np, name)(x, axis=axis).astype(
        np.int32), X)


def test_argmax_picks_the_first_of_ties_and_nan():
    x = np.array([[1, 3, 3, 0], [2, np.nan, 5, np.nan]], np.float32)
    assert_matches(lambda v: xnp.argmax(v, axis=1), lambda v: np.argmax(v, axis=1).astype(np.int32), x)
    assert_matches(lambda v: xnp.argmin(v, axis=1, keepdims=True),
                   lambda v: np.argmin(v, axis=1, keepdims=True).astype(np.int32), x)


def test_integer_and_bool_sums_accumulate_in_int32():
    x = np.arange(12, dtype=np.int8).reshape(3, 4) * 20
    assert_matches(lambda v: xnp.sum(v, axis=0), lambda v: np.sum(v, axis=0, dtype=np.int32), x)
    assert_matches(lambda v: xnp.sum(v > 100), lambda v: np.sum(v > 100).astype(np.int32), x)
    assert_matches(lambda v: xnp.max(v, axis=1), lambda v: np.max(v, axis=1), x)
    assert_matches(lambda v: xnp.mean(v), lambda v: np.float32(np.mean(v)), x)


def test_method_forms():
    assert_matches(lambda x: (x.sum(1), x.mean(), x.max(0), x.argmax(2), x.var(ddof=1)),
                   lambda x: (x.sum(1), x.mean(), x.max(0), x.argmax(2).astype(np.int32), x.var(ddof=1)), X,
                   rtol=2e-5, atol=1e-6)


@pytest.mark.parametrize("axis", [None, 0, 1, 2, -1])
def test_cumsum_and_cumprod(axis):
    assert_matches(lambda x: xnp.cumsum(x, axis=axis), lambda x: np.cumsum(x, axis=axis), X, rtol=1e-5, atol=1e-5)
    small = (X * 0.5 + 1).astype(np.float32)
    assert_matches(lambda x: xnp.cumprod(x, axis=axis), lambda x: np.cumprod(x, axis=axis), small, rtol=1e-4)


def test_cumsum_of_ints():
    x = np.arange(10, dtype=np.int32)
    assert_matches(xnp.cumsum, lambda v: np.cumsum(v).astype(np.int32), x)


@pytest.mark.parametrize("axis", [0, 1, -1, None])
def test_sort_and_argsort(axis):
    assert_matches(lambda x: xnp.sort(x, axis=axis), lambda x: np.sort(x, axis=axis), X)
    assert_matches(lambda x: xnp.argsort(x, axis=axis), lambda x: np.argsort(x, axis=axis, kind="stable").astype(
        np.int32), X)


def test_argsort_is_stable():
    x = np.array([3, 1, 2, 1, 3, 0, 1], np.int32)
    assert_matches(xnp.argsort, lambda v: np.argsort(v, kind="stable").astype(np.int32), x)


def test_empty_max_is_a_clear_error():
    with pytest.raises(ValueError, match="zero-size"):
        run(xnp.max, np.zeros((0,), np.float32))


def test_bad_axis_is_a_clear_error():
    with pytest.raises(ValueError, match="out of bounds"):
        run(lambda x: xnp.sum(x, axis=3), X)
