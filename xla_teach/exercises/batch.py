"""Grading a whole class: every submission in a folder, in parallel, with a CSV, JSON and HTML summary.

::

    xla-teach grade dce submissions/                 # every .py and .ipynb in the folder
    xla-teach grade dce submissions/ --out grades/   # where the results go (never overwritten)

Each submission is graded as one student's file is (:func:`xla_teach.exercises.grade`: its own
fenced-in process), several at a time -- as many as the machine has cores. A notebook counts
by its code cells, joined in order (IPython's ``%magics`` and ``!shell`` lines are left out), so
the function the exercise asks for may be defined in any cell. The results folder gets:

* ``scores.csv``: one row per file, the total and the points of every check;
* ``results/FILE.json`` (FILE: the submission's name, extension included): Gradescope's
  ``results.json`` format (``score``, ``max_score``, ``output``, and one entry per check under
  ``tests``), for upload or other tools;
* ``reports/FILE.txt``: the report the student would see;
* ``summary.html``: the score distribution, and per check how many passed and the commonest
  failure message -- what to explain again in the next class.
"""

from __future__ import annotations

import csv
import html
import json
import os
import sys
import threading
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from xla_teach.exercises.grading import ExerciseError, GradeReport, printable
from xla_teach.exercises.notebooks import notebook_source  # noqa: F401 - part of this module's API

SUBMISSION_SUFFIXES = (".py", ".ipynb")


@dataclass
class ClassResults:
    """What :func:`grade_folder` produced: one report per student, and where the files went."""

    exercise: str
    reports: dict[str, GradeReport]  # student (the file's name, extension included) -> report
    out: Path

    @property
    def max_score(self) -> int:
        return max((r.max_score for r in self.reports.values()), default=0)


def submissions_in(folder: Path) -> list[Path]:
    """The ``.py`` and ``.ipynb`` files of ``folder`` (not hidden ones), sorted by name."""
    if not folder.is_dir():
        raise ExerciseError(f"{folder}: not a folder of submissions")
    found = sorted(p for p in folder.iterdir()
                   if p.is_file() and p.suffix in SUBMISSION_SUFFIXES and not p.name.startswith("."))
    if not found:
        raise ExerciseError(f"{folder} has no .py or .ipynb submissions")
    return found


def grade_folder(exercise: str, folder: str | Path, out: str | Path | None = None, seed: int = 0,
                 jobs: int | None = None, progress: Callable[[int, int, str], None] | None = None) -> ClassResults:
    """Grade every submission in ``folder``; write the results to ``out`` (a new or empty folder;
    default ``grades_EXERCISE`` next to ``folder``). ``progress(done, total, student)`` is called
    after each submission."""
    from xla_teach.exercises.grading import require_posix

    require_posix()
    from xla_teach.exercises import get_exercise, grade

    ex = get_exercise(exercise)
    files = submissions_in(Path(folder))
    out_dir = Path(out) if out is not None else Path(folder).resolve().parent / f"grades_{ex.name}"
    if out_dir.exists() and any(out_dir.iterdir()):
        raise ExerciseError(f"{out_dir} exists and is not empty; not overwriting it (give --out a new folder)")
    out_dir.mkdir(parents=True, exist_ok=True)
    reports: dict[str, GradeReport] = {}
    lock = threading.Lock()

    def one(path: Path) -> tuple[str, GradeReport]:
        # The key is the file's name, extension included: unique in the folder, the same from one
        # run to the next (alice.py, alice.ipynb and alice.py.py are three rows, never one).
        try:
            return path.name, grade(ex.name, path, seed=seed)  # each in its own fenced-in process
        except Exception as err:  # noqa: BLE001 - one submission never stops the class's grading
            return path.name, failed_report(ex, path, f"the grader could not grade this file: "
                                                      f"{type(err).__name__}: {err}", seed)

    with ThreadPoolExecutor(max_workers=jobs or os.cpu_count() or 1) as pool:
        for future in as_completed([pool.submit(one, path) for path in files]):
            student, report = future.result()
            with lock:
                reports[student] = report
                if progress is not None:
                    progress(len(reports), len(files), student)
    results = ClassResults(ex.name, dict(sorted(reports.items())), out_dir)
    write_results(results)
    return results


def failed_report(ex: Any, path: Path, why: str, seed: int) -> GradeReport:
    """A row of zeros with the reason, for a submission the grader could not grade."""
    from xla_teach.exercises.grading import CheckResult
    from xla_teach.exercises.hints import hint

    checks = [CheckResult(c.name, c.description, 0, c.max_points, hint=hint(ex.name, c.name))
              for c in ex.make_checks(seed)]
    return GradeReport(ex.name, str(path), checks, load_error=printable(why)[:4000])


def same_student(results: ClassResults) -> dict[str, list[str]]:
    """Files that look like one student's (the same name before the first dot): the teacher
    decides which counts; every one of them was graded."""
    by_stem: dict[str, list[str]] = {}
    for name in results.reports:
        by_stem.setdefault(name.split(".", 1)[0], []).append(name)
    return {stem: names for stem, names in by_stem.items() if len(names) > 1}


def progress_bar(done: int, total: int, student: str) -> None:
    """``[#####.....] 12/30  alice`` on stderr, redrawn in place."""
    width = 30
    filled = width * done // max(total, 1)
    sys.stderr.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{total}  {student[:30]:<30}")
    if done == total:
        sys.stderr.write("\n")
    sys.stderr.flush()


# ---- the files --------------------------------------------------------------------------------------------
def gradescope_json(report: GradeReport) -> dict[str, object]:
    """A report in Gradescope's ``results.json`` format."""
    return {
        "score": report.score, "max_score": report.max_score, "execution_time": round(report.seconds, 3),
        "output": report.text("full"),
        "tests": [{"name": c.name, "score": c.points, "max_score": c.max_points,
                   "status": "passed" if c.passed else "failed",
                   "output": c.description + ("\n\n" + "\n".join(c.messages) if c.messages else "")}
                  for c in report.checks],
    }


def write_results(results: ClassResults) -> None:
    out = results.out
    (out / "results").mkdir(exist_ok=True)
    (out / "reports").mkdir(exist_ok=True)
    check_names = _check_names(results)
    with open(out / "scores.csv", "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["student", "file", "score", "max_score", "loaded", *check_names])
        for student, report in results.reports.items():
            points = {c.name: c.points for c in report.checks}
            writer.writerow([student, Path(report.solution).name, report.score, report.max_score,
                             "no" if report.load_error else "yes", *(points.get(n, 0) for n in check_names)])
    for student, report in results.reports.items():
        (out / "results" / f"{student}.json").write_text(json.dumps(gradescope_json(report), indent=1))
        (out / "reports" / f"{student}.txt").write_text(report.text("full") + "\n")
    (out / "summary.html").write_text(summary_html(results))


def _check_names(results: ClassResults) -> list[str]:
    names: list[str] = []
    for report in results.reports.values():
        names += [c.name for c in report.checks if c.name not in names]
    return names


def _first_line(message: str) -> str:
    """A failure message without its case numbers and module listing: what the students share."""
    text = message.split("\n", 1)[0]
    if text.startswith("case") and ": " in text:
        text = text.split(": ", 1)[1]
    return text


def summary_html(results: ClassResults) -> str:
    """One self-contained page: score distribution, and each check's pass rate and commonest failure."""
    reports = list(results.reports.values())
    top = results.max_score
    counts = Counter(r.score for r in reports)
    tallest = max(counts.values(), default=1)
    bars = []
    for score in range(top + 1):
        n = counts.get(score, 0)
        height = 160 * n / tallest
        x = 40 + score * 36
        bars.append(f'<rect x="{x}" y="{190 - height:.1f}" width="28" height="{height:.1f}" class="bar">'
                    f"<title>{n} student(s) scored {score}</title></rect>"
                    f'<text x="{x + 14}" y="208" class="axis">{score}</text>'
                    + (f'<text x="{x + 14}" y="{184 - height:.1f}" class="count">{n}</text>' if n else ""))
    svg = (f'<svg viewBox="0 0 {60 + (top + 1) * 36} 220" class="histogram" role="img" '
           f'aria-label="score distribution">{"".join(bars)}</svg>')
    rows = []
    for name in _check_names(results):
        mine = [c for r in reports for c in r.checks if c.name == name]
        passed = sum(c.passed for c in mine)
        messages = Counter(_first_line(m) for c in mine for m in c.messages if not m.endswith("above first)"))
        common, times = messages.most_common(1)[0] if messages else ("", 0)
        description = mine[0].description if mine else ""
        rate = passed / len(mine) if mine else 0
        rows.append(f"<tr><td><b>{html.escape(name)}</b><br><span class=desc>{html.escape(description)}</span></td>"
                    f'<td class=num><div class=meter><div style="width:{100 * rate:.0f}%"></div></div>'
                    f"{passed}/{len(mine)}</td><td>{html.escape(common)}"
                    + (f" <span class=desc>({times}×)</span>" if times else "") + "</td></tr>")
    not_loaded = [s for s, r in results.reports.items() if r.load_error]
    students = "".join(
        f"<tr><td>{html.escape(s)}</td><td class=num>{r.score}/{r.max_score}</td>"
        f"<td>{html.escape(_first_line(r.load_error)) if r.load_error else ''}</td></tr>"
        for s, r in results.reports.items())
    duplicates = same_student(results)
    items = "".join(f"<li>{html.escape(stem)}: {', '.join(html.escape(n) for n in names)} (each graded; keep the "
                    "one that counts)</li>" for stem, names in duplicates.items())
    twice = f"<h2>Several files of one student?</h2><ul>{items}</ul>" if duplicates else ""
    mean = sum(r.score for r in reports) / len(reports) if reports else 0
    full = sum(r.passed for r in reports)
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{html.escape(results.exercise)}: class results</title>
<style>
body {{ font: 15px/1.45 system-ui, sans-serif; margin: 2em auto; max-width: 1000px; color: #222; padding: 0 1em; }}
h1 {{ font-size: 1.5em; }} table {{ border-collapse: collapse; width: 100%; margin: 1em 0 2em; }}
td, th {{ border-bottom: 1px solid #ddd; padding: .45em .6em; text-align: left; vertical-align: top; }}
th {{ background: #f4f4f4; }} .num {{ white-space: nowrap; }} .desc {{ color: #666; font-size: .9em; }}
.histogram {{ width: 100%; max-width: 700px; height: auto; }} .bar {{ fill: #4c78a8; }}
.axis, .count {{ font-size: 11px; text-anchor: middle; fill: #444; }}
.meter {{ display: inline-block; width: 80px; height: 9px; background: #eee; margin-right: .5em; }}
.meter div {{ height: 100%; background: #54a24b; }}
</style></head><body>
<h1>{html.escape(results.exercise)} &mdash; {len(reports)} submissions</h1>
<p>Mean score {mean:.1f} of {top}; {full} with every check passing; {len(not_loaded)} that did not load.</p>
<h2>Score distribution</h2>
{svg}
<h2>Checks</h2>
<table><tr><th>check</th><th>passed</th><th>commonest failure</th></tr>
{"".join(rows)}</table>
<h2>Students</h2>
<table><tr><th>student</th><th>score</th><th>why it did not load</th></tr>
{students}</table>
{twice}
</body></html>
"""


__all__ = ["ClassResults", "grade_folder", "gradescope_json", "notebook_source", "progress_bar",
           "submissions_in", "summary_html"]
