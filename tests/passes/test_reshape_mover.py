"""reshape-mover: golden before/after texts, each also checked on the interpreter."""

from tests.passes.pass_test_utils import check_pass
from xla_teach.passes.simplifiers.reshape_mover import ReshapeMover


def test_sinks_equal_transposes_below_an_elementwise_op() -> None:
    check_pass(ReshapeMover(), """
HloModule m
ENTRY main {
  a = f32[2,3] parameter(0)
  b = f32[2,3] parameter(1)
  ta = f32[3,2] transpose(a), dimensions={1,0}
  tb = f32[3,2] transpose(b), dimensions={1,0}
  ROOT m = f32[3,2] multiply(ta, tb)
}
""", """
HloModule m
ENTRY main {
  a = f32[2,3] parameter(0)
  b = f32[2,3] parameter(1)
  multiply = f32[2,3] multiply(a, b)
  ROOT transpose = f32[3,2] transpose(multiply), dimensions={1,0}
}
""")


def test_scalar_broadcasts_and_constants_are_rearranged_along() -> None:
    check_pass(ReshapeMover(), """
HloModule m
ENTRY main {
  a = f32[2,3] parameter(0)
  ra = f32[6] reshape(a)
  one = f32[] constant(1)
  ones = f32[6] broadcast(one), dimensions={}
  c = f32[6] constant({1, 2, 3, 4, 5, 6})
  s = f32[6] add(ra, ones)
  ROOT m = f32[6] multiply(s, c)
}
""", """
HloModule m
ENTRY main {
  a = f32[2,3] parameter(0)
  one = f32[] constant(1)
  broadcast = f32[2,3] broadcast(one), dimensions={}
  add = f32[2,3] add(a, broadcast)
  c = f32[6] constant({1, 2, 3, 4, 5, 6})
  reshape.1 = f32[2,3] reshape(c)
  multiply = f32[2,3] multiply(add, reshape.1)
  ROOT reshape.2 = f32[6] reshape(multiply)
}
""")


def test_needs_every_operand_rearrangeable_the_same_way() -> None:
    check_pass(ReshapeMover(), """
HloModule m
ENTRY main {
  a = f32[2,3] parameter(0)
  b = f32[3,2] parameter(1)
  ta = f32[3,2] transpose(a), dimensions={1,0}
  ROOT m = f32[3,2] multiply(ta, b)
}
""", None)
    check_pass(ReshapeMover(), """
HloModule m
ENTRY main {
  a = f32[2,3] parameter(0)
  b = f32[3,2] parameter(1)
  ra = f32[6] reshape(a)
  rb = f32[6] reshape(b)
  ROOT m = f32[6] multiply(ra, rb)
}
""", None)
