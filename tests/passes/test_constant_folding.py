"""Constant folding: golden before/after texts, each also checked on the interpreter."""

from tests.passes.pass_test_utils import check_pass
from xla_teach.passes.simplifiers.constant_folding import ConstantFolding


def test_folds_a_chain_of_constant_ops() -> None:
    check_pass(ConstantFolding(), """
HloModule m
ENTRY main {
  x = f32[3] parameter(0)
  a = f32[3] constant({1, 2, 3})
  b = f32[3] constant({10, 20, 30})
  s = f32[3] add(a, b)
  n = f32[3] negate(s)
  ROOT r = f32[3] multiply(x, n)
}
""", """
HloModule m
ENTRY main {
  x = f32[3] parameter(0)
  constant.1 = f32[3] constant({-11, -22, -33})
  ROOT r = f32[3] multiply(x, constant.1)
}
""")


def test_folds_reduce_through_its_reducer_and_compare_to_pred() -> None:
    check_pass(ConstantFolding(), """
HloModule m
sum {
  a = s32[] parameter(0)
  b = s32[] parameter(1)
  ROOT s = s32[] add(a, b)
}
ENTRY main {
  x = s32[] parameter(0)
  c = s32[4] constant({1, 2, 3, 4})
  zero = s32[] constant(0)
  total = s32[] reduce(c, zero), dimensions={0}, to_apply=sum
  big = pred[] compare(total, zero), direction=GT
  ROOT r = s32[] select(big, x, total)
}
""", """
HloModule m
sum {
  a = s32[] parameter(0)
  b = s32[] parameter(1)
  ROOT s = s32[] add(a, b)
}
ENTRY main {
  constant.1 = pred[] constant(true)
  x = s32[] parameter(0)
  constant = s32[] constant(10)
  ROOT r = s32[] select(constant.1, x, constant)
}
""")


def test_folds_constant_with_broadcast_of_constant_but_not_the_broadcast() -> None:
    check_pass(ConstantFolding(), """
HloModule m
ENTRY main {
  x = f32[2] parameter(0)
  c = f32[2] constant({1, 2})
  two = f32[] constant(2)
  b = f32[2] broadcast(two), dimensions={}
  m = f32[2] multiply(c, b)
  ROOT r = f32[2] add(x, m)
}
""", """
HloModule m
ENTRY main {
  x = f32[2] parameter(0)
  constant = f32[2] constant({2, 4})
  ROOT r = f32[2] add(x, constant)
}
""")


def test_never_folds_broadcasts_iota_rng_or_all_broadcast_operands() -> None:
    check_pass(ConstantFolding(), """
HloModule m
ENTRY main {
  one = f32[] constant(1)
  two = f32[] constant(2)
  b1 = f32[8] broadcast(one), dimensions={}
  b2 = f32[8] broadcast(two), dimensions={}
  s = f32[8] add(b1, b2)
  i = f32[8] iota(), iota_dimension=0
  r = f32[8] rng(one, two), distribution=rng_uniform
  t = f32[8] add(s, i)
  ROOT u = f32[8] add(t, r)
}
""", None, semantics=False)


def test_size_cap() -> None:
    text = """
HloModule m
ENTRY main {
  a = f32[3] constant({1, 2, 3})
  ROOT n = f32[3] negate(a)
}
"""
    check_pass(ConstantFolding(max_elements=2), text, None)
    check_pass(ConstantFolding(max_elements=3), text, """
HloModule m
ENTRY main {
  ROOT constant = f32[3] constant({-1, -2, -3})
}
""")
