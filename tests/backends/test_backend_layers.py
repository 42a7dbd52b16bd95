"""The backends are siblings: the CPU and GPU compilers share what lives in ``backends/llvm`` and
``passes/``, and neither imports the other (nor does the shared layer import either). A module
that reaches across fails here, with the line that does it."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "xla_teach"
FORBIDDEN = {
    "backends/cpu": ("xla_teach.backends.gpu",),
    "backends/gpu": ("xla_teach.backends.cpu",),
    "backends/llvm": ("xla_teach.backends.cpu", "xla_teach.backends.gpu"),
}


def _imports(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.append((node.lineno, node.module))
        elif isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
    return found


def test_no_backend_imports_another() -> None:
    crossings = []
    for folder, banned in FORBIDDEN.items():
        for path in sorted((PACKAGE / folder).rglob("*.py")):
            for line, module in _imports(path):
                if module.startswith(banned):
                    crossings.append(f"{path.relative_to(PACKAGE.parent)}:{line} imports {module}")
    assert crossings == []
