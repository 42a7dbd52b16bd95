"""call-inliner: golden before/after texts, each also checked on the interpreter."""

from pathlib import Path

import pytest

from tests.passes.pass_test_utils import assert_same_results, check_pass
from xla_teach.hlo.text.parser import parse_hlo
from xla_teach.passes.simplifiers.call_inliner import CallInliner

FORI_LOOP = Path(__file__).resolve().parents[2] / "tests" / "data" / "xla_samples" / "fori_loop" / "before_optimizations.txt"


def test_inlines_a_call_and_removes_the_callee() -> None:
    check_pass(CallInliner(), """
HloModule m
square {
  p = f32[4] parameter(0)
  ROOT m = f32[4] multiply(p, p)
}
ENTRY main {
  x = f32[4] parameter(0)
  c = f32[4] call(x), to_apply=square
  ROOT n = f32[4] negate(c)
}
""", """
HloModule m
ENTRY main {
  x = f32[4] parameter(0)
  m.1 = f32[4] multiply(x, x)
  ROOT n = f32[4] negate(m.1)
}
""")


def test_nested_calls_and_a_callee_called_twice() -> None:
    check_pass(CallInliner(), """
HloModule m
inner {
  p = f32[4] parameter(0)
  ROOT e = f32[4] exponential(p)
}
outer {
  a = f32[4] parameter(0)
  b = f32[4] parameter(1)
  s = f32[4] subtract(a, b)
  ROOT c = f32[4] call(s), to_apply=inner
}
ENTRY main {
  x = f32[4] parameter(0)
  y = f32[4] parameter(1)
  c1 = f32[4] call(x, y), to_apply=outer
  c2 = f32[4] call(y, x), to_apply=outer
  ROOT t = (f32[4], f32[4]) tuple(c1, c2)
}
""", """
HloModule m
ENTRY main {
  x = f32[4] parameter(0)
  y = f32[4] parameter(1)
  s.1 = f32[4] subtract(x, y)
  e.2 = f32[4] exponential(s.1)
  s.2 = f32[4] subtract(y, x)
  e.3 = f32[4] exponential(s.2)
  ROOT t = (f32[4], f32[4]) tuple(e.2, e.3)
}
""")


@pytest.mark.skipif(not FORI_LOOP.exists(), reason="shared samples not available")
def test_call_inside_a_while_body_of_a_real_jax_module() -> None:
    original = parse_hlo(FORI_LOOP.read_text())
    module = original.clone()
    assert CallInliner().run(module)
    assert not any(i.opcode == "call" for i in module.instructions())
    assert_same_results(original, module)
