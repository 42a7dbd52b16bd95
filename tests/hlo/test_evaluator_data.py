"""Data-movement ops of the reference interpreter (xla-operation-semantics.md §6)."""

from __future__ import annotations

import numpy as np
import pytest

from tests.hlo.evaluator_util import BF16, run_hlo, run_op


def arange(*dims: int, dtype: type = np.float32) -> np.ndarray:
    return np.arange(int(np.prod(dims))).reshape(dims).astype(dtype)


def test_broadcast() -> None:
    x = np.array([1, 2, 3], np.int32)
    np.testing.assert_array_equal(run_op("broadcast", x, result="s32[2,3]", attrs="dimensions={1}"),
                                  [[1, 2, 3], [1, 2, 3]])
    np.testing.assert_array_equal(run_op("broadcast", x, result="s32[3,2]", attrs="dimensions={0}"),
                                  [[1, 1], [2, 2], [3, 3]])
    np.testing.assert_array_equal(run_op("broadcast", np.array(7, np.int8), result="s8[2,2]", attrs="dimensions={}"),
                                  np.full((2, 2), 7, np.int8))
    y = arange(2, 3)
    out = run_op("broadcast", y, result="f32[3,4,2]", attrs="dimensions={2,0}")  # operand dims out of order
    for i in range(3):
        for j in range(4):
            for k in range(2):
                assert out[i, j, k] == y[k, i]


def test_reshape_is_row_major_and_transpose() -> None:
    x = arange(2, 3, 4)
    np.testing.assert_array_equal(run_op("reshape", x, result="f32[4,6]"), x.reshape(4, 6))
    np.testing.assert_array_equal(run_op("reshape", np.array([[5]], np.int32), result="s32[]"), 5)
    out = run_op("transpose", x, result="f32[4,2,3]", attrs="dimensions={2,0,1}")
    for i in range(4):
        for j in range(2):
            for k in range(3):
                assert out[i, j, k] == x[j, k, i]


def test_reshape_ignores_layouts() -> None:
    text = """HloModule t
ENTRY e {
  p = f32[2,3]{0,1} parameter(0)
  ROOT r = f32[3,2]{0,1} reshape(p)
}
"""
    x = arange(2, 3)
    np.testing.assert_array_equal(run_hlo(text, x), x.reshape(3, 2))


def test_slice_with_strides() -> None:
    x = arange(5, 8)
    out = run_op("slice", x, result="f32[2,3]", attrs="slice={[1:5:2], [0:8:3]}")
    np.testing.assert_array_equal(out, [[8, 11, 14], [24, 27, 30]])


def _dynamic_slice(x: np.ndarray, starts: list[int], sizes: list[int]) -> np.ndarray:
    params = "\n".join(f"  i{k} = s32[] parameter({k + 1})" for k in range(len(starts)))
    result = f"s32[{','.join(map(str, sizes))}]"
    text = f"""HloModule t
ENTRY e {{
  x = s32[{','.join(map(str, x.shape))}] parameter(0)
{params}
  ROOT r = {result} dynamic-slice(x, {', '.join(f'i{k}' for k in range(len(starts)))}), dynamic_slice_sizes={{{','.join(map(str, sizes))}}}
}}
"""
    return run_hlo(text, x, *(np.array(s, np.int32) for s in starts))


def test_dynamic_slice_clamps_starts() -> None:
    x = np.arange(3, dtype=np.int32)
    np.testing.assert_array_equal(_dynamic_slice(x, [5], [2]), [1, 2])  # 5 -> 1
    np.testing.assert_array_equal(_dynamic_slice(x, [-4], [2]), [0, 1])  # negative -> 0
    y = np.arange(12, dtype=np.int32).reshape(3, 4)
    np.testing.assert_array_equal(_dynamic_slice(y, [1, 3], [2, 2]), [[6, 7], [10, 11]])


def test_dynamic_update_slice_clamps_starts() -> None:
    text = """HloModule t
ENTRY e {
  x = s32[4] parameter(0)
  u = s32[2] parameter(1)
  i = s32[] parameter(2)
  ROOT r = s32[4] dynamic-update-slice(x, u, i)
}
"""
    x, u = np.zeros(4, np.int32), np.array([7, 8], np.int32)
    np.testing.assert_array_equal(run_hlo(text, x, u, np.array(3, np.int32)), [0, 0, 7, 8])  # 3 -> 2
    np.testing.assert_array_equal(run_hlo(text, x, u, np.array(-1, np.int32)), [7, 8, 0, 0])
    np.testing.assert_array_equal(x, np.zeros(4))  # the argument is untouched


def test_concatenate_and_reverse() -> None:
    a, b = arange(2, 2), arange(2, 1) + 10
    np.testing.assert_array_equal(run_op("concatenate", a, b, result="f32[2,3]", attrs="dimensions={1}"),
                                  [[0, 1, 10], [2, 3, 11]])
    x = arange(2, 3)
    np.testing.assert_array_equal(run_op("reverse", x, attrs="dimensions={0,1}"), x[::-1, ::-1])
    np.testing.assert_array_equal(run_op("copy", x), x)


def _pad(x: np.ndarray, value: float, padding: str, result: str) -> np.ndarray:
    return run_op("pad", x, np.array(value, x.dtype), result=result, attrs=f"padding={padding}")


def _reference_pad(x: np.ndarray, value: float, low: int, high: int, interior: int) -> np.ndarray:
    """1-D pad written directly from the definition, element by element."""
    spread = [] if x.size == 0 else [x[0]]
    for element in x[1:]:
        spread += [value] * interior + [element]
    full = [value] * max(low, 0) + spread + [value] * max(high, 0)
    start = max(-low, 0)
    return np.array(full[start : len(full) - max(-high, 0)], x.dtype)


@pytest.mark.parametrize(("low", "high", "interior"), [(0, 0, 0), (2, 1, 0), (1, 2, 2), (-1, -1, 1), (-2, 3, 0),
                                                       (3, -4, 1), (0, 0, 3)])
def test_pad_matches_reference(low: int, high: int, interior: int) -> None:
    x = np.arange(1, 5, dtype=np.int32)
    expected = _reference_pad(x, -9, low, high, interior)
    np.testing.assert_array_equal(_pad(x, -9, f"{low}_{high}_{interior}", f"s32[{expected.size}]"), expected)


def test_pad_measured_negative_interior_case() -> None:
    x = arange(3, 2)
    out = _pad(x, -1, "-1_-1_1x0_0", "f32[3,2]")  # rows: 3 -> 5 with interior -> crop 1 each side
    np.testing.assert_array_equal(out, [[-1, -1], [2, 3], [-1, -1]])
    out = _pad(np.ones((2, 2), BF16), 0.5, "1_0x0_1_1", "bf16[3,4]")
    np.testing.assert_array_equal(out.astype(np.float32), [[0.5] * 4, [1, 0.5, 1, 0.5], [1, 0.5, 1, 0.5]])


def test_bitcast_with_default_layouts_is_a_reshape() -> None:
    x = arange(2, 6)
    np.testing.assert_array_equal(run_op("bitcast", x, result="f32[3,4]{1,0}"), x.reshape(3, 4))


def test_bitcast_follows_physical_layout() -> None:
    # A {0,1} (column-major) f32[2,3] stores x[0,0], x[1,0], x[0,1], ...; reading those
    # bytes as a row-major f32[6] gives that physical order.
    text = """HloModule t
ENTRY e {
  p = f32[2,3]{0,1} parameter(0)
  ROOT r = f32[6]{0} bitcast(p)
}
"""
    x = arange(2, 3)
    np.testing.assert_array_equal(run_hlo(text, x), x.T.reshape(-1))
    # f32[3,2]{0,1} holding the same bytes as a row-major f32[2,3] is its transpose.
    text = text.replace("f32[6]{0}", "f32[3,2]{0,1}").replace("f32[2,3]{0,1}", "f32[2,3]{1,0}")
    np.testing.assert_array_equal(run_hlo(text, x), x.T)


def test_tuple_and_get_tuple_element() -> None:
    text = """HloModule t
ENTRY e {
  a = f32[2] parameter(0)
  b = s32[] parameter(1)
  inner = (f32[2], s32[]) tuple(a, b)
  outer = ((f32[2], s32[]), s32[]) tuple(inner, b)
  first = (f32[2], s32[]) get-tuple-element(outer), index=0
  ROOT r = s32[] get-tuple-element(first), index=1
}
"""
    assert run_hlo(text, np.zeros(2, np.float32), np.array(5, np.int32)) == 5


def test_empty_and_rank_zero_arrays() -> None:
    empty = np.zeros((0, 3), np.float32)
    assert run_op("transpose", empty, result="f32[3,0]", attrs="dimensions={1,0}").shape == (3, 0)
    assert run_op("add", empty, empty).shape == (0, 3)
    assert run_op("reshape", empty, result="f32[0]").shape == (0,)
    assert _pad(np.zeros(0, np.int32), 4, "1_2", "s32[3]").tolist() == [4, 4, 4]
    scalar = run_op("negate", np.array(2.5, np.float32))
    assert isinstance(scalar, np.ndarray) and scalar.shape == () and scalar.dtype == np.float32 and scalar == -2.5
