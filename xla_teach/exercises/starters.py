"""Starter files are made from the reference solutions, so the two never drift apart.

A reference solution (``exercise_solutions/NAME.py``) marks the code the
student writes::

    def run(self, module):
        # BEGIN SOLUTION: remove the dead instructions of every computation
        ...
        # END SOLUTION

:func:`strip_solution` replaces every marked region by a ``TODO`` with the marker's
text and ``raise NotImplementedError`` (a region at the top level of the file, such as
a helper function, becomes only the ``TODO`` comment, so the file still imports). The
starter files in ``notebooks/exercises/`` are exactly the stripped solutions; a test
keeps it so, and ``python -m xla_teach.exercises.make_starters --write`` regenerates them
after a solution is edited.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
# The reference solutions live in the repository, outside the package: an installed xla_teach
# (what students get) does not carry them. Teachers, graders' tests and CI use the checkout.
SOLUTIONS_DIR = REPO_ROOT / "exercise_solutions"
STARTERS_DIR = REPO_ROOT / "notebooks" / "exercises"
INSTALLED_STARTERS_DIR = Path(__file__).resolve().parent / "starter_files"  # in a wheel (see setup.py)

_BEGIN = re.compile(r"^(?P<indent>\s*)# BEGIN SOLUTION(?::\s*(?P<todo>.*))?$")
_END = re.compile(r"^\s*# END SOLUTION\s*$")


class StarterError(ValueError):
    """A solution file's markers are unbalanced."""


def strip_solution(text: str, exercise: str) -> str:
    """``text`` with every ``BEGIN SOLUTION`` ... ``END SOLUTION`` region replaced by a TODO."""
    out: list[str] = []
    region: str | None = None  # the indent of the open region
    for number, line in enumerate(text.splitlines(), 1):
        begin, end = _BEGIN.match(line), _END.match(line)
        if region is None and begin:
            region = begin["indent"]
            todo = (begin["todo"] or "write this part").strip()
            out.append(f"{region}# TODO: {todo}")
            if region:  # inside a function: fail loudly until the student writes it
                out.append(f'{region}raise NotImplementedError("TODO ({exercise}): {_escape(todo)}")')
        elif region is not None and end:
            region = None
        elif begin or end:
            raise StarterError(f"line {number}: {'nested BEGIN' if begin else 'END without BEGIN'} SOLUTION marker")
        elif region is None:
            out.append(line)
    if region is not None:
        raise StarterError("a BEGIN SOLUTION marker has no END SOLUTION")
    return "\n".join(out) + "\n"


def _escape(todo: str) -> str:
    return todo.replace("\\", "\\\\").replace('"', '\\"')


def solution_file(exercise: str) -> Path:
    path = SOLUTIONS_DIR / f"{exercise}.py"
    if not SOLUTIONS_DIR.is_dir():
        raise FileNotFoundError(f"the reference solutions are not installed with xla_teach: they are in a "
                                f"checkout of the repository ({SOLUTIONS_DIR} is missing)")
    return path


def starter_file(exercise: str) -> Path:
    """``notebooks/exercises/NAME.py`` -- or ``NAME_exercise.py`` when ``NAME`` is a module of
    Python's standard library: a ``bisect.py`` next to a notebook would hide Python's ``bisect``.
    An installed xla_teach (no repository around it) has the same files in
    ``xla_teach/exercises/starter_files/``: the build copies them there (``setup.py``)."""
    stem = f"{exercise}_exercise" if exercise in sys.stdlib_module_names else exercise
    folder = STARTERS_DIR if STARTERS_DIR.is_dir() else INSTALLED_STARTERS_DIR
    return folder / f"{stem}.py"


def starter_text(exercise: str) -> str:
    return strip_solution(solution_file(exercise).read_text(), exercise)
