"""Differential testing: random modules (tests/hypothesis_modules.py) compiled by the CPU backend
must compute what the reference interpreter computes.

The modules cover every elementwise opcode, twelve element types (four floats, eight integers),
``while`` loops, calls and tuples, and each runs twice: on random arguments and on "special"
ones (NaN, infinities, -0.0, integer minimum and maximum), which exercise the integer rules
(wrap-around, division by zero, shifts) and the convert saturation rules the CPU must share
with the interpreter.

Floats are compared with a tolerance scaled to the result's magnitude: the CPU's math library and
the interpreter's NumPy differ by an ulp or two, reductions add in another order, and random chains
of ops can amplify that. f16 is computed in f32 and rounded after every op on both sides, but a
one-ulp difference before the rounding can still move an f16 result by one f16 ulp. Integers and
predicates must match exactly.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from tests.hypothesis_modules import hlo_modules
from tests.passes.pass_test_utils import special_inputs
from xla_teach.api import compile_module
from xla_teach.hlo.evaluator import HloEvaluator
from xla_teach.hlo.ir import HloModule
from xla_teach.tools.fake_data import fake_arguments

# Special inputs put 1e30 into f16 (it becomes inf, as intended), and bitcast-convert makes
# signalling NaNs, whose widening NumPy reports as an invalid cast.
pytestmark = pytest.mark.filterwarnings("ignore:overflow encountered in cast:RuntimeWarning",
                                        "ignore:invalid value encountered in cast:RuntimeWarning")
RTOL = {"float16": 1e-2, "bfloat16": 4e-2, "float32": 1e-3, "float64": 1e-3}


def _assert_matches(got: list, want: list, module: HloModule, args: list) -> None:
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        g, w = np.asarray(g), np.asarray(w)
        what = f"{module.to_text()}\narguments: {args}"
        assert g.dtype == w.dtype and g.shape == w.shape, what
        if w.dtype.name in RTOL:  # bfloat16 (ml_dtypes) is not of NumPy's kind "f"
            rtol = RTOL[w.dtype.name]
            g, w = g.astype(np.float64), w.astype(np.float64)
            finite = np.isfinite(w)
            scale = float(np.max(np.abs(w[finite]), initial=1.0))
            np.testing.assert_allclose(g, w, rtol=rtol, atol=rtol * 1e-2 * scale, equal_nan=True, err_msg=what)
        else:
            np.testing.assert_array_equal(g, w, err_msg=what)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(hlo_modules())
def test_random_modules_cpu_matches_interpreter(module: HloModule) -> None:
    executable = compile_module(module, "cpu")
    for args in (fake_arguments(module, seed=1), special_inputs(module)):
        want = HloEvaluator().evaluate_module(module, args)
        _assert_matches(executable.execute(args), want, module, args)
