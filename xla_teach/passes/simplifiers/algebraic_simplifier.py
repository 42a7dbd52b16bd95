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

Rule table (``exact`` = equal results for every input, NaN and -0.0 included):

=====================================================  ======================================================
rule                                                   exactness
=====================================================  ======================================================
x + 0 -> x, 0 + x -> x                                 floats: differs only for x = -0.0 (-0.0 + 0.0 = +0.0);
                                                       XLA does it too. (x + (-0.0) -> x is exact.)
x - 0 -> x                                             exact (-0.0 - 0.0 = -0.0)
i - i -> 0                                             integers only (x - x is NaN for inf/NaN)
x * 1 -> x, 1 * x -> x                                 exact
i * 0 -> 0                                             integers only (NaN * 0, inf * 0 are NaN; -1 * 0 = -0.0)
x / 1 -> x                                             exact
x / 2^k -> x * 2^-k                                    floats, only when 2^-k is exactly representable: exact
negate(negate(x)) -> x, not(not(x)) -> x               exact
abs(abs(x)) -> abs(x)                                  exact
max/min/and/or(x, x) -> x                              exact
pow(x, 0) -> 1, pow(x, 1) -> x, pow(x, 2) -> x * x     exact (IEEE pow(NaN, 0) = 1; pow(x, 2) is x*x rounded)
pow(x, -1) -> 1 / x                                    floats; may differ from libm pow by one ulp
pow(x, 0.5) -> sqrt(x)                                 **not done**: pow(-0, 0.5) = +0 but sqrt(-0) = -0, and
                                                       pow(-inf, 0.5) = +inf but sqrt(-inf) = NaN
select(true, a, b) -> a, select(false, a, b) -> b      exact (constant or broadcast-of-constant predicate)
select(p, a, a) -> a                                   exact
compare(c1, c2) -> constant                            exact (not for TOTALORDER comparisons)
compare(i, i) -> true/false                            integers only (NaN != NaN)
op(broadcast(a), broadcast(b)) -> broadcast(op(a, b))  exact (same broadcast dims and operand shapes)
reshape/transpose/broadcast/convert/slice/pad/copy     exact (no-op versions removed: same dims, identity
/reverse no-ops -> operand                             permutation, same type, full slice, zero padding...)
concatenate(x) -> x; zero-sized operands dropped       exact
reshape(reshape(x)) -> reshape(x)                      exact
transpose(transpose(x)) -> transpose(x) / x            exact (permutations composed)
broadcast(broadcast(x)) -> broadcast(x)                exact (dimensions composed)
reshape/transpose(broadcast(scalar)) -> broadcast      exact
slice(slice(x)) -> slice(x)                            exact (start/stride composed)
slice(concatenate(.., b, ..)) -> b                     exact (slice covers exactly operand b)
reverse(reverse(x)) -> x                               exact
reduce over size-1 dims -> f(init, reshape(x))         exact (f = the reducer's single binary op); with
                                                       init = 0 and f = add, x + 0 -> x then drops f
reduce over some size-1 dims -> reduce(reshape(x))    exact (the same elements combined in the same order)
reduce of an empty array -> broadcast(init)            exact
dot with size-1 contracting dims -> multiply of        same-type dots; differs only in the sign of a zero: a
broadcasts                                             dot sums from +0.0, so a product of -0.0 comes out +0.0
=====================================================  ======================================================

What XLA's simplifier has and this one leaves out (students: good exercises): x * 0 for
floats under fast-math, conversions of conversions, dot strength reduction for vectors
(dot -> multiply + reduce), reduce(transpose) dimension permutation, pad/slice merging,
``A + (-B) -> A - B``, dynamic-slice with constant indices, and many layout-sensitive
rewrites.
"""

from __future__ import annotations

from xla_teach.hlo.ir import HloComputation
from xla_teach.hlo.opcodes import is_elementwise
from xla_teach.passes.pass_base import HloPass
from xla_teach.passes.simplifiers.algsimp_rules_arith import ARITH_RULES
from xla_teach.passes.simplifiers.algsimp_rules_base import Rule
from xla_teach.passes.simplifiers.algsimp_rules_reduce_dot import REDUCE_DOT_RULES
from xla_teach.passes.simplifiers.algsimp_rules_shape import SHAPE_RULES

ALL_RULES: tuple[Rule, ...] = SHAPE_RULES + ARITH_RULES + REDUCE_DOT_RULES


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
                comp.replace_instruction(instr, replacement)
                fired = True
                break
        return fired

    def _rules(self, opcode: str) -> list[Rule]:
        if opcode not in self._by_opcode:
            self._by_opcode[opcode] = rules_for(opcode, self.rules)
        return self._by_opcode[opcode]
