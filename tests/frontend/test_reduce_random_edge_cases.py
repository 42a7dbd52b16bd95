"""Edge cases of reductions (average/mean/var/std), sort with NaN and random.uniform,
checked against NumPy, eagerly and under ``jit``."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import xla_teach as xt
import xla_teach.frontend.random as xr
import xla_teach.numpy as xnp

A = np.arange(6, dtype=np.float32).reshape(2, 3)


# ---- average ---------------------------------------------------------------------------
def test_average_weights_of_other_shape_need_an_axis() -> None:
    with pytest.raises(TypeError, match="average: axis must be specified"):
        xnp.average(A, weights=np.ones(3, np.float32))


@pytest.mark.parametrize("axis, weights", [(1, [1.0, 2.0, 3.0]), (0, [1.0, 3.0]), (-1, [0.5, 0.0, 2.0]),
                                           ((1, 0), np.arange(1.0, 7.0).reshape(3, 2))])
def test_average_weights_along_axis(axis: object, weights: object) -> None:
    w = np.asarray(weights, np.float32)
    expected = np.average(A, axis=axis, weights=w)
    np.testing.assert_allclose(xnp.average(A, axis=axis, weights=w), expected, rtol=1e-6)
    jitted = xt.jit(lambda a, w: xnp.average(a, axis=axis, weights=w))
    np.testing.assert_allclose(jitted(A, w), expected, rtol=1e-6)


def test_average_weights_of_wrong_length() -> None:
    with pytest.raises(ValueError, match="average: shape of weights"):
        xnp.average(A, axis=1, weights=np.ones(2, np.float32))


def test_average_weights_summing_to_zero() -> None:
    with pytest.raises(ZeroDivisionError, match="average: weights sum to zero"):
        xnp.average(np.array([1.0, 2.0], np.float32), weights=np.array([1.0, -1.0], np.float32))
    # Traced weights cannot be checked: inf/NaN as in JAX, never an internal error.
    out = xt.jit(lambda a, w: xnp.average(a, weights=w))(np.array([1.0, 2.0], np.float32),
                                                         np.array([1.0, -1.0], np.float32))
    assert not np.isfinite(out)


def test_average_integer_weights_give_float() -> None:
    out = xnp.average(np.array([1, 2, 4], np.int32), weights=np.array([1, 1, 2], np.int32))
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, 2.75)


# ---- mean / var / std dtypes -----------------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16])
@pytest.mark.parametrize("fn", ["mean", "var", "std"])
def test_half_precision_accumulates_in_float32(dtype: type, fn: str) -> None:
    x = np.full(5000, 60, dtype)
    expected = getattr(np, fn)(x.astype(np.float32))
    for f in (getattr(xnp, fn), xt.jit(getattr(xnp, fn))):
        out = f(x)
        assert out.dtype == np.dtype(dtype)
        np.testing.assert_allclose(np.asarray(out, np.float32), expected, atol=1e-2)


def test_half_precision_average() -> None:
    x = np.full(5000, 60, np.float16)
    out = xnp.average(x, weights=x)
    assert out.dtype == np.float16 and float(out) == 60.0


def test_mean_dtype_is_accumulator_and_result() -> None:
    x = np.array([1, 2], np.int32)
    out = xnp.mean(x, dtype=np.int32)
    expected = np.mean(x, dtype=np.int32)
    assert out.dtype == expected.dtype == np.int32 and int(out) == int(expected) == 1
    y = np.array([[-3, 4], [5, 8]], np.int32)
    np.testing.assert_array_equal(xnp.mean(y, axis=1, dtype=np.int32), np.mean(y, axis=1, dtype=np.int32))
    assert xnp.mean(np.array([1, 2], np.int32)).dtype == np.float32  # the default stays float32


def test_var_std_with_dtype() -> None:
    x = np.array([1.0, 2.0, 4.0], np.float16)
    for fn in ("var", "std"):
        out = getattr(xnp, fn)(x, dtype=np.float32)
        assert out.dtype == np.float32
        np.testing.assert_allclose(out, getattr(np, fn)(x, dtype=np.float32), rtol=1e-6)


# ---- sort with NaN ---------------------------------------------------------------------------
SORT_INPUT = [2.0, np.nan, 1.0, -np.nan, -0.0, 0.0, -0.0, -np.inf, np.inf, 1.0]


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16, np.float32, np.float64])
def test_sort_and_argsort_put_nans_last(dtype: type) -> None:
    x = np.array(SORT_INPUT, dtype)
    order = np.argsort(x.astype(np.float64), kind="stable")  # NumPy: every NaN last, -0 == +0
    for backend in ("interpreter", "cpu"):
        np.testing.assert_array_equal(xt.jit(xnp.argsort, backend=backend)(x), order)
        values = np.asarray(xt.jit(xnp.sort, backend=backend)(x))
        np.testing.assert_array_equal(values.view(np.uint8), x[order].view(np.uint8))  # bits: signs of 0 and NaN
    np.testing.assert_array_equal(xnp.argsort(x), order)
    np.testing.assert_array_equal(np.asarray(xnp.sort(x), np.float64), x[order].astype(np.float64))


def test_sort_nan_eager_matches_numpy_2d() -> None:
    x = np.array([[3.0, np.nan, 1.0], [np.nan, -1.0, np.nan]], np.float32)
    np.testing.assert_array_equal(xnp.sort(x, axis=1), np.sort(x, axis=1))
    np.testing.assert_array_equal(xnp.argsort(x, axis=0), np.argsort(x, axis=0, kind="stable"))


def test_sort_gradient_still_routes_back() -> None:
    grad = xt.grad(lambda v: (xnp.sort(v) * xnp.arange(3.0)).sum())(np.array([3.0, np.nan, 2.0], np.float32))
    np.testing.assert_array_equal(grad, [1.0, 2.0, 0.0])


# ---- random.uniform / random_bits ------------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16, np.float32])
@pytest.mark.parametrize("bounds", [(0.0, 1.0), (1.0, 3.0), (-2.0, 0.0)])
def test_uniform_stays_below_maxval(dtype: type, bounds: tuple[float, float]) -> None:
    minval, maxval = bounds
    out = xr.uniform(xr.PRNGKey(0), (20000,), dtype=dtype, minval=minval, maxval=maxval)
    assert out.dtype == np.dtype(dtype)
    values = np.asarray(out, np.float64)
    assert values.min() >= minval and values.max() < maxval


def test_uniform_rejects_integer_dtype() -> None:
    with pytest.raises(TypeError, match="uniform: dtype must be a floating type"):
        xr.uniform(xr.PRNGKey(0), (3,), dtype=np.int32)


def test_uniform_with_array_and_traced_bounds() -> None:
    key = xr.PRNGKey(3)
    reference = np.asarray(xr.uniform(key, (3,))) * 2.0
    np.testing.assert_allclose(xr.uniform(key, (3,), maxval=np.float32(2.0)), reference, rtol=1e-6)
    jitted = xt.jit(lambda k, m: xr.uniform(k, (3,), maxval=m))
    np.testing.assert_allclose(jitted(key, np.float32(2.0)), reference, rtol=1e-6)
    lows, highs = np.array([0.0, 10.0, 20.0], np.float32), np.array([1.0, 11.0, 21.0], np.float32)
    out = np.asarray(xr.uniform(key, (2, 3), minval=lows, maxval=highs))
    assert out.shape == (2, 3) and np.all(out >= lows) and np.all(out < highs)


def test_random_bits_eager_matches_jit() -> None:
    key = xr.PRNGKey(7)
    eager = xr.random_bits(key, (4,))
    assert eager.dtype == np.uint32 and eager.shape == (4,)
    np.testing.assert_array_equal(eager, xt.jit(lambda k: xr.random_bits(k, (4,)))(key))
