"""mkdocs hook: the notebooks, rendered as tutorial pages.

Each ``notebooks/src/NN_name.py`` (the "percent" source the notebooks are built from,
see ``scripts/build_notebooks.py``) becomes ``tutorials/NN_name.md``: markdown cells as
markdown, code cells as Python code blocks (no outputs: run the notebook to see them),
and a link to download the notebook. The downloadable ``.ipynb`` is built from the same
source by the same script, so the page and the notebook cannot disagree.

``tutorials/index.md`` lists them; the nav section
``Tutorials`` lists them in order.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType

from hook_utils import add_generated_file, fence, set_nav_entries
from mkdocs.config.defaults import MkDocsConfig
from mkdocs.exceptions import PluginError
from mkdocs.structure.files import Files

ROOT = Path(__file__).resolve().parents[2]
NAV_SECTION = "Tutorials"
PAGE_DIR = "tutorials"
GENERATOR = "docs/hooks/tutorials.py"


def _build_notebooks() -> ModuleType:
    """``scripts/build_notebooks.py``, which owns the source format."""
    spec = importlib.util.spec_from_file_location("build_notebooks", ROOT / "scripts" / "build_notebooks.py")
    if spec is None or spec.loader is None:
        raise PluginError(f"{GENERATOR}: cannot load scripts/build_notebooks.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def title_of(markdown: str, fallback: str) -> str:
    """The first ``# heading`` of a markdown cell, without markdown."""
    match = re.search(r"^# (.+)$", markdown, flags=re.M)
    return match.group(1).strip().replace("`", "") if match else fallback  # nav titles are plain text


def tutorial_page(source: Path, cells: list, notebook_name: str) -> str:
    """The page for one notebook source: its cells, with a download box after the first cell."""
    rel_source = source.relative_to(ROOT).as_posix()
    download = "\n".join([
        '!!! tip "Run this tutorial"',
        f"    Download the notebook [{notebook_name}]({notebook_name}) and open it in Jupyter, or, in a "
        f"checkout, run `.venv/bin/jupyter lab notebooks/{notebook_name}`. This page is generated from "
        f"`{rel_source}` and shows the code without its output: the test suite runs every notebook, "
        "so the code on this page runs.",
    ])
    parts: list[str] = []
    if not cells or cells[0].kind != "markdown" or not re.match(r"^# ", cells[0].source):
        parts.append(f"# {source.stem}")
    for i, cell in enumerate(cells):
        parts.append(cell.source if cell.kind == "markdown" else fence(cell.source, "python"))
        if i == 0:
            parts.append(download)
    return "\n\n".join(parts) + "\n"


def index_page(rows: list[tuple[str, str]]) -> str:
    lines = [
        "# Tutorials",
        "",
        "The notebooks in `notebooks/`, one idea each, from a first `jit` to reading a gradient's HLO. "
        "Each ends with exercises; the test suite runs all of them headless on the CPU (GPU cells say so "
        "when there is no GPU). Download a notebook from its page, or open it in a checkout.",
        "",
    ]
    lines += [f"* [{title}]({page})" for title, page in rows]
    return "\n".join(lines) + "\n"


def on_files(files: Files, config: MkDocsConfig) -> Files:
    builder = _build_notebooks()
    sources = builder.sources()
    if not sources:
        raise PluginError(f"{GENERATOR}: no notebook sources in notebooks/src/")
    nav: list[dict[str, str]] = [{"All tutorials": f"{PAGE_DIR}/index.md"}]
    rows = []
    for source in sources:
        cells = builder.parse_percent_source(source.read_text(), source.relative_to(ROOT).as_posix())
        notebook_name = builder.target_of(source).name
        notebook = builder.notebook_text(builder.build_notebook(source))
        add_generated_file(files, config, f"{PAGE_DIR}/{notebook_name}", notebook, GENERATOR)
        page = f"{PAGE_DIR}/{source.stem}.md"
        add_generated_file(files, config, page, tutorial_page(source, cells, notebook_name), GENERATOR)
        first = cells[0].source if cells[0].kind == "markdown" else ""
        title = title_of(first, source.stem)
        nav.append({title: page})
        rows.append((title, f"{source.stem}.md"))
    add_generated_file(files, config, f"{PAGE_DIR}/index.md", index_page(rows), GENERATOR)
    set_nav_entries(config, NAV_SECTION, nav, PAGE_DIR + "/")
    return files
