"""Random modules (tests/hypothesis_modules.py) through every pass and the full pipeline: the
interpreter must give the same results before and after, and the verifier must accept the result."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from tests.hypothesis_modules import hlo_modules
from tests.passes.pass_test_utils import assert_same_results, special_inputs
from xla_teach.hlo.evaluator import evaluate_module
from xla_teach.hlo.ir import HloModule
from xla_teach.hlo.verifier import verify_module
from xla_teach.passes.pass_base import HloPass, PassOptions
from xla_teach.passes.pipeline import default_pipeline, simplification_passes
from xla_teach.passes.simplifiers.call_inliner import CallInliner

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])

PASSES: dict[str, Callable[[], HloPass]] = {p.name: type(p) for p in simplification_passes()}
PASSES["call-inliner"] = CallInliner


def _check(original: HloModule, optimize: Callable[[HloModule], object]) -> None:
    module = original.clone()
    optimize(module)
    verify_module(module)
    assert_same_results(original, module, rtol=1e-4)
    # NaN, infinities, -0.0 and integer extremes too (signed zeros compare equal here).
    args = special_inputs(original)
    for want, got in zip(evaluate_module(original, args), evaluate_module(module, args), strict=True):
        np.testing.assert_allclose(np.asarray(got, np.float64), np.asarray(want, np.float64), rtol=1e-4,
                                   equal_nan=True)


@pytest.mark.parametrize("pass_name", sorted(PASSES))
@SETTINGS
@given(module=hlo_modules())
def test_single_pass_preserves_results(pass_name: str, module: HloModule) -> None:
    _check(module, PASSES[pass_name]().run)


@SETTINGS
@given(module=hlo_modules())
def test_default_pipeline_preserves_results(module: HloModule) -> None:
    _check(module, lambda m: default_pipeline().run(m, PassOptions(record=False)))


@SETTINGS
@given(module=hlo_modules())
def test_simplification_reaches_a_fixed_point(module: HloModule) -> None:
    """After the pipeline's simplification, running every simplifier once more changes nothing."""
    module = module.clone()
    pipeline = default_pipeline()
    pipeline.find("optimization").run(module, PassOptions(record=False))
    for p in simplification_passes():
        assert not p.run(module), f"{p.name} still changed the module: {p.notes}"
