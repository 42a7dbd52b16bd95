"""The tutorial notebooks run, headless, from top to bottom, and match their sources.

Every ``notebooks/*.ipynb`` is executed with nbclient on a fresh kernel that runs
*this* interpreter (so the notebooks see the checkout under test), in a temporary
working directory, with ``XLA_FLAGS`` cleared. A cell that raises fails the test
with the cell's traceback. GPU cells detect the device themselves, so the suite
runs on machines without one.

The notebooks are build outputs of ``notebooks/src/*.py`` (see
``scripts/build_notebooks.py``); they are committed without outputs, and a stale
or hand-edited notebook fails here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK_DIR = ROOT / "notebooks"
NOTEBOOKS = sorted(NOTEBOOK_DIR.glob("*.ipynb"))
CELL_TIMEOUT_S = 120
KERNEL_NAME = "xla-teach-test"

nbformat = pytest.importorskip("nbformat", reason="nbformat is not installed (pip install -e '.[test]')")
nbclient = pytest.importorskip("nbclient", reason="nbclient is not installed (pip install -e '.[test]')")
pytest.importorskip("ipykernel", reason="ipykernel is not installed (pip install -e '.[test]')")


def _kernel_manager(kernel_dir: Path):  # type: ignore[no-untyped-def]
    """A kernel manager whose only kernel runs ``sys.executable`` (not whatever 'python3' means here)."""
    from jupyter_client.kernelspec import KernelSpecManager
    from jupyter_client.manager import KernelManager

    spec_dir = kernel_dir / KERNEL_NAME
    spec_dir.mkdir(parents=True)
    (spec_dir / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "xla_teach test kernel", "language": "python"}))
    specs = KernelSpecManager(kernel_dirs=[str(kernel_dir)])
    return KernelManager(kernel_name=KERNEL_NAME, kernel_spec_manager=specs)


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs(path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    notebook = nbformat.read(path, as_version=4)
    monkeypatch.delenv("XLA_FLAGS", raising=False)
    monkeypatch.delenv("XLA_TEACH_DEBUG", raising=False)
    monkeypatch.delenv("MPLBACKEND", raising=False)  # the kernel then draws inline, as in Jupyter
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    workdir = tmp_path / "cwd"
    workdir.mkdir()
    (tmp_path / "tmp").mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))  # notebooks' tempfile folders go away with tmp_path
    client = nbclient.NotebookClient(notebook, km=_kernel_manager(tmp_path / "kernels"), timeout=CELL_TIMEOUT_S,
                                     resources={"metadata": {"path": str(workdir)}})
    client.execute()  # raises CellExecutionError, with the failing cell and its traceback
    errors = [output for cell in notebook.cells if cell.cell_type == "code" for output in cell.get("outputs", [])
              if output.get("output_type") == "error"]
    assert not errors, f"{path.name}: cells produced errors: {errors}"
    assert not any(workdir.iterdir()), f"{path.name} left files in its working directory: {list(workdir.iterdir())}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_is_clean_and_ends_with_exercises(path: Path) -> None:
    notebook = nbformat.read(path, as_version=4)
    nbformat.validate(notebook)
    with_outputs = [i for i, cell in enumerate(notebook.cells)
                    if cell.cell_type == "code" and (cell.outputs or cell.execution_count is not None)]
    assert not with_outputs, f"{path.name}: commit notebooks without outputs (cells {with_outputs})"
    last = notebook.cells[-1]
    assert last.cell_type == "markdown" and "## Exercises" in last.source, \
        f"{path.name} must end with a markdown cell holding '## Exercises'"


def test_percent_sources_become_cells() -> None:
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        from build_notebooks import NotebookSourceError, parse_percent_source
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    text = "# header, not a cell\n\n# %% [markdown]\n# # Title\n#\n# text\n\n# %%\nx = 1\n\n# %%\n\n# %%\nprint(x)\n"
    cells = [(c.kind, c.source) for c in parse_percent_source(text)]
    assert cells == [("markdown", "# Title\n\ntext"), ("code", "x = 1"), ("code", "print(x)")]
    with pytest.raises(NotebookSourceError, match="must start with '#'"):
        parse_percent_source("# %% [markdown]\nnot a comment\n")
    with pytest.raises(NotebookSourceError, match="no cells"):
        parse_percent_source("print('no marker')\n")


def test_notebooks_match_their_sources() -> None:
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "build_notebooks.py"), "--check"],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
