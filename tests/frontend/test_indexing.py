"""NumPy indexing (slice / dynamic-slice / gather) and x.at[...] updates against NumPy."""

from __future__ import annotations

import numpy as np
import pytest

import xla_teach.numpy as xnp
from tests.frontend.frontend_test_utils import assert_matches, run

X = np.arange(60, dtype=np.float32).reshape(3, 4, 5)

STATIC = [
    np.s_[1], np.s_[-1], np.s_[1:], np.s_[:, 2], np.s_[..., 3], np.s_[1, ..., 2], np.s_[::2], np.s_[::-1],
    np.s_[:, ::-2, 1:4], np.s_[2:0:-1, 3], np.s_[None], np.s_[:, None, 1], np.s_[..., None], np.s_[5:9],
    np.s_[-2:, -3:-1, ::3], np.s_[1, 2, 3], np.s_[:, 1:1],
]


@pytest.mark.parametrize("index", STATIC, ids=[str(i) for i in range(len(STATIC))])
def test_basic_indexing(index):
    assert_matches(lambda x: x[index], lambda x: x[index], X)


ADVANCED = [
    np.s_[[0, 2]], np.s_[[2, -1, 0]], np.s_[:, [3, 0]], np.s_[[1, 0], :, [4, 1]], np.s_[[[0], [2]], [1, 3]],
    np.s_[..., [0, 0, 4]], np.s_[1:, [1, 2], ::2], np.s_[[0, 1], [2, 3], [4, 0]], np.s_[2, :, [1, 3]],
    np.s_[[True, False, True]], np.s_[:, np.array([True, False, True, True])],
]


@pytest.mark.parametrize("index", ADVANCED, ids=[str(i) for i in range(len(ADVANCED))])
def test_integer_array_indexing_is_a_gather(index):
    assert_matches(lambda x: x[index], lambda x: x[index], X)


def test_traced_integer_indices():
    assert_matches(lambda x, i: x[i], lambda x, i: x[i], X, np.int32(2))
    assert_matches(lambda x, i: x[i], lambda x, i: x[i], X, np.int32(-1))
    assert_matches(lambda x, i, j: x[i, :, j], lambda x, i, j: x[i, :, j], X, np.int32(1), np.int32(3))
    assert_matches(lambda x, idx: x[:, idx], lambda x, idx: x[:, idx], X, np.array([3, -1, 0], np.int32))
    text = __import__("xla_teach").jit(lambda x, i: x[i]).lower(X, np.int32(0)).as_text()
    assert "dynamic-slice" in text


def test_take_and_take_along_axis():
    idx = np.array([[0, 4], [3, 3]], np.int32)
    assert_matches(lambda x: xnp.take(x, idx, axis=2), lambda x: np.take(x, idx, axis=2), X)
    assert_matches(lambda x: xnp.take(x, idx), lambda x: np.take(x, idx), X)
    assert_matches(lambda x: xnp.take(x, 2, axis=1), lambda x: np.take(x, 2, axis=1), X)
    order = np.argsort(-X, axis=1).astype(np.int32)
    assert_matches(lambda x, o: xnp.take_along_axis(x, o, 1), lambda x, o: np.take_along_axis(x, o, 1), X, order)
    first = np.zeros((3, 1, 5), np.int32)
    assert_matches(lambda x, o: xnp.take_along_axis(x, o, 1), lambda x, o: np.take_along_axis(x, o, 1), X, first)


def _np_update(x, index, values, mode):
    y = x.copy()
    if mode == "set":
        y[index] = values
    else:
        {"add": np.add, "mul": np.multiply, "min": np.minimum, "max": np.maximum}[mode].at(y, index, values)
    return y


UPDATES = [np.s_[1], np.s_[0, 2], np.s_[:, 1:3], np.s_[..., -1], np.s_[::2], np.s_[[0, 2]], np.s_[:, [1, 1, 3], 2],
           np.s_[1, [0, 3], [4, 0]]]


@pytest.mark.parametrize("mode", ["set", "add", "mul", "min", "max"])
@pytest.mark.parametrize("index", UPDATES, ids=[str(i) for i in range(len(UPDATES))])
def test_at_updates(index, mode):
    values = np.float32(7.0)
    method = {"mul": "multiply"}.get(mode, mode)
    if mode == "set" and index == UPDATES[6]:
        index = np.s_[:, [1, 3], 2]  # NumPy and XLA differ on which duplicate wins
    assert_matches(lambda x: getattr(x.at[index], method)(values), lambda x: _np_update(x, index, values, mode), X)


def test_at_update_with_broadcast_array_values_and_traced_index():
    values = np.arange(5, dtype=np.float32)
    assert_matches(lambda x, v: x.at[:, 1].set(v), lambda x, v: _np_update(x, np.s_[:, 1], v, "set"), X, values)
    assert_matches(lambda x, i: x.at[i, 0].add(1.0), lambda x, i: _np_update(x, np.s_[i, 0], 1.0, "add"), X,
                   np.int32(2))
    assert_matches(lambda x: x.at[1].get(), lambda x: x[1], X)


def test_at_index_cast_values_to_the_array_dtype():
    assert_matches(lambda x: x.at[0].set(2.7), lambda x: _np_update(x, 0, 2, "set"), np.zeros(3, np.int32))


def test_dynamic_slice_and_update_slice():
    assert_matches(lambda x, i: xnp.dynamic_slice(x, (i, 1, 0), (2, 2, 5)), lambda x, i: x[i:i + 2, 1:3], X,
                   np.int32(1))
    assert_matches(lambda x: xnp.dynamic_update_slice(x, xnp.ones((1, 2, 2)), (2, 0, 3)),
                   lambda x: _np_update(x, np.s_[2:3, 0:2, 3:5], 1.0, "set"), X)


def test_index_errors():
    with pytest.raises(IndexError, match="too many indices"):
        run(lambda x: x[0, 0, 0, 0], X)
    with pytest.raises(IndexError, match="out of bounds"):
        run(lambda x: x[3], X)
    with pytest.raises(IndexError, match="integer"):
        run(lambda x: x[np.array([0.5])], X)
