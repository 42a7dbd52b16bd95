"""Course kits (xla_teach/exercises/kits.py): the student kit has the notebooks and starters and
no answer; the teacher kit has every solution, every answer key and a guide; the answer keys
themselves run, so every answer they state is checked on this checkout."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from xla_teach.exercises import EXERCISE_NAMES
from xla_teach.exercises.kits import KEYS_DIR, NOTEBOOKS_DIR, KitError, hidden_runs, student_kit, teacher_kit
from xla_teach.exercises.starters import SOLUTIONS_DIR, starter_file

ROOT = Path(__file__).resolve().parents[2]
KEYS = sorted(KEYS_DIR.glob("*.py"))


def test_the_student_kit_has_the_course_and_no_answer(tmp_path: Path) -> None:
    kit = student_kit(tmp_path / "students", package="xla-teach==0.1")
    names = {p.relative_to(kit.folder).as_posix() for p in kit.files}
    assert {f"notebooks/{p.name}" for p in NOTEBOOKS_DIR.glob("[0-9][0-9]_*.ipynb")} <= names
    assert {f"exercises/{starter_file(e).name}" for e in EXERCISE_NAMES} <= names
    assert (kit.folder / "requirements.txt").read_text().splitlines()[0] == "xla-teach==0.1"
    assert not any("solution" in n or n.startswith("keys/") for n in names)
    every_file = "\n".join(p.read_text(errors="replace") for p in kit.folder.rglob("*") if p.is_file())
    assert "BEGIN SOLUTION" not in every_file


def test_the_student_kit_refuses_a_leaked_answer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A starter that carries its solution's hidden code (a mistake in make_starters, say) stops the kit."""
    leaky = tmp_path / "starters"
    leaky.mkdir()
    (leaky / "dce.py").write_text((SOLUTIONS_DIR / "dce.py").read_text().replace("# BEGIN SOLUTION", "# was"))
    monkeypatch.setattr("xla_teach.exercises.kits.STARTERS_DIR", leaky)
    assert hidden_runs(SOLUTIONS_DIR / "dce.py")
    with pytest.raises(KitError, match="hidden solution code"):
        student_kit(tmp_path / "students")
    assert not (tmp_path / "students").exists()


def test_a_kit_never_writes_over_files(tmp_path: Path) -> None:
    (tmp_path / "mine.txt").write_text("keep me")
    with pytest.raises(KitError, match="not empty"):
        teacher_kit(tmp_path)
    assert (tmp_path / "mine.txt").read_text() == "keep me"


def test_the_teacher_kit_has_every_solution_key_and_chapter(tmp_path: Path) -> None:
    kit = teacher_kit(tmp_path / "teachers")
    assert {p.name for p in (kit.folder / "solutions").iterdir()} == {f"{e}.py" for e in EXERCISE_NAMES}
    assert {p.name for p in (kit.folder / "keys").iterdir()} == {p.name for p in KEYS}
    guide = (kit.folder / "guide.md").read_text()
    for source in sorted((NOTEBOOKS_DIR / "src").glob("[0-9][0-9]_*.py")):
        assert f"keys/{source.name}" in guide, f"no answer key for {source.name}"
    for exercise in EXERCISE_NAMES:
        assert f"**Graded exercise `{exercise}`**" in guide


def test_every_notebook_has_an_answer_key_for_each_of_its_exercises() -> None:
    import re

    for source in sorted((NOTEBOOKS_DIR / "src").glob("[0-9][0-9]_*.py")):
        exercises = re.findall(r"^# (\d+)\. \*\*", source.read_text().split("# ## Exercises")[-1], re.M)
        key = (KEYS_DIR / source.name).read_text()
        answered = re.findall(r"^# ## Exercise (\d+):", key, re.M)
        assert answered == exercises, f"{source.name}: exercises {exercises}, answered {answered}"


@pytest.mark.parametrize("key", KEYS, ids=[k.stem for k in KEYS])
def test_the_answer_key_runs_and_its_asserts_hold(key: Path) -> None:
    run = subprocess.run([sys.executable, str(key)], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-3000:]
