"""Edge cases of the ``xnp`` API against NumPy: ``nonzero`` with a size smaller than the
number of nonzeros, invalid indices, ``sinh``/``cosh`` near overflow, ``split`` with
unusual indices, boolean ``-``, and axis arguments of the wrong type."""

from __future__ import annotations

import numpy as np
import pytest

import xla_teach as xt
import xla_teach.numpy as xnp
from tests.frontend.frontend_test_utils import run

A = np.arange(6.0).reshape(2, 3)


# ---- nonzero(size=N) --------------------------------------------------------------------------------
def _nonzero_ref(x: np.ndarray, size: int, fill_value: int = 0) -> tuple[np.ndarray, ...]:
    """JAX's ``nonzero(x, size=N)``: the first N indices, padded with ``fill_value``."""
    return tuple(np.concatenate([i[:size], np.full(max(0, size - len(i)), fill_value)]) for i in np.nonzero(x))


@pytest.mark.parametrize("x, size", [
    (np.array([1, 3, 0, 4]), 2), (np.array([1, 3, 0, 4]), 1), (np.array([1, 3, 0, 4]), 3),
    (np.array([1, 3, 0, 4]), 5), (np.array([1, 3, 0, 4]), 0), (np.array([0, 0, 7]), 1),
    (np.array([[1, 3, 0, 4], [0, 0, 5, 6]]), 2), (np.array([[1, 3, 0, 4], [0, 0, 5, 6]]), 4),
    (np.array([[1, 3, 0, 4], [0, 0, 5, 6]]), 7),
])
def test_nonzero_size(x, size):
    want = _nonzero_ref(x, size, fill_value=-1)
    for got in (xnp.nonzero(x, size=size, fill_value=-1),
                run(lambda a: xnp.nonzero(a, size=size, fill_value=-1), x)):
        assert len(got) == len(want)
        for g, w in zip(got, want, strict=True):
            np.testing.assert_array_equal(np.asarray(g), w)


def test_at_set_still_clamps_out_of_range_indices():
    got = run(lambda a, i: a.at[i].set(9.0), np.zeros(3, np.float32), np.array([5], np.int32))
    np.testing.assert_array_equal(got, [0.0, 0.0, 9.0])


# ---- invalid indices ------------------------------------------------------------------------------
@pytest.mark.parametrize("index", [1.0, (slice(None), "a"), {}, np.float32(1), (0, 1.5), "x", object()],
                         ids=["float", "str_in_tuple", "dict", "np_float32", "float_in_tuple", "str", "object"])
def test_invalid_index_raises_index_error_like_numpy(index):
    with pytest.raises(IndexError):
        A[index]
    with pytest.raises(IndexError, match="valid indices"):
        run(lambda a: a[index], A)
    with pytest.raises(IndexError, match="valid indices"):
        run(lambda a: a.at[index].set(0.0), A)


@pytest.mark.parametrize("index", [np.array([1.0]), [0.0, 1.0], np.array(1.0)], ids=["array", "list", "0d"])
def test_float_array_index_rejected(index):
    with pytest.raises(IndexError):
        A[index]
    with pytest.raises(IndexError, match="integer"):
        run(lambda a: a[index], A)


def test_traced_float_index_rejected():
    with pytest.raises(IndexError, match="integer"):
        run(lambda a, i: a[i], A, np.float32(1))


@pytest.mark.parametrize("index", [np.int64(1), (slice(None), np.int32(-1)), [], (1, []), 1],
                         ids=["np_int", "np_int_in_tuple", "empty_list", "int_and_empty_list", "int"])
def test_valid_scalar_and_empty_indices_still_work(index):
    np.testing.assert_array_equal(run(lambda a: a[index], A), A[index])


# ---- sinh / cosh ------------------------------------------------------------------------------------
_HYP_X = np.concatenate([np.linspace(-89.0, 89.0, 2001), np.geomspace(1e-30, 2.0, 200),
                         -np.geomspace(1e-30, 2.0, 200), [0.0, 1.0, -1.0]])


@pytest.mark.parametrize("name", ["sinh", "cosh"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_sinh_cosh_accurate_up_to_overflow(name, dtype):
    x = _HYP_X.astype(dtype)
    got = np.asarray(run(getattr(xnp, name), x))
    assert got.dtype == dtype
    want = getattr(np, name)(x.astype(np.float64))  # exact enough to judge a float32 result
    np.testing.assert_allclose(got, want, rtol=4 * np.finfo(dtype).eps, atol=0)


@pytest.mark.parametrize("name", ["sinh", "cosh"])
def test_sinh_cosh_overflow_and_specials_like_numpy(name):
    x = np.array([89.0, -89.0, 89.5, -89.5, 1000.0, np.inf, -np.inf, np.nan, 0.0, 1e-40], np.float32)
    with np.errstate(over="ignore"):
        want = getattr(np, name)(x)
    want[-1] = 0.0 if name == "sinh" else 1.0  # 1e-40 is a denormal: XLA's CPU runtime reads it as 0
    got = np.asarray(run(getattr(xnp, name), x))
    np.testing.assert_allclose(got, want, rtol=4 * np.finfo(np.float32).eps)
    np.testing.assert_allclose(np.asarray(getattr(xnp, name)(x)), want, rtol=4 * np.finfo(np.float32).eps)


@pytest.mark.parametrize("x0", [0.0, 0.3, -0.7, 2.0, -5.0])
def test_sinh_cosh_gradients(x0):
    np.testing.assert_allclose(xt.grad(xnp.sinh)(x0), np.cosh(x0), rtol=1e-5)
    np.testing.assert_allclose(xt.grad(xnp.cosh)(x0), np.sinh(x0), rtol=1e-5, atol=1e-7)


# ---- split ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("indices", [[-1], [1, 9], [3, 1], [0], [4], [-9, 2], [2, 2], 2, 4, 1, np.int64(2),
                                     np.array([1, 3])],
                         ids=["neg", "out_of_range", "decreasing", "zero", "end", "neg_out_of_range", "repeated",
                              "sections2", "sections4", "sections1", "np_int", "np_array"])
def test_split_like_numpy(indices):
    x = np.arange(8.0).reshape(4, 2)
    want = np.split(x, indices)
    results = [run(lambda a: xnp.split(a, indices), x)]
    if not isinstance(indices, (np.ndarray, np.generic)):  # eagerly NumPy values are traced arguments
        results.append(xnp.split(x, indices))
    for got in results:
        assert len(got) == len(want)
        for g, w in zip(got, want, strict=True):
            np.testing.assert_array_equal(np.asarray(g), w)
            assert np.shape(g) == w.shape


def test_split_along_axis_with_negative_index():
    x = np.arange(12.0).reshape(3, 4)
    for g, w in zip(xnp.split(x, [-1, 1], axis=1), np.split(x, [-1, 1], axis=1), strict=True):
        np.testing.assert_array_equal(np.asarray(g), w)


@pytest.mark.parametrize("sections", [0, -2])
def test_split_non_positive_sections(sections):
    with pytest.raises(ValueError, match="split: number sections must be larger than 0"):
        xnp.split(np.arange(4.0), sections)


def test_split_unequal_sections():
    with pytest.raises(ValueError, match="equal division"):
        np.split(np.arange(4.0), 3)
    with pytest.raises(ValueError, match="equal division"):
        xnp.split(np.arange(4.0), 3)


def test_arange_zero_step_raises_like_numpy():
    with pytest.raises(ZeroDivisionError):
        np.arange(0, 5, 0)
    with pytest.raises(ZeroDivisionError, match="arange: step must not be zero"):
        xnp.arange(0, 5, 0)


# ---- boolean subtract / negative ------------------------------------------------------------------
B = np.array([True, False, True])


@pytest.mark.parametrize("fn, name", [
    (lambda a, b: xnp.subtract(a, b), "subtract"), (lambda a, b: a - b, "subtract"),
    (lambda a, b: xnp.negative(a), "negative"), (lambda a, b: -a, "negative"),
    (lambda a, b: xnp.subtract(a, True), "subtract"),
], ids=["subtract", "sub_op", "negative", "neg_op", "sub_python_bool"])
def test_bool_subtract_negative_raise_type_error(fn, name):
    with pytest.raises(TypeError):
        np.subtract(B, ~B) if name == "subtract" else np.negative(B)
    with pytest.raises(TypeError, match=f"xnp.{name}: boolean {name}"):
        run(fn, B, ~B)
    with pytest.raises(TypeError, match=f"xnp.{name}: boolean {name}"):
        getattr(xnp, name)(*((B, ~B) if name == "subtract" else (B,)))


def test_bool_mixed_with_int_still_subtracts():
    ints = np.array([3, 4, 5], np.int32)
    np.testing.assert_array_equal(run(lambda a, b: a - b, ints, B), ints - B)
    np.testing.assert_array_equal(run(lambda a: -a, ints), -ints)
    np.testing.assert_array_equal(run(lambda a, b: xnp.logical_xor(a, b), B, ~B), np.logical_xor(B, ~B))


# ---- axis arguments ---------------------------------------------------------------------------------
X = np.arange(24.0).reshape(2, 3, 4)


@pytest.mark.parametrize("fn", [
    lambda L: L.sum(X, axis=1.0), lambda L: L.sum(X, axis=(0, 1.0)), lambda L: L.argmax(X, axis=(0,)),
    lambda L: L.argmax(X, axis=1.0), lambda L: L.sum(X, axis=True), lambda L: L.cumsum(X, axis=1.0),
], ids=["sum_float", "sum_float_in_tuple", "argmax_tuple", "argmax_float", "sum_bool", "cumsum_float"])
def test_bad_axis_type_raises_type_error(fn):
    with pytest.raises(TypeError):
        fn(np)
    with pytest.raises(TypeError, match="axis must be an integer"):
        fn(xnp)
    with pytest.raises(TypeError, match="axis must be an integer"):
        run(lambda _: fn(xnp), X)


@pytest.mark.parametrize("source, destination", [
    ((0, 1), (1, 0)), ((0, 1), (2, 0)), ([0, 2], [-1, 0]), (0, -1), (np.int64(2), 0), ((), ()),
])
def test_moveaxis_sequences(source, destination):
    want = np.moveaxis(X, source, destination)
    results = [run(lambda a: xnp.moveaxis(a, source, destination), X)]
    if not isinstance(source, np.generic):  # eagerly NumPy values are traced arguments
        results.append(xnp.moveaxis(X, source, destination))
    for got in results:
        np.testing.assert_array_equal(np.asarray(got), want)


@pytest.mark.parametrize("source, destination, error", [
    ((0, 1), (1, 1), ValueError), ((0, 1), (1,), ValueError), ((0, 3), (0, 1), ValueError),
    (0.0, 1, TypeError),
])
def test_moveaxis_errors(source, destination, error):
    with pytest.raises(error):
        np.moveaxis(X, source, destination)
    with pytest.raises(error):
        xnp.moveaxis(X, source, destination)
