"""Exercise `autodiff_rule`: the reverse-mode rule of ``atan2``.

``xla_teach.grad`` differentiates a traced program by running it backwards: each primitive has a
*vector-Jacobian product* rule that turns the cotangent of its output into cotangents of its
inputs (``xla_teach/frontend/autodiff_rules.py``; JAX's ``defvjp``). Write the rule of
``atan2(y, x)``, the angle of the point (x, y)::

    d atan2(y, x) / dy =  x / (x^2 + y^2)
    d atan2(y, x) / dx = -y / (x^2 + y^2)

``atan2_vjp(ct, inputs, out)`` gets ``ct``, the cotangent of the output (an array of the
output's shape), ``inputs == [y, x]`` and ``out == atan2(y, x)``, all traced arrays, and returns
``[ct_y, ct_x]``: the cotangent times each partial derivative, element by element. Write it
with ``xla_teach.numpy`` functions (``xnp.multiply``, ``+``, ``/``, ``-``...), not NumPy: the
rule itself is traced into HLO, so that ``grad`` of a ``grad`` differentiates it again.

The grader installs your rule in place of xla_teach's, computes gradients of programs that use
``atan2`` (alone, weighted, inside other functions, and a second derivative) and compares them
with central finite differences in float64. Chapter 09 of the notebooks shows the backward pass
of a program as HLO, rule by rule.

Grade it:  xla-teach grade autodiff_rule path/to/autodiff_rule.py
"""

from __future__ import annotations

from typing import Any

import xla_teach.numpy as xnp


def atan2_vjp(ct: Any, inputs: list[Any], out: Any) -> list[Any]:
    y, x = inputs
    # TODO: both partial derivatives share the denominator x^2 + y^2
    raise NotImplementedError("TODO (autodiff_rule): both partial derivatives share the denominator x^2 + y^2")
