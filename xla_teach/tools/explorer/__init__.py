"""The compile explorer: one offline, interactive page per compilation.

::

    exe = xla_teach.api.compile_module(hlo_text, "cpu")
    write_explorer(exe, "explorer.html")      # or: xla-teach explore FILE; compiled.explore()

Step through every pass (a structural diff and a picture of what changed), pan and zoom the
optimized module, search it, and click an instruction for its HLO line, Python source line,
fusion, kernel (LLVM IR, PTX) and buffer. See :mod:`.model` for what the page contains and
:mod:`.page` for how it is put together.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from xla_teach.tools.explorer.model import CompileService, ExplorerData, build_data
from xla_teach.tools.explorer.page import explorer_page
from xla_teach.tools.explorer.structural_diff import StructuralDiff, structural_diff


def explorer_html(executable: Any, title: str | None = None, graphs: bool = True, profile_runs: int = 0,
                  compile: CompileService | None = None) -> str:
    """The explorer page of one compiled executable, as HTML text (``profile_runs``: time it that many
    runs on fake arguments, after warm-up runs, for the profile view; ``compile``: the compile
    service that estimates the time inside fusions, see :func:`.model.build_data`)."""
    return explorer_page(build_data(executable, title, graphs, profile_runs, compile=compile))


def write_explorer(executable: Any, path: str | Path, title: str | None = None, graphs: bool = True,
                   profile_runs: int = 0, compile: CompileService | None = None) -> Path:
    """Write the explorer page of ``executable`` to ``path`` (its folder must exist); returns the path."""
    path = Path(path)
    if not path.parent.is_dir():
        raise FileNotFoundError(f"cannot write the explorer to {path}: folder {path.parent} does not exist")
    path.write_text(explorer_html(executable, title, graphs, profile_runs, compile), encoding="utf-8")
    return path


class ExplorerPage:
    """A written explorer page: ``path`` to open in a browser, and shown inline in Jupyter (the
    page in a frame sized to the cell, scrolling inside it)."""

    def __init__(self, path: Path, html: str, height: int = 640) -> None:
        self.path = path
        self.html = html
        self.height = height

    def _repr_html_(self) -> str:
        import html as html_module

        return (f'<iframe srcdoc="{html_module.escape(self.html, quote=True)}" style="width:100%;'
                f'height:{self.height}px;border:1px solid #cfd8dc;border-radius:4px" '
                f'title="compile explorer"></iframe><div style="font-size:12px;color:#546e7a">'
                f"{html_module.escape(str(self.path))}</div>")

    def __repr__(self) -> str:
        return f"ExplorerPage({str(self.path)!r})"


def explore(executable: Any, path: str | Path | None = None, title: str | None = None,
            profile_runs: int = 0, compile: CompileService | None = None) -> ExplorerPage:
    """Write the explorer page (to ``path``, or a new file in the temporary folder) and return it."""
    import tempfile

    page = explorer_html(executable, title, profile_runs=profile_runs, compile=compile)
    if path is None:
        handle, name = tempfile.mkstemp(prefix=f"{executable.module.name}.", suffix=".explorer.html")
        with open(handle, "w", encoding="utf-8") as f:
            f.write(page)
        return ExplorerPage(Path(name), page)
    target = Path(path)
    if target.exists():
        raise FileExistsError(f"{target} exists; not overwriting it")
    if not target.parent.is_dir():
        raise FileNotFoundError(f"cannot write the explorer to {target}: folder {target.parent} does not exist")
    target.write_text(page, encoding="utf-8")
    return ExplorerPage(target, page)


def compare_page(a: Any, b: Any, path: str | Path | None = None, runs: int = 0,
                 labels: tuple[str, str] | None = None) -> ExplorerPage:
    """Write the page comparing executables ``a`` and ``b`` (:mod:`.compare`) to ``path`` (or a new
    temporary file) and return it; ``runs`` timed runs of each side."""
    import tempfile

    from xla_teach.tools.explorer.compare import write_compare

    names = labels or (a.module.name, b.module.name)
    if path is None:
        handle, name = tempfile.mkstemp(prefix=f"{a.module.name}.", suffix=".diff.html")
        os.close(handle)
        target = Path(name)
        target.unlink()
    else:
        target = Path(path)
    written = write_compare(a, b, target, names, runs)
    return ExplorerPage(written, written.read_text(encoding="utf-8"))


__all__ = ["ExplorerData", "ExplorerPage", "StructuralDiff", "build_data", "compare_page", "explore", "explorer_html",
           "explorer_page", "structural_diff", "write_explorer"]
