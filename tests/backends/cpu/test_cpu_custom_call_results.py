"""A custom-call target's result is converted to the declared element type on the CPU, as the
interpreter does (``hlo/custom_calls.py``): a target may compute in float64 or return a list."""

from __future__ import annotations

import numpy as np
import pytest

import xla_teach
from xla_teach.hlo.custom_calls import register_custom_call_target, unregister_custom_call_target

MODULE = """
HloModule m
ENTRY main {
  x = f32[4] parameter(0)
  ROOT r = f32[4] custom-call(x), custom_call_target="test.twice_in_f64"
}
"""


@pytest.fixture
def twice_in_f64():
    register_custom_call_target("test.twice_in_f64", lambda x: x.astype(np.float64) * 2.0)
    yield
    unregister_custom_call_target("test.twice_in_f64")


def test_wider_result_is_converted_like_the_interpreter(twice_in_f64) -> None:
    x = np.array([1.5, -2.0, 0.1, 3.0], np.float32)
    (want,) = xla_teach.execute(MODULE, [x], backend="interpreter")
    (got,) = xla_teach.execute(MODULE, [x], backend="cpu")
    assert got.dtype == np.float32 and want.dtype == np.float32
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(got, (x.astype(np.float64) * 2).astype(np.float32))


def test_wrong_result_shape_is_a_clear_error() -> None:
    register_custom_call_target("test.wrong_shape", lambda x: np.zeros(3))
    try:
        with pytest.raises(RuntimeError, match=r"returned float64\[3\], expected f32\[4\]"):
            xla_teach.execute(MODULE.replace("test.twice_in_f64", "test.wrong_shape"),
                              [np.zeros(4, np.float32)], backend="cpu")
    finally:
        unregister_custom_call_target("test.wrong_shape")


NESTED = """
HloModule m
ENTRY main {
  x = f32[3] parameter(0)
  n = s32[] parameter(1)
  inner = (f32[3], s32[]) tuple(x, n)
  ROOT r = (f32[3], (s32[], f32[3])) custom-call(inner, x), custom_call_target="test.nested"
}
"""


def _nested(pair: tuple, y: np.ndarray) -> tuple:
    """Sees the tuple operand as a tuple (as the interpreter passes it), answers nested."""
    assert isinstance(pair, tuple) and len(pair) == 2, pair
    x, n = pair
    return (x * n, (n + 1, x + y))


def test_tuple_operands_and_nested_results_keep_their_structure() -> None:
    register_custom_call_target("test.nested", _nested)
    try:
        args = [np.array([1.0, 2.0, 3.0], np.float32), np.array(4, np.int32)]
        want = xla_teach.execute(NESTED, args, backend="interpreter")
        got = xla_teach.execute(NESTED, args, backend="cpu")
        assert len(got) == len(want) == 3
        for g, w in zip(got, want, strict=True):
            assert g.dtype == w.dtype
            np.testing.assert_array_equal(g, w)
        np.testing.assert_array_equal(got[0], [4.0, 8.0, 12.0])
        assert int(got[1]) == 5
    finally:
        unregister_custom_call_target("test.nested")


def test_result_of_the_wrong_structure_is_a_clear_error() -> None:
    register_custom_call_target("test.nested", lambda pair, y: (pair[0], pair[1], y))
    try:
        with pytest.raises(RuntimeError, match=r"returned 3 values, expected a tuple of 2"):
            xla_teach.execute(NESTED, [np.zeros(3, np.float32), np.array(1, np.int32)], backend="cpu")
    finally:
        unregister_custom_call_target("test.nested")
