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
from xla_teach.hlo.evaluator.error_bounds import (
    Bounded,
    BoundsUnavailable,
    error_bounds,
    outside_bound,
    unknown_bound,
)
from xla_teach.hlo.ir import HloModule
from xla_teach.hlo.text.parser import parse_hlo
from xla_teach.tools.bugs.fake_data import fake_arguments

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


class Reference(list):
    """The interpreter's outputs of ``module`` on ``args``, which also knows how far a correct
    implementation may be from the exact result (:mod:`xla_teach.hlo.evaluator.error_bounds`)."""

    def __init__(self, outputs: list[np.ndarray], module: HloModule, args: list[np.ndarray]) -> None:
        super().__init__(outputs)
        self.module, self.args = module.clone(), list(args)  # the compiler may change ``module``
        self._bounds: list[Bounded] | None | bool = False

    @property
    def bounds(self) -> list[Bounded] | None:
        """One :class:`Bounded` per output, or None when the module has an op the analysis refuses."""
        if self._bounds is False:
            try:
                self._bounds = error_bounds(self.module, self.args)
            except BoundsUnavailable:
                self._bounds = None
        return self._bounds  # type: ignore[return-value]


def reference(module: HloModule | str, args: list[np.ndarray], flush_denormals: bool = True) -> Reference:
    """The interpreter's outputs of ``module`` on ``args``, with their error bounds."""
    module = parse_hlo(module) if isinstance(module, str) else module
    outputs = HloEvaluator(flush_denormals=flush_denormals).evaluate_module(module.clone(), args)
    return Reference(outputs, module, args)


def assert_same(got: list[np.ndarray], want: list[np.ndarray], tol: dict[str, float] | None = None,
                what: str = "") -> None:
    """``got`` agrees with ``want``. When ``want`` is a :class:`Reference` and no ``tol`` is given,
    each float (and each result computed from floats) must lie within its rounding-error bound of
    the exact value -- a tolerance from the terms of every sum, right on any CPU and any BLAS --
    and so must the interpreter's own result; where the bound is unknown, and otherwise, the
    dtype's usual tolerance (or ``tol``) against ``want`` applies."""
    assert len(got) == len(want), f"{what}: {len(got)} outputs, expected {len(want)}"
    bounds = want.bounds if isinstance(want, Reference) and tol is None else None
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        g, w = np.asarray(g), np.asarray(w)
        assert g.dtype == w.dtype and g.shape == w.shape, f"{what} out{i}: {g.dtype}{g.shape} vs {w.dtype}{w.shape}"
        if bounds is not None:
            assert_within_bound(g, w, bounds[i], f"{what} out{i}")
            continue
        t = tol or tolerance_for(w.dtype)
        if w.dtype.kind in "fc" or w.dtype in (np.dtype(ml_dtypes.bfloat16),):
            np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), equal_nan=True,
                                       err_msg=f"{what} out{i}", **t)
        else:
            np.testing.assert_array_equal(g, w, err_msg=f"{what} out{i}")


def assert_within_bound(got: np.ndarray, want: np.ndarray, bounded: Bounded, what: str = "",
                        tol: dict[str, float] | None = None, other: str = "interpreter") -> None:
    """Every element of ``got`` and of ``want`` (the ``other`` implementation's result: the
    interpreter's -- if it is outside, the bound is wrong -- or XLA's) within ``bounded``'s bound of
    the exact value; elements with an unknown bound compared with ``want`` at ``tol`` (or the
    dtype's tolerance)."""
    oracle = " (the interpreter is the oracle: the bound is wrong)" if other == "interpreter" else ""
    for name, result in (("result", got), (f"{other}'s result{oracle}", want)):
        bad = outside_bound(result, bounded)
        if bad.any():
            at = tuple(int(x) for x in np.argwhere(bad)[0])
            raise AssertionError(
                f"{what}: {int(bad.sum())} of {bad.size} elements of the {name} are outside the rounding-error "
                f"bound; first at {at}: got {got[at]!r}, {other} {want[at]!r}, exact {bounded.value[at]!r}, "
                f"bound {bounded.bound[at]!r}")
    unknown = unknown_bound(bounded)
    if unknown.any():
        assert_same([got[unknown]], [want[unknown]], tol, f"{what} (elements without a bound)")


def assert_matches_xla(got: list[np.ndarray], xla: list[np.ndarray], module: HloModule, args: list[np.ndarray],
                      tol: dict[str, float], what: str = "") -> None:
    """``got`` and XLA's recorded outputs both within the rounding-error bounds of ``module`` on
    ``args`` (two correct implementations, each free to sum in its own order); where the analysis
    has no bound, ``got`` within ``tol`` (the sample's recorded tolerance) of XLA's."""
    try:
        bounds: list[Bounded] | None = error_bounds(module, args)
    except BoundsUnavailable:
        bounds = None
    assert len(got) == len(xla), f"{what}: {len(got)} outputs, XLA gave {len(xla)}"
    for i, (g, x) in enumerate(zip(got, xla, strict=True)):
        g, x = np.asarray(g), np.asarray(x)
        assert g.dtype == x.dtype and g.shape == x.shape, f"{what} out{i}: {g.dtype}{g.shape} vs XLA's {x.dtype}{x.shape}"
        if bounds is None:
            assert_same([g], [x], tol, f"{what} out{i}")
        else:
            assert_within_bound(g, x, bounds[i], f"{what} out{i}", tol, other="XLA")


def run_both(module: HloModule | str, args: list[np.ndarray] | None, backend: str,
             seed: int = 0) -> tuple[list[np.ndarray], Reference]:
    """Compile and run ``module`` on ``backend`` and on the interpreter (fake data if no args)."""
    if isinstance(module, str):
        module = parse_hlo(module)
    if args is None:
        args = fake_arguments(module, seed=seed)
    # XLA's CPU runtime flushes denormals, its GPU backend keeps them (--xla_gpu_ftz=false).
    want = reference(module, list(args), flush_denormals=backend == "cpu")
    executable = compile_module(module, backend)
    return executable.execute(list(args)), want
