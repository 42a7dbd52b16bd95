"""Pipeline options that act on whole sub-pipelines: disabling one by name, and the fixed-point
pipeline's limit on iterations (with the warning XLA also gives)."""

from __future__ import annotations

import pytest

from xla_teach.backends.cpu.cpu_pipeline import cpu_pipeline
from xla_teach.hlo.evaluator import evaluate_module
from xla_teach.hlo.ir import HloModule
from xla_teach.hlo.parser import parse_hlo
from xla_teach.passes.pass_base import HloPass, HloPassFix, PassOptions, PassRecorder

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
