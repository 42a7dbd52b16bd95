"""Run every real XLA dump in tests/data/xla_samples on the interpreter and compare with the
outputs XLA computed (new sample folders join automatically)."""

from __future__ import annotations

import json
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from xla_teach.hlo.evaluator import HloEvaluator
from xla_teach.hlo.text.parser import parse_hlo

SAMPLES = Path(__file__).parents[2] / "tests" / "data" / "xla_samples"
PROGRAMS = sorted(p for p in SAMPLES.glob("*") if (p / "meta.json").is_file()) if SAMPLES.is_dir() else []
DUMPS = ["before_optimizations.txt", "after_optimizations.txt"]


def _stored(array: np.ndarray, hlo_type: str) -> np.ndarray:
    """bf16 arrays are stored as uint16 bit patterns."""
    if hlo_type.startswith("bf16") and array.dtype == np.uint16:
        return array.view(ml_dtypes.bfloat16)
    return array


@pytest.mark.skipif(not PROGRAMS, reason=f"no samples under {SAMPLES}")
@pytest.mark.parametrize("dump", DUMPS)
@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.name)
def test_sample_matches_xla(program: Path, dump: str) -> None:
    if not (program / dump).is_file():
        pytest.skip(f"{program.name} has no {dump}")
    meta = json.loads((program / "meta.json").read_text())
    inputs, outputs = np.load(program / "inputs.npz"), np.load(program / "outputs.npz")
    args = [_stored(inputs[p["key"]], p["hlo_type"]) for p in meta["parameters"]]
    module = parse_hlo((program / dump).read_text())
    results = HloEvaluator().evaluate_module(module, args)
    assert len(results) == len(meta["outputs"])
    tolerance = meta["tolerance"]
    for result, out in zip(results, meta["outputs"], strict=True):
        expected = _stored(outputs[out["key"]], out["hlo_type"])
        assert result.dtype == expected.dtype and result.shape == expected.shape, out["key"]
        np.testing.assert_allclose(result.astype(np.float64), expected.astype(np.float64),
                                   rtol=tolerance["rtol"], atol=tolerance["atol"], err_msg=f"{dump} {out['key']}")
