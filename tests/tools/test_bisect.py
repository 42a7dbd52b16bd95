"""bisect: the first pass that changes a program's results is found at its exact position, with its
diff; a planted miscompile in the backend pipeline is named and shrunk to a tiny reproducer."""

from __future__ import annotations

import numpy as np
import pytest

from xla_teach.hlo.evaluator import evaluate_module
from xla_teach.hlo.text.parser import parse_hlo
from xla_teach.passes.pass_base import HloPass, HloPassPipeline
from xla_teach.passes.simplifiers.dce import DeadCodeElimination
from xla_teach.tools.bugs.bisect import (
    BrokenMultiplyToAdd,
    bisect_compilation,
    bisect_passes,
    inject_pass,
    write_reproducer,
)
from xla_teach.tools.bugs.fake_data import fake_arguments
from xla_teach.tools.bugs.shrink import as_parameter, shrink_module, with_root, without_output
from xla_teach.tools.bugs.snapshot import load_snapshot
from xla_teach.tools.tool_support import ToolError, backend_pipeline, reference_outputs

SEED = """
HloModule seed_example

%add_f32 (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %sum = f32[] add(%a, %b)
}

ENTRY %main (x: f32[1024], y: f32[1024], z: f32[1024]) -> f32[] {
  %x = f32[1024]{0} parameter(0)
  %y = f32[1024]{0} parameter(1)
  %z = f32[1024]{0} parameter(2)
  %mul = f32[1024]{0} multiply(%y, %z)
  %add = f32[1024]{0} add(%x, %mul)
  %e = f32[1024]{0} exponential(%add)
  %dead = f32[1024]{0} negate(%e)
  %zero = f32[] constant(0)
  ROOT %total = f32[] reduce(%add, %zero), dimensions={0}, to_apply=%add_f32
}
"""


class RenameOnly(HloPass):
    """Changes the module (a name) but not its meaning: a stage that must test good."""

    def __init__(self, tag: str) -> None:
        super().__init__()
        self.name = f"rename-{tag}"
        self.tag = tag

    def run(self, module):
        module.entry.root.name = f"total_{self.tag}"
        return True


@pytest.mark.parametrize("position", [0, 3, 7])
def test_bisect_passes_finds_planted_pass_at_its_position(position):
    passes: list[HloPass] = [RenameOnly(str(i)) for i in range(8)]
    passes.insert(position, BrokenMultiplyToAdd())
    module = parse_hlo(SEED)
    result = bisect_passes(module, passes, fake_arguments(module))
    assert result.pass_name == "broken-multiply-to-add"
    assert result.stage == position + 1 and result.num_stages == 9
    assert len(result.checks) <= 5  # binary search: about log2(9) + 1 checks, not 9
    diff = result.diff()
    assert "-  %mul = f32[1024]{0} multiply(%y, %z)" in diff and "add(%y, %z)" in diff


def test_bisect_passes_inside_nested_pipeline_and_no_culprit():
    module = parse_hlo(SEED)
    args = fake_arguments(module)
    nested = HloPassPipeline("outer", [DeadCodeElimination(), HloPassPipeline("inner", [BrokenMultiplyToAdd()])])
    result = bisect_passes(module, nested, args)
    assert result.culprit.pipeline == "inner" and result.pass_name == "broken-multiply-to-add"
    clean = bisect_passes(module, [DeadCodeElimination(), RenameOnly("a")], args)
    assert clean.culprit is None and "no HLO pass changed the program's meaning" in clean.describe()


def test_custom_check_is_used():
    module = parse_hlo(SEED)
    seen = []

    def check(stage_module):  # "bad" from the stage made by rename-2 onwards
        seen.append(stage_module.entry.root.name)
        return int(seen[-1].split("_")[1]) < 2

    result = bisect_passes(module, [RenameOnly(str(i)) for i in range(5)], [], check=check)
    assert result.pass_name == "rename-2" and result.stage == 3
    assert sorted(seen) == sorted(set(seen)) and len(seen) <= 4


def test_bisect_compilation_names_pass_and_shrinks_to_five_or_fewer():
    module = parse_hlo(SEED)
    args = fake_arguments(module)
    report = bisect_compilation(module, args, "cpu",
                                lambda: inject_pass(backend_pipeline("cpu"), "broken-multiply-to-add", "fusion"))
    assert report.failure and "output 0" in report.failure
    assert report.pass_result.pass_name == "broken-multiply-to-add"
    shrunk = report.shrunk
    assert shrunk.module.instruction_count() <= 5
    assert "multiply" in [i.opcode for i in shrunk.module.entry.instructions]
    # the reproducer really still fails: the planted pass changes its result, the interpreter does not
    broken = shrunk.module.clone()
    BrokenMultiplyToAdd().run(broken)
    assert not np.allclose(evaluate_module(broken, shrunk.args)[0], reference_outputs(shrunk.module, shrunk.args)[0])


def test_no_failure_means_nothing_to_bisect():
    module = parse_hlo(SEED)
    report = bisect_compilation(module, fake_arguments(module), "cpu")
    assert report.failure == "" and report.pass_result is None and "nothing to bisect" in report.text()


def test_shrink_moves_and_cuts_keep_values():
    module = parse_hlo(SEED)
    args = fake_arguments(module)
    sub, sub_args = with_root(module, args, "mul")
    assert [i.opcode for i in sub.entry.instructions].count("parameter") == 2 and len(sub_args) == 2
    np.testing.assert_array_equal(evaluate_module(sub, sub_args)[0], args[1] * args[2])
    cut, cut_args = as_parameter(module, args, "add")
    assert cut.instruction_count() < module.instruction_count()
    np.testing.assert_allclose(evaluate_module(cut, cut_args)[0], evaluate_module(module, args)[0], rtol=1e-6)


def test_without_output_drops_one_tuple_element():
    text = SEED.replace("  ROOT %total = f32[] reduce(%add, %zero), dimensions={0}, to_apply=%add_f32",
                        "  %total = f32[] reduce(%add, %zero), dimensions={0}, to_apply=%add_f32\n"
                        "  ROOT %t = (f32[], f32[1024]{0}) tuple(%total, %mul)").replace(
                        "-> f32[] {\n  %x", "-> (f32[], f32[1024]) {\n  %x")
    module = parse_hlo(text)
    args = fake_arguments(module)
    smaller, smaller_args = without_output(module, args, 0)
    assert smaller.entry.root.shape.to_text(print_layout=False) == "(f32[1024])"
    assert len(smaller_args) == 2  # x was only needed by the dropped sum
    np.testing.assert_array_equal(evaluate_module(smaller, smaller_args)[0], args[1] * args[2])


def test_shrink_with_predicate_finds_minimal_exponential():
    module = parse_hlo(SEED.replace("reduce(%add, %zero)", "reduce(%e, %zero)"))
    args = fake_arguments(module)

    def has_exp(candidate, _args):
        return any(i.opcode == "exponential" for i in candidate.entry.instructions)

    result = shrink_module(module, args, has_exp)
    assert sorted(i.opcode for i in result.module.entry.instructions) == ["exponential", "parameter"]


def test_write_reproducer_never_overwrites(tmp_path):
    module = parse_hlo(SEED)
    args = fake_arguments(module)
    report = bisect_compilation(module, args, "cpu",
                                lambda: inject_pass(backend_pipeline("cpu"), "broken-multiply-to-add"))
    hlo, snap = write_reproducer(tmp_path, report.shrunk, "cpu")
    assert parse_hlo(hlo.read_text()).to_text() == report.shrunk.module.to_text()
    loaded = load_snapshot(snap)
    assert all(np.array_equal(a, b) for a, b in zip(loaded.arguments, report.shrunk.args, strict=True))
    with pytest.raises(ToolError, match="already exists"):
        write_reproducer(tmp_path, report.shrunk, "cpu")


def test_inject_errors():
    with pytest.raises(ToolError, match="unknown --inject-bug"):
        inject_pass(backend_pipeline("cpu"), "nope")
    with pytest.raises(ToolError, match="no pass or pipeline named 'nowhere'"):
        inject_pass(backend_pipeline("cpu"), "broken-swap-operands", "nowhere")
