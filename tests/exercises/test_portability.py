"""Off Linux the grader's fences say they are absent instead of calling Linux's system calls, and
on a system without POSIX processes (Windows) grading says plainly where it runs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from xla_teach.exercises import grading

ON_DARWIN = """
import platform
platform.system = lambda: "Darwin"
from pathlib import Path
from xla_teach.exercises import confinement as c
assert c._libc is None and not c.LINUX
print(c.landlock_abi())
print(c.restrict_files(Path("."), hidden=[]))
print(c.forbid_processes_and_network())
print(c.limit_threads())
"""


def test_off_linux_every_fence_says_it_is_absent(tmp_path: Path) -> None:
    run = subprocess.run([sys.executable, "-c", ON_DARWIN], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    abi, files, syscalls, threads = run.stdout.splitlines()
    assert abi == "0"
    assert files == "no Landlock in Darwin: file access is limited only by the user's rights"
    assert syscalls == "no seccomp on Darwin: forks and network are not blocked"
    assert threads.startswith("threads: not limited on Darwin")


def test_without_posix_processes_grading_says_where_it_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(grading.os, "name", "nt")
    with pytest.raises(grading.ExerciseError, match="POSIX system .*WSL"):
        grading.require_posix()
