"""The algebraic simplifier (``algsimp``, XLA's ``AlgebraicSimplifier``).

Local rewrites, each replacing one instruction by a simpler equal one. The pass walks
every computation operands-first and applies the first rule that matches; it repeats
the walk (a few times) so that one rewrite can enable the next, and the
``simplification`` pipeline reruns it to a fixed point together with the other passes.
Instructions that became unused are removed with the one replaced (as XLA's
``ReplaceInstruction`` does).

Before::

    ENTRY main {
      x = f32[2,3] parameter(0)
      zero = f32[] constant(0)
      zeros = f32[2,3] broadcast(zero), dimensions={}
      sum = f32[2,3] add(x, zeros)
      r1 = f32[3,2] reshape(sum)
      r2 = f32[6] reshape(r1)
      n1 = f32[6] negate(r2)
      ROOT n2 = f32[6] negate(n1)
    }

After::

    ENTRY main {
      x = f32[2,3] parameter(0)
      ROOT reshape = f32[6] reshape(x)
    }

Not done on purpose: ``pow(x, 0.5) -> sqrt(x)`` (``pow(-0, 0.5) = +0`` but ``sqrt(-0) = -0``,
and ``pow(-inf, 0.5) = +inf`` but ``sqrt(-inf) = NaN``).

What XLA's simplifier has and this one leaves out (students: good exercises): x * 0 for
floats under fast-math, conversions of conversions, dot strength reduction for vectors
(dot -> multiply + reduce), reduce(transpose) dimension permutation, pad/slice merging,
``A + (-B) -> A - B``, dynamic-slice with constant indices, and many layout-sensitive
rewrites.

The rule table below is generated from ``ALL_RULES`` when this module loads (``rule_table()``),
so it lists exactly the rules that run; ``exact`` = equal results for every input, NaN and -0.0
included.
"""

from __future__ import annotations

from xla_teach.hlo.ir import HloComputation, HloInstruction
from xla_teach.hlo.opcodes import is_elementwise
from xla_teach.passes.pass_base import HloPass, hlo_lines
from xla_teach.passes.simplifiers.algsimp_rules_arith import ARITH_RULES
from xla_teach.passes.simplifiers.algsimp_rules_base import Rule
from xla_teach.passes.simplifiers.algsimp_rules_reduce_dot import REDUCE_DOT_RULES
from xla_teach.passes.simplifiers.algsimp_rules_shape import SHAPE_RULES

ALL_RULES: tuple[Rule, ...] = SHAPE_RULES + ARITH_RULES + REDUCE_DOT_RULES


def rule_table(rules: tuple[Rule, ...] = ALL_RULES, width: int = 92) -> str:
    """The rules as a reStructuredText simple table: each rule, the opcodes it looks at, and how
    exact it is (long cells wrap onto continuation rows)."""
    import textwrap

    rows: list[tuple[str, str]] = []
    for r in rules:
        rule = textwrap.wrap(r.name, width)
        exactness = textwrap.wrap(r.exactness, 60)
        for i in range(max(len(rule), len(exactness))):
            rows.append((rule[i] if i < len(rule) else "", exactness[i] if i < len(exactness) else ""))
    first = max(len(a) for a, _ in rows)
    second = max(len(b) for _, b in rows)
    border = "=" * first + "  " + "=" * second
    lines = [border, "rule".ljust(first) + "  exactness", border]
    lines += [(a.ljust(first) + "  " + b).rstrip() for a, b in rows]
    return "\n".join(["Rule table:", "", *lines, border, ""])


__doc__ = (__doc__ or "") + "\n" + rule_table()


def rules_for(opcode: str, rules: tuple[Rule, ...] = ALL_RULES) -> list[Rule]:
    """The rules that look at ``opcode`` (``*elementwise`` rules match every elementwise op)."""
    return [r for r in rules if opcode in r.opcodes or ("*elementwise" in r.opcodes and is_elementwise(opcode))]


class AlgebraicSimplifier(HloPass):
    """Applies the rule table of the module docstring until nothing matches."""

    name = "algsimp"

    def __init__(self, rules: tuple[Rule, ...] = ALL_RULES, max_sweeps: int = 8) -> None:
        super().__init__()
        self.rules = rules
        self.max_sweeps = max_sweeps
        self._by_opcode: dict[str, list[Rule]] = {}

    def run_on_computation(self, comp: HloComputation) -> bool:
        changed = False
        for _ in range(self.max_sweeps):
            if not self.sweep(comp):
                break
            changed = True
        return changed

    def sweep(self, comp: HloComputation) -> bool:
        """One operands-first walk over ``comp``; True if any rule fired."""
        fired = False
        for instr in comp.post_order():
            if instr.parent is not comp or instr.has_side_effect():
                continue
            if not instr.users and not instr.is_root():
                continue  # dead: dce's job
            for r in self._rules(instr.opcode):
                replacement = r.apply(instr)
                if replacement is None:
                    continue
                if replacement is instr:
                    break
                if not replacement.shape.compatible(instr.shape):
                    raise AssertionError(f"algsimp rule '{r.name}' changed the shape of {instr.name}: "
                                         f"{instr.shape} -> {replacement.shape}")
                self.note(f"{comp.name}: {instr.name} -> {replacement.name} [{r.name}]")
                if self.recording_steps:
                    self.record_step(r.name, r.apply, hlo_lines([instr, *instr.operands]),
                                     hlo_lines([replacement, *_new_operands(replacement, instr)]),
                                     [instr.name, replacement.name])
                comp.replace_instruction(instr, replacement)
                fired = True
                break
        return fired

    def _rules(self, opcode: str) -> list[Rule]:
        if opcode not in self._by_opcode:
            self._by_opcode[opcode] = rules_for(opcode, self.rules)
        return self._by_opcode[opcode]


def _new_operands(replacement: HloInstruction, old: HloInstruction) -> list[HloInstruction]:
    """The instructions a rule made to feed its replacement (those ``old`` did not read)."""
    seen = {id(o) for o in old.operands}
    made, stack = [], list(replacement.operands)
    while stack and len(made) < 6:
        instr = stack.pop()
        if id(instr) in seen or instr is old:
            continue
        seen.add(id(instr))
        if instr.users == (replacement,) or all(u in made or u is replacement for u in instr.users):
            made.append(instr)
            stack.extend(instr.operands)
    return made
