"""The autograder's machinery: run hidden checks against a student's file, report a score.

An exercise is a list of :class:`Check`\\ s. A check is one *property* ("removes every
dead instruction", "keeps side effects") tested on a few *cases* (usually a generated
module each); every case that passes is worth one point. A case is a function that takes
the student's running submission -- a :class:`~xla_teach.exercises.sandbox.StudentProcess`,
whose ``call(task, ...)`` runs the student's code in a fenced-in process of its own and
returns the result as data -- judges that result, and raises :class:`CaseFailed` with a
specific message (which property failed, on which module, expected vs got) when it fails.

Whatever the student's file does -- a syntax error, a missing function, an exception,
an endless loop -- grading goes on: the case scores zero and the report says why, with
the line of the student's file that raised. Only a wrong exercise name or a missing
file is an :class:`ExerciseError` (a mistake on the command line, not in the solution).
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from xla_teach.exercises.feedback import CaseFailed, CaseTimeout, printable  # noqa: F401 - graders import them from here
from xla_teach.exercises.hints import hint

CASE_TIME_LIMIT_S = 20.0  # per case: an endless loop in a solution fails that case, not the grader
SUBMISSION_TIME_LIMIT_S = 600.0  # per submission, all cases: past it the remaining cases fail unrun
MESSAGES_PER_CHECK = 2  # distinct failure messages shown per check


class ExerciseError(ValueError):
    """A usage error: unknown exercise, missing solution file."""


Case = Callable[[Any], None]  # takes the StudentProcess


@dataclass(frozen=True)
class Check:
    """One property of the solution, tested on ``cases`` (one point each)."""

    name: str  # short, kebab-case: shown in the report
    description: str  # the property, in one sentence
    cases: Sequence[Case]

    @property
    def max_points(self) -> int:
        return len(self.cases)


@dataclass
class CheckResult:
    name: str
    description: str
    points: int
    max_points: int
    messages: list[str] = field(default_factory=list)  # one per failed case
    hint: str = ""  # what to look at when it fails (exercises/hints.py)

    @property
    def passed(self) -> bool:
        return self.points == self.max_points


@dataclass(repr=False)
class GradeReport:
    """The outcome of ``grade(exercise, solution_path)``: ``score`` out of ``max_score``."""

    exercise: str
    solution: str
    checks: list[CheckResult]
    load_error: str = ""  # why the file could not be loaded ("" when it was)
    seconds: float = 0.0
    protections: list[str] = field(default_factory=list)  # what fenced the student's process in
    missing_protections: list[str] = field(default_factory=list)  # what the operating system did not allow

    @property
    def score(self) -> int:
        return sum(c.points for c in self.checks)

    @property
    def max_score(self) -> int:
        return sum(c.max_points for c in self.checks)

    @property
    def passed(self) -> bool:
        return not self.load_error and self.score == self.max_score

    @property
    def feedback(self) -> list[str]:
        """The report as lines: the score, then one line per check, failures explained in full."""
        return self.lines("full")

    def lines(self, detail: str = "hints") -> list[str]:
        """The report at one of three levels of detail: ``"summary"`` (one line per check, and
        the first line of a failed check's first message), ``"hints"`` (the summary and, under
        each failed check, its hint) or ``"full"`` (every message, expected vs got)."""
        if detail not in DETAILS:
            raise ValueError(f"detail must be one of {', '.join(DETAILS)}, got {detail!r}")
        lines = [f"grade {self.exercise} ({self.solution}): {self.score}/{self.max_score}"]
        lines += [f"  (isolation incomplete: {m})" for m in self.missing_protections]
        if self.load_error:
            lines += ["", *_indent(self.load_error, 2)]
        for c in self.checks:
            mark = "PASS" if c.passed else "FAIL"
            lines.append(f"  [{mark}] {c.name:<34} {c.points}/{c.max_points}  {c.description}")
            if detail == "full":
                for message in c.messages:
                    lines += _indent(message, 9)
                continue
            if c.messages:
                lines.append(" " * 9 + "first failure: " + _first_line(c.messages[0]))
            if detail == "hints" and not c.passed and c.hint:
                lines.append(" " * 9 + "hint: " + c.hint)
        if self.passed:
            lines.append("All checks pass. Well done!")
        elif detail != "full" and any(c.messages for c in self.checks):
            lines.append("Every failure in full (expected vs got): --detail full, or report.text('full')")
        return lines

    def text(self, detail: str = "full") -> str:
        """The report as text, every message by default (``lines`` for the other levels)."""
        return printable("\n".join(self.lines(detail)))

    def __str__(self) -> str:
        return self.text("hints")  # what a student sees first: a line per check, and a hint

    def __repr__(self) -> str:
        return f"<GradeReport {self.exercise}: {self.score}/{self.max_score}>"

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        """IPython/Jupyter show the whole report when a cell ends with ``grade(...)``."""
        printer.text(self.text("hints"))


DETAILS = ("summary", "hints", "full")
SUMMARY_WIDTH = 100


def _first_line(message: str) -> str:
    line = next((part.strip() for part in message.splitlines() if part.strip()), "")
    return line if len(line) <= SUMMARY_WIDTH else line[:SUMMARY_WIDTH - 3] + "..."


def _indent(text: str, n: int) -> list[str]:
    return [(" " * n + line) if line else "" for line in text.splitlines()]


# ---- loading the student's file ---------------------------------------------------------------
def load_solution(path: Path, module_name: str) -> ModuleType:
    """Execute the file at ``path`` as a fresh module (a new one on every call).

    Raises :class:`CaseFailed` with a readable message when the file cannot be run.
    """
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise CaseFailed(f"cannot load {path} as Python (is it a .py file?)")
    module = importlib.util.module_from_spec(spec)
    try:
        with time_limit(CASE_TIME_LIMIT_S):
            spec.loader.exec_module(module)
    except SyntaxError as err:
        where = f"line {err.lineno}" + (f", column {err.offset}" if err.offset else "")
        source = f"\n    {err.text.rstrip()}" if err.text else ""
        raise CaseFailed(f"{path.name} has a syntax error at {where}: {err.msg}{source}") from None
    except (Exception, SystemExit) as err:  # noqa: BLE001 -- anything the student's top level raises
        raise CaseFailed(f"running {path.name} failed: {describe_exception(err, path)}") from None
    return module


def require(module: ModuleType, name: str, kind: str, path: Path) -> Any:
    """The attribute ``name`` of the solution, or :class:`CaseFailed` saying it is missing."""
    value = getattr(module, name, None)
    if value is None:
        raise CaseFailed(f"{path.name} defines no {kind} named `{name}` (keep the name the starter file uses)")
    if not callable(value):
        raise CaseFailed(f"`{name}` in {path.name} should be a {kind}, but it is a {type(value).__name__}")
    return value


def describe_exception(err: BaseException, solution: Path | None = None) -> str:
    """``Type: message (solution.py line N, in fn)``: the student's own frame when there is one."""
    text = f"{type(err).__name__}: {err}" if str(err) else type(err).__name__
    frames = traceback.extract_tb(err.__traceback__)
    if solution is not None:
        mine = [f for f in frames if Path(f.filename).resolve() == solution.resolve()]
        if mine:
            f = mine[-1]
            return f"{text}\n  (raised at {solution.name} line {f.lineno}, in {f.name}: {(f.line or '').strip()})"
    if frames:
        f = frames[-1]
        return f"{text}\n  (raised in {Path(f.filename).name} line {f.lineno}, in {f.name})"
    return text


@contextlib.contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    """Raise :class:`CaseTimeout` in the block after ``seconds`` (main thread on Unix only;
    elsewhere the block simply runs without a limit)."""
    usable = hasattr(signal, "SIGALRM") and threading.current_thread() is threading.main_thread()
    if not usable:
        yield
        return

    def on_alarm(signum: int, frame: Any) -> None:
        raise CaseTimeout(f"took longer than {seconds:g} s (an endless loop?)")

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


# ---- running the checks -------------------------------------------------------------------------
def require_posix() -> None:
    """The grader runs each submission in a child process it talks to over inherited pipes and
    stops by process group: POSIX (Linux, macOS). Say so plainly elsewhere."""
    if os.name != "posix":
        raise ExerciseError("grading runs each submission in a fenced-in child process, which needs a POSIX "
                            "system (Linux or macOS); on Windows, run xla-teach in WSL")


def run_checks(exercise: str, solution_path: Path, checks: Sequence[Check],
               entry_points: Sequence[tuple[str, str]]) -> GradeReport:
    """Load the solution in a child process of its own (checking it defines ``entry_points``:
    (name, kind) pairs), then run every case, judging here what the child sends back."""
    from xla_teach.exercises.confinement import Limits
    from xla_teach.exercises.sandbox import StudentProcess

    require_posix()
    start = time.perf_counter()
    report = GradeReport(exercise, str(solution_path), [])
    with StudentProcess(exercise, solution_path, entry_points, Limits(seconds_per_case=CASE_TIME_LIMIT_S)) as student:
        report.protections = list(student.protections)
        report.missing_protections = student.missing_protections
        if student.load_error:
            report.load_error = f"{student.load_error}\nEvery check scores 0 until the file loads."
            report.checks = [CheckResult(c.name, c.description, 0, c.max_points, hint=hint(exercise, c.name))
                             for c in checks]
            report.seconds = time.perf_counter() - start
            return report
        for check in checks:
            result = CheckResult(check.name, check.description, 0, check.max_points, hint=hint(exercise, check.name))
            failures: dict[str, list[int]] = {}  # the same message for several cases is shown once
            for number, case in enumerate(check.cases, 1):
                if time.perf_counter() - start > SUBMISSION_TIME_LIMIT_S:
                    message = (f"not run: the submission used up its {SUBMISSION_TIME_LIMIT_S:g} s "
                               "for all cases (some case took long)")
                else:
                    message = run_case(case, student)
                if message is None:
                    result.points += 1
                else:
                    failures.setdefault(message, []).append(number)
            for k, (message, numbers) in enumerate(failures.items()):
                label = ""
                if check.max_points > 1:
                    label = f"case{'s' if len(numbers) > 1 else ''} {', '.join(map(str, numbers))}: "
                if k == MESSAGES_PER_CHECK:  # enough to act on; the rest would only repeat the lesson
                    rest = sorted(n for ns in list(failures.values())[k:] for n in ns)
                    result.messages.append(f"case{'s' if len(rest) > 1 else ''} {', '.join(map(str, rest))} "
                                           "fail too (fix the ones above first)")
                    break
                result.messages.append(label + message)
            report.checks.append(result)
    report.seconds = time.perf_counter() - start
    return report


def run_case(case: Case, student: Any) -> str | None:
    """None if the case passes, else the feedback message. The student's code ran in its own
    process; what fails here is the judgement of its result -- including a result that lies about
    its type (a string where an array was due, an array of objects), which the judge cannot even
    compare: that fails the case too, it never stops the grading."""
    try:
        case(student)
    except CaseFailed as err:
        return printable(str(err))
    except (TypeError, ValueError, AttributeError, KeyError, IndexError, ArithmeticError, AssertionError) as err:
        return printable(f"your result could not be judged: {type(err).__name__}: {err}"[:2000])
    return None


def failure_message(err: BaseException, solution_path: Path) -> str:
    """The feedback for an exception the student's code raised (in the student's process)."""
    if isinstance(err, CaseFailed):
        return str(err)
    if isinstance(err, CaseTimeout):
        return f"your code {err}"
    if isinstance(err, NotImplementedError):
        frames = traceback.extract_tb(err.__traceback__)
        if frames and Path(frames[-1].filename).resolve() == solution_path.resolve():  # a TODO of the starter
            return f"not written yet: {err}" if str(err) else "not written yet (NotImplementedError)"
        return f"your code raised {describe_exception(err, solution_path)}"
    if isinstance(err, RecursionError):
        return "your code recursed too deeply (RecursionError)"
    if isinstance(err, MemoryError):
        return "your code ran out of memory (MemoryError: the grader's memory limit)"
    message = f"your code raised {describe_exception(err, solution_path)}"
    if isinstance(err, PermissionError):  # most likely one of the sandbox's fences
        message += ("\n  (while grading, code may read only Python's own files, write only in its folder, and "
                    "start no processes, programs or network connections)")
    return message


@contextlib.contextmanager
def quiet_stdout() -> Iterator[None]:
    """Keep debugging prints of a solution out of the report (they go to stderr, truncated)."""
    import io

    buffer = io.StringIO()
    try:
        with contextlib.redirect_stdout(buffer):
            yield
    finally:
        printed = buffer.getvalue()
        if printed:
            clipped = printed if len(printed) < 2000 else printed[:2000] + "\n... (truncated)\n"
            sys.stderr.write(clipped)
