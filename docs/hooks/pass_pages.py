"""mkdocs hook: one reference page per pass of the CPU pipeline, generated from the code.

At every build this hook walks ``cpu_pipeline()`` (nested pipelines included) and, for
each distinct pass, writes ``pass-reference/<pass name>.md`` containing

* the pass's docstring, as markdown (``Before::`` blocks become code blocks);
* an example module **run through the pass at build time**: the docstring's ``Before::``
  block when it is a whole module, otherwise the complete module in ``pass_examples.py``;
* the module's text before and after, and both drawn as graphs with
  :mod:`xla_teach.tools.render` (instructions the pass created are outlined in red).

Without Graphviz's ``dot`` the graphs are shown as DOT source, with a note, so the
build still passes. A pass that fails on its example fails the build: a page that
shows a pass doing something it does not do would be worse than no page.

The pages are listed in the nav section ``HLO passes`` after ``passes.md`` (the
hand-written overview), with an index page showing the pipeline as a tree.
"""

from __future__ import annotations

import html
import inspect
import re
import sys
import textwrap
from dataclasses import dataclass, field

from hook_utils import add_generated_file, fence, set_nav_entries
from mkdocs.config.defaults import MkDocsConfig
from mkdocs.exceptions import PluginError
from mkdocs.structure.files import Files
from mkdocs.structure.pages import Page
from pass_examples import EXAMPLES, PREPARE

from xla_teach.backends.cpu.cpu_pipeline import cpu_pipeline
from xla_teach.hlo.ir import HloModule
from xla_teach.hlo.text.parser import HloParseError, parse_hlo
from xla_teach.passes.pass_base import HloPass, HloPassFix, HloPassPipeline, PassOptions, PassRecord, PassRecorder
from xla_teach.tools.render import have_dot, hlo_to_dot, svg_for_inline, to_svg

NAV_SECTION = "HLO passes"
PAGE_DIR = "pass-reference"
GENERATOR = "docs/hooks/pass_pages.py"

# SVGs are put into the HTML after markdown has run (Markdown would mangle them): the page
# holds a placeholder paragraph, on_page_content swaps in the drawing.
_GRAPHS: dict[str, str] = {}
_PLACEHOLDER = re.compile(r"<p>XLATEACHGRAPH(\d+)</p>")


@dataclass
class PassEntry:
    """One distinct pass of the pipeline and where it runs."""

    hlo_pass: HloPass
    places: list[str] = field(default_factory=list)  # "cpu-pipeline › fusion", one per occurrence

    @property
    def name(self) -> str:
        return self.hlo_pass.name

    @property
    def page(self) -> str:
        return f"{PAGE_DIR}/{page_stem(self.name)}.md"


def page_stem(pass_name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "-", pass_name)


def pipeline_passes(pipeline: HloPassPipeline | None = None) -> list[PassEntry]:
    """The distinct passes of ``pipeline`` (default: the CPU pipeline) in the order they first run."""
    entries: dict[str, PassEntry] = {}

    def walk(p: HloPassPipeline, path: list[str]) -> None:
        here = [*path, p.name + (" (fixed point)" if isinstance(p, HloPassFix) else "")]
        for child in p.passes:
            if isinstance(child, HloPassPipeline):
                walk(child, here)
            else:
                entries.setdefault(child.name, PassEntry(child)).places.append(" › ".join(here))

    walk(pipeline or cpu_pipeline(), [])
    return list(entries.values())


# ---- docstrings ------------------------------------------------------------------------------
def pass_docstring(hlo_pass: HloPass) -> str:
    """The module docstring of the pass (where the examples are), else its class's own docstring."""
    module_doc = inspect.getdoc(sys.modules[type(hlo_pass).__module__]) or ""
    class_doc = inspect.cleandoc(type(hlo_pass).__doc__ or "")  # not inherited from HloPass
    return module_doc or class_doc


_ROLE = re.compile(r":(?:func|class|meth|mod|attr|data|obj):`~?([^`]+)`")


_TABLE_BORDER = re.compile(r"^\s*=+(?:\s+=+)+\s*$")  # "=====  =====": a reStructuredText simple table


def docstring_to_markdown(doc: str) -> str:
    """reStructuredText-flavoured docstring -> markdown: ``text::`` literal blocks become fenced
    code blocks, ``:func:`x``` roles become code, and ``Label:: code`` lines their own paragraphs.
    Simple tables (``=====`` borders) are kept as preformatted text: their cells hold rules like
    ``x * 1 -> x`` that Markdown would take for emphasis."""
    lines = _ROLE.sub(r"``\1``", doc).splitlines()
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        stripped = line.rstrip()
        if _TABLE_BORDER.match(line):
            start, borders = i, 0
            while i < len(lines):  # up to the border that closes the table (followed by a blank line)
                borders += bool(_TABLE_BORDER.match(lines[i]))
                i += 1
                if borders >= 2 and _TABLE_BORDER.match(lines[i - 1]) and (i == len(lines) or not lines[i].strip()):
                    break
            out += ["", fence(textwrap.dedent("\n".join(lines[start:i]))), ""]
            continue
        if stripped.endswith("::"):
            bullet = re.match(r"^\s*(?:[*+-]|\d+\.)\s+", line)  # in a list item: the item's text indent
            indent = bullet.end() if bullet else len(line) - len(line.lstrip())
            intro = stripped[:-2].rstrip()
            if intro.strip():
                out.append(intro + ":")
            block: list[str] = []
            i += 1
            while i < len(lines) and (not lines[i].strip() or len(lines[i]) - len(lines[i].lstrip()) > indent):
                block.append(lines[i])
                i += 1
            code = textwrap.dedent("\n".join(block)).strip("\n")
            if code:
                out += ["", fence(code, "text", "    " if indent else ""), ""]
            continue
        if re.match(r"^\s*\S[^`]*::\s+\S", line):  # "Before::  ``code``": a paragraph of its own
            out += ["", re.sub(r"::(\s)", r":\1", line, count=1)]
        else:
            out.append(line)
        i += 1
    return "\n".join(out)


def docstring_example(doc: str, label: str = "Before") -> str | None:
    """The literal block after the first ``<label>...::`` line, if it parses as a whole module."""
    lines = doc.splitlines()
    for i, line in enumerate(lines):
        if re.match(rf"^\s*{label}\b.*::\s*$", line):
            indent = len(line) - len(line.lstrip())
            block = []
            for nxt in lines[i + 1:]:
                if nxt.strip() and len(nxt) - len(nxt.lstrip()) <= indent:
                    break
                block.append(nxt)
            text = textwrap.dedent("\n".join(block)).strip()
            if not text.startswith("HloModule"):
                text = "HloModule m\n\n" + text  # the simplifiers' examples leave out the header
            try:
                parse_hlo(text)
            except HloParseError:
                return None  # abbreviated ("..."), not a whole module
            return text
    return None


# ---- running the pass --------------------------------------------------------------------------
@dataclass
class ExampleRun:
    source: str  # "docstring" or "pass_examples.py"
    prepared_with: list[str]
    before: HloModule
    after: HloModule
    record: PassRecord


def _leaf(pipeline: HloPassPipeline, name: str) -> HloPass:
    for entry in pipeline_passes(pipeline):
        if entry.name == name:
            return entry.hlo_pass
    raise PluginError(f"{GENERATOR}: pass_examples.PREPARE names '{name}', which is not a pass of the CPU pipeline")


# Passes whose CPU instance is configured to leave the docstring's example alone (the CPU's
# top-k kernel computes small topk itself; the pipeline's SPMD partitioner waits for JAX's
# annotations, which the small example leaves out, and so does the call inliner that runs first
# in its stage): the page shows the pass as constructed alone.
AS_CONSTRUCTED_BY_DEFAULT = {"topk-decomposer", "spmd-partitioning", "call-inliner"}


def run_example(entry: PassEntry) -> ExampleRun:
    """Parse the pass's example, run it (through a one-pass pipeline, which verifies the module
    and checks the pass's "changed" claim), and return both modules and the pass record."""
    text = docstring_example(pass_docstring(entry.hlo_pass))
    source = "docstring"
    if text is None:
        if entry.name not in EXAMPLES:
            raise PluginError(f"{GENERATOR}: pass '{entry.name}' has no runnable example: give its docstring a "
                              "whole-module 'Before::' block, or add one to docs/hooks/pass_examples.py")
        text, source = EXAMPLES[entry.name], "pass_examples.py"
    fresh = cpu_pipeline()  # new pass objects: nothing carries over between pages
    module = parse_hlo(text)
    prepared = PREPARE.get(entry.name, [])
    if prepared:
        HloPassPipeline("prepare", [_leaf(fresh, name) for name in prepared]).run(module)
    before = module.clone()
    recorder = PassRecorder()
    try:
        hlo_pass = _leaf(fresh, entry.name)
        if entry.name in AS_CONSTRUCTED_BY_DEFAULT:
            hlo_pass = type(hlo_pass)()
        HloPassPipeline("docs", [hlo_pass]).run(module, PassOptions(record=True), recorder)
    except Exception as err:
        raise PluginError(f"{GENERATOR}: pass '{entry.name}' failed on its example: {type(err).__name__}: {err}") \
            from err
    return ExampleRun(source, prepared, before, module, recorder.records[-1])


# ---- the pages ---------------------------------------------------------------------------------
def _text(module: HloModule) -> str:
    return module.to_text(long_form=False, print_metadata=False).strip()


def _graph(module: HloModule, title: str, highlight: set[str], key: str) -> str:
    dot = hlo_to_dot(module, title=title, highlight=highlight)
    if not have_dot():
        return ("!!! note \"Graphviz is not installed\"\n    The graph is shown as DOT source: install Graphviz "
                "(`apt-get install graphviz`) and rebuild to see it drawn.\n\n" + fence(dot, "dot"))
    svg = svg_for_inline(to_svg(dot))
    svg = svg.replace(' id="', f' id="{key}-')  # several drawings on one page: keep ids unique
    _GRAPHS[str(len(_GRAPHS))] = f'<div class="hlo-graph">\n{svg}\n</div>'
    return f"XLATEACHGRAPH{len(_GRAPHS) - 1}"


def _plain(text: str) -> str:
    """Machine-written text (a pass note) as markdown that shows it as is."""
    return re.sub(r"([\\`*_\[\]])", r"\\\1", html.escape(text))


def _names(module: HloModule) -> set[str]:
    return {i.name for c in module.computations for i in c.instructions}


def pass_page(entry: PassEntry) -> str:
    p = entry.hlo_pass
    cls = type(p)
    source_path = cls.__module__.replace(".", "/") + ".py"
    run = run_example(entry)
    record = run.record
    new = _names(run.after) - _names(run.before)
    where = "; ".join(f"`{place}`" for place in entry.places)
    parts = [
        f"# `{p.name}`",
        "",
        f"`{cls.__module__}.{cls.__name__}` · source `{source_path}` · runs in {where}",
        "",
        docstring_to_markdown(pass_docstring(p)),
        "",
        "## Run on an example",
        "",
        "This section was generated when the documentation was built: the example was parsed, "
        f"`{p.name}` ran on it, and both modules were drawn with `xla_teach.tools.render`.",
    ]
    if run.source != "docstring":
        parts.append("The docstring has no complete example module (its example, if any, shows only the lines "
                     "that change), so this one comes from `docs/hooks/pass_examples.py`.")
    if run.prepared_with:
        passes = ", ".join(f"`{name}`" for name in run.prepared_with)
        parts.append(f"It was first run through {passes}, as the pipeline does before `{p.name}`.")
    parts += ["", "### Before", "", fence(_text(run.before)), "",
              _graph(run.before, f"before {p.name}", set(), "before"), "",
              f"### After `{p.name}`", ""]
    counts = (f"Instructions: {record.instructions_before} → {record.instructions_after}; "
              f"fusions: {record.fusions_before} → {record.fusions_after}.")
    parts.append(("The pass changed the module. " if record.changed else "The pass left the module unchanged. ")
                 + counts + (" New instructions are outlined in red." if new else ""))
    if record.notes:
        parts += ["", "What the pass noted (`PassRecord.notes`, also in the pass report of a dump):", ""]
        parts += [f"* {_plain(note)}" for note in record.notes]
    parts += ["", fence(_text(run.after)), "", _graph(run.after, f"after {p.name}", new, "after"), ""]
    return "\n".join(parts)


def _summary(entry: PassEntry) -> str:
    first = pass_docstring(entry.hlo_pass).split("\n\n")[0].replace("\n", " ")
    return _ROLE.sub(r"``\1``", first).replace("|", "\\|")


def index_page(entries: list[PassEntry]) -> str:
    """The CPU pipeline as a tree of links, and a table of the passes."""
    pages = {e.name: page_stem(e.name) + ".md" for e in entries}
    tree: list[str] = []

    def walk(p: HloPassPipeline, depth: int) -> None:
        fix = " (fixed point: reruns its passes until none changes the module)" if isinstance(p, HloPassFix) else ""
        tree.append(f"{'    ' * depth}* **{p.name}**{fix}")
        for child in p.passes:
            if isinstance(child, HloPassPipeline):
                walk(child, depth + 1)
            else:
                tree.append(f"{'    ' * (depth + 1)}* [`{child.name}`]({pages[child.name]})")

    walk(cpu_pipeline(), 0)
    table = ["| pass | what it does |", "|---|---|"]
    table += [f"| [`{e.name}`]({pages[e.name]}) | {_summary(e)} |" for e in entries]
    return "\n".join([
        "# The CPU pipeline, pass by pass",
        "",
        "These pages are generated from the code each time the documentation is built "
        f"(`{GENERATOR}`): the pipeline below is what `xla_teach.backends.cpu.cpu_pipeline.cpu_pipeline()` "
        "returns, and each pass's page shows its docstring and the pass run on an example, "
        "with the module drawn before and after. [HLO passes](../passes.md) explains the "
        "pipeline's design.",
        "",
        *tree,
        "",
        *table,
        "",
    ])


# ---- mkdocs events ---------------------------------------------------------------------------
def on_files(files: Files, config: MkDocsConfig) -> Files:
    _GRAPHS.clear()
    entries = pipeline_passes()
    stale = sorted(set(EXAMPLES) - {e.name for e in entries})
    if stale:
        raise PluginError(f"docs/hooks/pass_examples.py has examples for passes the CPU pipeline no longer runs: "
                          f"{stale}")
    doubled = sorted({e.name for e in entries if e.name in EXAMPLES
                      and docstring_example(pass_docstring(e.hlo_pass)) is not None} - set(PREPARE))
    if doubled:
        raise PluginError(f"docs/hooks/pass_examples.py has examples for passes whose docstring example already "
                          f"runs (one example per pass): {doubled}")
    add_generated_file(files, config, f"{PAGE_DIR}/index.md", index_page(entries), GENERATOR)
    nav = [{"The CPU pipeline": f"{PAGE_DIR}/index.md"}]
    for entry in entries:
        add_generated_file(files, config, entry.page, pass_page(entry), GENERATOR)
        nav.append({entry.name: entry.page})
    set_nav_entries(config, NAV_SECTION, nav, PAGE_DIR + "/")
    return files


def on_page_content(html_text: str, page: Page, config: MkDocsConfig, files: Files) -> str:
    if not page.file.src_uri.startswith(PAGE_DIR + "/"):
        return html_text
    return _PLACEHOLDER.sub(lambda m: _GRAPHS[m.group(1)], html_text)
