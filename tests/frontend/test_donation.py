"""``jit(f, donate_argnums=...)``: donated arrays are paired with outputs of the same shape and
dtype in ``input_output_alias`` (as JAX pairs them), and the CPU run writes the outputs into them.
Results are checked against NumPy and the non-donated run."""

from __future__ import annotations

import numpy as np
import pytest

import xla_teach
import xla_teach.numpy as xnp


def sgd(w, b, g):  # type: ignore[no-untyped-def]
    return w - 0.1 * g, b * 0.5, xnp.sum(g)


def test_donated_arguments_are_paired_with_equal_outputs() -> None:
    w, b, g = np.ones((4, 3), np.float32), np.ones(3, np.float32), np.ones((4, 3), np.float32)
    text = xla_teach.jit(sgd, donate_argnums=(0, 1)).lower(w, b, g).as_text()
    assert text.startswith("HloModule jit_sgd, input_output_alias={ {0}: (0, {}, may-alias), "
                           "{1}: (1, {}, may-alias) }")


def test_donated_run_matches_numpy_and_writes_into_the_argument() -> None:
    rng = np.random.default_rng(0)
    w, b, g = (rng.standard_normal(s).astype(np.float32) for s in ((64, 32), (32,), (64, 32)))
    want = (w - np.float32(0.1) * g, b * np.float32(0.5), g.sum())
    plain = xla_teach.jit(sgd, backend="cpu")(w.copy(), b.copy(), g)
    donated_w, donated_b = w.copy(), b.copy()
    out = xla_teach.jit(sgd, backend="cpu", donate_argnums=(0, 1))(donated_w, donated_b, g)
    for got, ref, exact in zip(out, want, plain, strict=True):
        np.testing.assert_allclose(got, ref, rtol=1e-5)
        np.testing.assert_array_equal(got, exact)
    assert np.shares_memory(out[0], donated_w) and np.shares_memory(out[1], donated_b)
    np.testing.assert_array_equal(donated_w, out[0])  # the caller's array now holds the result


def test_a_training_loop_with_donation_keeps_updating_in_place() -> None:
    step = xla_teach.jit(lambda w, g: w - 0.5 * g, backend="cpu", donate_argnums=0)
    w, g = np.full(8, 4, np.float32), np.ones(8, np.float32)
    for _ in range(3):
        w = step(w, g)
    np.testing.assert_array_equal(w, 2.5)


def test_unusable_donation_warns_and_static_donation_is_an_error() -> None:
    x = np.ones(4, np.float32)
    with pytest.warns(UserWarning, match=r"donated buffers were not usable.*x: f32\[4\]"):
        xla_teach.jit(lambda x: xnp.sum(x), donate_argnums=0).lower(x)
    with pytest.raises(ValueError, match="both static and donated"):
        xla_teach.jit(lambda x, n: x, static_argnums=1, donate_argnums=1)
    with pytest.raises(ValueError, match="donate_argnums 3 but only 1 positional"):
        xla_teach.jit(lambda x: x, donate_argnums=3).lower(x)
