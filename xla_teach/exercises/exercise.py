"""What an exercise is: a name, what it teaches, the names the student's file must define,
and the hidden checks (built from a seed, so feedback is the same on every run)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from xla_teach.exercises.grading import Check


@dataclass(frozen=True)
class Exercise:
    name: str  # what `xla-teach grade NAME ...` takes; also the starter's file name (NAME.py)
    title: str  # one line
    teaches: str  # a few sentences for `--list` and docs/exercises.md
    entry_points: Sequence[tuple[str, str]]  # (name, kind) the solution must define, e.g. ("rewrite", "function")
    make_checks: Callable[[int], list[Check]]  # seed -> checks
