"""Hidden checks of the ``cse`` exercise: write common subexpression elimination.

The oracle is xla_teach's own ``cse`` pass: after the student's pass the ENTRY must hold
as many instructions of each opcode as after the oracle, no two instructions may still
compute the same value, and the results must not change.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Hashable
from functools import partial

from xla_teach.exercises.exercise import Exercise
from xla_teach.exercises.grading import CaseFailed, Check
from xla_teach.exercises.hlo_checks import (
    check_reported_change,
    check_same_results,
    check_verifies,
    show,
    student_pass,
)
from xla_teach.exercises.random_modules import (
    FLOAT_BINARY,
    FLOAT_UNARY_CHEAP,
    FLOAT_UNARY_EXPENSIVE,
    ModuleWriter,
    random_expression,
)
from xla_teach.exercises.sandbox import StudentProcess
from xla_teach.hlo.ir import HloModule
from xla_teach.hlo.text.parser import parse_hlo
from xla_teach.passes.simplifiers.cse import CommonSubexpressionElimination, cse_key

ENTRY_POINT = "CommonSubexpressionElimination"
_UNARY = FLOAT_UNARY_CHEAP + FLOAT_UNARY_EXPENSIVE
_COMMUTATIVE = ("add", "multiply", "maximum", "minimum")


# ---- generated modules ---------------------------------------------------------------------------
def _start(seed: int, prefix: str) -> tuple[ModuleWriter, random.Random, str, list[str], list[str]]:
    rng = random.Random(seed)
    shape = rng.choice(["f32[4]", "f32[2,3]"])
    w = ModuleWriter(f"cse_{prefix}_{seed}")
    params = [w.parameter(shape) for _ in range(rng.randint(2, 3))]
    live = random_expression(w, rng, params, rng.randint(3, 5), shape, _UNARY, FLOAT_BINARY)
    return w, rng, shape, params, live


def duplicates_module(seed: int) -> str:
    """A random expression, then a copy of one of its subexpressions (two levels deep)."""
    w, rng, shape, params, live = _start(seed, "dup")
    original = {line.name: line for line in w.lines}
    target = rng.choice(live[1:])
    copies: dict[str, str] = {}

    def copy(name: str, depth: int) -> str:
        line = original[name]
        if name in params or depth == 0:
            return name
        if name not in copies:
            operands = [copy(op, depth - 1) for op in line.operands]
            copies[name] = w.add(line.opcode, shape, operands, name=f"again_{line.opcode}")
        return copies[name]

    duplicate = copy(target, 2)
    root = w.add("add", shape, [live[-1], duplicate], name="combine")
    return w.text(root)


def commutative_module(seed: int) -> str:
    """``op(a, b)`` and later ``op(b, a)`` for commutative ops."""
    w, rng, shape, params, live = _start(seed, "comm")
    swapped = []
    for op in rng.sample(_COMMUTATIVE, 2):
        a, b = rng.sample(params + live[:2], 2)
        first = w.add(op, shape, [a, b])
        swapped.append(first)
        swapped.append(w.add(op, shape, [b, a], name=f"{op}_swapped"))
    return w.text([live[-1], *swapped])


def constants_module(seed: int) -> str:
    """Equal constants written twice (scalars and arrays), next to a different one that must stay."""
    rng = random.Random(seed)
    w = ModuleWriter(f"cse_const_{seed}")
    x = w.parameter("f32[4]")
    value, other = rng.choice([("2", "3"), ("0.5", "-0.5"), ("1", "10")])
    outs = []
    for k, v in enumerate((value, value, other)):
        c = w.constant(v, "f32[]", name="c")
        b = w.broadcast_scalar(c, "f32[4]")
        outs.append(w.add("multiply", "f32[4]", [x, b], name=f"scaled{k}"))
    array = "{1, 2, 3, 4}" if rng.random() < 0.5 else "{0, -1, 5, 2}"
    for _ in range(2):
        outs.append(w.add("add", "f32[4]", [x, w.constant(array, "f32[4]", name="table")], name="shifted"))
    return w.text(outs)


def look_alikes_module(seed: int) -> str:
    """Instructions that look alike but differ (attributes, parameters, side effects), plus
    one real duplicate."""
    rng = random.Random(seed)
    w = ModuleWriter(f"cse_look_alikes_{seed}")
    a, b = w.parameter("f32[3]"), w.parameter("f32[3]")
    outs = [w.add("broadcast", "f32[3,3]", [a], f"dimensions={{{d}}}", name="rows" if d else "cols")
            for d in (0, 1)]
    first, second = rng.sample(["LT", "GT", "LE", "GE", "EQ", "NE"], 2)
    for direction in (first, second):
        cmp = w.add("compare", "pred[3]", [a, b], f"direction={direction}", name=f"is_{direction.lower()}")
        outs.append(w.add("select", "f32[3]", [cmp, a, b]))
    outs += [w.add("slice", "f32[2]", [a], f"slice={{[{s}:{s + 2}]}}") for s in (0, 1)]
    for _ in range(2):
        outs.append(w.add("custom-call", "f32[3]", [b], 'custom_call_target="xla_teach.identity", '
                          "custom_call_has_side_effect=true", name="effect"))
    op = rng.choice(FLOAT_UNARY_CHEAP)
    outs += [w.add(op, "f32[3]", [a]) for _ in range(2)]  # the real duplicate
    return w.text(outs)


# ---- the case --------------------------------------------------------------------------------------
def _duplicate_groups(module: HloModule) -> list[list[str]]:
    groups: dict[Hashable, list[str]] = {}
    for instr in module.entry.instructions:
        if instr.opcode == "parameter" or instr.has_side_effect() or instr.control_predecessors:
            continue
        groups.setdefault(cse_key(instr), []).append(instr.name)
    return [g for g in groups.values() if len(g) > 1]


def _cse_case(text: str, solution: StudentProcess) -> None:
    original, module, changed = student_pass(solution, ENTRY_POINT, text)
    after = check_verifies(module, text)
    reference = parse_hlo(text)
    CommonSubexpressionElimination().run(reference)
    leftovers = _duplicate_groups(module)
    if leftovers:
        same = "; ".join(" and ".join(g) for g in leftovers)
        raise CaseFailed(f"these still compute the same value: {same}\n{show('input', text)}\n"
                         f"{show('after your pass', after)}")
    want = Counter(i.opcode for i in reference.entry.instructions)
    got = Counter(i.opcode for i in module.entry.instructions)
    if got != want:
        diffs = ", ".join(f"{op}: {got[op]} (expected {want[op]})" for op in sorted(set(want) | set(got))
                          if got[op] != want[op])
        why = ""
        if any(got[op] < want[op] for op in want):
            why = ("\n  too few: instructions were merged that compute different values (check opcode, shape, "
                   "every attribute, and never merge parameters or side effects)")
        raise CaseFailed(f"instructions left, by opcode: {diffs}{why}\n{show('input', text)}\n"
                         f"{show('after your pass', after)}")
    check_reported_change(changed, original, module, text)
    check_same_results(original, module, text, after_text=after)


def _reports_change(text: str, solution: StudentProcess) -> None:
    _, module, changed = student_pass(solution, ENTRY_POINT, text)
    if not changed:
        raise CaseFailed("run() returned False on a module with duplicates\n" + show("input", text))
    again_text = module.to_text()
    first, again, changed_again = student_pass(solution, ENTRY_POINT, again_text)
    if changed_again:
        raise CaseFailed("a second run returned True: after one run no duplicates are left\n"
                         + show("second input", again_text))
    check_reported_change(changed_again, first, again, again_text)


def make_checks(seed: int = 0) -> list[Check]:
    base = 1000 * seed

    def cases(texts: list[str]) -> list[partial[None]]:
        return [partial(_cse_case, t) for t in texts]

    return [
        Check("merges-duplicates", "merges identical instructions, whole duplicated chains included",
              cases([duplicates_module(base + s) for s in range(3)])),
        Check("commutative-operands", "treats op(a, b) and op(b, a) as the same for commutative ops",
              cases([commutative_module(base + s) for s in (10, 11)])),
        Check("constants-by-value", "merges constants with equal values (scalars and arrays), not others",
              cases([constants_module(base + s) for s in (20, 21)])),
        Check("respects-attributes", "never merges what differs in attributes, nor parameters or side effects",
              cases([look_alikes_module(base + s) for s in (30, 31)])),
        Check("reports-change", "returns True when it merged something, False on a second run",
              [partial(_reports_change, duplicates_module(base + 40))]),
    ]


EXERCISE = Exercise(
    name="cse",
    title="Common subexpression elimination",
    teaches="What makes two instructions 'the same' (opcode, shape, operands and every attribute; "
            "constants by value; commutative operands), why parameters and side effects are never "
            "merged, and why walking operands before users merges whole chains in one pass.",
    entry_points=[(ENTRY_POINT, "class")],
    make_checks=make_checks,
)
