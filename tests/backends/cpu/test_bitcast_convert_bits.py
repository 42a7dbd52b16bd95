"""``bitcast-convert`` reinterprets bits exactly, also through f16 and bf16 values the CPU holds
widened in f32: NaN payloads and signalling NaNs come back as they went in (they used to come
back as the canonical quiet NaN, 0xFFFF -> 0xFFC0, found by the random-module test)."""

from __future__ import annotations

import numpy as np
import pytest

from xla_teach.api import execute
from xla_teach.hlo.evaluator import HloEvaluator
from xla_teach.hlo.text.parser import parse_hlo

BITS = np.array([0x7C01, 0xFC01, 0x7E00, 0xFFFF, 0x7F81, 0x0001, 0x8000, 0x3C00], np.uint16)


@pytest.mark.parametrize("t", ["bf16", "f16"])
def test_round_trip_through_a_narrow_float_keeps_every_bit(t: str) -> None:
    text = (f"HloModule m\nENTRY e {{\n  p = u16[8] parameter(0)\n  f = {t}[8] bitcast-convert(p)\n"
            "  ROOT r = u16[8] bitcast-convert(f)\n}\n")
    (got,) = execute(text, [BITS], backend="cpu")
    np.testing.assert_array_equal(got, BITS)


@pytest.mark.parametrize("t", ["bf16", "f16"])
def test_width_changing_bitcast_keeps_every_bit(t: str) -> None:
    text = (f"HloModule m\nENTRY e {{\n  p = u16[4,2] parameter(0)\n  f = {t}[4,2] bitcast-convert(p)\n"
            "  ROOT r = u32[4] bitcast-convert(f)\n}\n")
    x = BITS.reshape(4, 2)
    (got,) = execute(text, [x], backend="cpu")
    (want,) = HloEvaluator().evaluate_module(parse_hlo(text), [x])
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(got, x.view(np.uint32).reshape(4))
