"""tuple-simplifier: golden before/after texts, each also checked on the interpreter."""

from tests.passes.pass_test_utils import check_pass
from xla_teach.passes.simplifiers.tuple_simplifier import TupleSimplifier


def test_get_tuple_element_of_tuple_is_the_operand() -> None:
    check_pass(TupleSimplifier(), """
HloModule m
ENTRY main {
  x = f32[4] parameter(0)
  y = f32[4] parameter(1)
  t = (f32[4], f32[4]) tuple(x, y)
  ROOT g = f32[4] get-tuple-element(t), index=1
}
""", """
HloModule m
ENTRY main {
  x = f32[4] parameter(0)
  ROOT y = f32[4] parameter(1)
}
""")


def test_repacked_tuple_is_the_original() -> None:
    check_pass(TupleSimplifier(), """
HloModule m
ENTRY main {
  p = (f32[4], s32[]) parameter(0)
  a = f32[4] get-tuple-element(p), index=0
  b = s32[] get-tuple-element(p), index=1
  ROOT t = (f32[4], s32[]) tuple(a, b)
}
""", """
HloModule m
ENTRY main {
  ROOT p = (f32[4], s32[]) parameter(0)
}
""")


def test_reordered_or_partial_repacking_is_kept() -> None:
    check_pass(TupleSimplifier(), """
HloModule m
ENTRY main {
  p = (f32[4], f32[4]) parameter(0)
  a = f32[4] get-tuple-element(p), index=0
  b = f32[4] get-tuple-element(p), index=1
  ROOT t = (f32[4], f32[4]) tuple(b, a)
}
""", None)
    check_pass(TupleSimplifier(), """
HloModule m
ENTRY main {
  p = (f32[4], f32[4], f32[4]) parameter(0)
  a = f32[4] get-tuple-element(p), index=0
  b = f32[4] get-tuple-element(p), index=1
  ROOT t = (f32[4], f32[4]) tuple(a, b)
}
""", None)
