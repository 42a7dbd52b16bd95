"""mkdocs hook: the pictures of docs/architecture.md, drawn by Graphviz when the site is built.

* ``<!-- the house, generated -->``: the package drawn as a house -- its floors and the imports
  between them -- from the code at every build (``xla_teach/tools/house.py``);
* every fenced ``dot`` block of a page: drawn in its place.

The drawings are inline SVG, so the site shows them with no network (a diagram library fetched
from elsewhere would leave a reader offline looking at its source). Without Graphviz the DOT
source stays, with a note saying so.
"""

from __future__ import annotations

import re
from typing import Any

MARK = "<!-- the house, generated -->"
_FENCE = re.compile(r"^```dot\n(.*?)^```$", re.S | re.M)
_PLACEHOLDER = re.compile(r"XLATEACHDIAGRAM(\d+)")
_DRAWN: dict[str, str] = {}


def _drawing(dot_text: str) -> str:
    from xla_teach.tools.render import have_dot, svg_for_inline, to_svg

    if not have_dot():
        return ("!!! note \"Graphviz is not installed\"\n    The picture is shown as DOT source: install Graphviz "
                "(`apt-get install graphviz`) and rebuild to see it drawn.\n\n```dot\n" + dot_text + "\n```")
    key = str(len(_DRAWN))
    svg = svg_for_inline(to_svg(dot_text)).replace(' id="', f' id="diagram{key}-')
    _DRAWN[key] = f'<div class="diagram">\n{svg}\n</div>'
    return f"XLATEACHDIAGRAM{key}"


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    if MARK in markdown:
        from xla_teach.tools.house import dot

        markdown = markdown.replace(MARK, _drawing(dot()))
    return _FENCE.sub(lambda m: _drawing(m.group(1)), markdown)


def on_page_content(html_text: str, page: Any, config: Any, files: Any) -> str:
    return _PLACEHOLDER.sub(lambda m: _DRAWN[m.group(1)], html_text)
