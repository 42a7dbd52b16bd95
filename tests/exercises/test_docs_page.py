"""docs/exercises.md describes the exercises and the report as they are."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.exercises.exercise_test_utils import grade, variant
from xla_teach.exercises import EXERCISES

PAGE = Path(__file__).resolve().parents[2] / "docs" / "exercises.md"


def test_every_exercise_and_check_is_documented() -> None:
    text = PAGE.read_text()
    for name, exercise in EXERCISES.items():
        assert f"### `{name}`" in text and f"| `{name}` |" in text
        for check in exercise.make_checks(0):
            assert f"`{check.name}`" in text, f"docs/exercises.md does not mention the check {check.name}"


def test_the_sample_report_is_what_the_grader_prints(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sample = re.search(r"```\n(grade algsimp_rule .*?)\n```", PAGE.read_text(), re.S)
    assert sample is not None
    documented = [line for line in sample.group(1).splitlines() if "..." not in line]
    variant(tmp_path, "algsimp_rule", ("if lhs is rhs and instr.shape.element_type.is_integral:", "if lhs is rhs:"),
            name="algsimp_rule.py")
    monkeypatch.chdir(tmp_path)
    printed = grade("algsimp_rule", "algsimp_rule.py").feedback
    for line in documented:
        assert line in printed, f"documented but not printed: {line!r}"
