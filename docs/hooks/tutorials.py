"""mkdocs hook: the notebooks, rendered as tutorial pages.

Each ``notebooks/src/NN_name.py`` (the "percent" source the notebooks are built from,
see ``scripts/build_notebooks.py``) becomes ``tutorials/NN_name.md``: markdown cells as
markdown, code cells as Python code blocks followed by **what they printed and drew**
(the notebook is run when the site is built, by ``scripts/execute_notebooks.py``, cached
until the notebook or the package changes), and a link to download the notebook. The
downloadable ``.ipynb`` is built from the same source by the same script, so the page and
the notebook cannot disagree.

Outputs: text as a text block, HTML (graphs, tables, the compile explorer in its frame)
inline, PNG figures as images. Set ``XLA_TEACH_DOCS_OUTPUTS=0`` to build without running
the notebooks (the pages then say so).

``tutorials/index.md`` lists them; the nav section
``Tutorials`` lists them in order.
"""

from __future__ import annotations

import html
import importlib.util
import os
import re
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from hook_utils import add_generated_file, fence, set_nav_entries
from mkdocs.config.defaults import MkDocsConfig
from mkdocs.exceptions import PluginError
from mkdocs.structure.files import Files

ROOT = Path(__file__).resolve().parents[2]
NAV_SECTION = "Tutorials"
PAGE_DIR = "tutorials"
GENERATOR = "docs/hooks/tutorials.py"


def _script(name: str) -> ModuleType:
    """A module of ``scripts/``: ``build_notebooks`` owns the source format, ``execute_notebooks``
    runs a notebook."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    if spec is None or spec.loader is None:
        raise PluginError(f"{GENERATOR}: cannot load scripts/{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def title_of(markdown: str, fallback: str) -> str:
    """The first ``# heading`` of a markdown cell, without markdown."""
    match = re.search(r"^# (.+)$", markdown, flags=re.M)
    return match.group(1).strip().replace("`", "") if match else fallback  # nav titles are plain text


def _html_block(html: str) -> str:
    """Raw HTML that Markdown leaves alone: one ``<div>``, no blank line inside it."""
    lines = [line for line in html.strip().splitlines() if line.strip()]
    return '<div class="nb-output">\n' + "\n".join(lines) + "\n</div>"


# The folders a notebook ran in when the site was built (scripts/execute_notebooks.py makes
# them under the machine's temporary folder): a reader's run has others, so pages say $TMPDIR.
_RUN_FOLDER = re.compile(r"/(?:private/)?(?:var/folders/[^\s\"'&]*?/T|tmp)/xla_teach_nb_(?:cwd_)?[A-Za-z0-9_]+")


def _neutral_paths(output: dict[str, Any]) -> dict[str, Any]:
    """The output with the build's run folders written as ``$TMPDIR``."""
    def clean(value: Any) -> Any:
        if isinstance(value, str):
            return _RUN_FOLDER.sub("$TMPDIR", value)
        if isinstance(value, list):
            return [clean(v) for v in value]
        if isinstance(value, dict):
            return {k: clean(v) for k, v in value.items()}
        return value

    return clean(output)


def render_outputs(outputs: list[dict[str, Any]]) -> list[str]:
    """A code cell's outputs as page blocks: text, HTML, images (the build's folders as $TMPDIR)."""
    blocks: list[str] = []
    for output in map(_neutral_paths, outputs):
        kind = output.get("output_type")
        if kind == "stream":
            blocks.append(fence(str(output.get("text", "")).rstrip("\n"), "text"))
        elif kind in ("execute_result", "display_data"):
            data = output.get("data", {})
            if "text/html" in data:
                blocks.append(_html_block(str(data["text/html"])))
            elif "image/svg+xml" in data:
                blocks.append(_html_block(str(data["image/svg+xml"])))
            elif "image/png" in data:
                png = str(data["image/png"]).strip()
                blocks.append(_html_block(f'<img alt="figure" src="data:image/png;base64,{png}">'))
            elif "text/plain" in data:
                blocks.append(fence(str(data["text/plain"]).rstrip("\n"), "text"))
        elif kind == "error":
            raise PluginError(f"{GENERATOR}: a notebook cell failed: {output.get('ename')}: {output.get('evalue')}")
    return blocks


def tutorial_page(source: Path, cells: list, notebook_name: str, outputs: list[list[dict[str, Any]]] | None) -> str:
    """The page for one notebook source: its cells, each code cell followed by its outputs (when
    the notebook ran: ``outputs[i]`` for cell ``i``), with a download box after the first cell."""
    rel_source = source.relative_to(ROOT).as_posix()
    shown = ("shows the code with what it printed and drew when the site was built" if outputs is not None else
             "shows the code without its output (this build did not run the notebooks)")
    download = "\n".join([
        '!!! tip "Run this tutorial"',
        f"    Download the notebook [{notebook_name}]({notebook_name}) and open it in Jupyter, or, in a "
        f"checkout, run `.venv/bin/jupyter lab notebooks/{notebook_name}`. This page is generated from "
        f"`{rel_source}` and {shown}; the test suite runs every notebook.",
    ])
    parts: list[str] = []
    if not cells or cells[0].kind != "markdown" or not re.match(r"^# ", cells[0].source):
        parts.append(f"# {source.stem}")
    for i, cell in enumerate(cells):
        parts.append(cell.source if cell.kind == "markdown" else fence(cell.source, "python"))
        if cell.kind == "code" and outputs is not None:
            parts += render_outputs(outputs[i])
        if i == 0:
            parts.append(download)
    return "\n\n".join(parts) + "\n"


def index_page(rows: list[tuple[str, str, str, str]]) -> str:
    """One entry per chapter: its first picture (when the notebooks ran), title and first line."""
    lines = [
        "# Tutorials",
        "",
        "The notebooks in `notebooks/`, one idea each, from a first `jit` to splitting a program across "
        "devices. Each ends with exercises (teachers: answer keys in the teacher kit); the test suite runs all "
        "of them headless on the CPU (GPU cells say so when there is no GPU). Download a notebook from its page, "
        "or open it in a checkout. The [learning path](../learning-path.md) gives the order, times and a weekly "
        "plan.",
        "",
        '<table class="tutorial-index">',
    ]
    for title, page, line, picture in rows:
        link = page.removesuffix(".md") + "/"
        lines.append(f'<tr><td style="width:260px">{picture}</td>'
                     f'<td><a href="{link}"><b>{html.escape(title)}</b></a><br>{html.escape(line)}</td></tr>')
    lines.append("</table>")
    return "\n".join(lines) + "\n"


def first_line(markdown: str) -> str:
    """The first sentence of a chapter's introduction (after its title, code blocks skipped),
    as plain text."""
    paragraphs = re.split(r"\n\s*\n", "\n".join(markdown.splitlines()[1:]))
    prose = [" ".join(line.strip() for line in p.strip().splitlines()) for p in paragraphs]
    prose = [p for p in prose if p and not p.startswith(("```", "#", "|", "* ", "1.")) and "." in p]
    if not prose:  # (a paragraph without a full stop leads into a code block: not a summary)
        return ""
    body = prose[0]
    sentence = re.split(r"(?<=\.)\s", body, maxsplit=1)[0].rstrip(":")
    pieces = sentence.split("`")  # emphasis marks go, code spans keep their characters (y*z)
    sentence = "".join(piece if k % 2 else piece.replace("*", "") for k, piece in enumerate(pieces))
    return re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", sentence)


def first_picture(outputs: list[list[dict[str, Any]]] | None) -> str:
    """The chapter's first figure as a thumbnail: a PNG, else a graph's SVG ("" when none)."""
    for cell in outputs or []:
        for output in cell:
            data = output.get("data", {})
            if "image/png" in data:
                png = str(data["image/png"]).strip()
                return f'<img alt="figure" src="data:image/png;base64,{png}" style="width:250px">'
    for cell in outputs or []:
        for output in cell:
            data = output.get("data", {})
            html = "".join(data.get("image/svg+xml", "")) or "".join(data.get("text/html", ""))
            if "<svg" in html and "</svg>" in html and "<iframe" not in html:
                svg = html[html.index("<svg"):html.index("</svg>") + 6]
                return f'<div style="width:250px;max-height:260px;overflow:hidden">{svg}</div>'
    return ""


def on_files(files: Files, config: MkDocsConfig) -> Files:
    builder = _script("build_notebooks")
    runner = _script("execute_notebooks") if os.environ.get("XLA_TEACH_DOCS_OUTPUTS", "1") != "0" else None
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
        outputs = None
        if runner is not None:
            ran = runner.executed(builder.target_of(source))
            if len(ran.cells) != len(cells):
                raise PluginError(f"{GENERATOR}: {notebook_name} is stale (python scripts/build_notebooks.py)")
            outputs = [list(c.get("outputs", [])) for c in ran.cells]
        add_generated_file(files, config, page, tutorial_page(source, cells, notebook_name, outputs), GENERATOR)
        first = cells[0].source if cells[0].kind == "markdown" else ""
        title = title_of(first, source.stem)
        nav.append({title: page})
        rows.append((title, f"{source.stem}.md", first_line(first), first_picture(outputs)))
    add_generated_file(files, config, f"{PAGE_DIR}/index.md", index_page(rows), GENERATOR)
    set_nav_entries(config, NAV_SECTION, nav, PAGE_DIR + "/")
    return files
