"""The explorer as one self-contained HTML file: styles, script, data and pictures inlined.

The page makes no network request of any kind, so it opens offline, from a dump folder, an
e-mail attachment or a bug report. Its parts: ``static/explorer.css``; the scripts
``static/vendor/dagre.min.js`` (graph layout, MIT), ``static/module_graph.js`` (the optimized
module grouped by op_name scope), ``static/timeline_chart.js`` (the profile's zoomable timeline)
and ``static/explorer.js`` (everything else); and the JSON of
:class:`~xla_teach.tools.explorer.model.ExplorerData` in a ``<script type="application/json">``
element (``</`` escaped so that no string ends it). :func:`offline_page` is that shell, which the
compare page of two compiles (:mod:`.compare`) fills with its own body and scripts.
"""

from __future__ import annotations

import html
import json
from importlib import resources
from typing import Any

from xla_teach.tools.explorer.model import ExplorerData

_SHELL = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title} - xla_teach {kind}</title>
<style>
{css}
</style>
</head>
<body{body_class}>
{body}
<script type="application/json" id="data">{data}</script>
{scripts}
</body>
</html>
"""

_EXPLORER_BODY = """<header>
  <h1>{title}</h1><span class="backend">{backend}</span>
  <span class="spacer"></span>
  <input id="search" type="search" placeholder="Search name, opcode or op_name  ( / )" autocomplete="off">
  <button id="whole" title="the optimized module (0)">Optimized module</button>
  <button id="memory" title="buffers over the schedule, the peak (m)">Memory</button>
  <button id="profile" title="measured time per thunk, the timed runs on a timeline (p)">Profile</button>
  <button id="fit" title="fit the graph to the window (f)">Fit</button>
</header>
<div id="results" class="hidden"></div>
<div class="layout">
  <nav id="passes">
    <div class="controls"><label><input id="changed-only" type="checkbox"> changed passes only</label>
      &middot; <kbd>j</kbd>/<kbd>k</kbd></div>
    <ol id="pass-list"></ol>
  </nav>
  <main id="graph" class="pane"></main>
  <aside id="details"></aside>
</div>"""


def offline_page(title: str, kind: str, body: str, data: Any, styles: list[str], scripts: list[str],
                 body_class: str = "") -> str:
    """One self-contained HTML page: ``styles`` and ``scripts`` (files of ``static/``) inlined,
    ``data`` as JSON in ``<script id="data">`` (``</`` escaped so that no string ends it)."""
    payload = json.dumps(data, separators=(",", ":")).replace("</", "<\\/")
    return _SHELL.format(title=title, kind=kind, body=body, data=payload,
                         css="\n".join(static_text(name) for name in styles),
                         scripts="\n".join(f"<script>\n{static_text(name)}\n</script>" for name in scripts),
                         body_class=f' class="{body_class}"' if body_class else "")


def static_text(name: str) -> str:
    """A file of ``static/`` (styles, scripts, the vendored layout library) as text."""
    return resources.files("xla_teach.tools.explorer").joinpath("static", name).read_text(encoding="utf-8")


def explorer_page(data: ExplorerData) -> str:
    title = html.escape(data.title)
    body = _EXPLORER_BODY.format(title=title, backend=html.escape(data.backend or "?"))
    return offline_page(title, "compile explorer", body, data.as_json(), ["explorer.css"],
                        ["vendor/dagre.min.js", "module_graph.js", "timeline_chart.js", "explorer.js"])
