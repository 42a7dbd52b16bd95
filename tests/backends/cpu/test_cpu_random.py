"""Differential testing: random modules (tests/hypothesis_modules.py) compiled by the CPU backend
must compute what the reference interpreter computes.

Floats are compared with a tolerance scaled to the result's magnitude: the CPU's math library and
the interpreter's NumPy differ by an ulp or two, reductions add in another order, and random chains
of ops can amplify that. Integers must match exactly (XLA's wrap-around, division-by-zero and shift
rules are the same on both).
"""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings

from tests.hypothesis_modules import hlo_modules
from xla_teach.api import compile_module
from xla_teach.hlo.evaluator import HloEvaluator
from xla_teach.hlo.ir import HloModule
from xla_teach.tools.fake_data import fake_arguments


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(hlo_modules())
def test_random_modules_cpu_matches_interpreter(module: HloModule) -> None:
    args = fake_arguments(module, seed=1)
    want = HloEvaluator().evaluate_module(module, args)
    got = compile_module(module, "cpu").execute(args)
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        g, w = np.asarray(g), np.asarray(w)
        assert g.dtype == w.dtype and g.shape == w.shape, module.to_text()
        if w.dtype.kind == "f":
            finite = np.isfinite(w)
            scale = float(np.max(np.abs(w[finite]), initial=1.0))
            np.testing.assert_allclose(g, w, rtol=1e-3, atol=1e-5 * scale, equal_nan=True,
                                       err_msg=module.to_text())
        else:
            np.testing.assert_array_equal(g, w, err_msg=module.to_text())
