"""Hidden checks of the ``elemental_emitter`` exercise: emit LLVM IR for ``softplus``.

The student's ``emit_softplus(b, x)`` builds the IR of one scalar. The grader wraps it in
a loop kernel ``out[i] = softplus(in[i])`` (what the CPU backend's elemental emitter does
for every elementwise op), compiles it with the backend's JIT
(:class:`xla_teach.backends.cpu.jit.CpuJit`, LLVM ``-O2``) and compares with NumPy
computed in higher precision, in units in the last place (ulp).

Before anything runs, the IR is checked: the emitter must return a value of the input's
type, and may only call LLVM intrinsics or functions the process really has (a call to a
missing function would abort the JIT, and with it the grader).
"""

from __future__ import annotations

from functools import partial

import numpy as np
from llvmlite import ir

from xla_teach.exercises.exercise import Exercise
from xla_teach.exercises.grading import CaseFailed, Check
from xla_teach.exercises.sandbox import StudentProcess

ENTRY_POINT = "emit_softplus"
I64 = ir.IntType(64)
PTR = ir.PointerType()
_IR_TYPES = {np.dtype(np.float32): ir.FloatType(), np.dtype(np.float64): ir.DoubleType()}
MAX_ULP = 4  # the reference solution stays within 2; libm-quality code within 1


def softplus_reference(x: np.ndarray) -> np.ndarray:
    """``log(1 + e^x)`` in more precision than ``x`` has, rounded to ``x``'s type."""
    wide = np.float64 if x.dtype == np.float32 else np.longdouble
    with np.errstate(over="ignore", invalid="ignore"):
        return np.logaddexp(wide(0), x.astype(wide)).astype(x.dtype)


def ulp_distance(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """How many representable numbers lie between ``got`` and ``want`` (+0 and -0 are one number;
    NaN is 0 ulp from NaN and infinitely far from anything else)."""
    signed = np.int32 if got.dtype == np.float32 else np.int64

    def ordered(a: np.ndarray) -> np.ndarray:
        """The float's bits as an integer that grows with the float (negatives mirrored below 0)."""
        bits = a.view(signed).astype(np.int64)
        return np.where(bits < 0, np.iinfo(signed).min - bits, bits)

    g, w = ordered(got), ordered(want)
    same_sign = (g >= 0) == (w >= 0)
    with np.errstate(over="ignore"):
        exact = np.abs(np.where(same_sign, g - w, 0)).astype(np.float64)  # no overflow: same sign
    distance = np.where(same_sign, exact, np.abs(g.astype(np.float64)) + np.abs(w.astype(np.float64)))
    nan_got, nan_want = np.isnan(got), np.isnan(want)
    return np.where(nan_got | nan_want, np.where(nan_got & nan_want, 0.0, np.inf), distance)


def _samples(dtype: type, kind: str, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    big = {np.float32: 3e38, np.float64: 1e308}[dtype]
    overflow = {np.float32: 89.0, np.float64: 710.0}[dtype]  # where e^x overflows
    if kind == "moderate":
        values = np.concatenate([rng.uniform(-20, 20, 2000), np.linspace(-3, 3, 97), rng.uniform(-1e-3, 1e-3, 50)])
    elif kind == "large_positive":
        values = np.concatenate([np.exp(rng.uniform(np.log(overflow), np.log(big), 500)), [overflow, big]])
    elif kind == "large_negative":
        values = -np.concatenate([np.exp(rng.uniform(np.log(overflow), np.log(big), 500)), [overflow, 120.0]])
    else:
        values = np.array([0.0, -0.0, np.inf, -np.inf, np.nan])
    return values.astype(dtype)


def _accuracy_case(dtype: type, kind: str, seed: int, solution: StudentProcess) -> None:
    x = _samples(dtype, kind, seed)
    got = _softplus_of(solution, dtype, x)
    want = softplus_reference(x)
    err = ulp_distance(got, want)
    bad = np.flatnonzero(err > (0 if kind == "special" else MAX_ULP))
    if bad.size:
        name = np.dtype(dtype).name
        rows = "\n".join(f"  softplus({x[k]}) = {got[k]}, expected {want[k]} ({err[k]:.3g} ulp)"
                         for k in bad[np.argsort(-err[bad])][:4])
        hint = {
            "large_positive": "\n  hint: e^x overflows to inf here; for large x, softplus(x) = x + log1p(e^-x)",
            "large_negative": "\n  hint: for very negative x, softplus(x) is e^x (tiny, or 0)",
            "special": "\n  hint: softplus(+-0) = log 2, softplus(inf) = inf, softplus(-inf) = 0, NaN stays NaN",
        }.get(kind, "")
        raise CaseFailed(f"{bad.size} of {x.size} {name} inputs off by more than "
                         f"{0 if kind == 'special' else MAX_ULP} ulp; the worst:\n{rows}{hint}")


def _softplus_of(solution: StudentProcess, dtype: type, x: np.ndarray) -> np.ndarray:
    """The student's kernel on ``x``: its IR is built in the student's process, then compiled and
    run in the grader's runner, which never loads the student's code (so nothing the student's
    code does in its own process -- answering with NumPy, say -- can stand in for the kernel)."""
    built = solution.call("emit_map_kernel", entry=ENTRY_POINT, dtype=np.dtype(dtype).name)
    ir_text = built.get("ir") if isinstance(built, dict) else None
    if not isinstance(ir_text, str):
        raise CaseFailed("the grader got no kernel IR back from your emitter")
    result = solution.runner().call("run_map_kernel", ir=ir_text, dtype=np.dtype(dtype).name, x=x)
    got = result.get("y") if isinstance(result, dict) else None
    if not isinstance(got, np.ndarray) or got.shape != x.shape or got.dtype != x.dtype:
        raise CaseFailed(f"the kernel gave no {np.dtype(dtype).name} result of {x.size} elements")
    return got


def _compiles_case(solution: StudentProcess) -> None:
    for dtype in (np.float32, np.float64):
        _softplus_of(solution, dtype, np.zeros(1, dtype))


def make_checks(seed: int = 0) -> list[Check]:
    base = 1000 * seed

    def accuracy(dtype: type, kind: str, seeds: tuple[int, ...]) -> list[partial[None]]:
        return [partial(_accuracy_case, dtype, kind, base + s) for s in seeds]

    return [
        Check("compiles", "emits valid IR of the input's type, for f32 and f64", [_compiles_case]),
        Check("moderate-inputs", "within 4 ulp of log(1 + e^x) for |x| <= 20 (f32 twice, f64 once)",
              accuracy(np.float32, "moderate", (1, 2)) + accuracy(np.float64, "moderate", (3,))),
        Check("large-positive-inputs", "no overflow: softplus(x) ~ x where e^x is inf (f32 and f64)",
              accuracy(np.float32, "large_positive", (4,)) + accuracy(np.float64, "large_positive", (5,))),
        Check("large-negative-inputs", "softplus(x) ~ e^x, down to 0, for very negative x",
              accuracy(np.float32, "large_negative", (6,))),
        Check("special-values", "exact for +-0, +-inf and NaN (f32 and f64)",
              accuracy(np.float32, "special", (0,)) + accuracy(np.float64, "special", (0,))),
    ]


EXERCISE = Exercise(
    name="elemental_emitter",
    title="The elemental IR emitter of a new op: softplus",
    teaches="How an elementwise HLO op becomes LLVM IR for one element (llvmlite's IRBuilder, "
            "intrinsics, selects instead of branches so loops vectorize), and why the textbook "
            "formula log(1 + e^x) is not the one to emit: overflow, cancellation and special values.",
    entry_points=[(ENTRY_POINT, "function")],
    make_checks=make_checks,
)
