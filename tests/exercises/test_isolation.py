"""The grader cannot be fooled or harmed by the code it grades. Each test plants one attack a
student could write -- patching the grader, reading the reference solution, writing outside
its folder, eating memory, forking, opening a socket, killing its own process -- and checks
that the submission gains nothing and the grader's files and process are untouched."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.exercises.exercise_test_utils import grade, messages, variant, write
from xla_teach.exercises import confinement, grading
from xla_teach.exercises.starters import solution_file, starter_file

needs_fences = pytest.mark.skipif(confinement.landlock_abi() < 1, reason="this kernel has no Landlock")

DCE_RUN = "    def run(self, module: HloModule) -> bool:\n"


def _attack(tmp_path: Path, code: str, name: str = "attack.py") -> Path:
    """The reference DCE with ``code`` run at the start of ``run()``."""
    body = "".join(f"        {line}\n" for line in code.strip().splitlines())
    return variant(tmp_path, "dce", (DCE_RUN, DCE_RUN + body), name=name)


def test_patching_the_grader_gains_nothing(tmp_path: Path) -> None:
    """Two lines appended to the untouched starter used to print 9/9: the cases now run in the
    grader's process, which the student's code never sees."""
    starter = starter_file("dce").read_text()
    patched = write(tmp_path, "dce.py", starter + "\nimport xla_teach.exercises.grading as g\n"
                    "g.run_case = lambda case, solution, path=None: None\n"
                    "g.CaseFailed = type('Never', (Exception,), {})\n")
    report = grade("dce", patched)
    assert report.score == 0 and not report.passed
    assert "not written yet" in report.text()
    assert grading.run_case.__module__ == "xla_teach.exercises.grading"  # the grader's own is intact


@needs_fences
def test_the_reference_solution_and_other_files_cannot_be_read(tmp_path: Path) -> None:
    secret = tmp_path / "other_student.py"
    secret.write_text("answer = 42\n")
    for target in (solution_file("dce"), secret):
        report = grade("dce", _attack(tmp_path, f"open({str(target)!r}).read()"))
        assert report.score == 0
        assert "PermissionError" in report.text(), report.text()


@needs_fences
def test_writes_outside_its_folder_fail_and_leave_nothing(tmp_path: Path) -> None:
    outside = tmp_path / "escape.txt"
    report = grade("dce", _attack(tmp_path, f"open({str(outside)!r}, 'w').write('x')"))
    assert report.score == 0 and "PermissionError" in report.text()
    assert not outside.exists()
    # inside its own folder it may write (a scratch file): the cases pass
    inside = grade("dce", _attack(tmp_path, "open('scratch.txt', 'w').write('x')", name="scratch.py"))
    assert inside.passed, inside.text()


@needs_fences
def test_no_processes_programs_or_network(tmp_path: Path) -> None:
    for code in ("import os\nos.fork()", "import subprocess\nsubprocess.run(['true'])",
                 "import socket\nsocket.create_connection(('127.0.0.1', 9))"):
        report = grade("dce", _attack(tmp_path, code))
        assert report.score == 0, code
        assert "PermissionError" in report.text() or "Operation not permitted" in report.text(), report.text()


def test_exhausting_memory_fails_the_cases_with_a_reason(tmp_path: Path) -> None:
    report = grade("dce", _attack(tmp_path, "hoard = bytearray(64 << 30)"))
    assert report.score == 0
    assert "ran out of memory" in report.text()


def test_a_process_that_kills_itself_fails_its_case_and_grading_goes_on(tmp_path: Path) -> None:
    """``os._exit`` ends the student's process in the middle of a case; a fresh one is started
    for the next case, which the (otherwise correct) solution passes when it does not exit."""
    code = "import os\nif len(module.entry.instructions) % 2:\n    os._exit(3)"
    report = grade("dce", _attack(tmp_path, code))
    assert "the process running your code exited (code 3)" in report.text(), report.text()
    assert 0 < report.score < report.max_score, report.text()


def test_messages_of_the_case_still_point_at_the_students_line(tmp_path: Path) -> None:
    report = grade("dce", _attack(tmp_path, "raise ValueError('mine')"))
    assert "ValueError: mine" in messages(report, "removes-dead-code")
    assert "attack.py line" in messages(report, "removes-dead-code")


def test_the_report_names_every_protection_the_system_did_not_allow(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(confinement, "landlock_abi", lambda: 0)
    line = confinement.restrict_files(Path("."))
    assert line.startswith("no Landlock")
    report = grading.GradeReport("dce", "x.py", [], missing_protections=[line])
    assert f"(isolation incomplete: {line})" in report.text()
