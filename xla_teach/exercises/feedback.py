"""What the grader tells a student, and the errors that carry it: shared by the grading process
(:mod:`.grading`) and the child that runs the student's code (:mod:`.sandbox`), below both."""

from __future__ import annotations

import re


class CaseFailed(Exception):  # noqa: N818 -- reads as "raise CaseFailed(...)" in graders
    """Raised by a case with the feedback the student sees."""


class CaseTimeout(Exception):  # noqa: N818
    """A case ran past :data:`CASE_TIME_LIMIT_S`."""


_CONTROL = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def printable(text: str) -> str:
    """``text`` with terminal control sequences and control characters removed (newlines and tabs
    kept): a message a student's code wrote cannot repaint the teacher's terminal or a report."""
    return _CONTROL.sub("", text)
