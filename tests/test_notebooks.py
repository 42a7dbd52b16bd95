"""The tutorial notebooks run, headless, from top to bottom, and match their sources.

Every ``notebooks/*.ipynb`` is executed with nbclient on a fresh kernel that runs
*this* interpreter (so the notebooks see the checkout under test), in a temporary
working directory, with ``XLA_FLAGS`` cleared -- once per state of the code: the
documentation build's run of the same notebook on the same package is reused. A cell that raises fails the test
with the cell's traceback. GPU cells detect the device themselves, so the suite
runs on machines without one.

The notebooks are build outputs of ``notebooks/src/*.py`` (see
``scripts/build_notebooks.py``); they are committed without outputs, and a stale
or hand-edited notebook fails here.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK_DIR = ROOT / "notebooks"
NOTEBOOKS = sorted(NOTEBOOK_DIR.glob("*.ipynb"))

nbformat = pytest.importorskip("nbformat", reason="nbformat is not installed (pip install -e '.[test]')")
nbclient = pytest.importorskip("nbclient", reason="nbclient is not installed (pip install -e '.[test]')")
pytest.importorskip("ipykernel", reason="ipykernel is not installed (pip install -e '.[test]')")


def _script(name: str) -> ModuleType:
    """A module of ``scripts/`` (the notebook tools, shared with the documentation build)."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


# The pictures each notebook must draw (matplotlib charts, Graphviz graphs, the compile explorer
# inline): a notebook that silently stops drawing fails here. Graphviz's pictures need `dot`.
PICTURES = {"01_first_jit": 2, "04_fusion": 2, "05_llvm_ir_assembly_ptx": 2, "06_buffer_assignment": 2,
            "07_dumps_and_bug_reproduction": 1, "08_mnist_style_training": 3, "09_autodiff_as_hlo": 2,
            "10_auto_clustering_and_aot": 2, "11_splitting_across_devices": 2}


def _pictures(notebook) -> int:  # type: ignore[no-untyped-def]
    count = 0
    for cell in notebook.cells:
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            html = "".join(data.get("text/html", ""))
            count += any(k in data for k in ("image/png", "image/svg+xml")) or "<svg" in html or "<iframe" in html
    return count


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs(path: Path) -> None:
    """Run (or, when the documentation build already ran this notebook against this very code,
    read that run from its cache: ``execute_notebooks.executed`` keys it by the notebook and
    every file of the package). A cell that raises fails with its traceback."""
    import shutil

    runner = _script("execute_notebooks")
    notebook = runner.executed(path)  # raises CellExecutionError, with the failing cell and its traceback
    errors = [output for cell in notebook.cells if cell.cell_type == "code" for output in cell.get("outputs", [])
              if output.get("output_type") == "error"]
    assert not errors, f"{path.name}: cells produced errors: {errors}"
    left = notebook.metadata[runner.LEFT_FILES]
    assert not left, f"{path.name} left files in its working directory: {left}"
    if shutil.which("dot"):
        assert _pictures(notebook) >= PICTURES.get(path.stem, 0), f"{path.name} drew {_pictures(notebook)} pictures"


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
