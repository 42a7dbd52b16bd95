"""Grading a whole class: a folder of .py files and notebooks, graded in parallel, with a CSV, a
Gradescope-style results.json per student and an HTML summary that a browser shows."""

from __future__ import annotations

import csv
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from xla_teach.exercises import ExerciseError
from xla_teach.exercises.batch import grade_folder, notebook_source
from xla_teach.exercises.starters import solution_file, starter_file

BROWSER = next((shutil.which(b) for b in ("chromium", "chromium-browser", "google-chrome") if shutil.which(b)), None)


def _notebook(source: str) -> dict[str, object]:
    """The source split into two code cells, with a markdown cell and an IPython magic between."""
    head, _, tail = source.partition("\nclass ")
    cells = [{"cell_type": "markdown", "source": ["# My DCE\n"]},
             {"cell_type": "code", "source": head.splitlines(keepends=True), "outputs": []},
             {"cell_type": "code", "source": ["%timeit 1 + 1\n", "!ls\n", "class " + tail], "outputs": []}]
    return {"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}


@pytest.fixture(scope="module")
def graded(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    folder = tmp_path_factory.mktemp("submissions")
    reference = solution_file("dce").read_text()
    (folder / "ada.py").write_text(reference)
    (folder / "bob.py").write_text(starter_file("dce").read_text())
    (folder / "cy.py").write_text("class DeadCodeElimination:\n    def run(self\n")  # does not load
    (folder / "dee.ipynb").write_text(json.dumps(_notebook(reference)))
    (folder / "notes.txt").write_text("not a submission")
    out = folder.parent / "grades"
    progress: list[tuple[int, int, str]] = []
    results = grade_folder("dce", folder, out=out, jobs=2, progress=lambda *a: progress.append(a))
    return results, out, progress


def test_every_submission_is_graded_once_with_progress(graded) -> None:  # type: ignore[no-untyped-def]
    results, _, progress = graded
    assert sorted(results.reports) == ["ada.py", "bob.py", "cy.py", "dee.ipynb"]
    scores = {s: (r.score, r.max_score) for s, r in results.reports.items()}
    assert scores["ada.py"] == scores["dee.ipynb"] == (9, 9)  # the notebook's cells make the same solution
    assert scores["bob.py"][0] == 0 and scores["cy.py"][0] == 0
    assert results.reports["cy.py"].load_error
    assert sorted(p[0] for p in progress) == [1, 2, 3, 4] and {p[1] for p in progress} == {4}


def test_the_csv_has_a_row_per_student_and_a_column_per_check(graded) -> None:  # type: ignore[no-untyped-def]
    results, out, _ = graded
    rows = list(csv.DictReader((out / "scores.csv").open()))
    assert [r["student"] for r in rows] == ["ada.py", "bob.py", "cy.py", "dee.ipynb"]
    ada = rows[0]
    checks = [c.name for c in results.reports["ada.py"].checks]
    assert all(ada[name] == str(c.points) for name, c in zip(checks, results.reports["ada.py"].checks, strict=True))
    assert ada["score"] == "9" and rows[2]["loaded"] == "no"


def test_results_json_follows_gradescope(graded) -> None:  # type: ignore[no-untyped-def]
    _, out, _ = graded
    bob = json.loads((out / "results" / "bob.py.json").read_text())
    assert bob["score"] == 0 and bob["max_score"] == 9 and "not written yet" in bob["output"]
    assert {t["status"] for t in bob["tests"]} == {"failed"}
    assert sum(t["max_score"] for t in bob["tests"]) == 9
    assert (out / "reports" / "ada.py.txt").read_text().startswith("grade dce")


def test_results_are_never_written_over(graded) -> None:  # type: ignore[no-untyped-def]
    results, out, _ = graded
    with pytest.raises(ExerciseError, match="not overwriting"):
        grade_folder("dce", Path(results.reports["ada.py"].solution).parent, out=out)


def test_notebook_source_keeps_code_cells_and_drops_magics() -> None:
    text = notebook_source_of({"cells": [{"cell_type": "code", "source": "x = 1\n%time x\n!pip list"},
                                         {"cell_type": "markdown", "source": "x = 2"}]})
    assert "x = 1" in text and "# %time x" in text and "# !pip list" in text and "x = 2" not in text


def notebook_source_of(notebook: dict[str, object]) -> str:
    import tempfile

    with tempfile.NamedTemporaryFile("w", suffix=".ipynb", delete=False) as f:
        json.dump(notebook, f)
    return notebook_source(Path(f.name))


@pytest.mark.skipif(BROWSER is None, reason="no headless Chromium")
def test_summary_page_in_a_headless_browser(graded, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    _, out, _ = graded
    page = out / "summary.html"
    dom = subprocess.run([BROWSER, "--headless", "--no-sandbox", "--disable-gpu", "--dump-dom", f"file://{page}"],
                         capture_output=True, timeout=120, check=False).stdout.decode()
    assert "dce &mdash; 4 submissions" in dom or "dce — 4 submissions" in dom
    assert len(re.findall(r'<rect [^>]*class="bar"', dom)) == 10  # scores 0..9
    assert "not written yet" in dom  # the commonest failure of the starter's checks
    shot = tmp_path / "summary.png"
    subprocess.run([BROWSER, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                    f"--screenshot={shot}", "--window-size=1100,1300", f"file://{page}"],
                   capture_output=True, timeout=120, check=False)
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000
    keep = Path(__file__).parents[2] / "build" / "screenshots"
    keep.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(shot, keep / "class_summary.png")
