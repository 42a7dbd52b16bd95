"""Pipeline options that act on whole sub-pipelines: disabling one by name, the fixed-point
pipeline's limit on iterations (with the warning XLA also gives), and which passes' reports of
"changed" are checked against the module's text."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from xla_teach.backends.cpu.cpu_pipeline import cpu_pipeline
from xla_teach.backends.gpu.gpu_pipeline import gpu_pipeline
from xla_teach.hlo.evaluator import evaluate_module
from xla_teach.hlo.ir import HloModule
from xla_teach.hlo.text.parser import parse_hlo
from xla_teach.passes.pass_base import (
    HloPass,
    HloPassFix,
    HloPassPipeline,
    PassMisreportedChange,
    PassOptions,
    PassRecorder,
)

SIMPLIFIABLE = """
HloModule m
ENTRY main {
  x = f32[4] parameter(0)
  zero = f32[] constant(0)
  zeros = f32[4] broadcast(zero), dimensions={}
  ROOT sum = f32[4] add(x, zeros)
}
"""


def _run(disabled: frozenset[str]) -> tuple[HloModule, PassRecorder]:
    module = parse_hlo(SIMPLIFIABLE)
    recorder = PassRecorder()
    cpu_pipeline().run(module, PassOptions(disabled_passes=disabled), recorder)
    return module, recorder


def test_disabling_a_sub_pipeline_skips_every_pass_in_it() -> None:
    _, recorder = _run(frozenset())
    assert any(r.pipeline == "simplification" and r.pass_name == "algsimp" and r.changed for r in recorder.records)
    module, recorder = _run(frozenset({"simplification"}))
    (skip,) = [r for r in recorder.records if r.pass_name == "simplification"]
    assert skip.skipped == "disabled by --xla_disable_hlo_passes" and not skip.changed
    inside = [r for r in recorder.records if r.pipeline == "simplification"]
    assert {r.pass_name for r in inside} >= {"algsimp", "cse", "dce"}
    assert all(r.skipped == "in simplification, disabled by --xla_disable_hlo_passes" and not r.changed
               for r in inside)
    # x + 0 was not simplified away: the add is still there (fused), and results are unchanged
    assert any(i.opcode == "add" for c in module.computations for i in c.instructions)
    import numpy as np

    x = np.arange(4, dtype=np.float32)
    np.testing.assert_array_equal(evaluate_module(module, [x])[0], x)


class _Flip(HloPass):
    """Renames the ROOT back and forth, so the module never stops changing."""

    name = "flip"

    def run(self, module: HloModule) -> bool:
        root = module.entry.root
        root.name = "b" if root.name == "a" else "a"
        return True


def test_fixed_point_pipeline_warns_when_it_gives_up() -> None:
    module = parse_hlo("HloModule m\nENTRY main {\n  ROOT a = f32[] parameter(0)\n}\n")
    with pytest.warns(UserWarning, match="still changed the module after 3 iterations"):
        HloPassFix("oscillating", [_Flip()], max_iterations=3).run(module, PassOptions(verify=False))


class _SilentRename(HloPass):
    """Renames the ROOT but reports no change (a lie the pipeline must notice when it checks)."""

    name = "silent-rename"

    def run(self, module: HloModule) -> bool:
        module.entry.root.name = "renamed"
        return False


class _BuiltInSilentRename(_SilentRename):
    __module__ = "xla_teach.passes.pretend_built_in"  # what makes a pass "built in"


def _one_parameter_module() -> HloModule:
    return parse_hlo("HloModule m\nENTRY main {\n  ROOT a = f32[] parameter(0)\n}\n")


def test_a_pass_written_outside_xla_teach_is_checked_against_its_report() -> None:
    with pytest.raises(PassMisreportedChange, match="silent-rename' reported no change"):
        HloPassPipeline("p", [_SilentRename()]).run(_one_parameter_module(), PassOptions())


def test_built_in_passes_are_trusted_unless_checking_is_asked_for() -> None:
    recorder = PassRecorder()
    HloPassPipeline("p", [_BuiltInSilentRename()]).run(_one_parameter_module(), PassOptions(), recorder)
    (record,) = recorder.records
    assert not record.changed and record.after == record.before  # trusted: not printed again
    with pytest.raises(PassMisreportedChange):
        HloPassPipeline("p", [_BuiltInSilentRename()]).run(
            _one_parameter_module(), PassOptions(check_reported_changes=True))


SAMPLES = Path(__file__).parents[1] / "data" / "xla_samples"
CORPUS = Path(__file__).parents[1] / "corpus"


@pytest.mark.parametrize("path", sorted(CORPUS.glob("*.hlo")) + sorted(SAMPLES.glob("*/before_optimizations.txt")),
                         ids=lambda p: p.parent.name if p.suffix == ".txt" else p.stem)
@pytest.mark.parametrize("pipeline", [cpu_pipeline, gpu_pipeline], ids=["cpu", "gpu"])
def test_every_built_in_pass_reports_its_changes_truly(path: Path, pipeline: Callable[[], HloPassPipeline]) -> None:
    """The pipelines trust their own passes' reports; this checks each report on real modules."""
    module = parse_hlo(path.read_text())
    recorder = PassRecorder()
    pipeline().run(module, PassOptions(check_reported_changes=True), recorder)
    assert any(r.changed for r in recorder.records)
