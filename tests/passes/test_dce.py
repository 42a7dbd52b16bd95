from tests.passes.pass_test_utils import check_pass
from xla_teach.passes.simplifiers.dce import DeadCodeElimination


def test_removes_dead_chain() -> None:
    check_pass(DeadCodeElimination(), """
HloModule m
ENTRY main {
  x = f32[4] parameter(0)
  e = f32[4] exponential(x)
  unused = f32[4] negate(e)
  ROOT neg = f32[4] negate(x)
}
""", """
HloModule m
ENTRY main {
  x = f32[4] parameter(0)
  ROOT neg = f32[4] negate(x)
}
""")


def test_keeps_parameters_side_effects_and_control_predecessors() -> None:
    check_pass(DeadCodeElimination(), """
HloModule m
ENTRY main {
  x = f32[4] parameter(0)
  unused_param = f32[4] parameter(1)
  cc = f32[4] custom-call(x), custom_call_target="xla_teach.identity", custom_call_has_side_effect=true
  ordered = f32[4] negate(x)
  ROOT r = f32[4] exponential(x), control-predecessors={ordered}
}
""", None, semantics=False)


def test_removes_unreachable_computations() -> None:
    check_pass(DeadCodeElimination(), """
HloModule m
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY main {
  x = f32[4] parameter(0)
  zero = f32[] constant(0)
  dead_sum = f32[] reduce(x, zero), dimensions={0}, to_apply=add
  ROOT n = f32[4] negate(x)
}
""", """
HloModule m
ENTRY main {
  x = f32[4] parameter(0)
  ROOT n = f32[4] negate(x)
}
""")
