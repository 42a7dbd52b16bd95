"""Rewrite by rewrite: algsimp records each rule it applies and fusion each producer it fuses, with
the rule's source location and the HLO lines around the rewrite, so the explorer can step through
them; PassOptions(record_steps=False) turns it off."""

from __future__ import annotations

import inspect
from pathlib import Path

from xla_teach.hlo.text.parser import parse_hlo
from xla_teach.passes.fusion.fusion_rules import FusionConfig, fusion_decision
from xla_teach.passes.fusion.instruction_fusion import InstructionFusion
from xla_teach.passes.pass_base import HloPassPipeline, PassOptions, PassRecorder
from xla_teach.passes.simplifiers.algebraic_simplifier import ALL_RULES, AlgebraicSimplifier

TEXT = """HloModule m
ENTRY main {
  x = f32[8] parameter(0)
  zero = f32[] constant(0)
  zeros = f32[8] broadcast(zero), dimensions={}
  a = f32[8] add(x, zeros)
  r = f32[2,4] reshape(a)
  rr = f32[8] reshape(r)
  e = f32[8] exponential(rr)
  ROOT n = f32[8] negate(e)
}"""
ROOT = Path(__file__).resolve().parents[2]


def run(passes, record_steps: bool = True):  # type: ignore[no-untyped-def]
    recorder = PassRecorder()
    HloPassPipeline("p", passes).run(parse_hlo(TEXT), PassOptions(record_steps=record_steps), recorder)
    return recorder.records


def test_each_rule_applied_is_a_step_with_the_rule_s_code_and_the_lines_around_it() -> None:
    (record,) = run([AlgebraicSimplifier()])
    fired = [n for n in record.notes if "->" in n]
    assert len(record.steps) == len(fired) >= 2
    by_name = {r.name: r for r in ALL_RULES}
    for step, note in zip(record.steps, fired, strict=True):
        assert f"[{step.rule}]" in note
        rule = by_name[step.rule]
        lines, first = inspect.getsourcelines(rule.apply)
        assert (ROOT / step.source_file).resolve() == Path(inspect.getsourcefile(rule.apply)).resolve()
        assert step.source_line == first and "@rule(" in lines[0]
        assert step.before and step.after and step.touched[0] in step.before[0]
    first = record.steps[0]
    assert first.before[0].startswith("%a = f32[8]{0} add(%x, %zeros)") and first.after[0].startswith("%x = ")


def test_each_fused_producer_is_a_step_and_steps_can_be_turned_off() -> None:
    (record,) = run([InstructionFusion(FusionConfig())])
    fused = [n for n in record.notes if n.startswith("fused ")]
    assert len(record.steps) == len(fused) >= 2
    where = inspect.getsourcelines(fusion_decision)[1]
    assert all(s.source_line == where and s.source_file.endswith("fusion_rules.py") for s in record.steps)
    assert all(s.after[0].split(" = ")[0].removeprefix("ROOT ").lstrip("%") in s.touched for s in record.steps)
    (quiet,) = run([InstructionFusion(FusionConfig())], record_steps=False)
    assert quiet.steps == [] and quiet.notes == record.notes
