"""Hidden checks of the ``dce`` exercise: write dead code elimination as an ``HloPass``.

The grader computes the live set itself (what the ROOT needs, plus parameters, plus
side-effecting instructions and what they read) and compares the instructions left by
the student's pass with it, name by name.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from functools import partial

from xla_teach.exercises.exercise import Exercise
from xla_teach.exercises.grading import CaseFailed, Check
from xla_teach.exercises.hlo_checks import (
    check_reported_change,
    check_same_results,
    check_verifies,
    format_names,
    show,
    student_pass,
)
from xla_teach.exercises.random_modules import (
    FLOAT_BINARY,
    FLOAT_UNARY_CHEAP,
    FLOAT_UNARY_EXPENSIVE,
    ModuleWriter,
    random_expression,
    random_shape,
)
from xla_teach.exercises.sandbox import StudentProcess
from xla_teach.hlo.ir import HloModule

ENTRY_POINT = "DeadCodeElimination"


# ---- the oracle ----------------------------------------------------------------------------------
def expected_survivors(module: HloModule) -> tuple[set[str], set[str]]:
    """(instruction names, computation names) a correct DCE keeps."""
    entry = module.entry
    keep: set[int] = set()
    stack = [entry.root] + [i for i in entry.instructions if i.opcode == "parameter" or i.has_side_effect()]
    while stack:
        instr = stack.pop()
        if instr.unique_id not in keep:
            keep.add(instr.unique_id)
            stack.extend(instr.operands)
    live = [i for i in entry.instructions if i.unique_id in keep]
    computations = {entry.name}
    comp_stack = [c for i in live for c in i.called_computations()]
    while comp_stack:
        comp = comp_stack.pop()
        if comp.name not in computations:
            computations.add(comp.name)
            comp_stack.extend(comp.called_computations())
    return {i.name for i in live}, computations


# ---- generated modules ---------------------------------------------------------------------------
def dead_code_module(seed: int, side_effects: bool = False, dead_reduce: bool = False) -> str:
    """A random live expression with dead instructions mixed in between the live ones."""
    rng = random.Random(seed)
    shape = random_shape(rng)
    w = ModuleWriter(f"dce_{seed}")
    params = [w.parameter(shape) for _ in range(rng.randint(2, 3))]
    if side_effects:
        w.parameter(shape, name="unused_param")
    unary = FLOAT_UNARY_CHEAP + FLOAT_UNARY_EXPENSIVE
    live = random_expression(w, rng, params, rng.randint(3, 5), shape, unary, FLOAT_BINARY)
    etype, dims = shape.split("[")[0], "[" + shape.split("[")[1]
    if dead_reduce:  # a live reduce with add_f32, a dead one with the only use of maximum_f32
        zero = w.constant("0", f"{etype}[]", name="zero")
        total = w.add("reduce", f"{etype}[]", [live[-1], zero], f"dimensions={{{_all_dims(dims)}}}, "
                      f"to_apply={w.reducer('add', etype)}", name="total")
        live.append(total)
    roots = [live[-1]] if not dead_reduce else [live[-2], live[-1]]
    dead_sources = params + live[:-1]
    if side_effects:
        effect = w.add("custom-call", shape, [rng.choice(params)], 'custom_call_target="xla_teach.identity", '
                       "custom_call_has_side_effect=true", name="print")
        w.add("negate", shape, [effect], name="dead_reads_effect")
    dead: list[str] = []
    for k in range(rng.randint(2, 4)):
        a = rng.choice(dead_sources + dead)
        b = rng.choice(dead_sources + dead)
        if k % 2 == 0:
            op, operands = rng.choice(FLOAT_BINARY), [a, b]
        else:
            op, operands = rng.choice(unary), [a]
        dead.append(w.add(op, shape, operands, name=f"unused_{op}", at=w.position_after(operands)))
    if dead_reduce:
        lowest = w.constant("-inf", f"{etype}[]", name="lowest")
        w.add("reduce", f"{etype}[]", [dead[-1], lowest], f"dimensions={{{_all_dims(dims)}}}, "
              f"to_apply={w.reducer('maximum', etype)}", name="unused_max")
    return w.text(roots if len(roots) > 1 else roots[0])


def _all_dims(dims: str) -> str:
    rank = len(dims.strip("[]").split(","))
    return ",".join(str(d) for d in range(rank))


# ---- cases ---------------------------------------------------------------------------------------
def _removes_exactly_the_dead(text: str, solution: StudentProcess) -> None:
    original, module, changed = student_pass(solution, ENTRY_POINT, text)
    after = check_verifies(module, text)
    want_instrs, want_comps = expected_survivors(original)
    got_instrs = {i.name for i in module.entry.instructions}
    got_comps = {c.name for c in module.computations}
    problems = []
    if got_instrs - want_instrs:
        problems.append(f"dead instruction(s) still there: {format_names(got_instrs - want_instrs)}")
    if want_instrs - got_instrs:
        problems.append(f"live instruction(s) removed: {format_names(want_instrs - got_instrs)} "
                        "(parameters, the ROOT, side effects and what they read must stay)")
    if got_comps - want_comps:
        unused = format_names(got_comps - want_comps)
        problems.append(f"computation(s) nothing calls any more are still there: {unused}")
    if want_comps - got_comps:
        problems.append(f"computation(s) still called were removed: {format_names(want_comps - got_comps)}")
    if problems:
        raise CaseFailed("\n".join(problems) + "\n" + show("input", text) + "\n" + show("after your pass", after))
    check_reported_change(changed, original, module, text)
    check_same_results(original, module, text, after_text=after)


def _idempotent(text: str, solution: StudentProcess) -> None:
    """First run: True (there is dead code); second run on the result: False, nothing changed."""
    original, module, changed = student_pass(solution, ENTRY_POINT, text)
    if not changed:
        raise CaseFailed("run() returned False on a module with dead code\n" + show("input", text))
    check_verifies(module, text)
    again_text = module.to_text()
    _, again, changed_again = student_pass(solution, ENTRY_POINT, again_text)
    if changed_again:
        raise CaseFailed("running the pass a second time returned True: after one run there is no dead code "
                         "left, so nothing should change\n" + show("second input", again_text))
    check_reported_change(changed_again, module, again, again_text)


def make_checks(seed: int = 0) -> list[Check]:
    base = 1000 * seed

    def cases(fn: Callable[[str, StudentProcess], None], texts: list[str]) -> list[Callable[[StudentProcess], None]]:
        return [partial(fn, text) for text in texts]

    return [
        Check("removes-dead-code", "removes every instruction whose value nothing reads, and nothing else",
              cases(_removes_exactly_the_dead, [dead_code_module(base + s) for s in range(4)])),
        Check("keeps-parameters-and-side-effects", "never removes parameters or side-effecting instructions",
              cases(_removes_exactly_the_dead, [dead_code_module(base + s, side_effects=True) for s in (10, 11)])),
        Check("removes-unused-computations", "drops computations that only dead instructions called",
              cases(_removes_exactly_the_dead, [dead_code_module(base + s, dead_reduce=True) for s in (20, 21)])),
        Check("reports-change", "returns True when it removed something, False on a second run",
              cases(_idempotent, [dead_code_module(base + 30, side_effects=True, dead_reduce=True)])),
    ]


EXERCISE = Exercise(
    name="dce",
    title="Dead code elimination as an HloPass",
    teaches="What 'dead' means in HLO (no users, not the ROOT, no side effect), walking a graph "
            "users-first, editing a computation safely, and the HloPass contract (run() returns "
            "whether anything changed).",
    entry_points=[(ENTRY_POINT, "class")],
    make_checks=make_checks,
)
