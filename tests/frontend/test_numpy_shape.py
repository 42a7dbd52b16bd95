"""Shape functions, array creation and products against NumPy."""

from __future__ import annotations

import numpy as np
import pytest

import xla_teach.numpy as xnp
from tests.frontend.frontend_test_utils import assert_matches, run

rng = np.random.default_rng(2)
X = rng.normal(size=(2, 3, 4)).astype(np.float32)


@pytest.mark.parametrize("fn", [
    lambda m: m.reshape(6, 4), lambda m: m.reshape(-1), lambda m: m.reshape((4, -1)), lambda m: m.T,
    lambda m: m.transpose(1, 0, 2), lambda m: m.swapaxes(0, 2), lambda m: m.ravel(),
    lambda m: m.reshape(2, 1, 3, 4).squeeze(), lambda m: m.reshape(2, 1, 3, 4).squeeze(1),
    lambda m: m[:, :, :, None].squeeze(-1),
], ids=["reshape", "reshape-1", "reshape_tuple", "T", "transpose", "swapaxes", "ravel", "squeeze", "squeeze1",
        "squeeze-1"])
def test_methods(fn):
    assert_matches(fn, fn, X)


def test_module_functions():
    cases = [
        (lambda m, L: L.reshape(m, (3, 8)), None),
        (lambda m, L: L.transpose(m, (2, 0, 1)), None),
        (lambda m, L: L.moveaxis(m, 0, -1), None),
        (lambda m, L: L.expand_dims(m, 1), None),
        (lambda m, L: L.expand_dims(m, (0, -1)), None),
        (lambda m, L: L.broadcast_to(m[:, :1], (2, 5, 4)), None),
        (lambda m, L: L.broadcast_to(m[0, 0], (3, 4)), None),
        (lambda m, L: L.concatenate([m, m * 2], axis=1), None),
        (lambda m, L: L.concatenate([m, m], axis=None), None),
        (lambda m, L: L.stack([m, m + 1, m + 2], axis=2), None),
        (lambda m, L: L.stack([m[0], m[1]]), None),
        (lambda m, L: L.vstack([m[0], m[1]]), None),
        (lambda m, L: L.hstack([m[0], m[1]]), None),
        (lambda m, L: L.pad(m, ((1, 0), (0, 2), (3, 1))), None),
        (lambda m, L: L.pad(m, 1, constant_values=-1.0), None),
        (lambda m, L: L.flip(m), None),
        (lambda m, L: L.flip(m, 1), None),
        (lambda m, L: L.flip(m, (0, 2)), None),
        (lambda m, L: L.tile(m, (1, 2, 1)), None),
        (lambda m, L: L.tile(m[0, 0], 3), None),
        (lambda m, L: L.repeat(m, 2, axis=1), None),
        (lambda m, L: L.repeat(m[0, 0], 3), None),
        (lambda m, L: tuple(L.split(m, 2, axis=2)), None),
        (lambda m, L: tuple(L.split(m, [1, 3], axis=2)), None),
    ]
    for fn, _ in cases:
        assert_matches(lambda m, fn=fn: fn(m, xnp), lambda m, fn=fn: fn(m, np), X)


def test_creation_functions():
    def f():
        return (xnp.zeros((2, 3)), xnp.ones(4, np.int32), xnp.full((2, 2), 7.5), xnp.full(3, 2, np.int8),
                xnp.arange(5), xnp.arange(2, 11, 3), xnp.arange(0.0, 1.0, 0.25), xnp.arange(5, dtype=np.float32),
                xnp.linspace(0.0, 1.0, 7), xnp.linspace(-2, 2, 4, endpoint=False), xnp.eye(3), xnp.eye(3, 4, k=1),
                xnp.eye(2, dtype=np.int32))

    expected = (np.zeros((2, 3), np.float32), np.ones(4, np.int32), np.full((2, 2), 7.5, np.float32),
                np.full(3, 2, np.int8), np.arange(5, dtype=np.int32), np.arange(2, 11, 3, dtype=np.int32),
                np.arange(0.0, 1.0, 0.25, dtype=np.float32), np.arange(5, dtype=np.float32),
                np.linspace(0.0, 1.0, 7, dtype=np.float32), np.linspace(-2, 2, 4, endpoint=False, dtype=np.float32),
                np.eye(3, dtype=np.float32), np.eye(3, 4, k=1, dtype=np.float32), np.eye(2, dtype=np.int32))
    assert_matches(f, lambda: expected)


def test_like_functions_and_one_hot():
    labels = np.array([0, 2, 1, 2], np.int32)
    assert_matches(lambda m: (xnp.zeros_like(m), xnp.ones_like(m, np.int32), xnp.full_like(m, 3.0)),
                   lambda m: (np.zeros_like(m), np.ones_like(m, np.int32), np.full_like(m, 3.0)), X)
    assert_matches(lambda v: xnp.one_hot(v, 3), lambda v: np.eye(3, dtype=np.float32)[v], labels)
    assert_matches(lambda v: xnp.one_hot(v, 4, axis=0), lambda v: np.eye(4, dtype=np.float32)[v].T, labels)


MATRICES = {
    "mv": ((3, 4), (4,)), "vm": ((4,), (4, 5)), "vv": ((4,), (4,)), "mm": ((3, 4), (4, 5)),
    "batched": ((2, 3, 4), (2, 4, 5)), "broadcast_batch": ((2, 1, 3, 4), (5, 4, 6)), "nd_2d": ((2, 3, 4), (4, 5)),
    "v_nd": ((4,), (2, 4, 5)),
}


@pytest.mark.parametrize("name", list(MATRICES))
def test_matmul_forms(name):
    a_shape, b_shape = MATRICES[name]
    a = rng.normal(size=a_shape).astype(np.float32)
    b = rng.normal(size=b_shape).astype(np.float32)
    assert_matches(xnp.matmul, np.matmul, a, b, rtol=1e-5, atol=1e-5)
    assert_matches(lambda x, y: x @ y, lambda x, y: x @ y, a, b, rtol=1e-5, atol=1e-5)


def test_dot_inner_outer_tensordot_vdot():
    a = rng.normal(size=(2, 3, 4)).astype(np.float32)
    b = rng.normal(size=(5, 4, 6)).astype(np.float32)
    v = rng.normal(size=(4,)).astype(np.float32)
    for fn in ["dot", "inner", "outer", "vdot"]:
        args = (a, b) if fn == "dot" else (v, v)
        assert_matches(getattr(xnp, fn), getattr(np, fn), *args, rtol=1e-5, atol=1e-5)
    assert_matches(lambda x, y: xnp.tensordot(x, y, axes=([2], [1])), lambda x, y: np.tensordot(x, y, ([2], [1])),
                   a, b, rtol=1e-5, atol=1e-5)
    m = rng.normal(size=(3, 4)).astype(np.float32)
    assert_matches(lambda x, y: xnp.tensordot(x, y), lambda x, y: np.tensordot(x, y), m, m, rtol=1e-5)
    assert_matches(lambda x: xnp.dot(x, 2.0), lambda x: np.dot(x, np.float32(2.0)), m)


EINSUMS = [
    ("ij,jk->ik", [(3, 4), (4, 5)]), ("ij,jk", [(3, 4), (4, 5)]), ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    ("i,i->", [(4,), (4,)]), ("i,j->ij", [(3,), (4,)]), ("ij->ji", [(3, 4)]), ("ij->", [(3, 4)]),
    ("ij->j", [(3, 4)]), ("bhqd,bhkd->bhqk", [(2, 2, 3, 4), (2, 2, 5, 4)]), ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)]),
    ("ij,ij->i", [(3, 4), (3, 4)]),
]


@pytest.mark.parametrize("spec,shapes", EINSUMS, ids=[e[0] for e in EINSUMS])
def test_einsum(spec, shapes):
    args = [rng.normal(size=s).astype(np.float32) for s in shapes]
    assert_matches(lambda *a: xnp.einsum(spec, *a), lambda *a: np.einsum(spec, *a), *args, rtol=1e-5, atol=1e-5)


def test_shape_errors_are_clear():
    with pytest.raises(ValueError, match="cannot reshape"):
        run(lambda m: m.reshape(5, 5), X)
    with pytest.raises(ValueError, match="contracting dimensions differ"):
        run(lambda m: m @ m, X)
    with pytest.raises(ValueError, match="cannot squeeze"):
        run(lambda m: m.squeeze(0), X)
    with pytest.raises(NotImplementedError, match="constant"):
        run(lambda m: xnp.pad(m, 1, mode="edge"), X)
