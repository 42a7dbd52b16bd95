"""reduce, reduce-window and select-and-scatter (xla-operation-semantics.md §7)."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from tests.hlo.evaluator_util import BF16, assert_bits_equal, run_both, run_hlo, shape_text, type_name


def reducer(name: str, opcode: str, dtype: str) -> str:
    return f"""%{name} (a: {dtype}[], b: {dtype}[]) -> {dtype}[] {{
  %a = {dtype}[] parameter(0)
  %b = {dtype}[] parameter(1)
  ROOT %r = {dtype}[] {opcode}(%a, %b)
}}
"""


def reduce_module(x: np.ndarray, dims: tuple[int, ...], opcode: str) -> str:
    t = type_name(x.dtype)
    out = [d for i, d in enumerate(x.shape) if i not in dims]
    return f"""HloModule t
{reducer("f", opcode, t)}
ENTRY e {{
  x = {shape_text(x.dtype, x.shape)} parameter(0)
  init = {t}[] parameter(1)
  ROOT r = {shape_text(x.dtype, out)} reduce(x, init), dimensions={{{",".join(map(str, dims))}}}, to_apply=%f
}}
"""


def test_reduce_sum_applies_init_once() -> None:
    x = np.array([1, 2, 3, 4], np.float32)
    for result in run_both(reduce_module(x, (0,), "add"), x, np.float32(10)):
        assert result == 20


@pytest.mark.parametrize("dims", [(0,), (1,), (2,), (0, 2), (0, 1, 2), ()])
def test_reduce_over_dimensions(dims: tuple[int, ...]) -> None:
    x = np.random.default_rng(0).integers(-50, 50, size=(3, 4, 5)).astype(np.int32)
    expected = x.sum(axis=dims, dtype=np.int32) + 1 if dims else x + 1
    for result in run_both(reduce_module(x, dims, "add"), x, np.int32(1)):
        np.testing.assert_array_equal(result, expected)


@pytest.mark.parametrize("opcode", ["maximum", "minimum", "multiply", "and", "or", "xor", "add"])
@pytest.mark.parametrize("dtype", [np.int8, np.uint16, np.int64])
def test_reduce_fast_and_general_paths_agree_on_integers(opcode: str, dtype: type) -> None:
    x = np.random.default_rng(1).integers(-100, 100, size=(4, 37)).astype(dtype)
    fast, general = run_both(reduce_module(x, (1,), opcode), x, np.array(1, dtype))
    np.testing.assert_array_equal(fast, general)


@pytest.mark.parametrize("dtype", [np.float32, BF16, np.float16])
def test_reduce_max_min_propagate_nan_and_order_zeros(dtype: type) -> None:
    x = np.array([[1, np.nan, 3], [-0.0, 0.0, -0.0], [-0.0, -0.0, -0.0]], dtype)
    for result in run_both(reduce_module(x, (1,), "maximum"), x, np.array(-np.inf, dtype)):
        assert_bits_equal(result, np.array([np.nan, 0.0, -0.0], dtype))
    for result in run_both(reduce_module(x, (1,), "minimum"), x, np.array(np.inf, dtype)):
        assert_bits_equal(result, np.array([np.nan, -0.0, -0.0], dtype))


def test_reduce_float_sum_paths_agree_closely() -> None:
    x = np.random.default_rng(2).normal(size=(3, 1000)).astype(np.float32)
    fast, general = run_both(reduce_module(x, (1,), "add"), x, np.float32(0))
    np.testing.assert_allclose(fast, x.astype(np.float64).sum(axis=1), rtol=1e-5)
    np.testing.assert_allclose(general, fast, rtol=1e-4)


def test_reduce_empty_returns_init() -> None:
    x = np.zeros((3, 0), np.float32)
    for result in run_both(reduce_module(x, (1,), "maximum"), x, np.float32(-7)):
        np.testing.assert_array_equal(result, [-7, -7, -7])


ARGMAX = """HloModule t
%argmax (v0: f32[], i0: s32[], v1: f32[], i1: s32[]) -> (f32[], s32[]) {
  %v0 = f32[] parameter(0)
  %i0 = s32[] parameter(1)
  %v1 = f32[] parameter(2)
  %i1 = s32[] parameter(3)
  %gt = pred[] compare(%v1, %v0), direction=GT
  %eq = pred[] compare(%v1, %v0), direction=EQ
  %lt_index = pred[] compare(%i1, %i0), direction=LT
  %tie = pred[] and(%eq, %lt_index)
  %take = pred[] or(%gt, %tie)
  %v = f32[] select(%take, %v1, %v0)
  %i = s32[] select(%take, %i1, %i0)
  ROOT %t = (f32[], s32[]) tuple(%v, %i)
}

ENTRY e {
  x = f32[3,5] parameter(0)
  idx = s32[3,5] iota(), iota_dimension=1
  neg_inf = f32[] constant(-inf)
  zero = s32[] constant(0)
  ROOT r = (f32[3], s32[3]) reduce(x, idx, neg_inf, zero), dimensions={1}, to_apply=%argmax
}
"""


def test_variadic_reduce_argmax() -> None:
    x = np.array([[1, 5, 2, 5, 0], [-1, -2, -3, -4, -5], [0, 0, 9, 0, 9]], np.float32)
    values, indices = run_hlo(ARGMAX, x)
    np.testing.assert_array_equal(values, [5, -1, 9])
    np.testing.assert_array_equal(indices, [1, 0, 2])


# ---- reduce-window --------------------------------------------------------------------
Ints = tuple[int, ...]
Pads = tuple[tuple[int, int], ...]


def reference_reduce_window(x: np.ndarray, init: float, sizes: Ints, strides: Ints, pads: Pads, lhs_dil: Ints,
                            rhs_dil: Ints, fn: Callable[[Any, Any], Any]) -> np.ndarray:
    """Written straight from the definition, one output and one window cell at a time."""
    out_dims = []
    for n, size, stride, (lo, hi), ld, rd in zip(x.shape, sizes, strides, pads, lhs_dil, rhs_dil, strict=True):
        padded = (n - 1) * ld + 1 + lo + hi
        out_dims.append(max(0, (padded - ((size - 1) * rd + 1)) // stride + 1))
    out = np.empty(out_dims, x.dtype)
    for o in itertools.product(*(range(d) for d in out_dims)):
        acc = init
        for k in itertools.product(*(range(s) for s in sizes)):
            value = init
            source = []
            for d in range(x.ndim):
                position = o[d] * strides[d] + k[d] * rhs_dil[d] - pads[d][0]  # in the dilated base
                if position < 0 or position % lhs_dil[d] or position // lhs_dil[d] >= x.shape[d]:
                    break
                source.append(position // lhs_dil[d])
            else:
                value = x[tuple(source)]
            acc = fn(acc, value)
        out[o] = acc
    return out


def reduce_window_module(x: np.ndarray, window: str, out_dims: tuple[int, ...], opcode: str) -> str:
    t = type_name(x.dtype)
    return f"""HloModule t
{reducer("f", opcode, t)}
ENTRY e {{
  x = {shape_text(x.dtype, x.shape)} parameter(0)
  init = {t}[] parameter(1)
  ROOT r = {shape_text(x.dtype, out_dims)} reduce-window(x, init), window={{{window}}}, to_apply=%f
}}
"""


def test_reduce_window_output_size_formula() -> None:
    x = np.arange(8, dtype=np.float32)
    for result in run_both(reduce_window_module(x, "size=2 stride=3 rhs_dilate=2", (2,), "add"), x, np.float32(0)):
        np.testing.assert_array_equal(result, [0 + 2, 3 + 5])


CASES = [
    ((2, 2), (1, 1), ((0, 0), (0, 0)), (1, 1), (1, 1)),
    ((3, 2), (2, 1), ((1, 1), (0, 2)), (1, 1), (1, 1)),
    ((2, 3), (1, 2), ((1, 0), (2, 1)), (2, 1), (1, 2)),
    ((1, 2), (3, 1), ((-1, 2), (0, 0)), (1, 3), (2, 1)),
]


@pytest.mark.parametrize(("sizes", "strides", "pads", "lhs_dil", "rhs_dil"), CASES)
def test_reduce_window_matches_reference(sizes: Ints, strides: Ints, pads: Pads, lhs_dil: Ints, rhs_dil: Ints) -> None:
    x = np.random.default_rng(3).integers(-9, 9, size=(5, 4)).astype(np.int32)
    expected = reference_reduce_window(x, 100, sizes, strides, pads, lhs_dil, rhs_dil, lambda a, b: a + b)
    window = (f"size={'x'.join(map(str, sizes))} stride={'x'.join(map(str, strides))} "
              f"pad={'x'.join(f'{lo}_{hi}' for lo, hi in pads)} lhs_dilate={'x'.join(map(str, lhs_dil))} "
              f"rhs_dilate={'x'.join(map(str, rhs_dil))}")
    for result in run_both(reduce_window_module(x, window, expected.shape, "add"), x, np.int32(100)):
        np.testing.assert_array_equal(result, expected)


def test_reduce_window_max_pool_with_padding() -> None:
    x = np.arange(16, dtype=np.float32).reshape(4, 4)
    module = reduce_window_module(x, "size=3x3 stride=2x2 pad=1_1x1_1", (2, 2), "maximum")
    for result in run_both(module, x, np.float32(-np.inf)):
        np.testing.assert_array_equal(result, [[5, 7], [13, 15]])


# ---- select-and-scatter ---------------------------------------------------------------
def select_and_scatter_module(shape: tuple[int, ...], source_shape: tuple[int, ...], window: str) -> str:
    return f"""HloModule t
%ge (a: f32[], b: f32[]) -> pred[] {{
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %r = pred[] compare(%a, %b), direction=GE
}}
{reducer("add", "add", "f32")}
ENTRY e {{
  x = {shape_text(np.float32, shape)} parameter(0)
  s = {shape_text(np.float32, source_shape)} parameter(1)
  init = f32[] constant(0)
  ROOT r = {shape_text(np.float32, shape)} select-and-scatter(x, s, init), window={{{window}}}, select=%ge, scatter=%add
}}
"""


def test_select_and_scatter_picks_first_maximum() -> None:
    x = np.array([[1, 7, 7, 2], [7, 3, 0, 9]], np.float32)
    source = np.array([[10, 20]], np.float32)
    for result in run_both(select_and_scatter_module((2, 4), (1, 2), "size=2x2 stride=2x2"), x, source):
        np.testing.assert_array_equal(result, [[0, 10, 0, 0], [0, 0, 0, 20]])


def test_select_and_scatter_overlapping_windows_accumulate() -> None:
    x = np.array([1, 5, 2, 0, 3], np.float32)
    source = np.array([1, 2, 4, 8], np.float32)
    # windows of size 2 stride 1: maxima at 1, 1, 2, 4
    for result in run_both(select_and_scatter_module((5,), (4,), "size=2"), x, source):
        np.testing.assert_array_equal(result, [0, 3, 4, 0, 8])


def test_select_and_scatter_never_selects_padding() -> None:
    x = np.array([-5, -6, -7], np.float32)
    source = np.array([1, 2], np.float32)
    # size 2, stride 2, pad 1_0: windows {pad, x0} and {x1, x2}; padding (0 > -5) is skipped
    for result in run_both(select_and_scatter_module((3,), (2,), "size=2 stride=2 pad=1_0"), x, source):
        np.testing.assert_array_equal(result, [1, 2, 0])


def test_variadic_reduce_window_max_with_index() -> None:
    text = """HloModule t
%pick (v0: f32[], i0: s32[], v1: f32[], i1: s32[]) -> (f32[], s32[]) {
  %v0 = f32[] parameter(0)
  %i0 = s32[] parameter(1)
  %v1 = f32[] parameter(2)
  %i1 = s32[] parameter(3)
  %take = pred[] compare(%v1, %v0), direction=GT
  %v = f32[] select(%take, %v1, %v0)
  %i = s32[] select(%take, %i1, %i0)
  ROOT %t = (f32[], s32[]) tuple(%v, %i)
}

ENTRY e {
  x = f32[6] parameter(0)
  idx = s32[6] iota(), iota_dimension=0
  ninf = f32[] constant(-inf)
  none = s32[] constant(-1)
  ROOT r = (f32[3], s32[3]) reduce-window(x, idx, ninf, none), window={size=3 stride=2 pad=0_1}, to_apply=%pick
}
"""
    values, indices = run_hlo(text, np.array([4, 1, 7, 7, 2, 9], np.float32))
    np.testing.assert_array_equal(values, [7, 7, 9])
    np.testing.assert_array_equal(indices, [2, 2, 5])


def test_reduce_of_a_scalar_and_of_an_empty_window_output() -> None:
    x = np.array(5, np.int16)
    for result in run_both(reduce_module(x, (), "add"), x, np.int16(2)):
        assert result.shape == () and result.dtype == np.int16 and result == 7
    empty = np.zeros((0,), np.float32)
    for result in run_both(reduce_window_module(empty, "size=2", (0,), "add"), empty, np.float32(0)):
        assert result.shape == (0,)
