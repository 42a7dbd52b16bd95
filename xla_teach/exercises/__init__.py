"""Exercises with an autograder: small, real compiler tasks, graded by hidden property tests.

==================  ====================================================================
exercise            the student writes
==================  ====================================================================
``shape_inference`` ``infer_dot_shape(...)``: the result shape of a ``dot``, or ValueError
``dce``             dead code elimination, as an ``HloPass``
``cse``             common subexpression elimination, as an ``HloPass``
``algsimp_rule``    one algebraic-simplifier rule: ``rewrite(instr) -> instr | None``
``fusion_decision`` ``should_fuse(producer, consumer) -> bool``, by documented rules
``elemental_emitter`` the LLVM IR of a new elementwise op (softplus), JIT-compiled
``reduction_loop``  ``emit_row_sum(...)``: a reduction kernel's loop nest in LLVM IR
``liveness``        ``live_ranges`` and ``peak_bytes`` of a computation in a given order
``bisect``          ``find_broken_pass(module, pipeline, args)``: name the pass that breaks
``autodiff_rule``   ``atan2_vjp(ct, inputs, out)``: atan2's vector-Jacobian product
``sharding``        ``device_slices`` and ``reshard``: each device's piece, the collective
``read_dump``       kernels, fusions and source lines in XLA's own optimized dumps
``capstone``        ``build_pipeline()``: the student's DCE, CSE, rule and fusion as one
                    pipeline, graded on traced models the student has not seen
==================  ====================================================================

Start from the starter file (``notebooks/exercises/NAME.py``, or :func:`copy_starter`),
fill in the TODOs, then grade::

    xla-teach grade dce my_dce.py            # or, in Python / a notebook:
    print(xla_teach.exercises.grade("dce", "my_dce.py"))

The checks run on modules the student has not seen (generated from a seed), compare
results with the interpreter, and check the expected structural effect; every failure
names the property, shows the module and says what was expected and what came out.
"""

from __future__ import annotations

import functools
import importlib
import os
import shutil
from pathlib import Path
from typing import Any

from xla_teach.exercises.exercise import Exercise
from xla_teach.exercises.grading import ExerciseError, GradeReport, run_checks
from xla_teach.exercises.starters import solution_file, starter_file

# In the order a student meets them; each names a module of xla_teach/exercises/graders/.
EXERCISE_NAMES = ("shape_inference", "dce", "cse", "algsimp_rule", "fusion_decision", "elemental_emitter",
                  "reduction_loop", "liveness", "bisect", "autodiff_rule", "sharding", "read_dump", "capstone")


@functools.cache
def _exercises() -> dict[str, Exercise]:
    """The graders, imported on first use (they pull in the interpreter and LLVM)."""
    modules = [importlib.import_module(f"xla_teach.exercises.graders.{name}") for name in EXERCISE_NAMES]
    return {m.EXERCISE.name: m.EXERCISE for m in modules}


def __getattr__(name: str) -> Any:
    if name == "EXERCISES":  # lazily: `xla-teach --help` should not wait for LLVM
        return _exercises()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def get_exercise(name: str) -> Exercise:
    key = name.strip().replace("-", "_")
    if key not in EXERCISE_NAMES:
        raise ExerciseError(f"unknown exercise '{name}' (exercises: {', '.join(EXERCISE_NAMES)})")
    return _exercises()[key]


def grade(exercise: str, solution_path: str | Path, seed: int = 0) -> GradeReport:
    """Grade the student's file (``.py``, or a notebook's code cells) for ``exercise``; never
    raises for a bad solution file.

    Raises :class:`ExerciseError` only for an unknown exercise or a missing file.
    ``seed`` picks the hidden modules (the same seed gives the same feedback).
    """
    ex = get_exercise(exercise)
    path = Path(solution_path)
    if not path.is_file():
        raise ExerciseError(f"{path}: no such file (copy the starter {starter_file(ex.name)} and edit it)")
    if path.suffix == ".ipynb":
        import tempfile

        from xla_teach.exercises.notebooks import notebook_source

        with tempfile.TemporaryDirectory(prefix="xla_teach_notebook_") as folder:
            source = Path(folder) / f"{path.stem}.py"
            source.write_text(notebook_source(path))
            report = run_checks(ex.name, source, ex.make_checks(seed), ex.entry_points)
        report.solution = str(path)
        return report
    return run_checks(ex.name, path, ex.make_checks(seed), ex.entry_points)


def exercise_folder() -> Path:
    """Where :func:`start` keeps your copies: ``$XLA_TEACH_EXERCISES_DIR``, or
    ``~/xla_teach_exercises``."""
    folder = Path(os.environ.get("XLA_TEACH_EXERCISES_DIR") or Path.home() / "xla_teach_exercises")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def start(exercise: str) -> Path:
    """Your copy of the starter of ``exercise`` in :func:`exercise_folder` (made the first time,
    never overwritten afterwards): edit it, then ``grade(exercise, start(exercise))``."""
    mine = exercise_folder() / starter_file(get_exercise(exercise).name).name
    return mine if mine.exists() else copy_starter(exercise, mine)


def copy_starter(exercise: str, destination: str | Path = ".") -> Path:
    """Copy the starter of ``exercise`` to ``destination`` (a directory or a file name); never
    overwrites a file. Returns the path of the copy."""
    ex = get_exercise(exercise)
    source = starter_file(ex.name)
    target = Path(destination)
    if target.is_dir():
        target = target / source.name
    if target.exists():
        raise ExerciseError(f"{target} already exists; not overwriting it (pick another name)")
    shutil.copyfile(source, target)
    return target


__all__ = [  # noqa: F822 -- EXERCISES comes from __getattr__
    "EXERCISES",
    "EXERCISE_NAMES",
    "Exercise",
    "ExerciseError",
    "GradeReport",
    "copy_starter",
    "exercise_folder",
    "get_exercise",
    "grade",
    "solution_file",
    "start",
    "starter_file",
]
