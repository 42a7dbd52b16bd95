"""Every module XLA writes runs: XLA CPU's own optimized HLO of ordinary JAX programs (its
fusions -- a scatter as a fusion root --, its ``TopK`` custom-call, bitcasts between element
types in a sort comparator, dots with batch dimensions of size 1...) parses, verifies and gives
XLA's results on the interpreter and on the CPU backend. The modules, inputs and XLA's outputs
are in tests/data/xla_optimized (written by its generate.py with JAX 0.10.2)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from xla_teach.api import execute
from xla_teach.hlo.parser import parse_hlo
from xla_teach.hlo.verifier import verify_module

DATA = Path(__file__).resolve().parents[1] / "data" / "xla_optimized"
PROGRAMS = sorted(p.stem for p in DATA.glob("*.txt"))


def test_the_data_is_there() -> None:
    assert len(PROGRAMS) >= 12


@pytest.mark.parametrize("backend", ["interpreter", "cpu"])
@pytest.mark.parametrize("name", PROGRAMS)
def test_xla_optimized_module_gives_xlas_results(name: str, backend: str) -> None:
    text = (DATA / f"{name}.txt").read_text()
    verify_module(parse_hlo(text))
    data = np.load(DATA / f"{name}.npz")
    args = [data[f"arg{i}"] for i in range(sum(1 for k in data.files if k.startswith("arg")))]
    want = [data[f"out{i}"] for i in range(sum(1 for k in data.files if k.startswith("out")))]
    got = execute(text, args, backend)
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert g.shape == w.shape and g.dtype == w.dtype, (g.dtype, g.shape, w.dtype, w.shape)
        if w.dtype.kind in "iub":
            np.testing.assert_array_equal(g, w)
        else:
            np.testing.assert_allclose(g, w, rtol=2e-5, atol=2e-6, equal_nan=True)
