"""Whatever a student's file does, grading finishes with a score and a reason."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.exercises.exercise_test_utils import grade, messages, write
from xla_teach.exercises import ExerciseError, copy_starter, grading
from xla_teach.exercises.starters import StarterError, starter_file, strip_solution


def test_syntax_error_scores_zero_with_the_line(tmp_path: Path) -> None:
    report = grade("cse", write(tmp_path, "broken.py", "class CommonSubexpressionElimination:\n    def run(self\n"))
    assert report.score == 0 and not report.passed
    assert "broken.py has a syntax error at line 2" in report.load_error
    assert all(c.points == 0 for c in report.checks) and report.max_score > 0


def test_missing_or_misnamed_entry_point(tmp_path: Path) -> None:
    report = grade("algsimp_rule", write(tmp_path, "named.py", "def my_rewrite(instr):\n    return None\n"))
    assert report.score == 0 and "defines no function named `rewrite`" in report.load_error
    report = grade("algsimp_rule", write(tmp_path, "value.py", "rewrite = 3\n"))
    assert "`rewrite` in value.py should be a function, but it is a int" in report.load_error


def test_errors_while_loading_are_reported(tmp_path: Path) -> None:
    report = grade("dce", write(tmp_path, "imports.py", "import no_such_module_anywhere\n"))
    assert "ModuleNotFoundError" in report.load_error and report.score == 0
    report = grade("dce", write(tmp_path, "exits.py", "raise SystemExit(3)\n"))
    assert "SystemExit" in report.load_error and report.score == 0


def test_exceptions_point_at_the_students_line(tmp_path: Path) -> None:
    solution = write(tmp_path, "crash.py", "from xla_teach.passes.pass_base import HloPass\n"
                     "class DeadCodeElimination(HloPass):\n"
                     "    def run(self, module):\n"
                     "        return 1 / 0\n")
    report = grade("dce", solution)
    assert report.score == 0
    assert "ZeroDivisionError: division by zero" in messages(report, "removes-dead-code")
    assert "raised at crash.py line 4, in run: return 1 / 0" in messages(report, "removes-dead-code")


def test_run_must_return_a_bool(tmp_path: Path) -> None:
    solution = write(tmp_path, "none.py", "from xla_teach.passes.pass_base import HloPass\n"
                     "class DeadCodeElimination(HloPass):\n    def run(self, module):\n        pass\n")
    report = grade("dce", solution)
    assert report.score == 0 and "run() must return True or False, but returned None" in messages(report,
                                                                                                   "removes-dead-code")


def test_endless_loop_fails_the_case_not_the_grader(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(grading, "CASE_TIME_LIMIT_S", 0.2)
    solution = write(tmp_path, "loop.py", "def find_broken_pass(module, pipeline, args):\n    while True:\n"
                     "        pass\n")
    report = grade("bisect", solution)
    assert report.score == 0
    assert "took longer than 0.2 s (an endless loop?)" in messages(report, "no-false-alarm")


def test_prints_of_a_solution_stay_out_of_the_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    solution = write(tmp_path, "chatty.py", "def should_fuse(p, c):\n    print('deciding', p.name)\n"
                     "    return False\n")
    report = grade("fusion_decision", solution)
    assert "deciding" not in report.text()
    assert "deciding" in capsys.readouterr().err


def test_usage_errors_raise_a_value_error(tmp_path: Path) -> None:
    with pytest.raises(ExerciseError, match="unknown exercise 'dse'.*dce, cse"):
        grade("dse", tmp_path / "x.py")
    with pytest.raises(ExerciseError, match="no such file"):
        grade("dce", tmp_path / "missing.py")
    assert issubclass(ExerciseError, ValueError)


def test_copy_starter_never_overwrites(tmp_path: Path) -> None:
    copy = copy_starter("fusion_decision", tmp_path)
    assert copy == tmp_path / "fusion_decision.py"
    assert copy.read_text() == starter_file("fusion_decision").read_text()
    copy.write_text("# my work\n")
    with pytest.raises(ExerciseError, match="already exists"):
        copy_starter("fusion_decision", tmp_path)
    assert copy.read_text() == "# my work\n"


def test_strip_solution_regions() -> None:
    text = ("# BEGIN SOLUTION: a helper\ndef helper():\n    return 1\n# END SOLUTION\n\n"
            "def f():\n    # BEGIN SOLUTION: compute \"it\"\n    return helper()\n    # END SOLUTION\n")
    assert strip_solution(text, "ex") == (
        "# TODO: a helper\n\ndef f():\n    # TODO: compute \"it\"\n"
        "    raise NotImplementedError(\"TODO (ex): compute \\\"it\\\"\")\n")
    with pytest.raises(StarterError, match="no END SOLUTION"):
        strip_solution("# BEGIN SOLUTION\nx = 1\n", "ex")
    with pytest.raises(StarterError, match="END without BEGIN"):
        strip_solution("x = 1\n# END SOLUTION\n", "ex")


def test_no_starter_hides_a_standard_library_module() -> None:
    import sys

    from xla_teach.exercises import EXERCISE_NAMES

    for name in EXERCISE_NAMES:
        assert starter_file(name).stem not in sys.stdlib_module_names
