"""``xla-teach grade``: run the autograder on an exercise solution.

::

    xla-teach grade --list                      # the exercises and their starter files
    xla-teach grade --start dce                 # copy the starter to ./dce.py (never overwrites)
    xla-teach grade dce dce.py                  # grade: exit code 0 for a full score, else 1
    xla-teach grade dce submissions/            # a whole class: CSV, results.json each, summary.html

Importing this module registers ``grade`` with :mod:`xla_teach.tools.cli` (which imports it).
"""

from __future__ import annotations

import argparse
import sys
import textwrap
from pathlib import Path

from xla_teach.tools.cli.registry import register

HELP = "grade an exercise solution with the hidden checks (see docs/exercises.md)"


def configure_grade(parser: argparse.ArgumentParser) -> None:
    from xla_teach.exercises import EXERCISE_NAMES

    parser.add_argument("exercise", nargs="?", metavar="EXERCISE", help=f"{', '.join(EXERCISE_NAMES[:-1])} or "
                        f"{EXERCISE_NAMES[-1]} (--list describes them)")
    parser.add_argument("solution", nargs="?", metavar="SOLUTION", help="your solution file (.py or .ipynb), or a "
                        "folder of submissions to grade a whole class")
    parser.add_argument("--list", action="store_true", help="list the exercises with their starter files")
    parser.add_argument("--start", default="", metavar="EXERCISE",
                        help="copy the starter file of EXERCISE into the current directory")
    parser.add_argument("--seed", type=int, default=0, help="pick other hidden modules (default 0)")
    parser.add_argument("--out", default=None, metavar="FOLDER", help="with a folder of submissions: where the "
                        "results go (a new or empty folder; default grades_EXERCISE next to the submissions)")
    parser.add_argument("--jobs", type=int, default=None, help="submissions graded at once (default: the cores)")
    parser.add_argument("--detail", choices=("summary", "hints", "full"), default="hints",
                        help="how much of each failure to show: a line per check, with a hint (default), or every "
                             "message in full (expected vs got)")


def run_grade(args: argparse.Namespace) -> int:
    from xla_teach.exercises import EXERCISES, ExerciseError, copy_starter, grade, starter_file

    if args.list or (not args.exercise and not args.start):
        for ex in EXERCISES.values():
            print(f"{ex.name:<18} {ex.title}")
            print(textwrap.fill(ex.teaches, 100, initial_indent=" " * 19, subsequent_indent=" " * 19))
            print(f"{'':<18} starter: {starter_file(ex.name)}\n")
        print("Start: xla-teach grade --start EXERCISE; edit the file; then: xla-teach grade EXERCISE FILE.py")
        return 0
    if args.start:
        copy = copy_starter(args.start, ".")
        print(f"wrote {copy}: fill in the TODOs, then run  xla-teach grade {args.start} {copy}")
        return 0
    if not args.solution:
        raise ExerciseError(f"give the solution file: xla-teach grade {args.exercise} path/to/solution.py "
                            f"(start from --start {args.exercise})")
    from pathlib import Path

    if Path(args.solution).is_dir():
        from xla_teach.exercises.batch import grade_folder, progress_bar

        results = grade_folder(args.exercise, args.solution, out=args.out, seed=args.seed, jobs=args.jobs,
                               progress=progress_bar)
        full = sum(r.passed for r in results.reports.values())
        print(f"graded {len(results.reports)} submissions of {results.exercise}: {full} with a full score")
        for name in ("scores.csv", "summary.html", "results/FILE.json", "reports/FILE.txt"):
            print(f"  {results.out / name}")
        return 0
    report = grade(args.exercise, args.solution, seed=args.seed)
    print(report.text(args.detail))
    return 0 if report.passed else 1


KIT_HELP = ("make a course kit from this checkout: 'student' (notebooks, starters, requirements.txt; no answers) "
            "or 'teacher' (reference solutions, answer keys, the teacher's guide)")


def configure_kit(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("which", choices=("student", "teacher"), help="whose kit")
    parser.add_argument("folder", help="a new (or empty) folder to write it into")
    parser.add_argument("--package", default="xla-teach", help="student kit: how requirements.txt names "
                        "xla_teach (a version, a wheel's URL, 'git+https://...'); default xla-teach")


def run_kit(args: argparse.Namespace) -> int:
    from xla_teach.exercises.kits import KitError, student_kit, teacher_kit

    try:
        folder = Path(args.folder)
        kit = student_kit(folder, args.package) if args.which == "student" else teacher_kit(folder)
    except KitError as err:
        print(f"xla-teach kit: {err}", file=sys.stderr)
        return 2
    print(f"{args.which} kit: {len(kit.files)} files in {kit.folder}")
    return 0


register("grade", HELP, configure_grade, run_grade)
register("kit", KIT_HELP, configure_kit, run_kit)
