"""Build the tutorial notebooks (``notebooks/*.ipynb``) from their Python sources.

The sources live in ``notebooks/src/NN_name.py`` in the "percent" format that
Jupytext, VS Code and Spyder understand: a line ``# %%`` starts a code cell and
``# %% [markdown]`` a markdown cell whose lines are comments::

    # %% [markdown]
    # # Reading and writing HLO
    # Every XLA program is an `HloModule`...

    # %%
    from xla_teach import parse_hlo

Lines before the first ``# %%`` are a header for the source file only. Sources are
plain Python, so they review and diff like code; the ``.ipynb`` files are build
outputs, committed **without outputs** (the test suite executes them).

Usage::

    python scripts/build_notebooks.py            # (re)write every notebook from its source
    python scripts/build_notebooks.py 02 04      # only the notebooks whose names start so
    python scripts/build_notebooks.py --check    # exit 1 if a notebook is missing or stale

A notebook edited in Jupyter (its cells no longer match what this script wrote) is
not overwritten unless ``--force`` is given: move the edit into its source first.
Outputs saved by running a notebook are dropped on the next build.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
SOURCES = NOTEBOOKS / "src"
_MARKER = re.compile(r"^# %%(?P<markdown>\s*\[markdown\])?\s*$")
NBFORMAT, NBFORMAT_MINOR = 4, 5
KERNELSPEC = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}


class NotebookSourceError(ValueError):
    """A notebook source file cannot be turned into a notebook."""


@dataclass
class Cell:
    kind: str  # "code" or "markdown"
    source: str


def parse_percent_source(text: str, where: str = "<source>") -> list[Cell]:
    """Split percent-format text into cells (markdown cells lose their leading ``# ``)."""
    cells: list[Cell] = []
    kind: str | None = None
    lines: list[str] = []

    def flush() -> None:
        if kind is None:
            return  # the header before the first marker
        body = "\n".join(lines).strip("\n")
        if body.strip():
            cells.append(Cell(kind, body))

    for number, line in enumerate(text.splitlines(), start=1):
        match = _MARKER.match(line)
        if match:
            flush()
            kind, lines = ("markdown" if match.group("markdown") else "code"), []
        elif kind == "markdown":
            if line.strip() and not line.startswith("#"):
                raise NotebookSourceError(f"{where}:{number}: a markdown cell line must start with '#': {line!r}")
            lines.append(line[2:] if line.startswith("# ") else line[1:])
        else:
            lines.append(line)
    flush()
    if not cells:
        raise NotebookSourceError(f"{where}: no cells (start each cell with '# %%' or '# %% [markdown]')")
    return cells


def _cells_digest(sources: list[tuple[str, str]]) -> str:
    return hashlib.sha256(json.dumps(sources).encode()).hexdigest()


def build_notebook(source_path: Path) -> dict:
    """The notebook (as JSON data, no outputs) for one source file."""
    cells = parse_percent_source(source_path.read_text(), str(source_path.relative_to(ROOT)))
    stem = source_path.stem
    nb_cells = []
    for i, cell in enumerate(cells):
        data: dict = {"cell_type": cell.kind, "id": f"{stem[:48]}-{i:03d}", "metadata": {},
                      "source": cell.source.splitlines(keepends=True)}
        if cell.kind == "code":
            data["execution_count"] = None
            data["outputs"] = []
        nb_cells.append(data)
    metadata = {
        "kernelspec": KERNELSPEC,
        "language_info": {"name": "python", "pygments_lexer": "ipython3"},
        "xla_teach": {
            "generated_from": str(source_path.relative_to(ROOT)),
            "cells_sha256": _cells_digest([(c.kind, c.source) for c in cells]),
        },
    }
    return {"cells": nb_cells, "metadata": metadata, "nbformat": NBFORMAT, "nbformat_minor": NBFORMAT_MINOR}


def notebook_text(notebook: dict) -> str:
    return json.dumps(notebook, indent=1, ensure_ascii=False) + "\n"


def _edited_by_hand(path: Path) -> bool:
    """Whether the notebook's cells differ from what this script last wrote into it."""
    try:
        existing = json.loads(path.read_text())
        recorded = existing["metadata"]["xla_teach"]["cells_sha256"]
        sources = [(c["cell_type"], "".join(c["source"])) for c in existing["cells"]]
    except (ValueError, KeyError, TypeError):
        return True  # not written by this script
    return _cells_digest(sources) != recorded


def target_of(source_path: Path) -> Path:
    return NOTEBOOKS / f"{source_path.stem}.ipynb"


def sources(prefixes: list[str] | None = None) -> list[Path]:
    found = sorted(SOURCES.glob("[0-9][0-9]_*.py"))
    if prefixes:
        found = [p for p in found if any(p.stem.startswith(prefix) for prefix in prefixes)]
    return found


def stale_notebooks(prefixes: list[str] | None = None) -> list[str]:
    """Why each notebook is missing or out of date ([] when all match their sources)."""
    problems = []
    for src in sources(prefixes):
        target = target_of(src)
        if not target.exists():
            problems.append(f"{target.relative_to(ROOT)} is missing")
        elif target.read_text() != notebook_text(build_notebook(src)):
            problems.append(f"{target.relative_to(ROOT)} differs from {src.relative_to(ROOT)} "
                            "(or has outputs); run scripts/build_notebooks.py")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", help="build only notebooks whose file names start with these")
    parser.add_argument("--check", action="store_true", help="only check that the notebooks are up to date")
    parser.add_argument("--force", action="store_true", help="overwrite notebooks edited by hand")
    args = parser.parse_args(argv)
    selected = sources(args.names)
    if not selected:
        print(f"no notebook sources match {args.names or '*'} in {SOURCES.relative_to(ROOT)}", file=sys.stderr)
        return 2
    if args.check:
        problems = stale_notebooks(args.names)
        for problem in problems:
            print(problem, file=sys.stderr)
        return 1 if problems else 0
    status = 0
    for src in selected:
        target = target_of(src)
        text = notebook_text(build_notebook(src))
        if target.exists() and target.read_text() == text:
            print(f"unchanged {target.relative_to(ROOT)}")
            continue
        if target.exists() and _edited_by_hand(target) and not args.force:
            print(f"not overwriting {target.relative_to(ROOT)}: it was edited outside {src.relative_to(ROOT)} "
                  "(move the edits into the source, or pass --force)", file=sys.stderr)
            status = 1
            continue
        target.write_text(text)
        print(f"wrote {target.relative_to(ROOT)}")
    return status


if __name__ == "__main__":
    sys.exit(main())
