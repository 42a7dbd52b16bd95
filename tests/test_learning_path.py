"""docs/learning-path.md covers the course as it is: every notebook (linked to its tutorial
page) and every graded exercise appears in the path, and each exercise is placed after the
chapter whose notebook prepares it."""

from __future__ import annotations

import re
from pathlib import Path

from xla_teach.exercises import EXERCISE_NAMES

ROOT = Path(__file__).resolve().parent.parent
PAGE = (ROOT / "docs" / "learning-path.md").read_text()


def _rows(header: str) -> list[list[str]]:
    section = PAGE.split(header, 1)[1].split("\n## ", 1)[0]
    return [[cell.strip() for cell in line.strip("|").split("|")] for line in section.splitlines()
            if line.startswith("| ") and not line.startswith("| #") and not line.startswith("| Exercise")]


def test_every_notebook_is_a_chapter_of_the_path() -> None:
    notebooks = sorted(p.stem for p in (ROOT / "notebooks" / "src").glob("[0-9][0-9]_*.py"))
    chapters = "".join(row[1] for row in _rows("## The path"))
    assert sorted(re.findall(r"\(tutorials/(\d\d_\w+)\.md\)", chapters)) == notebooks


def test_every_exercise_is_placed_after_the_chapter_that_prepares_it() -> None:
    rows = {row[0].strip("`"): row for row in _rows("## The graded exercises")}
    assert sorted(rows) == sorted(EXERCISE_NAMES)
    for name, row in rows.items():
        chapter = row[1]
        source = next((ROOT / "notebooks" / "src").glob(f"{chapter}_*.py")).read_text()
        assert re.search(rf"for exercise in \[[^]]*'{name}'", source), f"{name}: notebook {chapter} does not prepare it"
