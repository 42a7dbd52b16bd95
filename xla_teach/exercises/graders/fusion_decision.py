"""Hidden checks of the ``fusion_decision`` exercise: decide whether a producer fuses into a consumer.

The reference is xla_teach's own rule set
(:func:`xla_teach.passes.fusion.fusion_rules.fusion_decision` with the CPU's defaults but
no output fusion), whose answer comes with a reason -- the feedback quotes it.

Two kinds of checks:

* **decisions**: every producer -> consumer edge of a module, asked directly;
* **fusion pass**: ``InstructionFusion`` runs with the student's decisions, which also
  asks about consumers that are already fusions; every answer must match, and the fused
  module must verify and compute what the original computes.
"""

from __future__ import annotations

import random
from functools import partial

from xla_teach.exercises.exercise import Exercise
from xla_teach.exercises.grading import CaseFailed, Check
from xla_teach.exercises.hlo_checks import check_same_results, check_verifies, show, strip_layouts
from xla_teach.exercises.random_modules import ModuleWriter
from xla_teach.exercises.sandbox import StudentProcess
from xla_teach.hlo.ir import HloInstruction, HloModule
from xla_teach.hlo.text.parser import parse_hlo
from xla_teach.passes.fusion.fusion_rules import FusionConfig, fusion_decision
from xla_teach.passes.fusion.instruction_fusion import InstructionFusion

ENTRY_POINT = "should_fuse"
CONFIG = FusionConfig(output_fusion=False, recompute_values_kept_in_memory=True)
S = "f32[2,2]"


def reference(producer: HloInstruction, consumer: HloInstruction) -> str | None:
    """None to fuse, else the reason not to."""
    return fusion_decision(producer, consumer, CONFIG)


def _ask(student: StudentProcess, text: str, producer: HloInstruction, consumer: HloInstruction) -> bool:
    """The student's ``should_fuse(producer, consumer)``, asked in the student's process about the
    instructions of these names in the module ``text``."""
    result = student.call("decide", entry=ENTRY_POINT, text=text, producer=producer.name, consumer=consumer.name)
    if not isinstance(result, dict) or not isinstance(result.get("fuse"), bool):
        raise CaseFailed(f"should_fuse({producer.name}, {consumer.name}) must return True or False")
    if result.get("edited"):
        raise CaseFailed("should_fuse changed the module: it must only look, never edit\n" + show("input", text))
    return bool(result["fuse"])


def _describe(instr: HloInstruction) -> str:
    text = strip_layouts(instr.to_text(long_form=False, print_metadata=False))
    if instr.opcode == "fusion":
        inner = strip_layouts(instr.fused_computation.to_text(long_form=False, print_metadata=False))
        text += "\n      calls " + "\n      ".join(inner.splitlines())
    return f"{text}   ({len(instr.users)} user{'s' if len(instr.users) != 1 else ''})"


def _mismatch(producer: HloInstruction, consumer: HloInstruction, got: bool, why: str | None) -> str:
    expected = "False" if why is not None else "True"
    because = f"not fusing: {why}" if why is not None else "no rule forbids it, so fuse"
    return (f"should_fuse({producer.name}, {consumer.name}) returned {got}, expected {expected} ({because})\n"
            f"  producer: {_describe(producer)}\n  consumer: {_describe(consumer)}")


# ---- generated modules ---------------------------------------------------------------------------
def random_fusion_module(seed: int) -> str:
    """A random mix of cheap and expensive elementwise ops, data movement, constants, reductions and dots."""
    rng = random.Random(seed)
    w = ModuleWriter(f"fusion_{seed}")
    values = [w.parameter(S) for _ in range(3)]
    kinds = ["cheap"] * 4 + ["expensive"] * 2 + ["scalar_const", "array_const", "transpose", "reshape",
                                                   "reduce", "dot"]
    for _ in range(rng.randint(6, 9)):
        x, y = rng.choice(values[-3:]), rng.choice(values)
        kind = rng.choice(kinds)
        if kind == "cheap":
            op = rng.choice(["add", "multiply", "maximum", "subtract", "negate", "abs"])
            new = w.add(op, S, [x] if op in ("negate", "abs") else [x, y])
        elif kind == "expensive":
            op = rng.choice(["exponential", "tanh", "divide"])
            new = w.add(op, S, [x] if op != "divide" else [x, y])
        elif kind == "scalar_const":
            c = w.constant(rng.choice(["0.5", "2", "-1"]), "f32[]")
            new = w.add("multiply", S, [x, w.broadcast_scalar(c, S)])
        elif kind == "array_const":
            new = w.add("add", S, [x, w.constant("{{1, 2}, {3, 4}}", S, name="table")])
        elif kind == "transpose":
            new = w.add("transpose", S, [x], "dimensions={1,0}")
        elif kind == "reshape":
            flat = w.add("negate", "f32[4]", [w.add("reshape", "f32[4]", [x])])
            new = w.add("reshape", S, [flat])
        elif kind == "reduce":
            zero = w.constant("0", "f32[]", name="zero")
            row = w.add("reduce", "f32[2]", [x, zero], f"dimensions={{1}}, to_apply={w.reducer('add', 'f32')}")
            new = w.add("broadcast", S, [row], "dimensions={0}")
        else:
            new = w.add("dot", S, [x, y], "lhs_contracting_dims={1}, rhs_contracting_dims={0}")
        values.append(new)
    return w.text([values[-1], rng.choice(values[3:-1])])


_ADD = "add_f32 {\n  lhs = f32[] parameter(0)\n  rhs = f32[] parameter(1)\n  ROOT r = f32[] add(lhs, rhs)\n}\n"

# One module per rule; the comment says which edges the rule decides.
RULE_MODULES: dict[str, str] = {
    "the consumer must be able to host a fusion (dot, tuple cannot)": f"""HloModule rule_host
ENTRY main {{
  a = {S} parameter(0)
  b = {S} parameter(1)
  n = {S} negate(a)
  d = {S} dot(n, b), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}
  e = {S} abs(b)
  ROOT t = ({S}, {S}) tuple(d, e)
}}
""",
    "parameters never fuse; constants only when scalar": f"""HloModule rule_leaves
ENTRY main {{
  a = {S} parameter(0)
  c = f32[] constant(2)
  twos = {S} broadcast(c), dimensions={{}}
  m = {S} multiply(a, twos)
  table = {S} constant({{{{1, 2}}, {{3, 4}}}})
  ROOT s = {S} add(m, table)
}}
""",
    "reduce and dot results are not recomputed per element": f"""HloModule rule_heroes
{_ADD}
ENTRY main {{
  a = {S} parameter(0)
  b = {S} parameter(1)
  zero = f32[] constant(0)
  r = f32[2] reduce(a, zero), dimensions={{1}}, to_apply=add_f32
  rb = {S} broadcast(r), dimensions={{0}}
  d = {S} dot(a, b), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}
  ROOT s = {S} add(rb, d)
}}
""",
    "expensive producers with other users are not duplicated; cheap ones are": f"""HloModule rule_duplicate
ENTRY main {{
  a = {S} parameter(0)
  b = {S} parameter(1)
  e = {S} exponential(a)
  x = {S} add(e, b)
  y = {S} multiply(e, a)
  n = {S} negate(b)
  u = {S} subtract(n, x)
  v = {S} maximum(n, y)
  ROOT t = ({S}, {S}) tuple(u, v)
}}
""",
    "a cheap producer reached by two paths is copied, not refused": f"""HloModule rule_two_paths
ENTRY main {{
  a = {S} parameter(0)
  n = {S} negate(a)
  e = {S} exponential(n)
  t = {S} transpose(e), dimensions={{1,0}}
  ROOT s = {S} add(n, t)
}}
""",
    "fusions: kLoop producers fuse, kInput producers and multi-output consumers do not": f"""HloModule rule_fusions
{_ADD}
fused_loop {{
  p = {S} parameter(0)
  ROOT n = {S} negate(p)
}}

fused_reduce {{
  p = {S} parameter(0)
  z = f32[] constant(0)
  ROOT r = f32[2] reduce(p, z), dimensions={{1}}, to_apply=add_f32
}}

fused_pair {{
  p = {S} parameter(0)
  n = {S} negate(p)
  m = {S} abs(p)
  ROOT t = ({S}, {S}) tuple(n, m)
}}

ENTRY main {{
  a = {S} parameter(0)
  loop = {S} fusion(a), kind=kLoop, calls=fused_loop
  use = {S} add(loop, a)
  red = f32[2] fusion(use), kind=kInput, calls=fused_reduce
  bred = {S} broadcast(red), dimensions={{0}}
  pair = ({S}, {S}) fusion(bred), kind=kLoop, calls=fused_pair
  first = {S} get-tuple-element(pair), index=0
  ROOT out = {S} multiply(first, use)
}}
""",
}


# ---- the cases ------------------------------------------------------------------------------------------
def _decisions_case(text: str, solution: StudentProcess, rule: str = "") -> None:
    """Every producer -> consumer edge of the ENTRY, asked directly."""
    module = parse_hlo(text)
    asked = module.to_text()  # the student's process parses the same text
    wrong = []
    for consumer in module.entry.post_order():
        for producer in dict.fromkeys(consumer.operands):
            why = reference(producer, consumer)
            got = _ask(solution, asked, producer, consumer)
            if got != (why is None):
                wrong.append(_mismatch(producer, consumer, got, why))
    if wrong:
        more = f"\n({len(wrong) - 2} more wrong decision(s) on this module)" if len(wrong) > 2 else ""
        heading = f"rule: {rule}\n" if rule else ""
        raise CaseFailed(heading + "\n".join(wrong[:2]) + more + "\n" + show("module", text))


class _GradedFusion(InstructionFusion):
    """``InstructionFusion`` that fuses what the student says, noting where the reference disagrees."""

    def __init__(self, student: StudentProcess, module: HloModule) -> None:
        super().__init__(CONFIG)
        self.student = student
        self.module = module
        self.wrong: list[str] = []

    def decide(self, producer: HloInstruction, consumer: HloInstruction) -> str | None:
        why = reference(producer, consumer)
        got = _ask(self.student, self.module.to_text(), producer, consumer)  # the module as it is now
        if got != (why is None):
            self.wrong.append(_mismatch(producer, consumer, got, why))
        return None if got else (why or "the solution said no")


def _fusion_pass_case(text: str, solution: StudentProcess) -> None:
    original, module = parse_hlo(text), parse_hlo(text)
    fusion = _GradedFusion(solution, module)
    try:
        fusion.run(module)
    except CaseFailed:
        raise
    except Exception:  # a wrong "fuse" can leave a graph the fusion code cannot handle: report the cause
        if not fusion.wrong:
            raise
    if fusion.wrong:
        raise CaseFailed("during the fusion pass (consumers may be fusions by now):\n" + fusion.wrong[0] + "\n"
                         + show("input of the fusion pass", text))
    after = check_verifies(module, text)
    check_same_results(original, module, text, after_text=after)


def make_checks(seed: int = 0) -> list[Check]:
    base = 1000 * seed
    return [
        Check("rule-by-rule", "one small module per documented rule, every edge decided right",
              [partial(_decisions_case, text, rule=rule) for rule, text in RULE_MODULES.items()]),
        Check("random-decisions", "every producer -> consumer edge of random modules decided as the rules say",
              [partial(_decisions_case, random_fusion_module(base + s)) for s in range(4)]),
        Check("fusion-pass", "InstructionFusion with your decisions: same decisions, fused modules compute the same",
              [partial(_fusion_pass_case, random_fusion_module(base + s)) for s in (10, 11, 12, 13)]),
    ]


EXERCISE = Exercise(
    name="fusion_decision",
    title="Decide what fuses",
    teaches="Why fusion pays (intermediates stay in registers), which ops a fused loop can compute "
            "per element, why expensive producers are not duplicated, how fusing can create a "
            "cycle, and how decisions compose as consumers become fusions.",
    entry_points=[(ENTRY_POINT, "function")],
    make_checks=make_checks,
)
