"""A notebook submission as one Python file: its code cells, joined in order."""

from __future__ import annotations

import json
from pathlib import Path


def notebook_source(path: Path) -> str:
    """The code cells of a notebook, in order, as one Python file (magics and shell lines left out)."""
    def unreadable(why: str) -> str:
        return f"raise SyntaxError({f'{path.name} is not a readable notebook: {why}'!r})\n"

    try:
        notebook = json.loads(path.read_text(encoding="utf-8"))
        cells = notebook["cells"]
    except (OSError, ValueError, KeyError, TypeError) as err:
        return unreadable(type(err).__name__)
    if not isinstance(cells, list):
        return unreadable(f"its cells are a {type(cells).__name__}, not a list")
    parts = []
    for number, cell in enumerate(cells, 1):
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        source = cell.get("source", "")
        text = "".join(str(line) for line in source) if isinstance(source, list) else str(source)
        lines = [("# " + line) if line.lstrip().startswith(("%", "!")) else line for line in text.splitlines()]
        parts.append(f"# ---- cell {number}\n" + "\n".join(lines))
    return "\n\n".join(parts) + "\n"
