"""gather, scatter, sort and topk (xla-operation-semantics.md §9-10)."""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from tests.hlo.evaluator_util import assert_bits_equal, run_both, run_hlo, shape_text

Ints = tuple[int, ...]


# ---- gather ---------------------------------------------------------------------------
def reference_gather(operand: np.ndarray, indices: np.ndarray, offset_dims: Ints, collapsed: Ints,
                     start_index_map: Ints, index_vector_dim: int, slice_sizes: Ints) -> np.ndarray:
    """One output element at a time, straight from the definition."""
    if index_vector_dim == indices.ndim:
        indices = indices[..., None]
    batch_shape = [d for i, d in enumerate(indices.shape) if i != index_vector_dim]
    offset_operand_dims = [d for d in range(operand.ndim) if d not in collapsed]
    out_rank = len(batch_shape) + len(offset_operand_dims)
    out_shape, batch_iter, offset_iter = [], iter(batch_shape), iter(offset_operand_dims)
    for d in range(out_rank):
        out_shape.append(slice_sizes[next(offset_iter)] if d in offset_dims else next(batch_iter))
    out = np.empty(out_shape, operand.dtype)
    for out_index in itertools.product(*(range(d) for d in out_shape)):
        batch = [out_index[d] for d in range(out_rank) if d not in offset_dims]
        offsets = [out_index[d] for d in offset_dims]
        start = [0] * operand.ndim
        for k, operand_dim in enumerate(start_index_map):
            position = batch[:index_vector_dim] + [k] + batch[index_vector_dim:]
            start[operand_dim] = int(indices[tuple(position)])
        start = [min(max(s, 0), operand.shape[d] - slice_sizes[d]) for d, s in enumerate(start)]
        full = list(start)
        for k, operand_dim in enumerate(offset_operand_dims):
            full[operand_dim] += offsets[k]
        out[out_index] = operand[tuple(full)]
    return out


def gather(operand: np.ndarray, indices: np.ndarray, out_shape: Ints, offset_dims: Ints, collapsed: Ints,
           start_index_map: Ints, index_vector_dim: int, slice_sizes: Ints) -> np.ndarray:
    def ints(values: Ints) -> str:
        return "{" + ",".join(map(str, values)) + "}"

    text = f"""HloModule t
ENTRY e {{
  x = {shape_text(operand.dtype, operand.shape)} parameter(0)
  i = {shape_text(indices.dtype, indices.shape)} parameter(1)
  ROOT g = {shape_text(operand.dtype, out_shape)} gather(x, i), offset_dims={ints(offset_dims)}, collapsed_slice_dims={ints(collapsed)}, start_index_map={ints(start_index_map)}, index_vector_dim={index_vector_dim}, slice_sizes={ints(slice_sizes)}
}}
"""
    return run_hlo(text, operand, indices)


GATHER_CASES = [
    # indices shape, offset_dims, collapsed, start_index_map, index_vector_dim, slice_sizes
    ((5,), (1,), (0,), (0,), 1, (1, 6)),  # take rows
    ((5, 1), (1, 2), (), (0,), 1, (1, 6)),  # rows, keeping the size-1 dim
    ((4, 2), (), (0, 1), (0, 1), 1, (1, 1)),  # pick elements
    ((2, 3), (0,), (1,), (1,), 2, (8, 1)),  # columns, implicit index vector dim, offset dim first
    ((2, 3), (1, 2), (), (1, 0), 0, (3, 2)),  # index vector along dim 0, swapped map
]


@pytest.mark.parametrize(("ishape", "offset_dims", "collapsed", "start_map", "ivd", "sizes"), GATHER_CASES)
def test_gather_matches_reference(ishape: Ints, offset_dims: Ints, collapsed: Ints, start_map: Ints, ivd: int,
                                  sizes: Ints) -> None:
    rng = np.random.default_rng(0)
    operand = np.arange(48, dtype=np.float32).reshape(8, 6)
    indices = rng.integers(-3, 10, size=ishape).astype(np.int32)  # some out of range: clamped
    expected = reference_gather(operand, indices, offset_dims, collapsed, start_map, ivd, sizes)
    result = gather(operand, indices, expected.shape, offset_dims, collapsed, start_map, ivd, sizes)
    np.testing.assert_array_equal(result, expected)


def test_gather_clamps_starts() -> None:
    operand = np.arange(8, dtype=np.int32)
    result = gather(operand, np.array([7, -1, 3], np.int32), (3, 6), (1,), (), (0,), 1, (6,))
    np.testing.assert_array_equal(result[:, 0], [2, 0, 2])  # 7 -> 8-6 = 2, -1 -> 0, 3 -> 2


# ---- scatter --------------------------------------------------------------------------
def scatter_module(operand: np.ndarray, indices: np.ndarray, updates: np.ndarray, combiner: str, dims: str) -> str:
    t = shape_text(operand.dtype, ())
    return f"""HloModule t
%combine (current: {t}, update: {t}) -> {t} {{
  %current = {t} parameter(0)
  %update = {t} parameter(1)
  ROOT %r = {t} {combiner}
}}

ENTRY e {{
  x = {shape_text(operand.dtype, operand.shape)} parameter(0)
  i = {shape_text(indices.dtype, indices.shape)} parameter(1)
  u = {shape_text(updates.dtype, updates.shape)} parameter(2)
  ROOT s = {shape_text(operand.dtype, operand.shape)} scatter(x, i, u), {dims}, to_apply=%combine
}}
"""


def reference_scatter(operand: np.ndarray, indices: np.ndarray, updates: np.ndarray, window_dims: Ints,
                      inserted: Ints, dims_map: Ints, index_vector_dim: int,
                      combine: Callable[[Any, Any], Any]) -> np.ndarray:
    out = operand.copy()
    if index_vector_dim == indices.ndim:
        indices = indices[..., None]
    window_operand_dims = [d for d in range(operand.ndim) if d not in inserted]
    for index in itertools.product(*(range(d) for d in updates.shape)):
        scatter = [index[d] for d in range(updates.ndim) if d not in window_dims]
        start = [0] * operand.ndim
        for k, operand_dim in enumerate(dims_map):
            start[operand_dim] = int(indices[tuple(scatter[:index_vector_dim] + [k] + scatter[index_vector_dim:])])
        sizes = [1] * operand.ndim
        for k, d in enumerate(window_operand_dims):
            sizes[d] = updates.shape[window_dims[k]]
        if any(s < 0 or s + z > n for s, z, n in zip(start, sizes, operand.shape, strict=True)):
            continue  # the whole window is skipped
        full = list(start)
        for k, d in enumerate(window_operand_dims):
            full[d] += index[window_dims[k]]
        out[tuple(full)] = combine(out[tuple(full)], updates[index])
    return out


ROW_SCATTER = "update_window_dims={1}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1"


def test_scatter_add_with_duplicates_and_out_of_range() -> None:
    operand = np.zeros((4, 3), np.float32)
    indices = np.array([1, 3, 1, 4, -1], np.int32)
    updates = np.arange(15, dtype=np.float32).reshape(5, 3)
    expected = reference_scatter(operand, indices, updates, (1,), (0,), (0,), 1, lambda a, b: a + b)
    for result in run_both(scatter_module(operand, indices, updates, "add(%current, %update)", ROW_SCATTER),
                           operand, indices, updates):
        np.testing.assert_array_equal(result, expected)
    assert expected[1].tolist() == [6, 8, 10]


def test_scatter_skips_partially_out_of_bounds_windows() -> None:
    operand = np.zeros(6, np.int32)
    indices = np.array([[0], [4], [5], [-1]], np.int32)
    updates = np.ones((4, 2), np.int32)  # windows of 2: starts 4 fits, 5 and -1 do not
    dims = "update_window_dims={1}, inserted_window_dims={}, scatter_dims_to_operand_dims={0}, index_vector_dim=1"
    for result in run_both(scatter_module(operand, indices, updates, "add(%current, %update)", dims),
                           operand, indices, updates):
        np.testing.assert_array_equal(result, [1, 1, 0, 0, 1, 1])


def test_scatter_combiner_receives_current_then_update_in_order() -> None:
    operand = np.full(3, 100, np.int32)
    indices = np.array([0, 2, 0, 0], np.int32)
    updates = np.array([1, 2, 3, 4], np.int32)
    dims = "update_window_dims={}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1"
    # f(current, update) = update - current: non-commutative and order dependent.
    expected = reference_scatter(operand, indices, updates, (), (0,), (0,), 1, lambda c, u: u - c)
    for result in run_both(scatter_module(operand, indices, updates, "subtract(%update, %current)", dims),
                           operand, indices, updates):
        np.testing.assert_array_equal(result, expected)
    assert expected.tolist() == [4 - (3 - (1 - 100)), 100, 2 - 100]


def test_scatter_set_keeps_last_update() -> None:
    operand = np.zeros(3, np.float32)
    indices, updates = np.array([1, 1], np.int32), np.array([5, 7], np.float32)
    dims = "update_window_dims={}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1"
    for result in run_both(scatter_module(operand, indices, updates, "add(%update, %update)", dims)
                           .replace("add(%update, %update)", "copy(%update)"), operand, indices, updates):
        np.testing.assert_array_equal(result, [0, 7, 0])


# ---- sort -----------------------------------------------------------------------------
def sort_module(shapes: list[str], comparator_body: str, dimension: int = 0, stable: bool = True) -> str:
    params = []
    for k, shape in enumerate(shapes):
        scalar = shape.split("[")[0] + "[]"
        params += [f"%p{2 * k}: {scalar}", f"%p{2 * k + 1}: {scalar}"]
    param_lines = "\n".join(
        f"  %p{i} = {p.split(': ')[1]} parameter({i})" for i, p in enumerate(params)
    )
    entry_params = "\n".join(f"  x{k} = {s} parameter({k})" for k, s in enumerate(shapes))
    result = shapes[0] if len(shapes) == 1 else "(" + ", ".join(shapes) + ")"
    operands = ", ".join(f"x{k}" for k in range(len(shapes)))
    return f"""HloModule t
%less ({", ".join(p.lstrip("%") for p in params)}) -> pred[] {{
{param_lines}
{comparator_body}
}}

ENTRY e {{
{entry_params}
  ROOT s = {result} sort({operands}), dimensions={{{dimension}}}, is_stable={"true" if stable else "false"}, to_apply=%less
}}
"""


def test_sort_key_value_pairs_stably() -> None:
    keys = np.array([3, 1, 2, 1, 3, 0], np.int32)
    values = np.arange(6, dtype=np.float32)
    text = sort_module(["s32[6]", "f32[6]"], "  ROOT %lt = pred[] compare(%p0, %p1), direction=LT")
    for sorted_keys, sorted_values in run_both(text, keys, values):
        np.testing.assert_array_equal(sorted_keys, [0, 1, 1, 2, 3, 3])
        np.testing.assert_array_equal(sorted_values, [5, 1, 3, 2, 0, 4])


def test_sort_descending_along_a_dimension() -> None:
    x = np.array([[3, 1, 2], [0, 5, 4]], np.int32)
    text = sort_module(["s32[2,3]"], "  ROOT %gt = pred[] compare(%p0, %p1), direction=GT", dimension=0)
    for result in run_both(text, x):
        np.testing.assert_array_equal(result, [[3, 5, 4], [0, 1, 2]])
    swapped = sort_module(["s32[2,3]"], "  ROOT %lt = pred[] compare(%p1, %p0), direction=LT", dimension=1)
    for result in run_both(swapped, x):
        np.testing.assert_array_equal(result, [[3, 2, 1], [5, 4, 0]])


def test_sort_totalorder_puts_nans_at_both_ends() -> None:
    x = np.array([1, np.nan, -0.0, -np.inf, 0.0, -np.nan, -1], np.float32)
    x[5] = -np.abs(x[5])
    text = sort_module(["f32[7]"], "  ROOT %lt = pred[] compare(%p0, %p1), direction=LT, type=TOTALORDER")
    for result in run_both(text, x):
        assert np.isnan(result[0]) and np.signbit(result[0]) and np.isnan(result[-1]) and not np.signbit(result[-1])
        assert_bits_equal(result[1:-1], np.array([-np.inf, -1, -0.0, 0.0, 1], np.float32))


def test_sort_general_comparator_lexicographic() -> None:
    a = np.array([2, 1, 2, 1, 0, 2], np.int32)
    b = np.array([5, 9, 1, 3, 7, 5], np.int32)
    body = """  %lt0 = pred[] compare(%p0, %p1), direction=LT
  %eq0 = pred[] compare(%p0, %p1), direction=EQ
  %lt1 = pred[] compare(%p3, %p2), direction=LT
  %second = pred[] and(%eq0, %lt1)
  ROOT %r = pred[] or(%lt0, %second)"""  # a ascending, then b descending
    expected = sorted(zip(a.tolist(), b.tolist(), strict=True), key=functools.cmp_to_key(
        lambda x, y: -1 if (x[0], -x[1]) < (y[0], -y[1]) else (1 if (x[0], -x[1]) > (y[0], -y[1]) else 0)))
    sorted_a, sorted_b = run_hlo(sort_module(["s32[6]", "s32[6]"], body), a, b)
    assert list(zip(sorted_a.tolist(), sorted_b.tolist(), strict=True)) == expected


def test_topk_ties_keep_lower_index() -> None:
    x = np.array([[1, 5, 3, 5, 2], [0, 0, 0, 1, 0]], np.float32)
    text = """HloModule t
ENTRY e {
  x = f32[2,5] parameter(0)
  ROOT t = (f32[2,3], s32[2,3]) topk(x), k=3, largest=true
}
"""
    values, indices = run_hlo(text, x)
    np.testing.assert_array_equal(values, [[5, 5, 3], [1, 0, 0]])
    np.testing.assert_array_equal(indices, [[1, 3, 2], [3, 0, 1]])
    values, indices = run_hlo(text.replace("largest=true", "largest=false"), x)
    np.testing.assert_array_equal(indices, [[0, 4, 2], [0, 1, 2]])


def test_variadic_scatter_combines_pairs() -> None:
    text = """HloModule t
%keep_min (c0: f32[], c1: s32[], u0: f32[], u1: s32[]) -> (f32[], s32[]) {
  %c0 = f32[] parameter(0)
  %c1 = s32[] parameter(1)
  %u0 = f32[] parameter(2)
  %u1 = s32[] parameter(3)
  %lt = pred[] compare(%u0, %c0), direction=LT
  %v = f32[] select(%lt, %u0, %c0)
  %i = s32[] select(%lt, %u1, %c1)
  ROOT %t = (f32[], s32[]) tuple(%v, %i)
}

ENTRY e {
  v = f32[3] parameter(0)
  ids = s32[3] parameter(1)
  where = s32[4] parameter(2)
  uv = f32[4] parameter(3)
  uid = s32[4] parameter(4)
  ROOT s = (f32[3], s32[3]) scatter(v, ids, where, uv, uid), update_window_dims={}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=%keep_min
}
"""
    values, ids = run_hlo(text, np.full(3, np.inf, np.float32), np.full(3, -1, np.int32),
                          np.array([2, 0, 2, 2], np.int32), np.array([5, 1, 3, 4], np.float32),
                          np.array([10, 11, 12, 13], np.int32))
    np.testing.assert_array_equal(values, [1, np.inf, 3])
    np.testing.assert_array_equal(ids, [11, -1, 12])


def test_batched_gather_and_scatter() -> None:
    operand = np.arange(10, dtype=np.float32).reshape(2, 5)
    indices = np.array([[4, 0, 9], [1, 1, -2]], np.int32)
    text = """HloModule t
ENTRY e {
  x = f32[2,5] parameter(0)
  i = s32[2,3] parameter(1)
  ROOT g = f32[2,3] gather(x, i), offset_dims={}, collapsed_slice_dims={1}, start_index_map={1}, operand_batching_dims={0}, start_indices_batching_dims={0}, index_vector_dim=2, slice_sizes={1,1}
}
"""
    np.testing.assert_array_equal(run_hlo(text, operand, indices), [[4, 0, 4], [6, 6, 5]])  # clamped
    scatter = """HloModule t
%combine (current: f32[], update: f32[]) -> f32[] {
  %current = f32[] parameter(0)
  %update = f32[] parameter(1)
  ROOT %r = f32[] add(%current, %update)
}

ENTRY e {
  x = f32[2,5] parameter(0)
  i = s32[2,3] parameter(1)
  u = f32[2,3] parameter(2)
  ROOT s = f32[2,5] scatter(x, i, u), update_window_dims={}, inserted_window_dims={1}, scatter_dims_to_operand_dims={1}, input_batching_dims={0}, scatter_indices_batching_dims={0}, index_vector_dim=2, to_apply=%combine
}
"""
    updates = np.array([[1, 2, 3], [10, 20, 30]], np.float32)
    for result in run_both(scatter, np.zeros((2, 5), np.float32), indices, updates):
        np.testing.assert_array_equal(result, [[2, 0, 0, 0, 1], [0, 30, 0, 0, 0]])  # 9 and -2 are skipped
