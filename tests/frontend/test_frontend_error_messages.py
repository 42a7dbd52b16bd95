"""Bad input raises a clear error naming the called function and what is wrong -- never an
internal Python exception (IndexError, TypeError from ``int()``...) or HLO builder text."""

from __future__ import annotations

import re

import numpy as np
import pytest

import xla_teach as xt
import xla_teach.numpy as xnp
from xla_teach.frontend.errors import CompilationError

F2 = np.ones(2, np.float32)
A23 = np.ones((2, 3), np.float32)


# ---- 1. switch with no branches ----------------------------------------------------------------
def test_switch_without_branches_traced():
    with pytest.raises(ValueError, match="switch: needs at least one branch"):
        xt.jit(lambda a, i: xnp.switch(i, [], a))(F2, np.int32(0))


def test_switch_without_branches_eager_and_concrete_index():
    with pytest.raises(ValueError, match="switch: needs at least one branch"):
        xnp.switch(np.int32(0), [], F2)
    with pytest.raises(ValueError, match="switch: needs at least one branch"):
        xt.jit(lambda a: xnp.switch(0, [], a))(F2)


# ---- 2. functions that must return a pair -------------------------------------------------------
def test_grad_has_aux_without_pair():
    with pytest.raises(ValueError, match=re.escape("grad(has_aux=True): the function must return a pair "
                                                   "(output, aux), got a f32[] array")):
        xt.grad(lambda a: xnp.sum(a), has_aux=True)(F2)


def test_value_and_grad_has_aux_with_triple():
    with pytest.raises(ValueError, match=re.escape("value_and_grad(has_aux=True): the function must return a "
                                                   "pair (output, aux), got a tuple of 3 items")):
        xt.value_and_grad(lambda a: (xnp.sum(a), a, a), has_aux=True)(F2)


def test_vjp_has_aux_without_pair():
    with pytest.raises(ValueError, match=re.escape("vjp(has_aux=True): the function must return a pair "
                                                   "(output, aux)")):
        xt.vjp(lambda a: xnp.sum(a), F2, has_aux=True)
    with pytest.raises(ValueError, match=re.escape("vjp(has_aux=True): the function must return a pair "
                                                   "(output, aux), got a f32[] array")):
        xt.jit(lambda a: xt.vjp(lambda b: xnp.sum(b), a, has_aux=True)[0])(F2)


def test_grad_has_aux_with_pair_still_works():
    g, aux = xt.grad(lambda a: (xnp.sum(a), a * 2), has_aux=True)(F2)
    np.testing.assert_allclose(g, [1, 1])
    np.testing.assert_allclose(aux, [2, 2])


@pytest.mark.parametrize("jitted", [False, True])
def test_scan_function_without_pair(jitted):
    def run(xs):
        return xnp.scan(lambda c, x: c + x, np.float32(0), xs)
    fn = xt.jit(run) if jitted else run
    with pytest.raises(ValueError, match=re.escape("scan: the function must return a pair (carry, y), "
                                                   "got a f32[] array")):
        fn(np.ones(3, np.float32))


def test_scan_function_returning_none():
    with pytest.raises(ValueError, match=re.escape("scan: the function must return a pair (carry, y), got None")):
        xnp.scan(lambda c, x: None, np.float32(0), np.ones(3, np.float32))


# ---- 3. products with mismatched shapes -----------------------------------------------------------
def test_einsum_index_size_mismatch():
    with pytest.raises(ValueError, match=re.escape("xnp.einsum: operand shapes (2, 3) and (2, 3) disagree on "
                                                   "index 'j': 3 vs 2")):
        xnp.einsum("ij,jk->ik", A23, A23)


def test_einsum_repeated_output_subscript():
    with pytest.raises(ValueError, match="xnp.einsum: output subscript 'i' appears more than once in 'ij->ii'"):
        xnp.einsum("ij->ii", A23)


def test_tensordot_size_mismatch():
    with pytest.raises(ValueError, match=re.escape("xnp.tensordot: shape mismatch for sum: axis 0 of (2, 3) has "
                                                   "size 2 but axis 1 of (2, 3) has size 3")):
        xnp.tensordot(A23, A23, axes=([0], [1]))
    with pytest.raises(ValueError, match="xnp.tensordot: axes .* have different lengths"):
        xnp.tensordot(A23, A23, axes=([0, 1], [0]))


def test_inner_last_dims_mismatch():
    with pytest.raises(ValueError, match=re.escape("xnp.inner: shapes (2, 3) and (2, 2) not aligned")):
        xnp.inner(A23, np.ones((2, 2), np.float32))


def test_products_with_matching_shapes_still_work():
    np.testing.assert_allclose(xnp.einsum("ij,jk->ik", A23, A23.T), A23 @ A23.T)
    np.testing.assert_allclose(xnp.tensordot(A23, A23, axes=([0], [0])), np.tensordot(A23, A23, axes=([0], [0])))
    np.testing.assert_allclose(xnp.inner(A23, A23), np.inner(A23, A23))


# ---- 4. negative sizes ---------------------------------------------------------------------------------
@pytest.mark.parametrize("name, call", [
    ("zeros", lambda: xnp.zeros((-1, 2))),
    ("ones", lambda: xnp.ones(-3)),
    ("full", lambda: xnp.full((2, -1), 1.0)),
    ("eye", lambda: xnp.eye(-1)),
    ("eye", lambda: xnp.eye(2, -2)),
])
def test_negative_dimensions(name, call):
    with pytest.raises(ValueError, match=rf"xnp\.{name}: negative dimensions are not allowed"):
        call()


def test_linspace_negative_num():
    with pytest.raises(ValueError, match=re.escape("xnp.linspace: Number of samples, -1, must be non-negative.")):
        xnp.linspace(0, 1, -1)


def test_empty_sizes_still_work():
    assert xnp.zeros((0, 2)).shape == (0, 2)
    assert xnp.eye(0).shape == (0, 0)
    assert xnp.linspace(0, 1, 0).shape == (0,)


# ---- 5. repeat with per-element counts ---------------------------------------------------------------
X6 = np.arange(6.0, dtype=np.float32).reshape(2, 3)


@pytest.mark.parametrize("repeats, axis", [([1, 2, 0], 1), (np.array([2, 1]), 0), ([0, 0], 0), ([2], 0),
                                           (2, None), ([1, 2, 3, 1, 1, 1], None)])
def test_repeat_matches_numpy(repeats, axis):
    np.testing.assert_array_equal(xnp.repeat(X6, repeats, axis=axis), np.repeat(X6, repeats, axis=axis))


def test_repeat_per_element_inside_jit_and_grad():
    np.testing.assert_array_equal(xt.jit(lambda a: xnp.repeat(a, [1, 2], axis=0))(X6),
                                  np.repeat(X6, [1, 2], axis=0))
    g = xt.grad(lambda a: xnp.sum(xnp.repeat(a, [1, 2], axis=0)))(X6)
    np.testing.assert_array_equal(g, [[1, 1, 1], [2, 2, 2]])


def test_repeat_bad_counts():
    with pytest.raises(ValueError, match=r"xnp\.repeat: 2 repeat counts for axis 0 of size 6"):
        xnp.repeat(X6, [1, 2])
    with pytest.raises(ValueError, match=r"xnp\.repeat: negative dimensions are not allowed"):
        xnp.repeat(X6, -1)
    with pytest.raises(TypeError, match=r"xnp\.repeat: repeats must be an int or a 1-D sequence of ints"):
        xnp.repeat(X6, 1.5)


def test_repeat_traced_counts():
    with pytest.raises(CompilationError, match=r"xnp\.repeat with traced repeats"):
        xt.jit(lambda a, r: xnp.repeat(a, r))(X6, np.array([1, 2]))


# ---- 6. comparison with None ------------------------------------------------------------------------
@pytest.mark.parametrize("fn, name, op", [
    (lambda a: a == None, "equal", "=="),  # noqa: E711
    (lambda a: None != a, "not_equal", "!="),  # noqa: E711
    (lambda a: xnp.less(a, None), "less", "<"),
])
def test_comparison_with_none(fn, name, op):
    with pytest.raises(TypeError, match=re.escape(f"xnp.{name} (the `{op}` operator): comparison with None is "
                                                  "not supported")) as info:
        xt.jit(fn)(np.ones(2))
    assert "use `x is None`" in str(info.value)
