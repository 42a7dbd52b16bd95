"""The rounding-error bounds the backend tests compare with (xla_teach/hlo/evaluator/error_bounds.py).

A bound must hold for *every* correct order of evaluation, and must still catch a wrong answer.
The orders here are computed independently with NumPy: sums left to right in f32 (the worst
usual order), pairwise, in f64 then rounded, in blocks with the blocks reversed."""

from __future__ import annotations

import math

import numpy as np
import pytest

from xla_teach.hlo.evaluator import HloEvaluator
from xla_teach.hlo.evaluator.error_bounds import BoundsUnavailable, error_bounds, outside_bound, unknown_bound
from xla_teach.hlo.text.parser import parse_hlo

U32 = 2.0**-24

DOT = """HloModule dot
ENTRY main {
  a = f32[64,300] parameter(0)
  b = f32[300,48] parameter(1)
  ROOT d = f32[64,48] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}"""


def sequential_dot(a: np.ndarray, b: np.ndarray, order: np.ndarray) -> np.ndarray:
    """The products summed one by one in f32, in the given order of k."""
    acc = np.zeros((a.shape[0], b.shape[1]), np.float32)
    for k in order:
        acc = (acc + np.outer(a[:, k], b[k, :]).astype(np.float32)).astype(np.float32)
    return acc


def test_a_dot_bound_is_gamma_k_times_the_terms_and_holds_for_every_summation_order() -> None:
    rng = np.random.default_rng(0)
    a = (rng.standard_normal((64, 300)) * 30).astype(np.float32)
    b = rng.standard_normal((300, 48)).astype(np.float32)
    (bounded,) = error_bounds(parse_hlo(DOT), [a, b])
    terms = np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64))
    gamma = 300 * U32 / (1 - 300 * U32)
    np.testing.assert_allclose(bounded.bound, gamma * terms + 300 * 2.0**-126, rtol=1e-12)
    np.testing.assert_allclose(bounded.value, a.astype(np.float64) @ b.astype(np.float64), rtol=1e-13, atol=1e-9)
    orders = [np.arange(300), np.arange(300)[::-1], rng.permutation(300)]
    results = [sequential_dot(a, b, order) for order in orders]
    results += [a @ b, (a.astype(np.float64) @ b).astype(np.float32)]
    for result in results:
        assert not outside_bound(result, bounded).any()
    # The orders really differ, by more than an rtol of the result would allow where terms cancel.
    spread = np.max(np.abs(results[0] - results[1]) / np.maximum(np.abs(bounded.value), 1e-30))
    assert spread > 2e-5


def test_a_wrong_dot_is_outside_the_bound() -> None:
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((64, 300)).astype(np.float32), rng.standard_normal((300, 48)).astype(np.float32)
    (bounded,) = error_bounds(parse_hlo(DOT), [a, b])
    wrong = (a[:, :299] @ b[:299, :]).astype(np.float32)  # one term left out
    assert outside_bound(wrong, bounded).mean() > 0.9
    nudged = (a @ b).astype(np.float32)
    nudged[3, 5] = bounded.value[3, 5] + 3 * bounded.bound[3, 5]
    assert outside_bound(nudged, bounded).sum() == 1


def test_sums_in_f16_stay_inside_whatever_the_order() -> None:
    text = """HloModule sum
add { a = f16[] parameter(0)  b = f16[] parameter(1)  ROOT s = f16[] add(a, b) }
ENTRY main {
  x = f16[8,500] parameter(0)
  zero = f16[] constant(0)
  ROOT r = f16[8] reduce(x, zero), dimensions={1}, to_apply=add
}"""
    rng = np.random.default_rng(2)
    x = rng.uniform(-1, 1, (8, 500)).astype(np.float16)
    (bounded,) = error_bounds(parse_hlo(text), [x])
    left_to_right = np.zeros(8, np.float16)
    for j in range(500):
        left_to_right = (left_to_right + x[:, j]).astype(np.float16)
    interpreter = HloEvaluator().evaluate_module(parse_hlo(text), [x])[0]
    for result in (left_to_right, interpreter, x.astype(np.float64).sum(1).astype(np.float16)):
        assert not outside_bound(result, bounded).any()
    n = 501
    np.testing.assert_array_less(bounded.bound, 1.01 * (n * 2.0**-11 / (1 - n * 2.0**-11)) * np.abs(x).astype(
        np.float64).sum(1) + n * 2.0**-14 + 1e-12)


def test_elementwise_errors_are_carried_through_and_comparisons_that_may_flip_are_marked() -> None:
    text = """HloModule m
ENTRY main {
  x = f32[4] parameter(0)
  y = f32[4] parameter(1)
  s = f32[4] subtract(x, y)
  e = f32[4] exponential(s)
  big = pred[4] compare(x, y), direction=GT
  ROOT t = (f32[4], pred[4], f32[4]) tuple(e, big, s)
}"""
    x = np.array([1.0, 2.0, 1.0, 50.0], np.float32)
    y = np.array([1.0, 1.0, np.nextafter(np.float32(1), np.float32(2)), 0.5], np.float32)
    e, big, s = error_bounds(parse_hlo(text), [x, y])
    # Inputs are exact, so only the subtraction's own rounding (2 ulp room) and exp's (8 ulp) count.
    assert np.all(s.bound <= 2 * U32 * np.abs(s.value) + 2.0**-126 + 1e-300)
    assert np.all(e.bound >= 8 * U32 * e.value)
    assert np.all(e.bound <= np.exp(s.value) * (1 + 1e-6) * (2 * U32 * np.abs(s.value) + 2.0**-126) + 8.01 * U32 * e.value)
    assert big.bound.tolist() == [0, 0, 0, 0]  # exact inputs: the comparison cannot flip


def test_a_select_on_a_comparison_that_may_flip_may_take_either_side() -> None:
    text = """HloModule m
ENTRY main {
  x = f32[3] parameter(0)
  third = f32[] constant(0.333333343)
  thirds = f32[3] broadcast(third), dimensions={}
  y = f32[3] multiply(x, thirds)
  c = f32[] constant(1)
  cs = f32[3] broadcast(c), dimensions={}
  p = pred[3] compare(y, cs), direction=LT
  zero = f32[3] broadcast(c), dimensions={}
  hundred = f32[] constant(100)
  hundreds = f32[3] broadcast(hundred), dimensions={}
  ROOT r = f32[3] select(p, zero, hundreds)
}"""
    (bounded,) = error_bounds(parse_hlo(text), [np.array([3.0, 1.0, 30.0], np.float32)])
    assert bounded.bound[0] >= 99  # 3 * 0.333.. is 1 within a rounding: either side may be chosen
    assert bounded.bound[1] == 0 and bounded.bound[2] == 0


def test_sine_of_a_huge_argument_is_anything_in_minus_one_to_one() -> None:
    text = """HloModule m
ENTRY main {
  x = f32[2] parameter(0)
  k = f32[] constant(1e+30)
  ks = f32[2] broadcast(k), dimensions={}
  y = f32[2] multiply(x, ks)
  ROOT s = f32[2] sine(y)
}"""
    (bounded,) = error_bounds(parse_hlo(text), [np.array([0.7, -0.3], np.float32)])
    assert np.all(bounded.bound >= 2)


def test_loops_add_their_iterations_errors() -> None:
    text = """HloModule m
cond { s = (s32[], f32[3]) parameter(0)  i = s32[] get-tuple-element(s), index=0
       n = s32[] constant(20)  ROOT go = pred[] compare(i, n), direction=LT }
body { s = (s32[], f32[3]) parameter(0)  i = s32[] get-tuple-element(s), index=0
       v = f32[3] get-tuple-element(s), index=1  one = s32[] constant(1)  j = s32[] add(i, one)
       t = f32[] constant(1.1)  ts = f32[3] broadcast(t), dimensions={}  w = f32[3] multiply(v, ts)
       ROOT r = (s32[], f32[3]) tuple(j, w) }
ENTRY main {
  x = f32[3] parameter(0)
  zero = s32[] constant(0)
  init = (s32[], f32[3]) tuple(zero, x)
  loop = (s32[], f32[3]) while(init), condition=cond, body=body
  ROOT v = f32[3] get-tuple-element(loop), index=1
}"""
    x = np.array([1.0, -2.0, 3.0], np.float32)
    (bounded,) = error_bounds(parse_hlo(text), [x])
    np.testing.assert_allclose(bounded.value, x.astype(np.float64) * np.float64(np.float32(1.1)) ** 20, rtol=1e-12)
    relative = bounded.bound / np.abs(bounded.value)
    assert 20 * 2 * U32 < relative.max() < 20 * 2 * U32 * 1.01
    repeated = x.copy()
    for _ in range(20):
        repeated = (repeated * np.float32(1.1)).astype(np.float32)
    assert not outside_bound(repeated, bounded).any()


def test_ops_without_a_rule_have_unknown_bounds_and_reinterpreting_bits_is_refused() -> None:
    sort = """HloModule m
less { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT lt = pred[] compare(a, b), direction=LT }
ENTRY main {
  x = f32[5] parameter(0)
  ROOT s = f32[5] sort(x), dimensions={0}, to_apply=less
}"""
    (bounded,) = error_bounds(parse_hlo(sort), [np.arange(5, dtype=np.float32)])
    assert unknown_bound(bounded).all()
    bits = """HloModule m
ENTRY main {
  x = f32[5] parameter(0)
  ROOT b = s32[5] bitcast-convert(x)
}"""
    with pytest.raises(BoundsUnavailable, match="bitcast-convert"):
        error_bounds(parse_hlo(bits), [np.arange(5, dtype=np.float32)])


def test_overflow_to_infinity_is_accepted_only_where_the_exact_value_reaches_it() -> None:
    text = """HloModule m
ENTRY main {
  x = f32[2] parameter(0)
  ROOT y = f32[2] multiply(x, x)
}"""
    x = np.array([2e19, 3.0], np.float32)
    (bounded,) = error_bounds(parse_hlo(text), [x])
    assert not outside_bound(np.array([np.inf, 9.0], np.float32), bounded).any()
    assert outside_bound(np.array([np.inf, np.inf], np.float32), bounded).tolist() == [False, True]
    assert math.isfinite(bounded.bound[0])
