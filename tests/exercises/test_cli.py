"""``xla-teach grade``: exit code 0 for full marks, 1 otherwise, 2 for usage errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from xla_teach.exercises.starters import solution_file, starter_file
from xla_teach.tools.cli import main


def test_full_score_exits_zero(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["grade", "cse", str(solution_file("cse"))]) == 0
    out = capsys.readouterr().out
    assert "grade cse" in out and ": 10/10" in out and "All checks pass" in out


def test_starter_exits_one_with_feedback(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["grade", "dce", str(starter_file("dce"))]) == 1
    out = capsys.readouterr().out
    assert ": 0/9" in out and "[FAIL] removes-dead-code" in out and "not written yet" in out


def test_usage_errors_exit_two(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["grade", "nope", str(tmp_path / "x.py")]) == 2
    assert "unknown exercise 'nope'" in capsys.readouterr().err
    assert main(["grade", "dce"]) == 2
    assert "give the solution file" in capsys.readouterr().err


def test_list_and_start(capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert main(["grade", "--list"]) == 0
    listing = capsys.readouterr().out
    for name in ("dce", "cse", "algsimp_rule", "fusion_decision", "elemental_emitter", "bisect"):
        assert f"\n{name} " in "\n" + listing
    monkeypatch.chdir(tmp_path)
    assert main(["grade", "--start", "bisect"]) == 0
    assert (tmp_path / "bisect_exercise.py").read_text() == starter_file("bisect").read_text()
    assert main(["grade", "--start", "bisect"]) == 2  # never overwrites
    assert "already exists" in capsys.readouterr().err


def test_the_help_names_every_exercise(capsys: pytest.CaptureFixture[str]) -> None:
    from xla_teach.exercises import EXERCISE_NAMES

    with pytest.raises(SystemExit):
        main(["grade", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert all(name in text for name in EXERCISE_NAMES), text
