"""mkdocs hook: each backend's pass pipeline, printed from the code at every build where a page
says ``<!-- the cpu pipeline, generated -->`` (or ``gpu``), so the docs show the order the
compiler really runs (``HloPassPipeline.describe``)."""

from __future__ import annotations

import re
from typing import Any

_MARK = re.compile(r"<!-- the (cpu|gpu) pipeline, generated -->")


def _pipeline(backend: str) -> str:
    from xla_teach.backends.backend_info import backend_info

    return backend_info(backend).make_pipeline().describe()


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    return _MARK.sub(lambda m: "```text\n" + _pipeline(m.group(1)) + "\n```", markdown)
