"""while-loop-invariant-code-motion: golden before/after texts, each also checked on the interpreter."""

from tests.passes.pass_test_utils import check_pass
from xla_teach.passes.simplifiers.while_loop_invariant_code_motion import WhileLoopInvariantCodeMotion

HOIST_ONE = """
HloModule m
body {
  s = (s32[], f32[4], f32[4]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  one = s32[] constant(1)
  next = s32[] add(i, one)
  x = f32[4] get-tuple-element(s), index=1
  w = f32[4] get-tuple-element(s), index=2
  e = f32[4] exponential(w)
  y = f32[4] add(x, e)
  ROOT t = (s32[], f32[4], f32[4]) tuple(next, y, w)
}
cond {
  c = (s32[], f32[4], f32[4]) parameter(0)
  ci = s32[] get-tuple-element(c), index=0
  n = s32[] constant(3)
  ROOT lt = pred[] compare(ci, n), direction=LT
}
ENTRY main {
  x0 = f32[4] parameter(0)
  w0 = f32[4] parameter(1)
  zero = s32[] constant(0)
  init = (s32[], f32[4], f32[4]) tuple(zero, x0, w0)
  loop = (s32[], f32[4], f32[4]) while(init), condition=cond, body=body
  ROOT r = f32[4] get-tuple-element(loop), index=1
}
"""

HOIST_CHAIN = """
HloModule m
body {
  s = (s32[], f32[4], f32[4]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  one = s32[] constant(1)
  next = s32[] add(i, one)
  x = f32[4] get-tuple-element(s), index=1
  w = f32[4] get-tuple-element(s), index=2
  two = f32[] constant(2)
  b = f32[4] broadcast(two), dimensions={}
  m = f32[4] multiply(w, b)
  e = f32[4] exponential(m)
  y = f32[4] add(x, e)
  ROOT t = (s32[], f32[4], f32[4]) tuple(next, y, w)
}
cond {
  c = (s32[], f32[4], f32[4]) parameter(0)
  ci = s32[] get-tuple-element(c), index=0
  n = s32[] constant(3)
  ROOT lt = pred[] compare(ci, n), direction=LT
}
ENTRY main {
  x0 = f32[4] parameter(0)
  w0 = f32[4] parameter(1)
  zero = s32[] constant(0)
  init = (s32[], f32[4], f32[4]) tuple(zero, x0, w0)
  loop = (s32[], f32[4], f32[4]) while(init), condition=cond, body=body
  ROOT r = f32[4] get-tuple-element(loop), index=1
}
"""

VARIANT = """
HloModule m
body {
  s = (s32[], f32[4], f32[4]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  one = s32[] constant(1)
  next = s32[] add(i, one)
  x = f32[4] get-tuple-element(s), index=1
  w = f32[4] get-tuple-element(s), index=2
  two = f32[] constant(2)
  b = f32[4] broadcast(two), dimensions={}
  m = f32[4] multiply(w, b)
  e = f32[4] exponential(m)
  y = f32[4] add(x, e)
  ROOT t = (s32[], f32[4], f32[4]) tuple(next, y, x)
}
cond {
  c = (s32[], f32[4], f32[4]) parameter(0)
  ci = s32[] get-tuple-element(c), index=0
  n = s32[] constant(3)
  ROOT lt = pred[] compare(ci, n), direction=LT
}
ENTRY main {
  x0 = f32[4] parameter(0)
  w0 = f32[4] parameter(1)
  zero = s32[] constant(0)
  init = (s32[], f32[4], f32[4]) tuple(zero, x0, w0)
  loop = (s32[], f32[4], f32[4]) while(init), condition=cond, body=body
  ROOT r = f32[4] get-tuple-element(loop), index=1
}
"""


def test_hoists_an_op_on_a_pass_through_element() -> None:
    check_pass(WhileLoopInvariantCodeMotion(), HOIST_ONE, """
HloModule m
body {
  s = (s32[], f32[4], f32[4], f32[4]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  one = s32[] constant(1)
  next = s32[] add(i, one)
  x = f32[4] get-tuple-element(s), index=1
  e.2 = f32[4] get-tuple-element(s), index=3
  y = f32[4] add(x, e.2)
  w = f32[4] get-tuple-element(s), index=2
  ROOT tuple = (s32[], f32[4], f32[4], f32[4]) tuple(next, y, w, e.2)
}
cond {
  c = (s32[], f32[4], f32[4], f32[4]) parameter(0)
  ci = s32[] get-tuple-element(c), index=0
  n = s32[] constant(3)
  ROOT lt = pred[] compare(ci, n), direction=LT
}
ENTRY main {
  zero = s32[] constant(0)
  x0 = f32[4] parameter(0)
  w0 = f32[4] parameter(1)
  e.1 = f32[4] exponential(w0)
  tuple.1 = (s32[], f32[4], f32[4], f32[4]) tuple(zero, x0, w0, e.1)
  while = (s32[], f32[4], f32[4], f32[4]) while(tuple.1), condition=cond, body=body
  ROOT r = f32[4] get-tuple-element(while), index=1
}
""")


def test_hoists_a_chain_with_its_cheap_operands_and_carries_only_its_result() -> None:
    check_pass(WhileLoopInvariantCodeMotion(), HOIST_CHAIN, """
HloModule m
body {
  s = (s32[], f32[4], f32[4], f32[4]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  one = s32[] constant(1)
  next = s32[] add(i, one)
  x = f32[4] get-tuple-element(s), index=1
  e.2 = f32[4] get-tuple-element(s), index=3
  y = f32[4] add(x, e.2)
  w = f32[4] get-tuple-element(s), index=2
  ROOT tuple = (s32[], f32[4], f32[4], f32[4]) tuple(next, y, w, e.2)
}
cond {
  c = (s32[], f32[4], f32[4], f32[4]) parameter(0)
  ci = s32[] get-tuple-element(c), index=0
  n = s32[] constant(3)
  ROOT lt = pred[] compare(ci, n), direction=LT
}
ENTRY main {
  zero = s32[] constant(0)
  x0 = f32[4] parameter(0)
  w0 = f32[4] parameter(1)
  two.1 = f32[] constant(2)
  b.1 = f32[4] broadcast(two.1), dimensions={}
  m.1 = f32[4] multiply(w0, b.1)
  e.1 = f32[4] exponential(m.1)
  tuple.1 = (s32[], f32[4], f32[4], f32[4]) tuple(zero, x0, w0, e.1)
  while = (s32[], f32[4], f32[4], f32[4]) while(tuple.1), condition=cond, body=body
  ROOT r = f32[4] get-tuple-element(while), index=1
}
""")


def test_nothing_to_hoist_when_the_element_changes_every_iteration() -> None:
    check_pass(WhileLoopInvariantCodeMotion(), VARIANT, None)
