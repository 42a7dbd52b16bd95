"""CSE: golden before/after texts, each also checked on the interpreter."""

from tests.passes.pass_test_utils import check_pass
from xla_teach.passes.simplifiers.cse import CommonSubexpressionElimination


def test_commutative_operands_are_canonicalised() -> None:
    check_pass(CommonSubexpressionElimination(), """
HloModule m
ENTRY main {
  x = f32[4] parameter(0)
  y = f32[4] parameter(1)
  a = f32[4] add(x, y)
  b = f32[4] add(y, x)
  ROOT m = f32[4] multiply(a, b)
}
""", """
HloModule m
ENTRY main {
  x = f32[4] parameter(0)
  y = f32[4] parameter(1)
  a = f32[4] add(x, y)
  ROOT m = f32[4] multiply(a, a)
}
""")


def test_non_commutative_operand_order_matters() -> None:
    check_pass(CommonSubexpressionElimination(), """
HloModule m
ENTRY main {
  x = f32[4] parameter(0)
  y = f32[4] parameter(1)
  a = f32[4] subtract(x, y)
  b = f32[4] subtract(y, x)
  ROOT m = f32[4] multiply(a, b)
}
""", None)


def test_equal_constants_are_deduplicated_and_chains_merge() -> None:
    check_pass(CommonSubexpressionElimination(), """
HloModule m
ENTRY main {
  x = f32[4] parameter(0)
  c1 = f32[] constant(2)
  c2 = f32[] constant(2)
  b1 = f32[4] broadcast(c1), dimensions={}
  b2 = f32[4] broadcast(c2), dimensions={}
  e1 = f32[4] multiply(x, b1)
  e2 = f32[4] multiply(x, b2)
  s1 = f32[4] subtract(e1, x)
  s2 = f32[4] subtract(x, e2)
  ROOT t = (f32[4], f32[4]) tuple(s1, s2)
}
""", """
HloModule m
ENTRY main {
  x = f32[4] parameter(0)
  c1 = f32[] constant(2)
  b1 = f32[4] broadcast(c1), dimensions={}
  e1 = f32[4] multiply(x, b1)
  s1 = f32[4] subtract(e1, x)
  s2 = f32[4] subtract(x, e1)
  ROOT t = (f32[4], f32[4]) tuple(s1, s2)
}
""")


def test_constants_compare_bitwise_so_signed_zeros_stay_apart() -> None:
    check_pass(CommonSubexpressionElimination(), """
HloModule m
ENTRY main {
  x = f32[4] parameter(0)
  z1 = f32[] constant(0)
  z2 = f32[] constant(-0)
  b1 = f32[4] broadcast(z1), dimensions={}
  b2 = f32[4] broadcast(z2), dimensions={}
  a1 = f32[4] add(x, b1)
  a2 = f32[4] add(x, b2)
  ROOT t = (f32[4], f32[4]) tuple(a1, a2)
}
""", None)


def test_side_effecting_instructions_are_never_merged() -> None:
    check_pass(CommonSubexpressionElimination(), """
HloModule m
ENTRY main {
  lo = f32[] constant(0)
  hi = f32[] constant(1)
  r1 = f32[4] rng(lo, hi), distribution=rng_uniform
  r2 = f32[4] rng(lo, hi), distribution=rng_uniform
  ROOT s = f32[4] subtract(r1, r2)
}
""", None, semantics=False)


def test_reductions_with_the_same_reducer_merge() -> None:
    check_pass(CommonSubexpressionElimination(), """
HloModule m
sum {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY main {
  x = f32[4,8] parameter(0)
  zero = f32[] constant(0)
  r1 = f32[4] reduce(x, zero), dimensions={1}, to_apply=sum
  r2 = f32[4] reduce(x, zero), dimensions={1}, to_apply=sum
  r3 = f32[8] reduce(x, zero), dimensions={0}, to_apply=sum
  d = f32[4] subtract(r1, r2)
  ROOT t = (f32[4], f32[8]) tuple(d, r3)
}
""", """
HloModule m
sum {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY main {
  x = f32[4,8] parameter(0)
  zero = f32[] constant(0)
  r1 = f32[4] reduce(x, zero), dimensions={1}, to_apply=sum
  d = f32[4] subtract(r1, r1)
  r3 = f32[8] reduce(x, zero), dimensions={0}, to_apply=sum
  ROOT t = (f32[4], f32[8]) tuple(d, r3)
}
""")


CALLS = """
HloModule m
callee {
  p = f32[4] parameter(0)
  ROOT n = f32[4] negate(p)
}
ENTRY main {
  x = f32[4] parameter(0)
  c1 = f32[4] call(x), to_apply=callee
  c2 = f32[4] call(x), to_apply=callee
  ROOT s = f32[4] subtract(c1, c2)
}
"""


def test_identical_calls_merge() -> None:
    check_pass(CommonSubexpressionElimination(), CALLS, """
HloModule m
callee {
  p = f32[4] parameter(0)
  ROOT n = f32[4] negate(p)
}
ENTRY main {
  x = f32[4] parameter(0)
  c1 = f32[4] call(x), to_apply=callee
  ROOT s = f32[4] subtract(c1, c1)
}
""")


def test_calls_of_a_computation_with_a_side_effect_do_not_merge() -> None:
    with_rng = CALLS.replace("ROOT n = f32[4] negate(p)", """lo = f32[] constant(0)
  hi = f32[] constant(1)
  r = f32[4] rng(lo, hi), distribution=rng_uniform
  ROOT n = f32[4] add(p, r)""")
    check_pass(CommonSubexpressionElimination(), with_rng, None, semantics=False)
