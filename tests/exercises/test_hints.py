"""The report's three levels: a line per check (summary), the same with a hint under each failed
check (what ``xla-teach grade`` prints by default), or every message in full. Every check of every
exercise has a hint."""

from __future__ import annotations

import importlib

import pytest

from xla_teach.exercises import EXERCISE_NAMES, grade, starter_file
from xla_teach.exercises.hints import HINTS, hint
from xla_teach.tools.cli import main


@pytest.mark.parametrize("exercise", EXERCISE_NAMES)
def test_every_check_has_a_hint(exercise: str) -> None:
    checks = importlib.import_module(f"xla_teach.exercises.graders.{exercise}").make_checks(0)
    assert {c.name for c in checks} == set(HINTS[exercise])
    assert all(len(hint(exercise, c.name)) > 20 for c in checks)


def test_the_three_levels_of_a_report(capsys: pytest.CaptureFixture[str]) -> None:
    report = grade("dce", starter_file("dce"))
    failed = [c for c in report.checks if not c.passed]
    assert failed
    summary, hints, full = (report.text(level).splitlines() for level in ("summary", "hints", "full"))
    assert sum("first failure:" in line for line in summary) == len(failed)
    assert all(len(line) <= 9 + len("first failure: ") + 100 for line in summary if "first failure:" in line)
    assert not any("hint:" in line for line in summary)
    assert [line.split("hint: ", 1)[1] for line in hints if "hint: " in line] == [c.hint for c in failed]
    assert "first failure:" not in "\n".join(full)
    assert all(message.splitlines()[0].strip() in "\n".join(full) for c in failed for message in c.messages)
    assert str(report) == report.text("hints")
    assert main(["grade", "dce", str(starter_file("dce")), "--detail", "summary"]) == 1
    assert "hint:" not in capsys.readouterr().out
    assert main(["grade", "dce", str(starter_file("dce"))]) == 1
    assert "hint: " + failed[0].hint in capsys.readouterr().out
