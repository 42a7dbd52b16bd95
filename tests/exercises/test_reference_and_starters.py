"""Every reference solution scores full marks; every starter, as a student gets it, scores zero."""

from __future__ import annotations

import time

import pytest

from xla_teach.exercises import EXERCISE_NAMES, EXERCISES, grade
from xla_teach.exercises.starters import solution_file, starter_file, starter_text


def test_every_exercise_is_registered_with_a_solution_and_a_starter() -> None:
    assert list(EXERCISES) == list(EXERCISE_NAMES)
    assert len(EXERCISE_NAMES) >= 10
    for name in EXERCISE_NAMES:
        assert solution_file(name).is_file() and starter_file(name).is_file()


@pytest.mark.parametrize("exercise", EXERCISE_NAMES)
def test_reference_solution_scores_full_marks_quickly(exercise: str) -> None:
    start = time.perf_counter()
    report = grade(exercise, solution_file(exercise))
    seconds = time.perf_counter() - start
    assert report.passed, report.text()
    assert report.score == report.max_score >= 5
    assert seconds < 5.0, f"grading {exercise} took {seconds:.1f} s"


@pytest.mark.parametrize("exercise", EXERCISE_NAMES)
def test_reference_solution_passes_with_other_hidden_modules(exercise: str) -> None:
    report = grade(exercise, solution_file(exercise), seed=3)
    assert report.passed, report.text()


@pytest.mark.parametrize("exercise", EXERCISE_NAMES)
def test_starter_scores_zero_and_says_what_to_write(exercise: str) -> None:
    report = grade(exercise, starter_file(exercise))
    assert report.score == 0 and report.max_score > 0
    assert not report.load_error, "the starter must load: only its TODOs fail"
    for check in report.checks:
        assert check.messages and all("not written yet: TODO" in m for m in check.messages), check


@pytest.mark.parametrize("exercise", EXERCISE_NAMES)
def test_starter_is_the_stripped_solution(exercise: str) -> None:
    # Regenerate with: python -m xla_teach.exercises.make_starters --write
    starter = starter_file(exercise).read_text()
    assert starter == starter_text(exercise)
    assert "TODO" in starter and "SOLUTION" not in starter


def test_reference_solutions_are_not_part_of_the_package() -> None:
    """An installed xla_teach (what students get) must not carry the answers."""
    from pathlib import Path

    import xla_teach

    package = Path(xla_teach.__file__).parent
    assert not list(package.rglob("*solution*")), list(package.rglob("*solution*"))
    assert package not in solution_file("dce").parents
