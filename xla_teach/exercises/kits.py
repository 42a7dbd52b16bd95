"""Course kits: what students get, and what teachers keep (``xla-teach kit student|teacher DIR``).

The repository holds everything a course needs, answers included: the graded exercises'
reference solutions (``exercise_solutions/``) and the notebooks' answer keys
(``teacher/keys/``). Students should get neither. So a course does not hand out the
repository; it hands out two kits made from it:

* the **student kit** -- the notebooks (without outputs), the exercise starters, a
  ``requirements.txt`` naming the package (a hosted Jupyter such as Binder or Colab installs
  from it) and a README with the set-up. It holds no solution and no key, and
  :func:`student_kit` checks that before it returns: no file of it contains three lines in a
  row of a reference solution's hidden code, and no answer key is in it. Put it in the
  course's own repository for students to clone.
* the **teacher kit** -- the reference solutions, the answer keys (runnable scripts: every
  answer is computed and asserted on the checkout that made the kit), and a teacher's guide
  with a section per chapter: goals, time, where students stall, the graded exercises with
  the hint each check gives, and the commands that grade a class.

The grader itself needs neither kit: the hidden checks and their oracles are in the installed
package, and the reference solutions only serve the repository's own tests.
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from xla_teach.exercises.starters import REPO_ROOT, SOLUTIONS_DIR, STARTERS_DIR

NOTEBOOKS_DIR = REPO_ROOT / "notebooks"
KEYS_DIR = REPO_ROOT / "teacher" / "keys"
_HIDDEN = re.compile(r"^\s*# BEGIN SOLUTION.*?$(.*?)^\s*# END SOLUTION", re.S | re.M)


class KitError(RuntimeError):
    """A kit cannot be made here (no checkout, a folder in the way, an answer in the student kit)."""


@dataclass(frozen=True)
class Kit:
    folder: Path
    files: list[Path]


def _need(path: Path, what: str) -> Path:
    if not path.exists():
        raise KitError(f"{what} ({path}) is not here: kits are made from a clone of the xla_teach repository, "
                       "not from the installed package")
    return path


def _fresh(dest: Path) -> Path:
    dest = Path(dest)
    if dest.exists() and any(dest.iterdir()):
        raise KitError(f"{dest} is not empty: give a new folder (a kit never writes over files)")
    dest.mkdir(parents=True, exist_ok=True)
    return dest


def _copy_into(dest: Path, folders: dict[str, list[Path]]) -> list[Path]:
    """Copy each folder's files into ``dest/<folder>/``; the copies' paths."""
    copies = []
    for folder, sources in folders.items():
        (dest / folder).mkdir(exist_ok=True)
        for source in sources:
            shutil.copyfile(source, dest / folder / source.name)
            copies.append(dest / folder / source.name)
    return copies


def hidden_runs(solution: Path, length: int = 3) -> set[str]:
    """Every run of ``length`` consecutive code lines that a reference solution's starter leaves
    out (stripped, comments and blank lines dropped): a run that shows up elsewhere means the
    answer leaked. A single line can be ordinary (``for instr in comp.instructions:``); three in
    a row of one answer are not."""
    runs = set()
    for block in _HIDDEN.findall(solution.read_text()):
        lines = _code_lines(block).splitlines()
        runs |= {"\n".join(lines[i:i + length]) for i in range(len(lines) - length + 1)}
    return runs


def _code_lines(text: str) -> str:
    """``text``'s code lines, stripped, without blank lines and comments."""
    return "\n".join(line.strip() for line in text.splitlines() if line.strip() and not line.strip().startswith("#"))


def student_kit(dest: Path, package: str = "xla-teach") -> Kit:
    """Notebooks, starters, ``requirements.txt`` (``package``: how students install xla_teach)
    and a README, in the new folder ``dest``."""
    notebooks = sorted(_need(NOTEBOOKS_DIR, "the notebooks folder").glob("[0-9][0-9]_*.ipynb"))
    starters = sorted(_need(STARTERS_DIR, "the exercise starters").glob("*.py"))
    dest = _fresh(dest)
    files = _copy_into(dest, {"notebooks": notebooks, "exercises": starters})
    (dest / "requirements.txt").write_text(f"{package}\nmatplotlib\njupyter\n")
    (dest / "README.md").write_text(_STUDENT_README.format(package=package))
    files += [dest / "requirements.txt", dest / "README.md"]
    _check_no_answers(dest, files)
    return Kit(dest, files)


def _check_no_answers(dest: Path, files: list[Path]) -> None:
    secret = set().union(*(hidden_runs(s) for s in sorted(SOLUTIONS_DIR.glob("*.py")))) if SOLUTIONS_DIR.is_dir() \
        else set()
    keys = {k.name for k in KEYS_DIR.glob("*.py")} if KEYS_DIR.is_dir() else set()
    for path in files:
        if path.name in keys:
            raise KitError(f"{path} is an answer key: it must not be in the student kit")
        text = _code_lines(path.read_text(errors="replace").replace("\\n", "\n").replace('\\"', '"'))
        leaked = sorted(run for run in secret if run in text)
        if leaked:
            shutil.rmtree(dest)
            raise KitError(f"{path.name} holds hidden solution code ({leaked[0]!r}): the student kit was not made")


def teacher_kit(dest: Path) -> Kit:
    """Reference solutions, answer keys and the teacher's guide, in the new folder ``dest``."""
    solutions = sorted(_need(SOLUTIONS_DIR, "the reference solutions").glob("*.py"))
    keys = sorted(_need(KEYS_DIR, "the answer keys").glob("*.py"))
    dest = _fresh(dest)
    files = _copy_into(dest, {"solutions": solutions, "keys": keys})
    (dest / "guide.md").write_text(teachers_guide())
    files.append(dest / "guide.md")
    return Kit(dest, files)


# ---- the teacher's guide ------------------------------------------------------------------------
def _chapter_title(notebook_source: Path) -> str:
    match = re.search(r"^# # (.+)$", notebook_source.read_text(), re.M)
    return match.group(1).strip() if match else notebook_source.stem


def _key_notes(key: Path) -> str:
    """The key's opening notes: its first markdown cell after the title (goals, time, stalls)."""
    cells = re.findall(r"# %% \[markdown\]\n((?:#.*\n)+)", key.read_text())
    if not cells:
        return ""
    lines = [line[2:] if line.startswith("# ") else line.lstrip("#") for line in cells[0].splitlines()]
    return "\n".join(line for line in lines if not line.startswith("# ")).strip()


def _prepared_exercises(notebook_source: Path) -> list[str]:
    lists = re.findall(r"for exercise in \[([^\]]*)\]", notebook_source.read_text())
    return [name for names in lists for name in re.findall(r"'(\w+)'", names)]


def teachers_guide() -> str:
    """A section per chapter: the key's notes, the graded exercises with each check's hint."""
    from xla_teach.exercises.hints import HINTS

    parts = ["# Teacher's guide\n",
             "One section per chapter: what it is for, how long it takes, where students stall, its graded "
             "exercises with the hint each check gives a failing student, and the answer key. Grade a class "
             "with `xla-teach grade NAME submissions/ --out grades/` (`--seed N` changes the hidden cases); "
             "run a key with `python keys/NN_*.py` to see every answer computed.\n"]
    for source in sorted((NOTEBOOKS_DIR / "src").glob("[0-9][0-9]_*.py")):
        key = KEYS_DIR / source.name
        parts.append(f"## {_chapter_title(source)}\n")
        if key.is_file():
            parts.append(_key_notes(key) + "\n")
            parts.append(f"Answer key: `keys/{key.name}`.\n")
        for exercise in _prepared_exercises(source):
            parts.append(f"**Graded exercise `{exercise}`** (solution: `solutions/{exercise}.py`). What each check "
                         "needs, as the hints say it:\n")
            parts += [f"- `{check}`: {hint}" for check, hint in HINTS.get(exercise, {}).items()]
            parts.append("")
    return "\n".join(parts) + "\n"


_STUDENT_README = """# xla_teach: the course material

This folder is what you need for the course: the notebooks (`notebooks/`, one per chapter)
and the starter files of the graded exercises (`exercises/`).

## Set up

    python -m venv .venv && . .venv/bin/activate      # Windows: .venv\\Scripts\\activate
    pip install -r requirements.txt                    # installs {package}
    jupyter lab notebooks/

In a hosted Jupyter (Binder, Colab, JupyterHub), open this folder and run
`pip install -r requirements.txt` in a cell first. The notebooks draw their pictures with
Graphviz's `dot` where it is installed, and say so where it is not.

## Exercises

Each chapter that prepares a graded exercise ends with a cell that copies its starter and
grades it. From a terminal:

    xla-teach grade --list
    xla-teach grade dce exercises/dce.py

The grader runs hidden checks on modules you have not seen and tells you what failed and why.
"""
