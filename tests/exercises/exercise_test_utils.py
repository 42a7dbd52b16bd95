"""Helpers for the exercise tests: write a variant of a reference solution and grade it."""

from __future__ import annotations

from pathlib import Path

from xla_teach.exercises import GradeReport, grade
from xla_teach.exercises.starters import solution_file


def variant(tmp_path: Path, exercise: str, *replacements: tuple[str, str], name: str = "") -> Path:
    """The reference solution with each ``old`` replaced by ``new`` (each must occur), written to tmp_path."""
    text = solution_file(exercise).read_text()
    for old, new in replacements:
        assert old in text, f"the reference solution of {exercise} no longer contains:\n{old}"
        text = text.replace(old, new)
    path = tmp_path / (name or f"{exercise}_variant.py")
    path.write_text(text)
    return path


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def check_points(report: GradeReport) -> dict[str, tuple[int, int]]:
    return {c.name: (c.points, c.max_points) for c in report.checks}


def failed_checks(report: GradeReport) -> set[str]:
    return {c.name for c in report.checks if not c.passed}


def messages(report: GradeReport, check: str) -> str:
    return "\n".join(m for c in report.checks if c.name == check for m in c.messages)


__all__ = ["check_points", "failed_checks", "grade", "messages", "variant", "write"]
