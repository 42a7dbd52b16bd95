"""simplify-while-loops: golden before/after texts, each also checked on the interpreter."""

from tests.passes.pass_test_utils import check_pass
from xla_teach.passes.simplifiers.while_loop_simplifier import WhileLoopSimplifier

DEAD_ELEMENT = """
HloModule m
body {
  s = (s32[], f32[4]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  one = s32[] constant(1)
  next = s32[] add(i, one)
  x = f32[4] get-tuple-element(s), index=1
  y = f32[4] exponential(x)
  ROOT t = (s32[], f32[4]) tuple(next, y)
}
cond {
  c = (s32[], f32[4]) parameter(0)
  ci = s32[] get-tuple-element(c), index=0
  n = s32[] constant(3)
  ROOT lt = pred[] compare(ci, n), direction=LT
}
ENTRY main {
  x0 = f32[4] parameter(0)
  zero = s32[] constant(0)
  init = (s32[], f32[4]) tuple(zero, x0)
  loop = (s32[], f32[4]) while(init), condition=cond, body=body
  ROOT r = s32[] get-tuple-element(loop), index=0
}
"""

ONLY_LIVE = """
HloModule m
body {
  s = (s32[], f32[4], f32[4]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  one = s32[] constant(1)
  next = s32[] add(i, one)
  x = f32[4] get-tuple-element(s), index=1
  w = f32[4] get-tuple-element(s), index=2
  y = f32[4] add(x, w)
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

NEVER_RUNS = """
HloModule m
body {
  s = (s32[], f32[4]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  one = s32[] constant(1)
  next = s32[] add(i, one)
  x = f32[4] get-tuple-element(s), index=1
  y = f32[4] exponential(x)
  ROOT t = (s32[], f32[4]) tuple(next, y)
}
cond {
  c = (s32[], f32[4]) parameter(0)
  ci = s32[] get-tuple-element(c), index=0
  n = s32[] constant(3)
  ROOT lt = pred[] compare(ci, n), direction=LT
}
ENTRY main {
  x0 = f32[4] parameter(0)
  start = s32[] constant(5)
  init = (s32[], f32[4]) tuple(start, x0)
  loop = (s32[], f32[4]) while(init), condition=cond, body=body
  ROOT r = f32[4] get-tuple-element(loop), index=1
}
"""


def test_removes_a_loop_state_element_nobody_reads() -> None:
    check_pass(WhileLoopSimplifier(), DEAD_ELEMENT, """
HloModule m
body {
  s = (s32[]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  one = s32[] constant(1)
  next = s32[] add(i, one)
  ROOT tuple = (s32[]) tuple(next)
}
cond {
  c = (s32[]) parameter(0)
  ci = s32[] get-tuple-element(c), index=0
  n = s32[] constant(3)
  ROOT lt = pred[] compare(ci, n), direction=LT
}
ENTRY main {
  x0 = f32[4] parameter(0)
  zero = s32[] constant(0)
  tuple.1 = (s32[]) tuple(zero)
  while = (s32[]) while(tuple.1), condition=cond, body=body
  ROOT r = s32[] get-tuple-element(while), index=0
}
""")


def test_keeps_elements_that_feed_live_ones() -> None:
    # w is never read outside, but x (which is) is computed from it
    check_pass(WhileLoopSimplifier(), ONLY_LIVE, None)


def test_loop_whose_condition_is_false_at_the_start_is_its_initial_state() -> None:
    check_pass(WhileLoopSimplifier(), NEVER_RUNS, """
HloModule m
body {
  s = (s32[], f32[4]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  one = s32[] constant(1)
  next = s32[] add(i, one)
  x = f32[4] get-tuple-element(s), index=1
  y = f32[4] exponential(x)
  ROOT t = (s32[], f32[4]) tuple(next, y)
}
cond {
  c = (s32[], f32[4]) parameter(0)
  ci = s32[] get-tuple-element(c), index=0
  n = s32[] constant(3)
  ROOT lt = pred[] compare(ci, n), direction=LT
}
ENTRY main {
  start = s32[] constant(5)
  x0 = f32[4] parameter(0)
  init = (s32[], f32[4]) tuple(start, x0)
  ROOT r = f32[4] get-tuple-element(init), index=1
}
""")


def test_loop_that_runs_is_kept() -> None:
    check_pass(WhileLoopSimplifier(), NEVER_RUNS.replace("constant(5)", "constant(1)"), None)
