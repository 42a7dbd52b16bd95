"""defuser: golden before/after texts, each also checked on the interpreter, and whole optimized
modules defused back to the same results."""

from __future__ import annotations

from tests.passes.pass_test_utils import assert_same_results, check_pass
from xla_teach.api import compile_module
from xla_teach.hlo.text.parser import parse_hlo
from xla_teach.passes.fusion.defuser import Defuser, defuse_module


def test_inlines_a_fusion_in_place() -> None:
    check_pass(Defuser(), """
HloModule m
fused_add_exp {
  p0 = f32[4] parameter(0)
  p1 = f32[4] parameter(1)
  a = f32[4] add(p0, p1)
  ROOT e = f32[4] exponential(a)
}
ENTRY main {
  x = f32[4] parameter(0)
  y = f32[4] parameter(1)
  ROOT f = f32[4] fusion(x, y), kind=kLoop, calls=fused_add_exp
}
""", """
HloModule m
ENTRY main {
  x = f32[4] parameter(0)
  y = f32[4] parameter(1)
  a.1 = f32[4] add(x, y)
  ROOT e.1 = f32[4] exponential(a.1)
}
""")


def test_a_multi_output_fusion_becomes_a_tuple_of_its_roots() -> None:
    module = check_pass(Defuser(), """
HloModule m
fused {
  p0 = f32[4] parameter(0)
  n = f32[4] negate(p0)
  e = f32[4] exponential(p0)
  ROOT t = (f32[4], f32[4]) tuple(n, e)
}
ENTRY main {
  x = f32[4] parameter(0)
  f = (f32[4], f32[4]) fusion(x), kind=kLoop, calls=fused
  a = f32[4] get-tuple-element(f), index=0
  b = f32[4] get-tuple-element(f), index=1
  ROOT s = f32[4] add(a, b)
}
""", """
HloModule m
ENTRY main {
  x = f32[4] parameter(0)
  n.1 = f32[4] negate(x)
  e.1 = f32[4] exponential(x)
  t.1 = (f32[4], f32[4]) tuple(n.1, e.1)
  a = f32[4] get-tuple-element(t.1), index=0
  b = f32[4] get-tuple-element(t.1), index=1
  ROOT s = f32[4] add(a, b)
}
""")
    assert len(module.computations) == 1


def test_an_optimized_module_defused_computes_the_same_and_names_every_copy() -> None:
    softmax = """HloModule softmax
add { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT r = f32[] add(a, b) }
max { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT r = f32[] maximum(a, b) }
ENTRY main {
  x = f32[8,100] parameter(0)
  ninf = f32[] constant(-inf)
  mx = f32[8] reduce(x, ninf), dimensions={1}, to_apply=max
  mxb = f32[8,100] broadcast(mx), dimensions={0}
  sub = f32[8,100] subtract(x, mxb)
  e = f32[8,100] exponential(sub)
  zero = f32[] constant(0)
  s = f32[8] reduce(e, zero), dimensions={1}, to_apply=add
  sb = f32[8,100] broadcast(s), dimensions={0}
  ROOT d = f32[8,100] divide(e, sb)
}
"""
    optimized = compile_module(softmax, "cpu").module
    fused = [i for i in optimized.instructions() if i.opcode == "fusion"]
    assert fused
    members = {i.name for f in fused for i in f.fused_computation.instructions if i.opcode != "parameter"}
    defused = parse_hlo(optimized.to_text())
    copies = defuse_module(defused)
    assert set(copies) == members
    entry = {i.name for i in defused.entry.instructions}
    assert set(copies.values()) <= entry
    assert not [i for i in defused.instructions() if i.opcode == "fusion"]
    assert_same_results(optimized, defused)
