"""The front-end tests' comparison with NumPy (frontend_test_utils.assert_matches) follows the
rounding-error bound of the traced module: a sum that cancels may come out in any order, and a
wrong result is still caught."""

from __future__ import annotations

import numpy as np
import pytest

import xla_teach.numpy as xnp
from tests.frontend.frontend_test_utils import assert_matches


def _cancelling(n: int = 4096) -> np.ndarray:
    rng = np.random.default_rng(0)
    big = rng.uniform(1e3, 1e4, n // 2).astype(np.float32)
    return np.concatenate([big, -big * np.float32(1 + 2**-20)]).astype(np.float32)[rng.permutation(n)]


def _reversed_f32_sum(x: np.ndarray) -> np.ndarray:
    acc = np.float32(0)
    for v in x[::-1]:
        acc = np.float32(acc + v)
    return np.asarray(acc, np.float32)


def test_a_sum_that_cancels_matches_numpy_summed_in_another_order() -> None:
    x = _cancelling()
    ordered = float(_reversed_f32_sum(x))
    exact = float(np.sum(x.astype(np.float64)))
    assert abs(ordered - exact) > 1e-5 * abs(exact) + 1e-6  # an rtol of the result would refuse this order
    assert_matches(xnp.sum, _reversed_f32_sum, x)


def test_a_wrong_result_is_caught() -> None:
    x = _cancelling()
    with pytest.raises(AssertionError, match="outside the rounding-error bound|NumPy's result differs"):
        assert_matches(lambda v: xnp.sum(v[1:]), lambda v: np.sum(v, dtype=np.float32), x)
    with pytest.raises(AssertionError):
        assert_matches(lambda v: v * 1.0001, lambda v: v, np.ones(8, np.float32))
