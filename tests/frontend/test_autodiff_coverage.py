"""Every primitive the front end can record either has a reverse-mode rule or says why it has
none (``autodiff_rules.NO_GRADIENT``), so a new primitive fails here by name until it gets one;
and a cotangent that reaches one of the rule-less ones gets its reason, not a crash."""

from __future__ import annotations

import numpy as np
import pytest

import xla_teach
import xla_teach.numpy as xnp
from xla_teach.frontend import autodiff_rules, autodiff_rules_indexing, autodiff_rules_window  # noqa: F401
from xla_teach.frontend import primitives as P
from xla_teach.frontend.errors import CompilationError
from xla_teach.frontend.tracer import bind


def test_every_primitive_has_a_rule_or_a_reason_and_not_both() -> None:
    no_rule = sorted(name for name, prim in P.PRIMITIVES.items() if prim.vjp is None)
    assert no_rule == sorted(autodiff_rules.NO_GRADIENT), set(no_rule) ^ set(autodiff_rules.NO_GRADIENT)
    for name in autodiff_rules.NO_GRADIENT:
        assert P.PRIMITIVES[name].nondiff_reason


def test_a_gradient_through_a_bitcast_names_the_reason() -> None:
    def f(x: xnp.ndarray) -> xnp.ndarray:  # a float -> float bitcast (same width) that a cotangent reaches
        return xnp.sum(bind(P.bitcast_convert_p, x * 2.0, dtype=np.dtype(np.float32)))

    with pytest.raises(CompilationError, match="reinterprets the bits"):
        xla_teach.grad(f)(np.ones(3, np.float32))
