"""xnp elementwise functions, broadcasting and dtype promotion against NumPy."""

from __future__ import annotations

import numpy as np
import pytest

import xla_teach.numpy as xnp
from tests.frontend.frontend_test_utils import assert_matches, run

rng = np.random.default_rng(0)
X = rng.normal(size=(3, 4)).astype(np.float32)
POS = (rng.random(size=(3, 4)) + 0.5).astype(np.float32)
UNIT = (rng.random(size=(3, 4)) * 1.8 - 0.9).astype(np.float32)

UNARY = [
    ("exp", X), ("log", POS), ("log1p", POS), ("expm1", X), ("tanh", X), ("sqrt", POS), ("cbrt", X),
    ("abs", X), ("sign", X), ("floor", X * 3), ("ceil", X * 3), ("rint", X * 3), ("sin", X), ("cos", X),
    ("tan", UNIT), ("negative", X), ("square", X), ("reciprocal", POS), ("exp2", X), ("log2", POS),
    ("log10", POS), ("sinh", X), ("cosh", X), ("arctan", X), ("arcsin", UNIT), ("arccos", UNIT), ("trunc", X * 3),
    ("isfinite", X), ("isnan", X), ("isinf", X), ("logical_not", X > 0),
]


@pytest.mark.parametrize("name,x", UNARY, ids=[u[0] for u in UNARY])
def test_unary(name, x):
    assert_matches(getattr(xnp, name), getattr(np, name), x, rtol=2e-5, atol=2e-6)


def test_round_is_half_to_even_like_numpy():
    x = np.array([0.5, 1.5, 2.5, -0.5, -1.5, 2.4, 2.6], np.float32)
    assert_matches(xnp.round, np.round, x)
    assert_matches(lambda v: xnp.round(v, 1), lambda v: np.round(v, 1), x * 1.23, atol=1e-6)


BINARY = ["add", "subtract", "multiply", "true_divide", "maximum", "minimum", "power", "arctan2",
          "equal", "not_equal", "less", "less_equal", "greater", "greater_equal"]


@pytest.mark.parametrize("name", BINARY)
def test_binary_with_broadcasting(name):
    a = POS if name == "power" else X
    b = rng.normal(size=(4,)).astype(np.float32)
    assert_matches(getattr(xnp, name), getattr(np, name), a, b, rtol=2e-5, atol=1e-6)
    assert_matches(getattr(xnp, name), getattr(np, name), a[:, :1], b[None, :], rtol=2e-5, atol=1e-6)


@pytest.mark.parametrize("name", ["floor_divide", "remainder"])
@pytest.mark.parametrize("dtype", [np.int32, np.float32])
def test_floor_divide_and_remainder_follow_numpy_signs(name, dtype):
    a = np.array([7, -7, 7, -7, 0, 5], dtype)
    b = np.array([2, 2, -2, -2, 3, 5], dtype)
    assert_matches(getattr(xnp, name), getattr(np, name), a, b)


@pytest.mark.parametrize("name", ["bitwise_and", "bitwise_or", "bitwise_xor"])
def test_bitwise(name):
    a = np.array([1, 6, 12, -1], np.int32)
    b = np.array([3, 5, 10, 7], np.int32)
    assert_matches(getattr(xnp, name), getattr(np, name), a, b)
    assert_matches(getattr(xnp, name), getattr(np, name), a > 2, b > 4)


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.uint8, np.uint32])
def test_shifts_follow_numpy(dtype):
    """<< and >>: right shifts fill with the sign for signed types and with zeros for
    unsigned ones, as NumPy does; shifting by the bit width or more gives 0 (or -1)."""
    info = np.iinfo(dtype)
    a = np.array([1, 5, info.max, info.min, 0, 3], dtype)
    b = np.array([0, 1, 2, 3, 4, 1], dtype)
    assert_matches(xnp.left_shift, np.left_shift, a, b)
    assert_matches(xnp.right_shift, np.right_shift, a, b)
    assert_matches(lambda x, y: (x << y, x >> y, x >> 1, 1 << y), lambda x, y: (x << y, x >> y, x >> 1, 1 << y),
                   a, b)
    bits = np.array([np.iinfo(dtype).bits] * 6, dtype)
    want_right = np.where(a < 0, -1, 0).astype(dtype)
    assert_matches(lambda x, y: (x << y, x >> y), lambda x, y: (np.zeros_like(x), want_right), a, bits)


def test_shifts_of_floats_are_rejected():
    with pytest.raises(TypeError, match="left_shift needs integer arrays"):
        xnp.left_shift(np.ones(2, np.float32), np.ones(2, np.float32))


def test_operators_on_traced_arrays():
    def f(x, y):
        return (x + y, x - 1, 2 * x, x / y, x // y, x % y, x ** 2, -x, abs(x), x > y, x == y, (x > 0) & (y > 0),
                (x > 0) | (y > 0), ~(x > 0), x @ y.T, 1.0 - x, 2.0 / y)

    assert_matches(f, f, X, POS, rtol=1e-5, atol=1e-5)  # the same code on NumPy arrays is the oracle


def test_numpy_arrays_on_the_left_defer_to_the_tracer():
    w = np.arange(4, dtype=np.float32)
    assert_matches(lambda x: (w * x, w + x, w @ x.T, np.exp(x)), lambda x: (w * x, w + x, w @ x.T, np.exp(x)), X)


def test_where_and_clip():
    assert_matches(lambda x: xnp.where(x > 0, x, 0.0), lambda x: np.where(x > 0, x, np.float32(0)), X)
    assert_matches(lambda x: xnp.where(x > 0, 1, x), lambda x: np.where(x > 0, np.float32(1), x), X)
    assert_matches(lambda x: xnp.clip(x, -0.5, 0.5), lambda x: np.clip(x, np.float32(-0.5), np.float32(0.5)), X)
    assert_matches(lambda x: x.clip(None, 0.1), lambda x: np.minimum(x, np.float32(0.1)), X)


@pytest.mark.parametrize("a,b,expected", [
    (np.float32, np.float32, np.float32),
    (np.int32, np.float32, np.float32),    # NumPy: float64 (documented difference)
    (np.int8, np.int32, np.int32),
    (np.uint8, np.int8, np.int16),
    (np.float16, np.float32, np.float32),
    (np.float32, np.float64, np.float64),
    (np.bool_, np.int32, np.int32),
    (np.bool_, np.bool_, np.bool_),
])
def test_array_array_promotion(a, b, expected):
    out = run(lambda x, y: x + y, np.ones(2, a), np.ones(2, b))
    assert out.dtype == expected


@pytest.mark.parametrize("dtype,scalar,expected", [
    (np.float16, 2.0, np.float16),   # weak Python scalars take the array's type
    (np.int8, 3, np.int8),
    (np.int32, 2.5, np.float32),
    (np.bool_, 1, np.int32),
    (np.float64, 1, np.float64),
])
def test_python_scalars_are_weakly_typed(dtype, scalar, expected):
    assert run(lambda x: x * scalar, np.ones(2, dtype)).dtype == expected


def test_integer_true_division_gives_float32():
    assert_matches(lambda a, b: a / b, lambda a, b: (a / b).astype(np.float32), np.arange(1, 5, dtype=np.int32),
                   np.full(4, 3, np.int32))


def test_astype_and_conversions():
    x = X * 10
    assert_matches(lambda v: v.astype(np.int32), lambda v: v.astype(np.int32), x)
    assert_matches(lambda v: v.astype(bool), lambda v: v.astype(bool), np.array([0.0, 0.5, -2.0], np.float32))
    assert_matches(lambda v: xnp.astype(v, "f16"), lambda v: v.astype(np.float16), x, rtol=1e-3)


def test_unsupported_dtype_is_a_clear_error():
    with pytest.raises(ValueError, match="no HLO element type"):
        run(lambda x: x.astype(np.complex64), X)


def test_incompatible_broadcast_is_a_clear_error():
    with pytest.raises(ValueError, match="cannot be broadcast"):
        run(lambda x, y: x + y, np.ones(3, np.float32), np.ones(4, np.float32))
