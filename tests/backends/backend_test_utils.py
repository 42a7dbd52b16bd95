"""Shared helpers for backend tests: load the real-XLA samples and the HLO corpus, run a module on a
backend and on the reference interpreter, and compare."""

from __future__ import annotations

import json
import os
from pathlib import Path

import ml_dtypes
import numpy as np

from xla_teach.api import compile_module
from xla_teach.hlo.evaluator import HloEvaluator
from xla_teach.hlo.ir import HloModule
from xla_teach.hlo.parser import parse_hlo
from xla_teach.tools.fake_data import fake_arguments

ROOT = Path(__file__).parents[2]
# Real XLA dumps with inputs and outputs (JAX 0.10.2 on the CPU), kept in the repository;
# XLA_TEACH_SAMPLES names another folder of the same form.
SAMPLES = Path(os.environ.get("XLA_TEACH_SAMPLES", ROOT / "tests" / "data" / "xla_samples"))
SAMPLE_PROGRAMS = sorted(p for p in SAMPLES.glob("*") if (p / "meta.json").is_file()) if SAMPLES.is_dir() else []
CORPUS = sorted((ROOT / "tests" / "corpus").glob("*.hlo"))


def stored(array: np.ndarray, hlo_type: str) -> np.ndarray:
    """bf16 arrays are stored in the samples as uint16 bit patterns."""
    if hlo_type.startswith("bf16") and array.dtype == np.uint16:
        return array.view(ml_dtypes.bfloat16)
    return array


def load_sample(program: Path, dump: str = "before_optimizations.txt") -> tuple[HloModule, list[np.ndarray], dict]:
    meta = json.loads((program / "meta.json").read_text())
    inputs = np.load(program / "inputs.npz")
    args = [stored(inputs[p["key"]], p["hlo_type"]) for p in meta["parameters"]]
    return parse_hlo((program / dump).read_text()), args, meta


def tolerance_for(dtype: np.dtype) -> dict[str, float]:
    if dtype in (np.dtype(ml_dtypes.bfloat16),):
        return {"rtol": 2e-2, "atol": 2e-2}
    if dtype == np.float16:
        return {"rtol": 2e-3, "atol": 2e-3}
    if dtype == np.float32:
        return {"rtol": 2e-5, "atol": 1e-5}
    if dtype == np.float64:
        return {"rtol": 1e-12, "atol": 1e-12}
    return {"rtol": 0, "atol": 0}


def assert_same(got: list[np.ndarray], want: list[np.ndarray], tol: dict[str, float] | None = None,
                what: str = "") -> None:
    assert len(got) == len(want), f"{what}: {len(got)} outputs, expected {len(want)}"
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        g, w = np.asarray(g), np.asarray(w)
        assert g.dtype == w.dtype and g.shape == w.shape, f"{what} out{i}: {g.dtype}{g.shape} vs {w.dtype}{w.shape}"
        t = tol or tolerance_for(w.dtype)
        if w.dtype.kind in "fc" or w.dtype in (np.dtype(ml_dtypes.bfloat16),):
            np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), equal_nan=True,
                                       err_msg=f"{what} out{i}", **t)
        else:
            np.testing.assert_array_equal(g, w, err_msg=f"{what} out{i}")


def run_both(module: HloModule | str, args: list[np.ndarray] | None, backend: str,
             seed: int = 0) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Compile and run ``module`` on ``backend`` and on the interpreter (fake data if no args)."""
    if isinstance(module, str):
        module = parse_hlo(module)
    if args is None:
        args = fake_arguments(module, seed=seed)
    # XLA's CPU runtime flushes denormals, its GPU backend keeps them (--xla_gpu_ftz=false).
    reference = HloEvaluator(flush_denormals=backend == "cpu").evaluate_module(module.clone() if hasattr(module, "clone") else module, args)
    executable = compile_module(module, backend)
    return executable.execute(list(args)), reference
