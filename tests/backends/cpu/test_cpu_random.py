"""Differential testing: random modules (tests/hypothesis_modules.py) compiled by the CPU backend
must compute what the reference interpreter computes.

The modules cover every elementwise opcode, twelve element types (four floats, eight integers),
``while`` loops, calls and tuples, and each runs twice: on random arguments and on "special"
ones (NaN, infinities, -0.0, integer minimum and maximum), which exercise the integer rules
(wrap-around, division by zero, shifts) and the convert saturation rules the CPU must share
with the interpreter.

Floats are compared with a tolerance scaled to the result's magnitude: the CPU's math library and
the interpreter's NumPy differ by an ulp or two, reductions add in another order, and random chains
of ops can amplify that. For f16/bf16 the absolute slack also follows the inputs' magnitude: a
16-bit sum rounds each partial sum, so a result that cancels moves by an ulp of the terms. f16 is computed in f32 and rounded after every op on both sides, but a
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
from xla_teach.tools.bugs.fake_data import fake_arguments

# Special inputs put 1e30 into f16 (it becomes inf, as intended), and bitcast-convert makes
# signalling NaNs, whose widening NumPy reports as an invalid cast.
pytestmark = pytest.mark.filterwarnings("ignore:overflow encountered in cast:RuntimeWarning",
                                        "ignore:invalid value encountered in cast:RuntimeWarning")
RTOL = {"float16": 1e-2, "bfloat16": 4e-2, "float32": 1e-3, "float64": 1e-3}
HALF_TYPES = ("float16", "bfloat16")


def _assert_matches(got: list, want: list, module: HloModule, args: list) -> None:
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        g, w = np.asarray(g), np.asarray(w)
        what = f"{module.to_text()}\narguments: {args}"
        assert g.dtype == w.dtype and g.shape == w.shape, what
        if w.dtype.name in RTOL:  # bfloat16 (ml_dtypes) is not of NumPy's kind "f"
            rtol, half = RTOL[w.dtype.name], w.dtype.name in HALF_TYPES
            g, w = g.astype(np.float64), w.astype(np.float64)
            finite = np.isfinite(w)
            scale = float(np.max(np.abs(w[finite]), initial=1.0))
            atol = rtol * 1e-2 * scale
            if half:
                # A 16-bit sum rounds every partial sum, whose size is that of the inputs, not of
                # the result: summed in another order, a result that cancels (0.05 out of terms
                # near 1) moves by an ulp of the inputs. So the slack is relative to them.
                inputs = [np.asarray(a, np.float64) for a in args if np.asarray(a).dtype.name in RTOL]
                atol = max(atol, rtol * max((float(np.max(np.abs(a[np.isfinite(a)]), initial=0.0))
                                             for a in inputs), default=0.0))
            np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, equal_nan=True, err_msg=what)
        else:
            np.testing.assert_array_equal(g, w, err_msg=what)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(hlo_modules())
def test_random_modules_cpu_matches_interpreter(module: HloModule) -> None:
    executable = compile_module(module, "cpu")
    for args in (fake_arguments(module, seed=1), special_inputs(module)):
        want = HloEvaluator().evaluate_module(module, args)
        _assert_matches(executable.execute(args), want, module, args)
