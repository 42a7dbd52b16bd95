"""mkdocs hook: draw the package as a house -- its floors and the imports between them -- from the
code at every build (``xla_teach/tools/house.py``), where docs/architecture.md says
``<!-- the house, generated -->``."""

from __future__ import annotations

from typing import Any

MARK = "<!-- the house, generated -->"


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    if MARK not in markdown:
        return markdown
    from xla_teach.tools.house import mermaid

    return markdown.replace(MARK, "```mermaid\n" + mermaid() + "\n```")
