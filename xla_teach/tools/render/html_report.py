"""Self-contained HTML pages: one graph, or a step-by-step report of every pass.

XLA's ``--xla_dump_hlo_as_html`` pages load a Graphviz renderer from the web;
these need nothing: the graphs are rendered to SVG when the page is written and
pasted inline, styles and the few lines of script are in the page. Open them
offline, attach them to a bug report, archive them.

::

    from xla_teach.tools.render.html_report import pass_report_html, write_pass_report
    exe = xla_teach.api.compile_module(module)
    write_pass_report(exe.recorder, "passes.html")

The pass report lists every pass run (``*`` = changed the module). For each pass:
instruction and fusion counts, time, the pass's notes, the module's graph before
and after it (new instructions outlined in red) and a text diff. Step with the
Prev / Next buttons, the list, or the keys ``j`` / ``k``; without JavaScript the
passes are simply shown one below the other.
"""

from __future__ import annotations

import difflib
import html
import re
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from xla_teach.passes.pass_base import PassRecord, PassRecorder
from xla_teach.tools.render import GraphvizNotFound, RenderError, hlo_to_dot, svg_for_inline, to_png, to_svg

if TYPE_CHECKING:
    from xla_teach.hlo.ir import HloComputation, HloModule

REPORT_CSS = """
body { font-family: Helvetica, Arial, sans-serif; margin: 0; color: #212121; }
header { padding: 0.6em 1em; background: #eceff1; border-bottom: 1px solid #cfd8dc; }
h1 { font-size: 1.3em; margin: 0.2em 0; }
h2 { font-size: 1.1em; margin: 0.3em 0; }
.layout { display: flex; align-items: flex-start; }
nav { width: 22em; flex: none; max-height: calc(100vh - 6em); overflow-y: auto; position: sticky; top: 0;
      border-right: 1px solid #cfd8dc; font-size: 0.85em; }
nav ol { list-style: none; padding: 0; margin: 0; }
nav li a { display: block; padding: 0.25em 0.6em; color: #37474f; text-decoration: none; }
nav li a:hover { background: #e3f2fd; }
nav li.current a { background: #bbdefb; font-weight: bold; }
nav li.unchanged a { color: #90a4ae; }
main { flex: 1; padding: 0.5em 1em; min-width: 0; }
.controls button { font-size: 1em; margin-right: 0.5em; }
.badge { font-size: 0.75em; padding: 0.1em 0.5em; border-radius: 0.8em; vertical-align: middle; }
.badge.changed { background: #c8e6c9; } .badge.unchanged { background: #eceff1; }
.badge.skipped { background: #ffe0b2; }
.stats { color: #546e7a; }
.graphs { display: flex; gap: 1em; flex-wrap: wrap; }
figure { margin: 0; flex: 1 1 30em; border: 1px solid #cfd8dc; border-radius: 4px; padding: 0.3em;
         overflow: auto; max-height: 80vh; }
figcaption { font-weight: bold; color: #546e7a; }
figure svg { max-width: 100%; height: auto; }
pre { background: #fafafa; border: 1px solid #eceff1; padding: 0.5em; overflow-x: auto; font-size: 0.8em; }
.diff .add { background: #e8f5e9; color: #1b5e20; display: block; }
.diff .del { background: #ffebee; color: #b71c1c; display: block; }
.diff .hunk { color: #6a1b9a; display: block; }
.legend span { display: inline-block; padding: 0.1em 0.5em; margin: 0.1em; border: 1px solid; font-size: 0.8em; }
body.js section.pass { display: none; } body.js section.pass.current { display: block; }
section.pass { border-bottom: 1px solid #eceff1; padding-bottom: 1em; }
.graph-page svg { max-width: 100%; height: auto; }
"""

_SCRIPT = """
(function () {
  document.body.classList.add('js');
  var sections = Array.prototype.slice.call(document.querySelectorAll('section.pass'));
  var links = Array.prototype.slice.call(document.querySelectorAll('nav li'));
  var current = 0;
  function show(i) {
    if (!sections.length) return;
    current = Math.max(0, Math.min(sections.length - 1, i));
    sections.forEach(function (s, k) { s.classList.toggle('current', k === current); });
    links.forEach(function (l, k) { l.classList.toggle('current', k === current); });
    if (links[current]) links[current].scrollIntoView({block: 'nearest'});
    if (location.hash !== '#' + sections[current].id) history.replaceState(null, '', '#' + sections[current].id);
  }
  function fromHash() {
    var k = sections.findIndex(function (s) { return '#' + s.id === location.hash; });
    show(k < 0 ? 0 : k);
  }
  document.addEventListener('click', function (e) {
    var t = e.target;
    if (t.classList.contains('prev')) show(current - 1);
    if (t.classList.contains('next')) show(current + 1);
  });
  document.addEventListener('keydown', function (e) {
    if (e.key === 'j' || e.key === 'ArrowRight') show(current + 1);
    if (e.key === 'k' || e.key === 'ArrowLeft') show(current - 1);
  });
  window.addEventListener('hashchange', fromHash);
  fromHash();
})();
"""

_GRAPHVIZ_MISSING = ("<p><b>No picture:</b> Graphviz's <code>dot</code> program was not installed when this page "
                     "was written. The DOT source below can be pasted into any Graphviz viewer.</p>")


def esc(text: str) -> str:
    return html.escape(text, quote=True)


def _page(title: str, body: str, script: str = "") -> str:
    return ("<!DOCTYPE html>\n<html>\n<head>\n<meta charset=\"utf-8\">\n"
            f"<title>{esc(title)}</title>\n<style>{REPORT_CSS}</style>\n</head>\n<body>\n{body}\n"
            + (f"<script>{script}</script>\n" if script else "") + "</body>\n</html>\n")


_SVG_ID = re.compile(r'(\bid=")([^"]+)(")|(\bhref="#|url\(#)([^")]+)')


def scope_svg_ids(svg: str, prefix: str) -> str:
    """Prefix every ``id`` (and reference to one) so several SVGs can share one page."""
    def fix(match: re.Match[str]) -> str:
        if match.group(1):
            return f"{match.group(1)}{prefix}{match.group(2)}{match.group(3)}"
        return f"{match.group(4)}{prefix}{match.group(5)}"

    return _SVG_ID.sub(fix, svg)


def _inline_svg(dot_text: str, svg: str | None, scope: str) -> str:
    if svg is None:
        try:
            svg = to_svg(dot_text)
        except GraphvizNotFound:
            return _GRAPHVIZ_MISSING + f"<pre>{esc(dot_text)}</pre>"
        except RenderError as err:
            return f"<p><b>Graphviz failed:</b> {esc(str(err))}</p>"
    return scope_svg_ids(svg_for_inline(svg), scope)


def legend_html() -> str:
    """The node colours, as a row of coloured labels."""
    from xla_teach.tools.render.style import legend_entries

    spans = []
    for label, c in legend_entries():
        spans.append(f'<span style="background:{c.fill};border-color:{c.stroke};color:{c.font}">{esc(label)}</span>')
    return '<div class="legend">' + "".join(spans) + "</div>"


def graph_page(dot_text: str, title: str = "HLO graph", svg: str | None = None) -> str:
    """A page showing one graph (``svg`` if given, else rendered now) and its DOT source."""
    body = (f'<header><h1>{esc(title)}</h1>{legend_html()}</header>\n<main class="graph-page">'
            f"{_inline_svg(dot_text, svg, 'g_')}\n<details><summary>DOT source</summary>"
            f"<pre>{esc(dot_text)}</pre></details></main>")
    return _page(title, body)


FORMATS = ("dot", "svg", "png", "html")


def render_to_file(obj: HloModule | HloComputation | str, path: str | Path, fmt: str | None = None, *,
                   overwrite: bool = False, **options: object) -> Path:
    """Write ``obj``'s graph to ``path`` as dot, svg, png or html (default: from the
    file extension). An existing file is only replaced with ``overwrite=True``."""
    path = Path(path)
    fmt = (fmt or path.suffix.lstrip(".")).lower()
    if fmt not in FORMATS:
        raise RenderError(f"unknown graph format '{fmt}' for {path}: use one of {', '.join(FORMATS)}")
    if path.exists() and not overwrite:
        raise FileExistsError(f"{path} already exists; not overwriting it (choose another name, e.g. with -o; "
                              "from Python, overwrite=True replaces it)")
    dot_text = hlo_to_dot(obj, **options)  # type: ignore[arg-type]
    if fmt == "dot":
        path.write_text(dot_text)
    elif fmt == "svg":
        path.write_text(to_svg(dot_text))
    elif fmt == "png":
        path.write_bytes(to_png(dot_text))
    else:
        path.write_text(graph_page(dot_text, title=path.stem))
    return path


# ---- the pass report ------------------------------------------------------------------
def diff_html(before: str, after: str, context: int = 3) -> str:
    """A unified diff of two module texts, coloured (``+`` green, ``-`` red)."""
    lines = list(difflib.unified_diff(before.splitlines(), after.splitlines(), "before", "after", lineterm="",
                                      n=context))
    if not lines:
        return '<pre class="diff">(no difference)</pre>'
    out = []
    for line in lines:
        cls = "hunk" if line.startswith("@@") else "add" if line.startswith("+") else \
            "del" if line.startswith("-") else ""
        out.append(f'<span class="{cls}">{esc(line)}</span>' if cls else esc(line))
    return '<pre class="diff">' + "\n".join(out) + "</pre>"


def _records(source: PassRecorder | Iterable[PassRecord] | Any) -> list[PassRecord]:
    if isinstance(source, PassRecorder):
        return list(source.records)
    recorder = getattr(source, "recorder", None)  # an executable
    if isinstance(recorder, PassRecorder):
        return list(recorder.records)
    if isinstance(source, PassRecord):
        return [source]
    try:
        records = list(source)
    except TypeError:
        raise TypeError(f"pass report: expected a PassRecorder, PassRecords or an executable, "
                        f"got {type(source).__name__}") from None
    if not all(isinstance(r, PassRecord) for r in records):
        raise TypeError("pass report: every item must be a PassRecord")
    return records


def _module_name(text: str) -> str:
    match = re.match(r"\s*HloModule\s+([^\s,]+)", text)
    return match.group(1) if match else "module"


class GraphCache:
    """SVG per module text: the module after pass k is the module before pass k+1."""

    def __init__(self, options: dict[str, Any]) -> None:
        self.options = options
        self.cache: dict[tuple[str, frozenset[str]], str] = {}
        self.count = 0

    def svg(self, text: str, highlight: frozenset[str]) -> str:
        key = (text, highlight)
        if key not in self.cache:
            self.count += 1
            try:
                dot_text = hlo_to_dot(text, highlight=highlight, **self.options)
            except Exception as err:  # a report shows what it can
                self.cache[key] = f"<p><b>Cannot draw this module:</b> {esc(str(err))}</p>"
            else:
                self.cache[key] = _inline_svg(dot_text, None, f"s{self.count}_")
        return self.cache[key]


def _instruction_names(text: str) -> set[str]:
    return set(re.findall(r"^\s*(?:ROOT\s+)?%?([\w.\-]+)\s*=", text, flags=re.MULTILINE))


def record_html(record: PassRecord, graphs: GraphCache | None, anchor: str = "") -> str:
    """One pass: heading, counts, notes, before/after graphs, diff."""
    status = "skipped" if record.skipped else "changed" if record.changed else "unchanged"
    badge = f'<span class="badge {status}">{status}{": " + esc(record.skipped) if record.skipped else ""}</span>'
    parts = [f'<section class="pass" id="{anchor or f"pass-{record.index}"}">',
             '<div class="controls"><button class="prev">&larr; Prev</button>'
             '<button class="next">Next &rarr;</button></div>',
             f"<h2>#{record.index} {esc(record.pipeline)} / {esc(record.pass_name)} {badge}</h2>",
             f'<p class="stats">instructions {record.instructions_before} &rarr; {record.instructions_after}'
             f" &middot; fusions {record.fusions_before} &rarr; {record.fusions_after}"
             f" &middot; {record.seconds * 1e3:.2f} ms</p>"]
    if record.notes:
        parts.append("<ul class=\"notes\">" + "".join(f"<li>{esc(n)}</li>" for n in record.notes) + "</ul>")
    if record.changed and record.before and record.after:
        if graphs is not None:
            before_names, after_names = _instruction_names(record.before), _instruction_names(record.after)
            parts.append('<div class="graphs">'
                         f"<figure><figcaption>before (red: removed)</figcaption>"
                         f"{graphs.svg(record.before, frozenset(before_names - after_names))}</figure>"
                         f"<figure><figcaption>after (red: new)</figcaption>"
                         f"{graphs.svg(record.after, frozenset(after_names - before_names))}</figure></div>")
        parts.append("<h3>HLO diff</h3>" + diff_html(record.before, record.after))
    elif not record.changed:
        parts.append("<p>The module did not change.</p>")
    parts.append("</section>")
    return "\n".join(parts)


def pass_report_html(source: PassRecorder | Iterable[PassRecord] | Any, *, title: str | None = None,
                     only_changed: bool = False, graphs: bool = True, **render_options: Any) -> str:
    """A self-contained HTML page stepping through the passes of one compilation.

    ``source``: a :class:`PassRecorder`, a list of :class:`PassRecord` or an executable
    (its ``recorder``). ``only_changed``: leave out passes that changed nothing.
    ``graphs``: draw before/after graphs of each changing pass (needs Graphviz's
    ``dot``; without it the page says so). ``render_options`` go to
    :func:`~xla_teach.tools.render.hlo_to_dot` (``collapse_fusions``, ``max_nodes`` ...).
    """
    records = _records(source)
    if only_changed:
        records = [r for r in records if r.changed]
    first_text = next((r.before for r in records if r.before), "")
    title = title or f"Passes of {_module_name(first_text)}"
    cache = GraphCache(render_options) if graphs else None
    changed = sum(1 for r in records if r.changed)
    total_ms = sum(r.seconds for r in records) * 1e3
    items, sections = [], []
    for r in records:
        anchor = f"pass-{r.index}"
        status = "changed" if r.changed else "unchanged"
        mark = "* " if r.changed else ""
        items.append(f'<li class="{status}"><a href="#{anchor}">{r.index}. {mark}{esc(r.pipeline)}/'
                     f"{esc(r.pass_name)}</a></li>")
        sections.append(record_html(r, cache, anchor))
    if not records:
        sections.append("<p>No pass ran (were the passes disabled, or recording turned off?).</p>")
    header = (f"<header><h1>{esc(title)}</h1><p>{len(records)} pass runs, {changed} changed the module, "
              f"{total_ms:.1f} ms in all. Keys: <b>j</b>/<b>k</b> next/previous.</p>{legend_html()}</header>")
    body = (f'{header}\n<div class="layout"><nav><ol>{"".join(items)}</ol></nav>\n'
            f"<main>{''.join(sections)}</main></div>")
    return _page(title, body, _SCRIPT)


def write_pass_report(source: PassRecorder | Iterable[PassRecord] | Any, path: str | Path, *,
                      overwrite: bool = False, **options: Any) -> Path:
    """Write :func:`pass_report_html` to ``path``; an existing file is only replaced with ``overwrite=True``."""
    path = Path(path)
    if path.exists() and not overwrite:
        raise FileExistsError(f"{path} already exists; not overwriting it (pass overwrite=True to replace it)")
    path.write_text(pass_report_html(source, **options))
    return path
