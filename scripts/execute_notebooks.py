"""Run the tutorial notebooks headless, the way the test suite and the documentation both need.

:func:`execute` runs one notebook top to bottom with nbclient, on a fresh kernel that runs *this*
interpreter (so it sees the checkout, not whatever ``python3`` means), in a given working
directory, with ``XLA_FLAGS`` cleared, and returns the notebook with its outputs.

:func:`executed` is the same with a cache (``build/executed_notebooks/``) keyed by the notebook's
text and every file of the ``xla_teach`` package: the documentation build shows each tutorial with
its outputs, and ``mkdocs serve`` does not rerun ten notebooks on every edit of a page. A change
to the code or to the notebook runs it again.

    python scripts/execute_notebooks.py 04      # run notebooks/04_*.ipynb, print its outputs' kinds
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
CACHE = ROOT / "build" / "executed_notebooks"
CELL_TIMEOUT_S = 120
KERNEL_NAME = "xla-teach-notebooks"


def _kernel_manager(kernel_dir: Path) -> Any:
    """A kernel manager whose only kernel runs ``sys.executable``."""
    from jupyter_client.kernelspec import KernelSpecManager
    from jupyter_client.manager import KernelManager

    spec_dir = kernel_dir / KERNEL_NAME
    spec_dir.mkdir(parents=True)
    (spec_dir / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "xla_teach notebooks", "language": "python"}))
    return KernelManager(kernel_name=KERNEL_NAME, kernel_spec_manager=KernelSpecManager(kernel_dirs=[str(kernel_dir)]))


@contextlib.contextmanager
def _environment(tmp: Path) -> Iterator[None]:
    """The kernel's environment: no XLA flags or debug printing, plots inline, this checkout first
    on the path, temporary files under ``tmp``."""
    saved = dict(os.environ)
    try:
        for name in ("XLA_FLAGS", "XLA_TEACH_DEBUG", "MPLBACKEND"):
            os.environ.pop(name, None)
        os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), saved.get("PYTHONPATH")]))
        os.environ["TMPDIR"] = str(tmp)
        os.environ["XLA_TEACH_EXERCISES_DIR"] = str(tmp / "exercises")  # the graded cells' starter copies
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def execute(path: Path, workdir: Path) -> Any:
    """Run the notebook at ``path`` in ``workdir``; returns it with outputs (an nbformat node).
    Raises nbclient's ``CellExecutionError``, with the failing cell and its traceback."""
    import nbclient
    import nbformat

    notebook = nbformat.read(path, as_version=4)
    with tempfile.TemporaryDirectory(prefix="xla_teach_nb_") as scratch, _environment(Path(scratch)):
        client = nbclient.NotebookClient(notebook, km=_kernel_manager(Path(scratch) / "kernels"),
                                         timeout=CELL_TIMEOUT_S, resources={"metadata": {"path": str(workdir)}})
        client.execute()
    return notebook


def _digest(path: Path) -> str:
    h = hashlib.sha256(path.read_bytes())
    package = ROOT / "xla_teach"
    for file in sorted(p for p in package.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
        h.update(file.relative_to(package).as_posix().encode())
        h.update(file.read_bytes())
    return h.hexdigest()[:20]


LEFT_FILES = "xla_teach_left_files"  # the notebook's metadata: what it left in its working directory


def executed(path: Path) -> Any:
    """The notebook at ``path`` with its outputs, from the cache when neither it nor the package
    changed since it last ran (the documentation build runs each notebook; the notebook tests then
    check that run instead of a second one). Its metadata says what it left in its working
    directory (``LEFT_FILES``)."""
    import nbformat

    cached = CACHE / f"{path.stem}.{_digest(path)}.ipynb"
    if cached.is_file():
        notebook = nbformat.read(cached, as_version=4)
        if LEFT_FILES in notebook.metadata:
            return notebook
    with tempfile.TemporaryDirectory(prefix="xla_teach_nb_cwd_") as workdir:
        notebook = execute(path, Path(workdir))
        notebook.metadata[LEFT_FILES] = sorted(os.listdir(workdir))
    CACHE.mkdir(parents=True, exist_ok=True)
    for old in CACHE.glob(f"{path.stem}.*.ipynb"):
        old.unlink()
    nbformat.write(notebook, cached)
    return notebook


def main(argv: list[str]) -> int:
    for prefix in argv or [""]:
        for path in sorted((ROOT / "notebooks").glob(f"{prefix}*.ipynb")):
            notebook = executed(path)
            kinds = sorted({k for c in notebook.cells for o in c.get("outputs", []) for k in o.get("data", {})})
            print(f"{path.name}: {len(notebook.cells)} cells, outputs {', '.join(kinds) or 'text only'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
