"""Whole programs on the CPU backend against the reference interpreter (and XLA's own outputs):
every real-XLA sample, before and after XLA's optimizations, and every module of the HLO corpus."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.backends.backend_test_utils import (
    CORPUS,
    SAMPLE_PROGRAMS,
    assert_matches_xla,
    assert_same,
    load_sample,
    run_both,
    stored,
)
from xla_teach.api import compile_module


@pytest.mark.parametrize("dump", ["before_optimizations.txt", "after_optimizations.txt"])
@pytest.mark.parametrize("program", SAMPLE_PROGRAMS, ids=lambda p: p.name)
def test_sample_on_cpu_matches_xla(program: Path, dump: str) -> None:
    module, args, meta = load_sample(program, dump)
    got = compile_module(module, "cpu").execute(args)
    outputs = np.load(program / "outputs.npz")
    want = [stored(outputs[o["key"]], o["hlo_type"]) for o in meta["outputs"]]
    assert_matches_xla(got, want, module, args, {"rtol": meta["tolerance"]["rtol"], "atol": meta["tolerance"]["atol"]},
                       f"{program.name}/{dump}")


@pytest.mark.parametrize("path", CORPUS, ids=lambda p: p.stem)
def test_corpus_on_cpu_matches_interpreter(path: Path) -> None:
    got, want = run_both(path.read_text(), None, "cpu")
    assert_same(got, want, what=path.stem)
