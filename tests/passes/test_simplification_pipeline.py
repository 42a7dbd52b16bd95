"""The default pipeline's simplification stage: documented order, passes working together to a
fixed point, notes in the stage records, and disabling passes by XLA name."""

from __future__ import annotations

from tests.passes.pass_test_utils import assert_same_results, canonical
from xla_teach.hlo.text.parser import parse_hlo
from xla_teach.passes.pass_base import PassOptions, PassRecorder
from xla_teach.passes.pipeline import default_pipeline

# A call, a transpose pair, x*1, a repeated subexpression and a constant expression: every
# simplifier has something to do, and the result is a single dot.
MODULE = """
HloModule m
scale {
  p = f32[4,8] parameter(0)
  one = f32[] constant(1)
  ones = f32[4,8] broadcast(one), dimensions={}
  ROOT m = f32[4,8] multiply(p, ones)
}
ENTRY main {
  a = f32[8,4] parameter(0)
  b = f32[8,6] parameter(1)
  t1 = f32[4,8] transpose(a), dimensions={1,0}
  t2 = f32[8,4] transpose(t1), dimensions={1,0}
  t3 = f32[4,8] transpose(t2), dimensions={1,0}
  s = f32[4,8] call(t3), to_apply=scale
  d1 = f32[4,6] dot(s, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  d2 = f32[4,6] dot(s, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  two = f32[] constant(2)
  half = f32[] constant(0.5)
  prod = f32[] multiply(two, half)
  ps = f32[4,6] broadcast(prod), dimensions={}
  m = f32[4,6] multiply(d1, ps)
  ROOT r = f32[4,6] maximum(m, d2)
}
"""

EXPECTED = """
HloModule m
ENTRY main {
  a = f32[8,4] parameter(0)
  b = f32[8,6] parameter(1)
  ROOT dot = f32[4,6] dot(a, b), lhs_contracting_dims={0}, rhs_contracting_dims={0}
}
"""


def _optimize(disabled: frozenset[str] = frozenset()) -> tuple[str, PassRecorder]:
    module = parse_hlo(MODULE)
    recorder = PassRecorder()
    default_pipeline().find("optimization").run(module, PassOptions(disabled_passes=disabled), recorder)
    assert_same_results(parse_hlo(MODULE), module)
    return canonical(module), recorder


def test_documented_order() -> None:
    assert default_pipeline().describe().splitlines()[:14] == [
        "cpu-pipeline",
        "  optimization",
        "    call-inliner",
        "    layout-assignment",
        "    simplification (fixed point)",
        "      algsimp",
        "      constant_folding",
        "      cse",
        "      tuple-simplifier",
        "      reshape-mover",
        "      transpose-folding",
        "      simplify-while-loops",
        "      while-loop-invariant-code-motion",
        "      dce",
    ]


def test_passes_reach_a_fixed_point_together() -> None:
    text, recorder = _optimize()
    assert text == canonical(parse_hlo(EXPECTED))
    changed = {r.pass_name for r in recorder.changed_records()}
    assert {"call-inliner", "algsimp", "constant_folding", "cse", "transpose-folding"} <= changed
    rounds = [r for r in recorder.records if r.pipeline == "simplification"]
    last_round = rounds[-9:]  # the fixed point ends with a round where nothing changes
    assert [r.pass_name for r in last_round][0] == "algsimp" and not any(r.changed for r in last_round)


def test_records_carry_the_passes_notes() -> None:
    _, recorder = _optimize()
    notes = [n for r in recorder.records if r.pass_name == "call-inliner" for n in r.notes]
    assert any("inlined s" in n for n in notes)
    folded = [n for r in recorder.records if r.pass_name == "constant_folding" for n in r.notes]
    assert any("folded prod" in n for n in folded)


def test_disabling_passes_by_name() -> None:
    text, recorder = _optimize(frozenset({"transpose-folding", "cse"}))
    assert all(r.skipped for r in recorder.records if r.pass_name in ("transpose-folding", "cse"))
    assert text.count(" dot(") == 2  # no cse
    assert text.count(" transpose(") == 1 and " transpose(a)" in text  # three merged by algsimp, not folded
