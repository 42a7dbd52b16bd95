"""The capstone (xla_teach/exercises/graders/capstone.py): the student's own pipeline of DCE, CSE,
a simplifier rule and fusion, graded on small models traced from Python. The order of the
passes matters and the grade sees it; what each seed draws are different programs."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from xla_teach.exercises import grade
from xla_teach.exercises.graders.capstone import dead_instructions, duplicates, model_program, multiplications_by_one
from xla_teach.exercises.starters import solution_file
from xla_teach.hlo.text.parser import parse_hlo

PIPELINE = re.compile(r"return \[simplifier_with\(rewrite\).*?DeadCodeElimination\(\)\]", re.S)


def _with_pipeline(tmp_path: Path, passes: str) -> Path:
    source = solution_file("capstone").read_text()
    assert PIPELINE.search(source), "the reference solution's build_pipeline changed: update this test"
    path = tmp_path / "capstone.py"
    path.write_text(PIPELINE.sub("return " + passes, source))
    return path


def test_the_programs_carry_what_the_pipeline_must_remove_and_differ_by_seed() -> None:
    programs = [model_program(s) for s in range(4)]
    assert len(set(programs)) == 4
    for text in programs:
        module = parse_hlo(text)
        assert dead_instructions(module) and duplicates(module) and multiplications_by_one(module), text


@pytest.mark.parametrize(("passes", "lost"), [
    # fusion before CSE: a value written twice is fused into two consumers and computed twice
    ("[simplifier_with(rewrite), fusion_with(should_fuse), CommonSubexpressionElimination(), DeadCodeElimination()]",
     {"fuses-like-the-reference"}),
    # the rule after fusion: the multiply by ones is already inside a fused computation
    ("[CommonSubexpressionElimination(), DeadCodeElimination(), fusion_with(should_fuse), DeadCodeElimination(), "
     "simplifier_with(rewrite)]", {"applies-your-rule"}),
    ("[simplifier_with(rewrite), DeadCodeElimination(), fusion_with(should_fuse)]",
     {"merges-duplicates", "fuses-like-the-reference", "runs-compiled"}),
    ("[simplifier_with(rewrite), CommonSubexpressionElimination(), fusion_with(should_fuse)]",
     {"removes-dead-code"}),
])
def test_a_pipeline_in_a_worse_order_or_missing_a_pass_loses_exactly_what_it_should(
        tmp_path: Path, passes: str, lost: set[str]) -> None:
    report = grade("capstone", _with_pipeline(tmp_path, passes))
    failed = {c.name for c in report.checks if not c.passed}
    assert lost <= failed, report.text()
    assert failed - lost <= {"fuses-like-the-reference", "runs-compiled"}, report.text()


def test_a_pipeline_that_does_nothing_scores_nothing(tmp_path: Path) -> None:
    source = _with_pipeline(tmp_path, "[]")
    assert grade("capstone", source).score == 0


def test_the_capstone_solution_holds_the_four_graded_solutions_as_they_are() -> None:
    """The capstone's reference solution is the four earlier reference solutions copied in (as a
    student copies theirs): when one of them changes, this fails until the capstone is updated."""
    capstone = solution_file("capstone").read_text()

    def body(name: str) -> list[str]:
        text = solution_file(name).read_text()
        code = text[text.index('"""', text.index('"""') + 3) + 3:]  # after the module docstring
        return [line for line in code.splitlines() if line.strip() and not line.lstrip().startswith(
            ("# BEGIN SOLUTION", "from ", "import ", "# END SOLUTION"))]

    lines = set(capstone.splitlines())
    for name in ("dce", "cse", "algsimp_rule", "fusion_decision"):
        missing = [line for line in body(name) if line not in lines]
        assert not missing, f"capstone.py lacks {name}.py's lines: {missing[:3]}"
