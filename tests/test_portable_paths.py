"""Nothing a student reads or runs names a path of the machine the project is built on: the
notebooks' sources, the docs and the README use paths inside the repository (or the user's own)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# the project's own machine: its work folder, the folder of samples beside the repository, a home
SHARED_FOLDER = "sha" + "red/"  # (spelled apart: this file itself reads nothing from there)
BUILD_MACHINE = re.compile(r"/work/|/root/|/home/\w+/|" + SHARED_FOLDER + "samples")


def test_no_build_machine_paths_in_notebooks_docs_or_readme() -> None:
    files = [*sorted((ROOT / "notebooks" / "src").glob("*.py")), *sorted((ROOT / "docs").glob("*.md")),
             ROOT / "README.md"]
    found = [f"{path.relative_to(ROOT)}:{n}: {line.strip()}" for path in files
             for n, line in enumerate(path.read_text().splitlines(), 1) if BUILD_MACHINE.search(line)]
    assert not found, "\n".join(found)
