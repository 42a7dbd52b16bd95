"""Hidden checks of the ``autodiff_rule`` exercise: ``atan2``'s vector-Jacobian product.

In the student's process the rule replaces xla_teach's own for the ``atan2`` primitive, and
``xla_teach.grad`` differentiates the programs of ``student_tasks.ATAN2_PROGRAMS``; the gradients
come back here and are compared with central finite differences of the same programs run with
NumPy in float64 (the oracle needs no derivative at all).
"""

from __future__ import annotations

from functools import partial
from typing import Any

import numpy as np

from xla_teach.exercises.exercise import Exercise
from xla_teach.exercises.grading import CaseFailed, Check
from xla_teach.exercises.sandbox import StudentProcess
from xla_teach.exercises.student_tasks import ATAN2_PROGRAMS

ENTRY_POINT = "atan2_vjp"
STEP = 1e-6


def finite_difference_gradients(program: str, y: np.ndarray, x: np.ndarray, w: np.ndarray) -> list[np.ndarray]:
    """Central differences of the program (NumPy, float64) with respect to y and x."""
    fn = ATAN2_PROGRAMS[program]
    grads = []
    for which in range(2):
        args = [y.astype(np.float64), x.astype(np.float64)]
        g = np.zeros_like(args[which])
        for k in np.ndindex(*args[which].shape):
            hi = [a.copy() for a in args]
            lo = [a.copy() for a in args]
            hi[which][k] += STEP
            lo[which][k] -= STEP
            g[k] = (fn(np, *hi, w) - fn(np, *lo, w)) / (2 * STEP)
        grads.append(g)
    return grads


def _inputs(seed: int, shape: tuple[int, ...], quadrants: bool = False) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(seed)
    y, x = rng.uniform(0.3, 2.0, shape), rng.uniform(0.3, 2.0, shape)
    if quadrants:  # every quadrant: negative x and y too
        y *= rng.choice([-1.0, 1.0], shape)
        x *= rng.choice([-1.0, 1.0], shape)
    return y, x, rng.uniform(-1.0, 1.0, shape)


def _gradients(solution: StudentProcess, program: str, y: np.ndarray, x: np.ndarray, w: np.ndarray) -> Any:
    """The gradients, computed here by the grader's interpreter from the HLO the student's rule
    built in the student's process (traced there): nothing else in that process can answer."""
    from xla_teach.exercises.hlo_checks import evaluation_cost
    from xla_teach.hlo.evaluator import evaluate_module
    from xla_teach.hlo.text.parser import parse_hlo

    built = solution.call("atan2_gradient_hlo", entry=ENTRY_POINT, program=program, y=y, x=x, w=w)
    text = built.get("hlo") if isinstance(built, dict) else None
    if not isinstance(text, str):
        raise CaseFailed(f"grad of program '{program}' gave no gradient program")
    try:
        module = parse_hlo(text)
    except Exception as err:  # noqa: BLE001 - whatever came back, the case fails with the reason
        raise CaseFailed(f"the gradient program of '{program}' is not HLO: {err}") from None
    if evaluation_cost(module) > 1e7:
        raise CaseFailed(f"the gradient program of '{program}' would take the grader too long to run")
    outputs = evaluate_module(module, [y, x])
    return [np.asarray(g) for g in outputs]


def _case(program: str, seed: int, shape: tuple[int, ...], solution: StudentProcess, quadrants: bool = False) -> None:
    y, x, w = _inputs(seed, shape, quadrants)
    got = _gradients(solution, program, y, x, w)
    want = finite_difference_gradients(program, y, x, w)
    if not (isinstance(got, list) and len(got) == 2 and all(isinstance(g, np.ndarray) for g in got)):
        raise CaseFailed(f"grad of program '{program}' gave no gradients")
    for name, g, fd in zip(("y", "x"), got, want, strict=True):
        if g.shape != fd.shape:
            raise CaseFailed(f"program '{program}': the gradient for {name} has shape {g.shape}, expected {fd.shape}")
        if not np.allclose(g, fd, rtol=1e-4, atol=1e-6):
            k = int(np.argmax(np.abs(g - fd)))
            raise CaseFailed(f"program '{program}' (see the docstring of atan2_vjp): d/d{name} at y={y.flat[k]:.4g}, "
                             f"x={x.flat[k]:.4g} is {g.flat[k]:.6g}, finite differences give {fd.flat[k]:.6g}")


def make_checks(seed: int = 0) -> list[Check]:
    base = 1000 * seed
    return [
        Check("partial-derivatives", "sum(atan2(y, x)): both partial derivatives, first quadrant and all four",
              [partial(_case, "sum", base + k, (5,), quadrants=q) for k, q in enumerate((False, True, True))]),
        Check("uses-the-cotangent", "sum(w * atan2(y, x)): each input's cotangent is ct times its partial",
              [partial(_case, "weighted", base + 10 + k, s, quadrants=True) for k, s in enumerate(((4,), (2, 3)))]),
        Check("chain-rule", "atan2 inside other functions, on both sides of it",
              [partial(_case, "chain", base + 20 + k, (6,), quadrants=True) for k in range(2)]),
        Check("differentiable-rule", "grad of grad: the rule, written with xla_teach.numpy, is traced and "
              "differentiated again",
              [partial(_case, "second", base + 30 + k, (4,), quadrants=True) for k in range(2)]),
    ]


EXERCISE = Exercise(
    name="autodiff_rule",
    title="A reverse-mode rule: atan2's vector-Jacobian product",
    teaches="What a VJP rule is (cotangent in, one cotangent per input out), how grad strings the rules "
            "together into a backward pass of HLO, and why rules are written with traced operations: so "
            "that grad of grad works. Checked against finite differences, no derivative needed.",
    entry_points=[(ENTRY_POINT, "function")],
    make_checks=make_checks,
)
