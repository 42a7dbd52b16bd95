"""Accuracy and special cases of the emitted libm (``xla_teach.backends.llvm.math``).

Oracle: NumPy evaluated in a wider type (f64 for the f32 kernels, x87 long double for the f64
kernels where NumPy has it) and Python's ``math`` module for erf.  Errors are measured in ulp of
the kernel's own type.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import xla_teach.backends.llvm.math as xmath
from tests.backends.llvm.llvm_test_utils import jit_map, max_ulp, random_floats

WIDE = {np.float32: np.float64, np.float64: np.longdouble}
HAS_LONG_DOUBLE = np.finfo(np.longdouble).nmant > 52


def _logistic(x: np.ndarray) -> np.ndarray:
    return 1 / (1 + np.exp(-x))


def _erf(x: np.ndarray) -> np.ndarray:
    return np.vectorize(math.erf, otypes=[np.float64])(x.astype(np.float64))


def _rsqrt(x: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore"):
        return 1 / np.sqrt(x)


# name, emitter, reference, input range (None = every binade), allowed ulp (f32, f64)
UNARY = [
    ("exp", xmath.emit_exp, np.exp, (-100, 100), (1, 1)),
    ("exp_all", xmath.emit_exp, np.exp, None, (1, 1)),
    ("expm1", xmath.emit_expm1, np.expm1, (-5, 5), (2, 2)),
    ("expm1_all", xmath.emit_expm1, np.expm1, None, (2, 2)),
    ("log", xmath.emit_log, np.log, (1e-3, 1e3), (1, 1)),
    ("log_all", xmath.emit_log, np.log, None, (1, 1)),
    ("log1p", xmath.emit_log1p, np.log1p, (-0.99, 10), (2, 2)),
    ("sin", xmath.emit_sin, np.sin, (-100, 100), (2, 2)),
    ("cos", xmath.emit_cos, np.cos, (-100, 100), (2, 2)),
    ("tan", xmath.emit_tan, np.tan, (-10, 10), (3, 3)),
    ("tanh", xmath.emit_tanh, np.tanh, (-20, 20), (3, 3)),
    ("logistic", xmath.emit_logistic, _logistic, (-50, 50), (3, 3)),
    ("cbrt", xmath.emit_cbrt, np.cbrt, None, (1, 1)),
    ("sqrt", xmath.emit_sqrt, np.sqrt, None, (0.5, 0.5)),
    ("rsqrt", xmath.emit_rsqrt, _rsqrt, (1e-30, 1e30), (2, 2)),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("name,emit,ref,domain,tol", UNARY, ids=[u[0] for u in UNARY])
def test_unary_accuracy(name, emit, ref, domain, tol, dtype) -> None:
    if dtype is np.float64 and not HAS_LONG_DOUBLE and name not in ("sqrt",):
        pytest.skip("no extended-precision long double for an f64 oracle")
    rng = np.random.default_rng(7)
    lo, hi = domain if domain else (None, None)
    x = random_floats(rng, dtype, 20000, lo, hi)
    if name == "log_all" or name == "cbrt" or name == "sqrt":
        x = np.abs(x) if name != "cbrt" else x
    got = jit_map(emit, dtype)(x)
    with np.errstate(all="ignore"):
        want = ref(x.astype(WIDE[dtype]))
    err = max_ulp(got, want, dtype, x)
    allowed = tol[0] if dtype is np.float32 else tol[1]
    assert err <= allowed, f"{name} {np.dtype(dtype)}: {err:.2f} ulp at {max_ulp.last_worst}"


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
def test_erf_accuracy(dtype) -> None:
    rng = np.random.default_rng(3)
    x = random_floats(rng, dtype, 20000, -7, 7)
    got = jit_map(xmath.emit_erf, dtype)(x)
    want = _erf(x)
    # the oracle itself is an f64 (math.erf is within 1 ulp of f64): allow a little more in f64
    err = max_ulp(got, want, dtype, x)
    assert err <= (2 if dtype is np.float32 else 4), f"erf: {err} ulp at {max_ulp.last_worst}"


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
def test_pow_and_atan2_accuracy(dtype) -> None:
    if dtype is np.float64 and not HAS_LONG_DOUBLE:
        pytest.skip("no extended-precision long double for an f64 oracle")
    rng = np.random.default_rng(11)
    x = random_floats(rng, dtype, 20000, 0, 50)
    y = random_floats(rng, dtype, 20000, -20, 20)
    wide = WIDE[dtype]
    with np.errstate(all="ignore"):
        assert max_ulp(jit_map(xmath.emit_pow, dtype, 2)(x, y), np.power(x.astype(wide), y.astype(wide)), dtype) <= (1 if dtype is np.float32 else 2)
    a = random_floats(rng, dtype, 20000, -10, 10)
    c = random_floats(rng, dtype, 20000, -10, 10)
    got = jit_map(xmath.emit_atan2, dtype, 2)(a, c)
    assert max_ulp(got, np.arctan2(a.astype(wide), c.astype(wide)), dtype) <= 3


SPECIALS = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 2.0, -2.0, 0.5, -0.5, 3.0, -3.0, 1e-40, -1e-40]


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("name,emit,ref", [
    ("exp", xmath.emit_exp, np.exp), ("expm1", xmath.emit_expm1, np.expm1), ("log", xmath.emit_log, np.log),
    ("log1p", xmath.emit_log1p, np.log1p), ("sin", xmath.emit_sin, np.sin), ("cos", xmath.emit_cos, np.cos),
    ("tan", xmath.emit_tan, np.tan), ("tanh", xmath.emit_tanh, np.tanh), ("cbrt", xmath.emit_cbrt, np.cbrt),
    ("sqrt", xmath.emit_sqrt, np.sqrt), ("logistic", xmath.emit_logistic, _logistic), ("erf", xmath.emit_erf, _erf),
])
def test_unary_special_values(name, emit, ref, dtype) -> None:
    x = np.array(SPECIALS, dtype=dtype)
    got = jit_map(emit, dtype)(x)
    with np.errstate(all="ignore"):
        want = ref(x.astype(np.float64)).astype(dtype)
    finite = np.isfinite(want) & (np.abs(want) > np.finfo(dtype).tiny)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want), err_msg=f"{name}: NaN pattern")
    np.testing.assert_array_equal(got[~finite & ~np.isnan(want)], want[~finite & ~np.isnan(want)])
    zero = want == 0
    np.testing.assert_array_equal(np.signbit(got[zero]), np.signbit(want[zero]), err_msg=f"{name}: sign of zero")
    np.testing.assert_allclose(got[finite], want[finite], rtol=4 * np.finfo(dtype).eps)


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
def test_pow_special_values(dtype) -> None:
    vals = np.array(SPECIALS, dtype=dtype)
    x, y = np.meshgrid(vals, vals)
    x, y = x.ravel(), y.ravel()
    got = jit_map(xmath.emit_pow, dtype, 2)(x, y)
    with np.errstate(all="ignore"):
        want = np.power(x.astype(np.float64), y.astype(np.float64)).astype(dtype)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    ok = ~np.isnan(want)
    np.testing.assert_allclose(got[ok], want[ok], rtol=4 * np.finfo(dtype).eps, atol=0)
    np.testing.assert_array_equal(np.signbit(got[ok]), np.signbit(want[ok]))


def test_atan2_signed_zeros_and_infinities() -> None:
    vals = np.array([0.0, -0.0, np.inf, -np.inf, 1.0, -1.0, np.nan], np.float32)
    y, x = np.meshgrid(vals, vals)
    got = jit_map(xmath.emit_atan2, np.float32, 2)(y.ravel(), x.ravel())
    want = np.arctan2(y.ravel(), x.ravel())
    np.testing.assert_allclose(got, want, rtol=2e-7)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))


def test_rounding_and_is_finite() -> None:
    x = np.array([0.5, 1.5, 2.5, -0.5, -2.5, 2.4, -2.6, 0.0, -0.0, np.inf, np.nan, 1e30], np.float32)
    np.testing.assert_array_equal(jit_map(xmath.emit_round_half_even, np.float32)(x), np.round(x))
    away = np.where(np.isfinite(x), np.sign(x) * np.floor(np.abs(x) + 0.5), x)
    np.testing.assert_array_equal(jit_map(xmath.emit_round_half_away, np.float32)(x), away)
    finite = jit_map(lambda b, v: b.uitofp(xmath.emit_is_finite(b, v), v.type), np.float32)(x)
    np.testing.assert_array_equal(finite, np.isfinite(x).astype(np.float32))


# -- huge arguments: Payne-Hanek reduction (math/payne_hanek.py) --------------------------------------
# 2/pi in hex as published in fdlibm's table for __kernel_rem_pio2 (an independent source).
TWO_OVER_PI_HEX = (
    "A2F9836E4E441529FC2757D1F534DDC0DB6295993C439041FE5163ABDEBBC561B7246E3A424DD2E006492EEA09D1921CFE1DEB1CB1"
    "29A73EE88235F52EBB4484E99C7026B45F7E413991D639835339F49C845F8BBDF9283B1FF897FFDE05980FEF2F118B5A0A6D1F6D36"
    "7ECF27CB09B74F463F669E5FEA2D7527BAC7EBE5F17B3D0739F78A5292EA6BFB5FB11F8D5D0856033046FC7B6BABF0CFBC209AF436"
    "1DA9E391615EE61B086599855F14A068408DFFD8804D73273106061556CA73A8C960E27BC08C6B"
)
# The floats closest to a multiple of pi/2: |x * 2/pi - round| is 2^-29.9 (f32, found by trying every
# float) and 2^-61 (f64, Muller's "Elementary Functions"); the reduction loses no digits of r there.
HARDEST = {np.float32: 16367173 * 2.0**72, np.float64: 6381956970095103 * 2.0**797}


def test_two_over_pi_bits_match_the_published_table() -> None:
    from xla_teach.backends.llvm.math.payne_hanek import two_over_pi_bits

    bits = 4 * len(TWO_OVER_PI_HEX)
    assert two_over_pi_bits(bits) == int(TWO_OVER_PI_HEX, 16)


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("name,emit,ref,tol", [
    ("sin", xmath.emit_sin, np.sin, 2), ("cos", xmath.emit_cos, np.cos, 2), ("tan", xmath.emit_tan, np.tan, 3),
])
def test_trig_is_accurate_for_every_binade(name, emit, ref, tol, dtype) -> None:
    """Log-uniform |x| from 1 to the largest float, both signs, plus the hardest cases and the
    boundaries between the two reductions; the oracle reduces exactly too (glibc's sin/sinl)."""
    if dtype is np.float64 and not HAS_LONG_DOUBLE:
        pytest.skip("no extended-precision long double for an f64 oracle")
    rng = np.random.default_rng(5)
    top = np.log2(float(np.finfo(dtype).max))
    x = (2.0 ** rng.uniform(0, top, 20000) * rng.choice([-1.0, 1.0], 20000)).astype(dtype)
    hard = HARDEST[dtype]
    edges = [2.0**17, 2.0**28, np.finfo(dtype).max, 1e30, hard, 3 * hard]
    x = np.concatenate([x[np.isfinite(x)], np.array(edges + [-e for e in edges], dtype=dtype)])
    x = np.concatenate([x, np.nextafter(x[-12:], 0)])
    got = jit_map(emit, dtype)(x)
    want = ref(x.astype(WIDE[dtype]))
    err = max_ulp(got, want, dtype, x)
    assert err <= tol, f"{name} {np.dtype(dtype)}: {err:.2f} ulp at {max_ulp.last_worst}"


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
def test_cos_of_the_float_closest_to_a_multiple_of_pi_over_2(dtype) -> None:
    if dtype is np.float64 and not HAS_LONG_DOUBLE:
        pytest.skip("no extended-precision long double for an f64 oracle")
    x = np.array([HARDEST[dtype], -HARDEST[dtype]], dtype)
    got = jit_map(xmath.emit_cos, dtype)(x)
    want = np.cos(x.astype(WIDE[dtype]))
    assert np.all(np.abs(want) < 1e-8)  # the result is the tiny remainder r itself
    np.testing.assert_allclose(got, want, rtol=4 * np.finfo(dtype).eps)


def test_expm1_is_correctly_rounded_where_the_result_is_minus_one_plus_a_little() -> None:
    """Below x = -16.6 (2^k - 1 no longer exact in f32), expm1 is e^x - 1 rounded once: the
    correctly rounded value. Before, 2^k - 1 rounded to -1 at its tie and expm1(-17.224161) came
    out -1.0 instead of -0.99999994 (a fuzzer finding: pow(expm1(x), inf) then gave 1, not 0)."""
    fn = jit_map(xmath.emit_expm1, np.float32)
    x = np.concatenate([np.random.default_rng(5).uniform(-40, -16.63, 20000), [-17.224161]]).astype(np.float32)
    got = fn(x)
    np.testing.assert_array_equal(got, np.expm1(x.astype(np.float64)).astype(np.float32))
    assert got[-1] == np.float32(-0.99999994)


@pytest.mark.parametrize(("dtype", "itype"), [(np.float32, np.uint32), (np.float64, np.uint64)])
def test_fmod_is_exact_bit_for_bit(dtype: type, itype: type) -> None:
    """The GPU's fmod (``emit_fmod``: long division on the mantissas) against C's (NumPy's), run
    here on the CPU: random bit patterns (denormals, huge quotients, NaNs and infinities among
    them), every pair of special values, and large dividends over small divisors."""
    import warnings

    rng = np.random.default_rng(1)
    info = np.finfo(dtype)
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 3.0, 5.5, 1e30, info.tiny, info.tiny / 3,
                        -info.tiny / 7, info.max, info.smallest_subnormal], dtype)
    xs, ys = np.meshgrid(special, special)
    x = np.concatenate([rng.integers(0, np.iinfo(itype).max, 20000, dtype=itype).view(dtype), xs.ravel(),
                        (rng.standard_normal(500) * 1e6).astype(dtype)])
    y = np.concatenate([rng.integers(0, np.iinfo(itype).max, 20000, dtype=itype).view(dtype), ys.ravel(),
                        rng.standard_normal(500).astype(dtype)])
    got = jit_map(xmath.emit_fmod, dtype, 2)(x, y)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        want = np.fmod(x, y)
    same = (got.view(itype) == want.view(itype)) | (np.isnan(got) & np.isnan(want))
    assert same.all(), (x[~same][:4], y[~same][:4], got[~same][:4], want[~same][:4])
