"""Hidden checks of the ``bisect`` exercise: find the pass that breaks a program.

For each case the grader takes the CPU pipeline, plants a deliberately wrong pass
somewhere in it (under an innocent-looking name), and asks the student's
``find_broken_pass(module, pipeline, args)`` which pass it is. The planted pass really
breaks the module (the tests check that), and real passes change the module both
before and after it, so "the first pass that changed something" and "the last one"
are both wrong answers. One case plants nothing: the answer is then ``None``.
"""

from __future__ import annotations

import random
from functools import partial

from xla_teach.exercises.exercise import Exercise
from xla_teach.exercises.grading import CaseFailed, Check
from xla_teach.exercises.hlo_checks import fake_args, show
from xla_teach.exercises.random_modules import ModuleWriter, random_expression
from xla_teach.exercises.sandbox import StudentProcess
from xla_teach.exercises.student_tasks import make_pipeline
from xla_teach.hlo.ir import HloModule
from xla_teach.hlo.text.parser import parse_hlo
from xla_teach.passes.pass_base import HloPassPipeline, PassOptions, PassRecorder

ENTRY_POINT = "find_broken_pass"


# (what the planted pass does, its name, the pass or sub-pipeline it runs after); None: nothing planted
CASES: list[tuple[str, str, str] | None] = [
    ("swap-subtract", "operand-canonicalizer", "cse"),
    ("multiply-to-add", "elementwise-strength-reduction", "fusion"),
    ("maximum-to-minimum", "minmax-normalizer", "algsimp"),
    ("swap-subtract", "subtract-simplifier", "tree_reduction_rewriter"),
    None,
]


# ---- generated modules -------------------------------------------------------------------------------
def bisect_module(seed: int) -> str:
    """Something for every real pass to do (x * 1, a duplicate, dead code, fusible chains)
    and the ops the planted passes break (subtract, multiply, maximum)."""
    rng = random.Random(seed)
    shape = rng.choice(["f32[8]", "f32[2,4]"])
    w = ModuleWriter(f"bisect_{seed}")
    x, y, z = (w.parameter(shape) for _ in range(3))
    one = w.broadcast_scalar(w.constant("1", "f32[]", name="one"), shape, name="ones")
    scaled = w.add("multiply", shape, [x, one], name="times_one")
    diff = w.add("subtract", shape, [scaled, y], name="diff")
    prod = w.add("multiply", shape, [diff, z], name="prod")
    again = w.add("subtract", shape, [scaled, y], name="diff_again")
    biggest = w.add("maximum", shape, [prod, again], name="biggest")
    w.add("exponential", shape, [biggest], name="unused")
    tail = random_expression(w, rng, [biggest, x], 2, shape, ("negate", "tanh"), ("add", "multiply"))
    return w.text(w.add("add", shape, [tail[-1], biggest], name="result"))  # the result needs `biggest`


# ---- the case -------------------------------------------------------------------------------------------
def _first_changed_run(module: HloModule, case: tuple[str, str, str] | None) -> dict[str, int]:
    """For each pass name: the index of its first run that changed the module."""
    recorder = PassRecorder()
    make_pipeline(case).run(module.clone(), PassOptions(), recorder)
    first: dict[str, int] = {}
    for record in recorder.records:
        if record.changed:
            first.setdefault(record.pass_name, record.index)
    return first


def _pipeline_names(pipeline: HloPassPipeline) -> set[str]:
    names = {pipeline.name}
    for p in pipeline.passes:
        if isinstance(p, HloPassPipeline):
            names |= _pipeline_names(p)
    return names


def _bisect_case(case: tuple[str, str, str] | None, seed: int, solution: StudentProcess) -> None:
    text = bisect_module(seed)
    module = parse_hlo(text)
    args = fake_args(module, seed)
    result = solution.call("find_broken_pass", entry=ENTRY_POINT, text=text, args=args,
                           planted=list(case) if case is not None else None)  # in the student's process
    answer = result.get("answer") if isinstance(result, dict) else None
    expected = case[1] if case is not None else None
    if answer == expected or (expected is None and answer == ""):
        return
    if answer is not None and not isinstance(answer, str):
        raise CaseFailed(f"{ENTRY_POINT} must return a pass name (a str) or None")
    if expected is None:
        raise CaseFailed(f"returned '{answer}', but no pass breaks this module: every stage computes what the "
                         f"input computes, so the answer is None\n{show('module', text)}")
    if not answer:
        raise CaseFailed(f"returned {answer!r}, but a pass does break this module: after the pipeline the "
                         f"interpreter computes something else than before it\n{show('module', text)}")
    pipeline = make_pipeline(case)
    known = pipeline.describe()
    first = _first_changed_run(module, case)
    if answer in _pipeline_names(pipeline):
        raise CaseFailed(f"'{answer}' is a pipeline: name the pass inside it that broke the module:\n{known}")
    if answer not in known.split():
        raise CaseFailed(f"there is no pass named '{answer}' in the pipeline:\n{known}")
    if answer not in first:
        raise CaseFailed(f"'{answer}' never changed the module, so it cannot have broken it\n{show('module', text)}")
    where = ("the module was already wrong before it ran: look at earlier stages" if first[answer] > first[expected]
             else "the module still computes the right results after it: look at later stages")
    raise CaseFailed(f"returned '{answer}', but that is not the broken pass: {where}\n{show('module', text)}")


def make_checks(seed: int = 0) -> list[Check]:
    base = 1000 * seed
    planted = [c for c in CASES if c is not None]
    return [
        Check("finds-the-broken-pass", "names the planted pass, wherever in the pipeline it runs",
              [partial(_bisect_case, case, base + k) for k, case in enumerate(planted)]),
        Check("no-false-alarm", "returns None when no pass changes what the module computes",
              [partial(_bisect_case, None, base + 10)]),
    ]


EXERCISE = Exercise(
    name="bisect",
    title="Find the broken pass",
    teaches="How to debug a miscompile: every stage of the pass pipeline is an HLO module the "
            "interpreter can run, so the first stage that computes something else points at the "
            "pass that broke it -- found in log2(passes) runs by bisection.",
    entry_points=[(ENTRY_POINT, "function")],
    make_checks=make_checks,
)
