"""opt (hlo-opt): named passes or the whole pipeline, every stage printable, results unchanged."""

from __future__ import annotations

import numpy as np
import pytest

from xla_teach.hlo.evaluator import evaluate_module
from xla_teach.hlo.text.parser import parse_hlo
from xla_teach.tools.bugs.fake_data import fake_arguments
from xla_teach.tools.cli.opt import list_passes, normalize_stage, passes_by_name, run_opt
from xla_teach.tools.tool_support import ToolError

EXAMPLE = """
HloModule opt_example

ENTRY %main (x: f32[16], y: f32[16]) -> f32[16] {
  %x = f32[16]{0} parameter(0)
  %y = f32[16]{0} parameter(1)
  %unused = f32[16]{0} exponential(%x)
  %m = f32[16]{0} multiply(%x, %y)
  ROOT %n = f32[16]{0} negate(%m)
}
"""


def _same_results(before: str, after: str) -> None:
    a, b = parse_hlo(before), parse_hlo(after)
    args = fake_arguments(a)
    for x, y in zip(evaluate_module(a, args), evaluate_module(b, args), strict=True):
        np.testing.assert_array_equal(x, y)


def test_named_passes_run_in_order():
    only_dce = run_opt(parse_hlo(EXAMPLE), "cpu", ["dce"])
    assert "exponential" not in only_dce and "fusion(" not in only_dce
    fused = parse_hlo(run_opt(parse_hlo(EXAMPLE), "cpu", ["dce", "fusion"]))
    assert [i.opcode for i in fused.entry.instructions].count("fusion") == 1
    _same_results(EXAMPLE, fused.to_text())


def test_whole_pipeline_is_the_backends():
    from xla_teach.api import compile_module

    text = run_opt(parse_hlo(EXAMPLE), "cpu")
    assert text == compile_module(EXAMPLE, "cpu").module.to_text()
    _same_results(EXAMPLE, text)


@pytest.mark.parametrize("stage,needle", [("buffer-assignment", "allocation"), ("llvm_ir", "define"),
                                          ("optimized_llvm_ir", "define"), ("asm", "\t.size\t"),
                                          ("llvm", "define"), ("pass-summary", "fusion/fusion")])
def test_cpu_stages(stage, needle):
    assert needle in run_opt(parse_hlo(EXAMPLE), "cpu", None, stage)


def test_kernel_names_agree_across_stages():
    optimized = parse_hlo(run_opt(parse_hlo(EXAMPLE), "cpu"))
    (fusion,) = [i for i in optimized.entry.instructions if i.opcode == "fusion"]
    for stage in ("llvm_ir", "asm"):
        assert fusion.name in run_opt(parse_hlo(EXAMPLE), "cpu", None, stage)


def test_stage_errors_and_aliases():
    assert normalize_stage("llvm-before-optimizations") == "llvm_ir"
    with pytest.raises(ToolError, match="unknown --stage 'bogus'"):
        run_opt(parse_hlo(EXAMPLE), "cpu", None, "bogus")
    with pytest.raises(ToolError, match="has no stage ptx"):
        run_opt(parse_hlo(EXAMPLE), "cpu", None, "ptx")


def test_list_and_unknown_passes():
    names = [p.name for p in list_passes("cpu")]
    assert {"dce", "fusion", "hlo-memory-scheduler"} <= set(names) and len(names) == len(set(names))
    with pytest.raises(ToolError, match="unknown pass 'no-such-pass'.*known: .*dce"):
        passes_by_name(["no-such-pass"], "cpu")
    # fresh instances every time: two pipelines never share a pass object
    assert passes_by_name(["dce"]).passes[0] is not passes_by_name(["dce"]).passes[0]


def test_pass_summary_shows_each_pass_notes():
    """The notes (fusion's reason for each refusal) follow their pass's line, indented."""
    summary = run_opt(parse_hlo(EXAMPLE), "cpu", None, "pass-summary").splitlines()
    fusion_line = next(i for i, line in enumerate(summary) if "fusion/fusion" in line)
    following = summary[fusion_line + 1:]
    assert following and following[0].startswith("      ")
    notes = [line.strip() for line in following if line.startswith("      ")]
    assert any(note.startswith("fused m into") for note in notes)
    assert any("parameters are inputs" in note for note in notes)
