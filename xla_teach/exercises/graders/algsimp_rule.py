"""Hidden checks of the ``algsimp_rule`` exercise: add rules to the algebraic simplifier.

The student's ``rewrite(instr)`` becomes the *only* rule of an ``AlgebraicSimplifier``
(``Rule("student rewrite", ("*elementwise",), rewrite)``), so xla_teach's own rules
cannot do the work for it. Each generated module plants patterns that must be rewritten
(their names start with ``fold_``) and look-alikes that must stay (``keep_``).
"""

from __future__ import annotations

import random
from functools import partial

from xla_teach.exercises.exercise import Exercise
from xla_teach.exercises.grading import CaseFailed, Check
from xla_teach.exercises.hlo_checks import check_same_results, check_verifies, module_from_student, show
from xla_teach.exercises.random_modules import FLOAT_BINARY, INT_BINARY, ModuleWriter, random_expression
from xla_teach.exercises.sandbox import StudentProcess
from xla_teach.hlo.text.parser import parse_hlo

ENTRY_POINT = "rewrite"


# ---- generated modules ---------------------------------------------------------------------------
def _dims(shape: str) -> str:
    return shape[shape.index("["):]


def _ones_literal(shape: str) -> str:
    dims = [int(d) for d in _dims(shape).strip("[]").split(",") if d]
    text = "1"
    for d in reversed(dims):
        text = "{" + ", ".join([text] * d) + "}"
    return text


def multiply_module(seed: int, look_alikes: bool = False) -> str:
    """``x * 1`` in every spelling (``fold_``); with ``look_alikes``, multiplies that must stay (``keep_``)."""
    rng = random.Random(seed)
    etype = rng.choice(["f32", "s32"])
    shape = etype + rng.choice(["[4]", "[2,3]"])
    w = ModuleWriter(f"algsimp_mul_{seed}")
    params = [w.parameter(shape) for _ in range(2)]
    binary = FLOAT_BINARY if etype == "f32" else INT_BINARY
    values = random_expression(w, rng, params, 3, shape, ("negate",), binary)
    one = w.constant("1", f"{etype}[]", name="one")
    ones = w.broadcast_scalar(one, shape, name="ones")
    outs = [values[-1]]
    spellings = [lambda v: [v, ones], lambda v: [ones, v],
                 lambda v: [v, w.constant(_ones_literal(shape), shape, name="ones_array")]]
    chosen = spellings if not look_alikes else [rng.choice(spellings)]
    for make in chosen:
        outs.append(w.add("multiply", shape, make(rng.choice(values)), name="fold_times_one"))
    scalar = w.parameter(f"{etype}[]", name="s")
    outs.append(w.add("multiply", f"{etype}[]", [one, scalar], name="fold_one_times_scalar"))
    if look_alikes:
        two = w.broadcast_scalar(w.constant("2", f"{etype}[]", name="two"), shape, name="twos")
        outs.append(w.add("multiply", shape, [rng.choice(values), two], name="keep_times_two"))
        mixed = _ones_literal(shape).replace("1", "2", 1)
        outs.append(w.add("multiply", shape, [values[0], w.constant(mixed, shape, name="almost_ones")],
                          name="keep_times_almost_one"))
        outs.append(w.add("multiply", shape, params, name="keep_times_param"))
    return w.text(outs)


def subtract_module(seed: int, with_float: bool = False) -> str:
    """``i - i`` for integers (``fold_``); with ``with_float``, also ``x - x`` for floats (``keep_``)."""
    rng = random.Random(seed)
    dims = rng.choice(["[4]", "[2,3]"])
    w = ModuleWriter(f"algsimp_sub_{seed}")
    ints = [w.parameter(f"s32{dims}") for _ in range(2)]
    values = random_expression(w, rng, ints, 3, f"s32{dims}", ("negate", "abs"), INT_BINARY)
    same = rng.choice(values)
    diff = w.add("subtract", f"s32{dims}", [same, same], name="fold_self_difference")
    outs = [w.add("add", f"s32{dims}", [diff, values[-1]], name="use"),
            w.add("subtract", f"s32{dims}", [values[-1], values[0]], name="keep_difference")]
    if with_float:
        x = w.parameter(f"f32{dims}")
        y = w.add(rng.choice(["negate", "exponential", "abs"]), f"f32{dims}", [x])
        outs.append(w.add("subtract", f"f32{dims}", [y, y], name="keep_float_self_difference"))
    return w.text(outs)


# ---- the case ----------------------------------------------------------------------------------------
def _rule_case(text: str, solution: StudentProcess, specials: bool = False) -> None:
    original = parse_hlo(text)
    result = solution.call("simplify", entry=ENTRY_POINT, text=text)  # in the student's process
    module = module_from_student(result.get("text") if isinstance(result, dict) else None, text, "the simplifier")
    after = check_verifies(module, text)
    left = {i.name for i in module.entry.instructions}
    planted = {i.name for i in original.entry.instructions}
    not_folded = sorted(n for n in left if n.startswith("fold_"))
    lost = sorted(n for n in planted if n.startswith("keep_") and n not in left)
    problems = []
    if not_folded:
        problems.append(f"not rewritten: {', '.join(not_folded)}")
    if lost:
        reason = ""
        if any("float" in n for n in lost):
            reason = " -- for floats x - x is not 0: inf - inf and NaN - NaN are NaN"
        problems.append(f"rewritten but must stay: {', '.join(lost)}{reason}")
    dead = sorted(i.name for i in module.entry.instructions  # new, and unused: made but not returned
                  if not i.users and not i.is_root() and i.name not in planted)
    if dead:
        problems.append(f"left unused: {', '.join(dead)} (a rule that returns None must not create instructions)")
    if problems:
        raise CaseFailed("\n".join(problems) + f"\n{show('input', text)}\n{show('after the simplifier', after)}")
    check_same_results(original, module, text, specials=specials, after_text=after)


def make_checks(seed: int = 0) -> list[Check]:
    base = 1000 * seed
    return [
        Check("multiply-by-one", "rewrites x * 1 -> x: either side, broadcast or array of ones, any type",
              [partial(_rule_case, multiply_module(base + s)) for s in range(3)]),
        Check("multiply-look-alikes", "leaves x * 2, x * {2, 1, ...} and x * y alone",
              [partial(_rule_case, multiply_module(base + s, look_alikes=True)) for s in (10, 11)]),
        Check("integer-subtract-self", "rewrites i - i -> 0 for integers",
              [partial(_rule_case, subtract_module(base + s)) for s in (20, 21, 22)]),
        Check("float-subtract-self-stays", "keeps x - x for floats (inf - inf is NaN), on inputs with inf and NaN",
              [partial(_rule_case, subtract_module(base + s, with_float=True), specials=True) for s in (30, 31)]),
    ]


EXERCISE = Exercise(
    name="algsimp_rule",
    title="A rule for the algebraic simplifier",
    teaches="Pattern matching on the HLO graph (constants, broadcasts of constants), creating "
            "replacement instructions, and floating-point exactness: which identities hold for "
            "integers but not for floats (x - x with inf and NaN).",
    entry_points=[(ENTRY_POINT, "function")],
    make_checks=make_checks,
)
