"""Hidden checks of the ``shape_inference`` exercise: the result shape of a ``dot``.

The student's ``infer_dot_shape`` runs in the student's process on shapes and dimension
numbers the grader draws; its answer (a shape's text, or "raised ValueError") is compared here
with xla_teach's own shape inference (``infer_shape("dot", ...)``), the oracle.
"""

from __future__ import annotations

import random
from functools import partial

from xla_teach.exercises.exercise import Exercise
from xla_teach.exercises.grading import CaseFailed, Check
from xla_teach.exercises.sandbox import StudentProcess
from xla_teach.hlo.errors import ShapeError
from xla_teach.hlo.shape_inference import infer_shape
from xla_teach.hlo.text.parser import parse_shape

ENTRY_POINT = "infer_dot_shape"
Case = tuple[str, str, list[int], list[int], list[int], list[int]]  # lhs, rhs, batch x2, contracting x2


def expected(case: Case) -> str | None:
    """The oracle: the result shape's text, or None when there is none."""
    lhs, rhs, lb, rb, lc, rc = case
    attrs = {"lhs_batch_dims": tuple(lb), "rhs_batch_dims": tuple(rb), "lhs_contracting_dims": tuple(lc),
             "rhs_contracting_dims": tuple(rc)}
    try:
        return infer_shape("dot", [parse_shape(lhs), parse_shape(rhs)], attrs).to_text(print_layout=False)
    except ShapeError:
        return None


def _text(dims: list[int], etype: str = "f32") -> str:
    return f"{etype}[{','.join(map(str, dims))}]"


def valid_case(seed: int, batch: int, contracting: int, free: tuple[int, int]) -> Case:
    """A valid dot with ``batch`` batch and ``contracting`` contracting dimension pairs, placed
    at random positions among ``free`` free dimensions of each side."""
    rng = random.Random(seed)
    sizes = [rng.randint(1, 5) for _ in range(batch + contracting)]
    sides = []
    for n_free in free:
        roles = ["b"] * batch + ["c"] * contracting + ["f"] * n_free
        rng.shuffle(roles)
        dims, b_pos, c_pos = [], [], []
        bi = ci = 0
        for position, role in enumerate(roles):
            if role == "b":
                dims.append(sizes[bi])
                b_pos.append(position)
                bi += 1
            elif role == "c":
                dims.append(sizes[batch + ci])
                c_pos.append(position)
                ci += 1
            else:
                dims.append(rng.randint(1, 6))
        sides.append((dims, b_pos, c_pos))
    (ld, lb, lc), (rd, rb, rc) = sides
    return _text(ld), _text(rd), lb, rb, lc, rc


def invalid_case(seed: int) -> Case:
    """A dot with exactly one thing wrong."""
    rng = random.Random(seed)
    lhs, rhs, lb, rb, lc, rc = valid_case(seed, 1, 1, (1, 1))
    kind = rng.choice(["size", "count", "range", "twice", "type"])
    ld = list(parse_shape(lhs).dimensions)
    if kind == "size":
        ld[lc[0]] += 1
        return _text(ld), rhs, lb, rb, lc, rc
    if kind == "count":
        return lhs, rhs, lb, [], lc, rc
    if kind == "range":
        return lhs, rhs, lb, rb, [len(ld)], rc
    if kind == "twice":
        return lhs, rhs, lb, rb, lb, rb
    return lhs, _text(list(parse_shape(rhs).dimensions), "s32"), lb, rb, lc, rc


def _describe(case: Case) -> str:
    lhs, rhs, lb, rb, lc, rc = case
    return (f"dot({lhs}, {rhs}), lhs_batch_dims={{{','.join(map(str, lb))}}}, rhs_batch_dims="
            f"{{{','.join(map(str, rb))}}}, lhs_contracting_dims={{{','.join(map(str, lc))}}}, "
            f"rhs_contracting_dims={{{','.join(map(str, rc))}}}")


def _case(case: Case, solution: StudentProcess) -> None:
    lhs, rhs, lb, rb, lc, rc = case
    result = solution.call("infer_shape", entry=ENTRY_POINT, lhs=lhs, rhs=rhs, lhs_batch=lb, rhs_batch=rb,
                           lhs_contracting=lc, rhs_contracting=rc)
    got = result.get("shape") if isinstance(result, dict) else None
    want = expected(case)
    if want is None:
        if got is not None:
            raise CaseFailed(f"{_describe(case)} has no valid shape (raise ValueError), but you returned {got}")
        return
    if got is None:
        raise CaseFailed(f"{_describe(case)} is valid, of shape {want}, but your function raised ValueError")
    if not isinstance(got, str) or got != want:
        raise CaseFailed(f"{_describe(case)}: expected {want}, got {got}")


def make_checks(seed: int = 0) -> list[Check]:
    base = 1000 * seed
    return [
        Check("matrix-products", "matrix-vector and matrix-matrix products, either operand transposed",
              [partial(_case, valid_case(base + s, 0, 1, (1, 1))) for s in range(3)]
              + [partial(_case, valid_case(base + 3, 0, 1, (0, 1)))]),
        Check("batch-dimensions", "batch dimensions anywhere in either operand come first, in list order",
              [partial(_case, valid_case(base + 10 + s, b, 1, (1, 1))) for s, b in enumerate((1, 2, 2))]),
        Check("several-contracting", "several contracting pairs, and free dimensions in operand order",
              [partial(_case, valid_case(base + 20 + s, b, c, f))
               for s, (b, c, f) in enumerate(((0, 2, (1, 2)), (1, 2, (2, 1)), (0, 0, (1, 1))))]),
        Check("invalid-dots", "raises ValueError for mismatched sizes, counts, out-of-range or repeated "
              "dimensions and mixed element types",
              [partial(_case, invalid_case(base + 30 + s)) for s in range(6)]),
    ]


EXERCISE = Exercise(
    name="shape_inference",
    title="Shape inference for dot",
    teaches="How an instruction's shape follows from its operands and attributes: dot's dimension numbers "
            "(batch, contracting, free), the order of the result's dimensions, and which programs have no "
            "shape at all.",
    entry_points=[(ENTRY_POINT, "function")],
    make_checks=make_checks,
)

