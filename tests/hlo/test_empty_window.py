"""Ops whose window has no dimensions: XLA prints no ``window=`` at all (a convolution with no
spatial dims is a matmul; a reduce-window of a scalar is the identity), so the parser must read
that, and the printer must write it back the same way -- checked on the interpreter and the CPU
against NumPy."""

from __future__ import annotations

import numpy as np
import pytest

import xla_teach
from xla_teach.hlo.text.parser import parse_hlo

NO_WINDOW = """HloModule m, entry_computation_layout={(f32[2,3]{1,0}, f32[4,3]{1,0}, f32[])->(f32[2,4]{1,0}, f32[])}

%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}

ENTRY %main (x: f32[2,3], k: f32[4,3], v: f32[]) -> (f32[2,4], f32[]) {
  %x = f32[2,3]{1,0} parameter(0)
  %k = f32[4,3]{1,0} parameter(1)
  %c = f32[2,4]{1,0} convolution(%x, %k), dim_labels=bf_oi->bf
  %v = f32[] parameter(2)
  %zero = f32[] constant(0)
  %r = f32[] reduce-window(%v, %zero), to_apply=%add
  ROOT %t = (f32[2,4]{1,0}, f32[]) tuple(%c, %r)
}
"""


def test_no_window_prints_back_without_one() -> None:
    text = parse_hlo(NO_WINDOW).to_text()
    assert text.strip() == NO_WINDOW.strip()
    explicit = NO_WINDOW.replace("dim_labels=bf_oi->bf", "window={}, dim_labels=bf_oi->bf")
    assert parse_hlo(explicit).to_text() == text


@pytest.mark.parametrize("backend", ["interpreter", "cpu"])
def test_no_window_runs(backend: str) -> None:
    rng = np.random.default_rng(0)
    x, k = rng.standard_normal((2, 3), np.float32), rng.standard_normal((4, 3), np.float32)
    c, r = xla_teach.execute(NO_WINDOW, [x, k, np.float32(2.5)], backend=backend)
    np.testing.assert_allclose(c, x @ k.T, rtol=1e-5, atol=1e-6)
    assert r == np.float32(2.5)


def test_builder_convolution_without_spatial_dims_round_trips() -> None:
    b = xla_teach.XlaBuilder("matmul_as_conv")
    a = b.parameter(0, xla_teach.Shape.array("f32", (2, 3)), "a")
    k = b.parameter(1, xla_teach.Shape.array("f32", (3, 4)), "k")
    module = b.build(b.conv_general_dilated(a, k, [], [], dim_labels="bf_io->bf"))
    text = module.to_text()
    assert "window" not in text and parse_hlo(text).to_text() == text
