"""The hidden modules are valid HLO, repeatable, and contain what each check is about."""

from __future__ import annotations

import pytest

from xla_teach.exercises.graders import algsimp_rule, bisect, cse, dce, fusion_decision
from xla_teach.hlo.evaluator import evaluate_module
from xla_teach.hlo.text.parser import parse_hlo
from xla_teach.hlo.verifier import verify_module
from xla_teach.tools.bugs.fake_data import fake_arguments

GENERATORS = [
    dce.dead_code_module, lambda s: dce.dead_code_module(s, side_effects=True, dead_reduce=True),
    cse.duplicates_module, cse.commutative_module, cse.constants_module, cse.look_alikes_module,
    algsimp_rule.multiply_module, lambda s: algsimp_rule.multiply_module(s, look_alikes=True),
    lambda s: algsimp_rule.subtract_module(s, with_float=True),
    fusion_decision.random_fusion_module, bisect.bisect_module,
]


@pytest.mark.parametrize("generate", GENERATORS)
@pytest.mark.parametrize("seed", [0, 7, 1234])
def test_generated_modules_verify_run_and_repeat(generate, seed: int) -> None:  # type: ignore[no-untyped-def]
    text = generate(seed)
    assert text == generate(seed)
    module = parse_hlo(text)
    verify_module(module)
    evaluate_module(module, fake_arguments(module, seed))


def test_rule_modules_verify() -> None:
    for text in fusion_decision.RULE_MODULES.values():
        verify_module(parse_hlo(text))


@pytest.mark.parametrize("seed", range(6))
def test_dce_modules_have_dead_code_and_things_to_keep(seed: int) -> None:
    module = parse_hlo(dce.dead_code_module(seed, side_effects=True, dead_reduce=True))
    keep, computations = dce.expected_survivors(module)
    names = {i.name for i in module.entry.instructions}
    assert len(keep) < len(names)
    assert {"print", "unused_param"} <= keep and "dead_reads_effect" not in keep
    assert "maximum_f32" not in computations and "add_f32" in computations


@pytest.mark.parametrize("case", [c for c in bisect.CASES if c is not None])
def test_every_planted_pass_breaks_the_module_and_is_not_the_only_change(case: tuple[str, str, str]) -> None:
    from xla_teach.passes.pass_base import PassOptions, PassRecorder
    from xla_teach.tools.tool_support import compare_outputs

    for seed in range(3):
        module = parse_hlo(bisect.bisect_module(seed))
        args = fake_arguments(module, seed)
        recorder = PassRecorder()
        bisect.make_pipeline(case).run(module.clone(), PassOptions(), recorder)
        changed = [r.pass_name for r in recorder.records if r.changed]
        assert case[1] in changed and changed[0] != case[1] and changed[-1] != case[1]
        planted = next(r for r in recorder.records if r.pass_name == case[1] and r.changed)
        before = evaluate_module(parse_hlo(planted.before), args)
        after = evaluate_module(parse_hlo(planted.after), args)
        assert not all(c.ok for c in compare_outputs(after, before))
