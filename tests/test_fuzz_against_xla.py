"""A sample of the differential fuzzer against real XLA (scripts/fuzz_against_xla.py): random
JAX programs over every op family and special values, XLA CPU's results against the CPU
backend's on the same HLO. Runs when JAX is installed (the `bench` extra); the script runs
thousands (docs/xla-compatibility.md records the counts)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

pytest.importorskip("jax", reason="JAX (XLA) is the oracle: pip install -e '.[bench]'")
ROOT = Path(__file__).resolve().parents[1]


def _fuzzer() -> ModuleType:
    spec = importlib.util.spec_from_file_location("fuzz_against_xla", ROOT / "scripts" / "fuzz_against_xla.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["fuzz_against_xla"] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_a_sample_of_random_programs_matches_xla_on_the_cpu_backend() -> None:
    result = _fuzzer().fuzz(60, seed=2026, backends=["cpu"], out=None, denormals=False, progress=False)
    counts = result["counts"]
    assert counts["programs"] == 60 and counts["skipped"] < 6
    assert counts["crash"] == 0 and counts["mismatch"] == 0, result["findings"]


def test_the_comparison_flags_a_wrong_answer_and_accepts_a_right_one() -> None:
    fuzz = _fuzzer()
    program = fuzz.Program("float32", [(3,)], [fuzz.Op("exp", (0,))])
    want = [np.array([1.0, np.nan, np.inf], np.float32)]
    assert fuzz.compare(program, want, [np.array([1.0, np.nan, np.inf], np.float32)]) is None
    assert fuzz.compare(program, want, [np.array([1.0, 0.0, np.inf], np.float32)]) is not None
    assert fuzz.compare(program, want, [np.array([1.0, np.nan, 3e38], np.float32)]) is not None
    assert fuzz.compare(program, want, [np.array([1.0, np.nan, np.inf], np.float64)]) is not None


def test_stretches_side_by_side_stop_at_the_deadline_and_a_hang_is_recorded(monkeypatch: pytest.MonkeyPatch) -> None:
    """``--jobs 2 --seconds S``: two stretches run at once and no program starts after S seconds
    (so far fewer than ``-n`` run); a stretch whose worker never answers is recorded as a hang at
    the last program it started (here a stand-in for the worker process that times out)."""
    import argparse
    import subprocess
    import time

    fuzz = _fuzzer()
    a = argparse.Namespace(n=400, seed=7, start=0, backends="cpu", denormals=False, chunk=50, jobs=2,
                           xla_platform="cpu", deadline=time.time() + 20)
    result = fuzz.run_side_by_side(a, None)
    assert 0 < result["counts"]["programs"] < 400 and result["seconds"] < 20 + 120
    assert result["counts"]["crash"] == 0

    def hangs(command, **kwargs):  # type: ignore[no-untyped-def]
        raise subprocess.TimeoutExpired(command, kwargs["timeout"], output="program 10\nprogram 11\n")

    monkeypatch.setattr(subprocess, "run", hangs)
    a.deadline, a.start, a.n = time.time() + 1, 10, 5
    hung = fuzz.run_in_workers(a, None)
    assert [c["index"] for c in hung["process_crashes"]] == [11] and "hang" in hung["process_crashes"][0]["detail"]
