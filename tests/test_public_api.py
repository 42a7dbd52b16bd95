"""The stable public surface of issue 3: ``xla_teach.parse_hlo``, ``HloModule.to_text``,
``xla_teach.execute`` (interpreter by default) and ``xla_teach.XlaBuilder``."""

from __future__ import annotations

import numpy as np
import pytest

import xla_teach

SEED = """
HloModule seed

add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}

ENTRY main {
  x = f32[4] parameter(0)
  y = f32[4] parameter(1)
  z = f32[4] parameter(2)
  yz = f32[4] multiply(y, z)
  s = f32[4] add(x, yz)
  zero = f32[] constant(0)
  r = f32[] reduce(s, zero), dimensions={0}, to_apply=add
  ROOT out = (f32[], f32[4]) tuple(r, s)
}
"""


def _args() -> list[np.ndarray]:
    rng = np.random.default_rng(3)
    return [rng.standard_normal(4).astype(np.float32) for _ in range(3)]


def test_top_level_names() -> None:
    for name in ["parse_hlo", "execute", "XlaBuilder", "HloModule"]:
        assert name in xla_teach.__all__ and hasattr(xla_teach, name)


def test_execute_compiles_for_the_cpu_by_default_and_flattens_the_root(monkeypatch: pytest.MonkeyPatch) -> None:
    import xla_teach.api

    used: list[str] = []
    real_compiler_for = xla_teach.api.compiler_for
    monkeypatch.setattr(xla_teach.api, "compiler_for",
                        lambda backend, options: used.append(backend) or real_compiler_for(backend, options))
    x, y, z = _args()
    for backend in (None, "interpreter"):
        extra = {} if backend is None else {"backend": backend}
        outputs = xla_teach.execute(xla_teach.parse_hlo(SEED), [x, y, z], **extra)
        assert [o.dtype for o in outputs] == [np.float32, np.float32]
        np.testing.assert_allclose(outputs[1], x + y * z, rtol=1e-6)
        np.testing.assert_allclose(outputs[0], np.sum((x + y * z).astype(np.float64)), rtol=1e-5)
    assert used == ["cpu", "interpreter"]


def test_execute_accepts_text() -> None:
    x, y, z = _args()
    np.testing.assert_allclose(xla_teach.execute(SEED, [x, y, z])[1], x + y * z, rtol=1e-6)


def test_to_text_round_trips() -> None:
    text = xla_teach.parse_hlo(SEED).to_text()
    assert xla_teach.parse_hlo(text).to_text() == text == str(xla_teach.parse_hlo(text))


@pytest.mark.parametrize(("args", "message"), [
    (lambda a: a[:2], "takes 3 argument"),
    (lambda a: [*a, a[0]], "takes 3 argument"),
    (lambda a: [a[0], a[1].reshape(2, 2), a[2]], "parameter 1"),
    (lambda a: [a[0], a[1], np.zeros(5, np.float32)], "parameter 2"),
    (lambda a: [a[0].astype(np.float64), a[1], a[2]], "parameter 0"),
    (lambda a: [a[0], a[1].astype(np.int32), a[2]], "parameter 1"),
], ids=["too-few", "too-many", "wrong-rank", "wrong-size", "wrong-dtype-f64", "wrong-dtype-s32"])
def test_execute_rejects_wrong_arguments_with_value_error(args, message: str) -> None:
    module = xla_teach.parse_hlo(SEED)
    with pytest.raises(ValueError, match=message):
        xla_teach.execute(module, args(_args()))


def test_builder_module_executes() -> None:
    """The docstring example of XlaBuilder, run through xla_teach.execute; checked with NumPy."""
    b = xla_teach.XlaBuilder("axpy")
    alpha = b.parameter(0, xla_teach.Shape.scalar("f32"), "alpha")
    x = b.parameter(1, xla_teach.Shape.array("f32", (4,)), "x")
    y = b.parameter(2, xla_teach.Shape.array("f32", (4,)), "y")
    axpy = alpha * x + y
    total = b.reduce(axpy, b.constant(np.float32(0)), b.create_scalar_computation("add", "f32"), (0,))
    module = b.build(b.tuple([axpy, total]))
    a, xs, ys = np.float32(1.5), *_args()[:2]
    got_axpy, got_total = xla_teach.execute(module, [np.asarray(a), xs, ys])
    np.testing.assert_allclose(got_axpy, a * xs + ys, rtol=1e-6)
    np.testing.assert_allclose(got_total, np.sum(a * xs.astype(np.float64) + ys), rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="parameter 0"):
        xla_teach.execute(module, [np.ones(2, np.float32), xs, ys])
