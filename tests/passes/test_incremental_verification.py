"""After each pass that changed the module, a pipeline checks again only what the change can
affect (passes/pass_base.py ``_touched``): the computations whose text changed, and in them the
instructions whose line changed, whose operands' lines changed, or that call a changed
computation. These passes break a module in each of those ways, in a computation other than the
one they edit where that is the point, and the verifier must still name the problem."""

from __future__ import annotations

import pytest

from xla_teach.hlo.errors import VerificationError
from xla_teach.hlo.ir import HloInstruction, HloModule
from xla_teach.hlo.text.parser import parse_hlo, parse_shape
from xla_teach.passes.pass_base import HloPass, HloPassPipeline, PassOptions, PassRecorder

MODULE = """
HloModule m
add_f32 {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY main {
  x = f32[4,8] parameter(0)
  y = f32[4,8] parameter(1)
  e = f32[4,8] exponential(x)
  m = f32[4,8] multiply(e, y)
  zero = f32[] constant(0)
  ROOT r = f32[4] reduce(m, zero), dimensions={1}, to_apply=add_f32
}
"""


class _Edit(HloPass):
    """A 'pass' that applies ``edit`` once and says it changed the module."""

    def __init__(self, name: str, edit) -> None:  # type: ignore[no-untyped-def]
        super().__init__()
        self.name, self.edit = name, edit

    def run(self, module: HloModule) -> bool:
        self.edit(module)
        return True


def _instr(module: HloModule, name: str):  # type: ignore[no-untyped-def]
    return next(i for i in module.instructions() if i.name == name)


def _wrong_own_shape(module: HloModule) -> None:
    _instr(module, "m").shape = parse_shape("f32[4,9]")


def _operand_shape_changes_under_an_unchanged_user(module: HloModule) -> None:
    # e's own line changes (it says f32[8,4]); m's line does not, but its operand no longer fits
    _instr(module, "e").shape = parse_shape("f32[8,4]")


def _callee_changes_under_an_unchanged_caller(module: HloModule) -> None:
    # the reducer now returns f64: the reduce's line is the same, its to_apply no longer fits
    comp = next(c for c in module.computations if c.name == "add_f32")
    comp.root.shape = parse_shape("f64[]")


@pytest.mark.parametrize("edit", [_wrong_own_shape, _operand_shape_changes_under_an_unchanged_user,
                                  _callee_changes_under_an_unchanged_caller])
def test_a_pass_that_breaks_the_module_is_caught_however_it_breaks_it(edit) -> None:  # type: ignore[no-untyped-def]
    module = parse_hlo(MODULE)
    pipeline = HloPassPipeline("p", [_Edit("breaks", edit)])
    with pytest.raises(VerificationError, match="after pass breaks"):
        pipeline.run(module, PassOptions(), PassRecorder())


def test_after_a_small_change_only_what_it_can_affect_is_checked(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from xla_teach.hlo import verifier

    checked: list[str] = []
    original = verifier.instruction_problems
    monkeypatch.setattr(verifier, "instruction_problems", lambda i: checked.append(i.name) or original(i))

    def negate_y(module: HloModule) -> None:
        y = _instr(module, "y")
        neg = y.parent.add_instruction(HloInstruction("negate", y.shape, [y]), "neg")
        _instr(module, "m").replace_operand_with(1, neg)

    module = parse_hlo(MODULE)
    everything = len(list(module.instructions()))
    HloPassPipeline("p", [_Edit("negate", negate_y)]).run(module, PassOptions(), PassRecorder())
    assert len(checked[:everything]) == everything  # before the pipeline: all of them
    # after the pass: the new line, the line that changed (m's operand), and m's user
    assert sorted(checked[everything:]) == ["m", "neg", "r"]
