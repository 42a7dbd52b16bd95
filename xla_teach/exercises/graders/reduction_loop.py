"""Hidden checks of the ``reduction_loop`` exercise: the loop nest of a row-sum kernel in LLVM IR.

The student's ``emit_row_sum`` builds the body of ``void kernel(ptr dst, ptr src, i64 rows, i64
cols)`` in the student's process, where it is verified, compiled with the CPU backend's JIT and run
on the grader's arrays (``student_tasks.row_sums``). The sums come back here and are compared, bit
for bit, with a sequential float32 sum (``np.cumsum`` along the row accumulates in index order).
"""

from __future__ import annotations

from functools import partial

import numpy as np

from xla_teach.exercises.exercise import Exercise
from xla_teach.exercises.grading import CaseFailed, Check
from xla_teach.exercises.sandbox import StudentProcess

ENTRY_POINT = "emit_row_sum"


def sequential_row_sums(x: np.ndarray) -> np.ndarray:
    """Each row's elements added in index order, in float32 (0 for an empty row)."""
    if x.shape[1] == 0:
        return np.zeros(x.shape[0], np.float32)
    return np.cumsum(x, axis=1, dtype=np.float32)[:, -1].astype(np.float32)


def _values(rows: int, cols: int, seed: int, spread: bool = False) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((rows, cols)).astype(np.float32)
    if spread:  # magnitudes that make the order of the additions visible in the last bits
        x *= np.float32(10.0) ** rng.integers(-4, 5, (rows, cols)).astype(np.float32)
    return x


def _case(rows: int, cols: int, seed: int, solution: StudentProcess, spread: bool = False) -> None:
    x = _values(rows, cols, seed, spread)
    # The IR is built in the student's process and run in the grader's runner (see elemental_emitter).
    built = solution.call("emit_row_sum_kernel", entry=ENTRY_POINT)
    ir_text = built.get("ir") if isinstance(built, dict) else None
    if not isinstance(ir_text, str):
        raise CaseFailed("the grader got no kernel IR back from your emit_row_sum")
    result = solution.runner().call("run_row_sum_kernel", ir=ir_text, x=x)
    got = result.get("y") if isinstance(result, dict) else None
    want = sequential_row_sums(x)
    if not isinstance(got, np.ndarray) or got.shape != want.shape or got.dtype != np.float32:
        raise CaseFailed(f"the kernel gave no float32 result of {rows} row sums for an f32[{rows},{cols}] input")
    if got.tobytes() != want.tobytes():
        bad = int(np.flatnonzero(got.view(np.int32) != want.view(np.int32))[0])
        hint = ""
        if np.isclose(got[bad], want[bad], rtol=1e-5, atol=1e-6):
            hint = " (close: were the elements added in another order than src[r, 0], src[r, 1], ...?)"
        raise CaseFailed(f"f32[{rows},{cols}]: row {bad} sums to {got[bad]!r}, expected {want[bad]!r}{hint}")


def make_checks(seed: int = 0) -> list[Check]:
    base = 1000 * seed
    return [
        Check("sums-rows", "the sum of every row, for a few sizes", [
            partial(_case, r, c, base + k) for k, (r, c) in enumerate(((1, 1), (3, 5), (7, 33), (64, 100)))]),
        Check("edge-sizes", "no rows, empty rows, one column: the loops test their bounds first", [
            partial(_case, r, c, base + 10 + k) for k, (r, c) in enumerate(((0, 4), (5, 0), (9, 1)))]),
        Check("in-order", "elements added in index order: the same bits as a sequential float32 sum", [
            partial(_case, r, c, base + 20 + k, spread=True) for k, (r, c) in enumerate(((4, 257), (16, 1000)))]),
    ]


EXERCISE = Exercise(
    name="reduction_loop",
    title="A reduction kernel's loops in LLVM IR",
    teaches="The loop structure every reduction kernel has (header, body, exit; counters and an accumulator "
            "in phi nodes), emitted with llvmlite and run through the CPU backend's JIT; why a float "
            "reduction's order is part of its result.",
    entry_points=[(ENTRY_POINT, "function")],
    make_checks=make_checks,
)
