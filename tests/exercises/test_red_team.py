"""Red team: a class of submissions that each try to win without the work or to harm the grader,
graded as one batch. For every attack: its score, that the harm did not happen, and that the batch
finished with a row per file. (The attacks that hold are in test_isolation.py.)

Attacks that would do real harm if a fence failed use a harmless form: signal 0 (which only asks
whether a signal could be sent) stands for ``kill``."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import pytest

from xla_teach.exercises import confinement, grading, sandbox
from xla_teach.exercises.batch import grade_folder
from xla_teach.exercises.starters import solution_file

needs_fences = pytest.mark.skipif(confinement.landlock_abi() < 1, reason="this kernel has no Landlock")

DCE_RUN = "    def run(self, module: HloModule) -> bool:\n"
SECRET = "hunter2-do-not-print"


def in_run(code: str) -> str:
    """The reference DCE with ``code`` run at the start of ``run()``."""
    body = "".join(f"        {line}\n" for line in code.strip().splitlines())
    text = solution_file("dce").read_text()
    assert DCE_RUN in text
    return text.replace(DCE_RUN, DCE_RUN + body)


def at_import(code: str) -> str:
    """The reference DCE with ``code`` run when the file is loaded (after its definitions)."""
    return solution_file("dce").read_text() + "\n" + code.strip() + "\n"


REFUSED = """
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
{call}
if result >= 0:
    raise SystemExit("ATTACK WORKED")
raise OSError(ctypes.get_errno(), "ATTACK REFUSED")
"""

ATTACKS = {
    # Signals to other processes: the grader (its parent), every process, the whole group of another pid.
    "kill_parent.py": in_run("import os\nos.kill(os.getppid(), 0)"),
    "kill_everyone.py": in_run("import os\nos.kill(-1, 0)"),
    # Network and other doors past a socket filter: io_uring, namespaces, Unix sockets, W+X memory.
    "io_uring.py": in_run(REFUSED.format(call="result = libc.syscall(425, 8, ctypes.create_string_buffer(120))")),
    "unshare.py": in_run(REFUSED.format(call="result = libc.unshare(0x10000000 | 0x40000000)")),
    "unix_socket.py": in_run("import socket\nsocket.socket(socket.AF_UNIX).connect('\\0xla_teach_abstract')"),
    "rwx_memory.py": in_run("import mmap\nmmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)"),
    # Hangs: stopping itself, flooding the answer pipe with its own clock switched off.
    "stop_self.py": in_run("import os, signal\nos.kill(os.getpid(), signal.SIGSTOP)"),
    "flood.py": in_run("import json, os, signal, sys\nsignal.signal(signal.SIGALRM, signal.SIG_IGN)\n"
                       "fd = json.loads(sys.argv[1])['answers_fd']\nwhile True:\n    os.write(fd, b'x' * 4096 + b'\\n')"),
    # Leaks: the environment into the report, escape sequences into the teacher's terminal.
    "environment.py": in_run("import os\nraise RuntimeError(repr(dict(os.environ)))"),
    "escapes.py": in_run("raise RuntimeError('\\x1b[2J\\x1b[H\\x1b]0;9/9\\x07 All checks pass: 9/9')"),
    # Litter: a folder it locks (chmod 000) in its own folder; it says where that is.
    "locked_folder.py": in_run("import os\nos.makedirs('locked/inner', exist_ok=True)\n"
                               "open('locked/inner/f', 'w').write('x' * 4096)\nos.chmod('locked/inner', 0)\n"
                               "os.chmod('locked', 0)\nraise RuntimeError('FOLDER=' + os.getcwd() + '=')"),
    # Failures at import: an exit, a segfault.
    "exit_at_import.py": at_import("import os\nos._exit(7)"),
    "segfault_at_import.py": at_import("import ctypes\nctypes.string_at(0)"),
    # Answers that lie in their types, and a returned module far too costly for the grader to run.
    "lying_answer.py": at_import(
        "import xla_teach.exercises.student_tasks as t\n"
        "t.TASKS['run_pass'] = lambda solution, **kw: {'changed': True, 'text': ['not', 'hlo']}"),
    "huge_module.py": at_import(
        "import xla_teach.exercises.student_tasks as t\n"
        "HUGE = '''HloModule huge\\n\\nENTRY %main (p: f32[1,8000,8000,1]) -> f32[1,8000,8000,1] {\\n"
        "  %p = f32[1,8000,8000,1]{3,2,1,0} parameter(0)\\n"
        "  %k = f32[9,9,1,1]{3,2,1,0} constant({...})\\n"
        "  ROOT %c = f32[1,8000,8000,1]{3,2,1,0} convolution(%p, %k), window={size=9x9 pad=4_4x4_4}, dim_labels=b01f_01io->b01f\\n}\\n'''\n"
        "t.TASKS['run_pass'] = lambda solution, **kw: {'changed': True, 'text': HUGE}"),  # judged by structure
    # A thread bomb: as many sleeping threads as it can start (it says how many).
    "threads.py": in_run("import threading, time\nstarted = 0\ntry:\n    while started < 5000:\n"
                         "        threading.Thread(target=time.sleep, args=(60,), daemon=True).start()\n"
                         "        started += 1\nexcept (RuntimeError, MemoryError):\n    pass\n"
                         "raise RuntimeError(f'THREADS={started}=')"),
    # One student, three files.
    "alice.py": solution_file("dce").read_text(),
    "alice.py.py": "raise SystemExit('not this one')\n",
}


@pytest.fixture(scope="module")
def batch(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    folder = tmp_path_factory.mktemp("red_team")
    for name, text in ATTACKS.items():
        (folder / name).write_text(text)
    (folder / "alice.ipynb").write_text(json.dumps({"cells": 5, "nbformat": 4}))  # a malformed notebook
    patch = pytest.MonkeyPatch()
    patch.setattr(grading, "CASE_TIME_LIMIT_S", 2.0)  # the hangs are stopped by the clock: keep it short
    patch.setattr(sandbox, "GRACE_SECONDS", 0.5)
    patch.setenv("XLA_TEACH_SECRET_TOKEN", SECRET)
    try:
        results = grade_folder("dce", folder, out=tmp_path_factory.mktemp("red_team_grades"), jobs=2)
    finally:
        patch.undo()
    return results, folder


def text(results, name: str) -> str:  # type: ignore[no-untyped-def]
    return results.reports[name].text()


def test_the_batch_finishes_with_a_row_per_file(batch) -> None:  # type: ignore[no-untyped-def]
    results, folder = batch
    files = sorted(p.name for p in folder.iterdir())
    assert sorted(results.reports) == files
    rows = list(csv.DictReader((results.out / "scores.csv").open()))
    assert sorted(r["student"] for r in rows) == files
    assert results.reports["alice.py"].passed, text(results, "alice.py")  # the one that does the work
    for name, report in results.reports.items():
        if name != "alice.py":
            assert report.score < report.max_score, name
    summary = (results.out / "summary.html").read_text()
    assert "Several files of one student?" in summary and "alice.py.py" in summary


@needs_fences
@pytest.mark.parametrize("name", ["kill_parent.py", "kill_everyone.py", "unix_socket.py", "rwx_memory.py"])
def test_signals_sockets_and_writable_code_are_refused(batch, name: str) -> None:  # type: ignore[no-untyped-def]
    results, _ = batch
    assert results.reports[name].score == 0
    assert "PermissionError" in text(results, name), text(results, name)


@needs_fences
@pytest.mark.parametrize("name", ["io_uring.py", "unshare.py"])
def test_io_uring_and_namespaces_are_refused(batch, name: str) -> None:  # type: ignore[no-untyped-def]
    results, _ = batch
    report = text(results, name)
    assert "ATTACK REFUSED" in report and "ATTACK WORKED" not in report, report
    assert results.reports[name].score == 0


@pytest.mark.parametrize("name", ["stop_self.py", "flood.py"])
def test_a_stopped_or_flooding_child_is_stopped_by_the_clock(batch, name: str) -> None:  # type: ignore[no-untyped-def]
    results, _ = batch
    assert results.reports[name].score == 0
    assert "took longer than 2 s" in text(results, name), text(results, name)


def test_nothing_of_the_teacher_s_environment_or_terminal_leaks(batch) -> None:  # type: ignore[no-untyped-def]
    results, _ = batch
    leaked = text(results, "environment.py")
    assert SECRET not in leaked and "XLA_TEACH_SECRET_TOKEN" not in leaked
    assert "'OPENBLAS_NUM_THREADS': '1'" in leaked  # the child's own, made environment
    escaped = text(results, "escapes.py")
    assert "\x1b" not in escaped and "\x07" not in escaped and "All checks pass: 9/9" in escaped
    for name in results.reports:
        assert "\x1b" not in (results.out / "reports" / f"{name}.txt").read_text()


def test_a_locked_folder_is_removed_with_the_child_s_folder(batch) -> None:  # type: ignore[no-untyped-def]
    results, _ = batch
    folders = set(re.findall(r"FOLDER=([^=]+)=", text(results, "locked_folder.py")))
    assert folders
    for folder in folders:
        assert not Path(folder).exists(), folder


def test_failures_at_import_and_lying_or_costly_answers_are_rows_with_reasons(batch) -> None:  # type: ignore[no-untyped-def]
    results, _ = batch
    assert "exited (code 7)" in text(results, "exit_at_import.py")
    assert "segmentation fault" in text(results, "segfault_at_import.py")
    assert "not a readable notebook" in text(results, "alice.ipynb")
    assert results.reports["lying_answer.py"].score == 0
    assert "the grader got no module back from your pass" in text(results, "lying_answer.py")
    assert results.reports["huge_module.py"].score == 0
    assert "dead instruction(s) still there" in text(results, "huge_module.py")


def test_the_grader_never_runs_a_returned_module_far_costlier_than_its_input() -> None:
    """The judge's own interpreter is bounded: a module whose ROOT is an 8000x8000 convolution is
    refused in no time instead of running for most of an hour."""
    import time

    from xla_teach.exercises.hlo_checks import check_same_results, evaluation_cost
    from xla_teach.hlo.text.parser import parse_hlo

    small = parse_hlo("HloModule s\n\nENTRY %m (p: f32[4,4]) -> f32[4,4] {\n  %p = f32[4,4]{1,0} parameter(0)\n"
                      "  ROOT %n = f32[4,4]{1,0} negate(%p)\n}\n")
    huge = parse_hlo("HloModule h\n\nENTRY %m (p: f32[4,4]) -> f32[1,8000,8000,1] {\n  %p = f32[4,4]{1,0} parameter(0)\n"
                     "  %z = f32[] constant(1)\n  %b = f32[1,8000,8000,1]{3,2,1,0} broadcast(%z), dimensions={}\n"
                     "  %k = f32[9,9,1,1]{3,2,1,0} broadcast(%z), dimensions={}\n"
                     "  ROOT %c = f32[1,8000,8000,1]{3,2,1,0} convolution(%b, %k), window={size=9x9 pad=4_4x4_4}, "
                     "dim_labels=b01f_01io->b01f\n}\n")
    assert evaluation_cost(huge) > 1e10 > 1e3 > evaluation_cost(small)
    start = time.perf_counter()
    with pytest.raises(grading.CaseFailed, match="too long to run"):
        check_same_results(small, huge, "input")
    assert time.perf_counter() - start < 5


def test_a_thread_bomb_is_bounded(batch) -> None:  # type: ignore[no-untyped-def]
    """RLIMIT_NPROC caps the threads of a grader run as a user; as root (where the kernel ignores it)
    the memory limit still does: each thread reserves its stack."""
    results, _ = batch
    counts = [int(n) for n in re.findall(r"THREADS=(\d+)=", text(results, "threads.py"))]
    assert counts and max(counts) < 2000, counts
    assert results.reports["threads.py"].score == 0


# ---- no marks without the work --------------------------------------------------------------------------------
def starter_with(exercise: str, code: str) -> str:
    """The untouched starter of ``exercise`` with ``code`` appended (run when the file loads)."""
    from xla_teach.exercises.starters import starter_file

    return starter_file(exercise).read_text() + "\n" + code.strip() + "\n"


SHORTCUTS = {
    # xla_teach's own implementation of the exercised thing, called from the student's code.
    "dce_library.py": ("dce", in_run("from xla_teach.passes.simplifiers.dce import DeadCodeElimination as D\nreturn D().run(module)")),
    "dce_source.py": ("dce", in_run("import xla_teach.passes.simplifiers.dce as d\nexec(open(d.__file__).read(), {})")),
    "fusion_library.py": ("fusion_decision", starter_with("fusion_decision", """
from xla_teach.passes.fusion.fusion_rules import fusion_decision
from xla_teach.passes.fusion.instruction_fusion import FusionConfig
def should_fuse(producer, consumer):
    return fusion_decision(producer, consumer, FusionConfig()) is None""")),
    "capstone_library.py": ("capstone", starter_with("capstone", """
from xla_teach.passes.fusion.instruction_fusion import InstructionFusion
from xla_teach.passes.simplifiers.cse import CommonSubexpressionElimination as C
from xla_teach.passes.simplifiers.dce import DeadCodeElimination as D
def build_pipeline():
    return [C(), D(), InstructionFusion(), D()]""")),
    "atan2_library.py": ("autodiff_rule", starter_with("autodiff_rule", """
from xla_teach.frontend.autodiff_rules import _atan2
def atan2_vjp(ct, inputs, out):
    return _atan2(ct, inputs, out)""")),
    # The harness inside the student's process answering for the student (NumPy, finite differences).
    "softplus_numpy.py": ("elemental_emitter", starter_with("elemental_emitter", """
import numpy as np
import xla_teach.exercises.student_tasks as t
t.TASKS["evaluate"] = lambda solution, entry, dtype, x: {"y": np.logaddexp(0, x).astype(x.dtype)}""")),
    "row_sum_numpy.py": ("reduction_loop", starter_with("reduction_loop", """
import numpy as np
import xla_teach.exercises.student_tasks as t
t.TASKS["row_sums"] = lambda solution, entry, x: {"y": np.add.reduce(x, axis=1, dtype=np.float32)}""")),
    "gradients_numpy.py": ("autodiff_rule", starter_with("autodiff_rule", """
import numpy as np
import xla_teach.exercises.student_tasks as t
def _answer(solution, entry, program, y, x, w):
    d = x * x + y * y
    return {"grads": [w * x / d, -w * y / d]}
t.TASKS["atan2_gradients"] = _answer""")),
}


@needs_fences
@pytest.mark.parametrize("name", list(SHORTCUTS))
def test_no_marks_without_the_work(name: str, tmp_path: Path) -> None:
    """Calling xla_teach's own answer, reading its source, or having the harness in the student's
    process answer with NumPy: every case scores 0, and the report says why where it can."""
    from xla_teach.exercises import grade

    exercise, source = SHORTCUTS[name]
    path = tmp_path / name
    path.write_text(source)
    report = grade(exercise, path)
    assert report.score == 0, report.text()
    if "library" in name or "source" in name:
        assert "not available while grading" in report.text() or "PermissionError" in report.text(), report.text()


def test_a_submission_has_a_wall_clock_for_all_its_cases(tmp_path: Path) -> None:
    """Past the submission's limit the remaining cases fail unrun: a class batch always ends."""
    from xla_teach.exercises import grade

    path = tmp_path / "slow.py"
    path.write_text(in_run("import time\ntime.sleep(0.6)"))
    patch = pytest.MonkeyPatch()
    patch.setattr(grading, "SUBMISSION_TIME_LIMIT_S", 1.0)
    try:
        report = grade("dce", path)
    finally:
        patch.undo()
    assert "used up its 1 s for all cases" in report.text()
    assert report.score < report.max_score
