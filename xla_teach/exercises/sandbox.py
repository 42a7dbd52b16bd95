"""The grader's side of a submission: a child process that runs the student's code, and nothing else.

A grader that imports a student's file into its own process can be talked into anything: the
file may replace the grader's functions (``grading.run_case = lambda *a: None`` gives full
marks), read the hidden checks' answers, write over the teacher's files. So the student's code
runs in a child process (:mod:`student_process`) that

* starts in a fresh folder holding only the submission, which it may write in and nowhere
  else, and may read only Python's own files besides (Landlock);
* may not start processes or programs, nor open network sockets (seccomp);
* has a memory, CPU-time and file-size limit, and a wall-clock limit per case;
* receives inputs and sends back results as plain data (:mod:`wire`) over pipes of its own.

The checks -- what is right, what the expected answers are -- stay here, in the grading
process: a case asks :meth:`StudentProcess.call` for the student's result and judges it. A
child that dies (out of memory, killed for a loop, ``os._exit``) fails the case it was running
and is started again for the next one.

``StudentProcess.protections`` lists what the child could put in place; a protection the
operating system did not allow is named, and the report says so.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import IO, Any

from xla_teach.exercises.confinement import Limits
from xla_teach.exercises.feedback import CaseFailed, printable
from xla_teach.exercises.wire import decode, encode

STARTUP_SECONDS = 120.0  # imports (NumPy, LLVM) before the student's file is even read
PRINTS_SHOWN = 2000  # characters of a case's prints copied to the grader's stderr
MESSAGE_BYTES = 256 << 20  # the longest answer the grader reads from the child
GRACE_SECONDS = 5.0  # past a case's limit, before the grader stops waiting for the child's own verdict


class StudentProcess:
    """One submission, loaded in a fenced-in child process (see the module docstring)."""

    def __init__(self, exercise: str, solution: Path | None, entry_points: Sequence[tuple[str, str]],
                 limits: Limits | None = None) -> None:
        self.exercise = exercise
        self.solution = None if solution is None else Path(solution)  # None: a runner (see runner())
        self._runner: StudentProcess | None = None
        self.entry_points = [list(e) for e in entry_points]
        self.limits = limits or Limits()
        self.protections: list[str] = []
        self.load_error = ""
        self._folder: Path | None = None
        self._logs: Path | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._requests: IO[str] | None = None
        self._answers: int | None = None  # the pipe the child answers on (read unbuffered, see _receive)
        self._pending = b""  # bytes read from it that do not yet end a line
        self._printed = 0

    # ---- life cycle ----------------------------------------------------------------------------------------
    def __enter__(self) -> StudentProcess:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self) -> None:
        """Start the child and load the submission (``load_error`` says why that failed)."""
        self.close()
        self._folder = Path(tempfile.mkdtemp(prefix=f"xla_teach_grade_{self.exercise}_"))
        self._logs = Path(tempfile.mkdtemp(prefix="xla_teach_grade_logs_"))
        if self.solution is not None:
            shutil.copyfile(self.solution, self._folder / self.solution.name)
        to_child_r, to_child_w = os.pipe()
        from_child_r, from_child_w = os.pipe()
        settings = {"exercise": self.exercise, "solution": self.solution.name if self.solution else "",
                    "entry_points": self.entry_points,
                    "limits": asdict(self.limits), "requests_fd": to_child_r, "answers_fd": from_child_w}
        output = open(self._logs / "output.txt", "wb")  # noqa: SIM115 - the child writes it while we run
        self._printed = 0
        self._process = subprocess.Popen(
            # -P: the folder is not put on sys.path, so a submission called bisect.py or numpy.py
            # does not stand in for the module of that name.
            [sys.executable, "-P", "-m", "xla_teach.exercises.student_process", json.dumps(settings)],
            cwd=self._folder, stdin=subprocess.DEVNULL, stdout=output, stderr=output,
            pass_fds=(to_child_r, from_child_w), start_new_session=True, env=child_environment(self._folder))
        output.close()
        os.close(to_child_r)
        os.close(from_child_w)
        self._requests = os.fdopen(to_child_w, "w", encoding="utf-8")
        self._answers = from_child_r
        self._pending = b""
        try:
            hello = self._receive(STARTUP_SECONDS, "starting")
            self.protections = [str(p) for p in hello.get("protections", [])]
            loaded = self._receive(self.limits.seconds_per_case + STARTUP_SECONDS, "loading the file")
            self.load_error = printable(str(loaded.get("load_error", "")))
        except CaseFailed as err:  # the file killed its process as it loaded (an exit, a crash, a hang)
            self.load_error = printable(str(err))

    def runner(self) -> StudentProcess:
        """A second fenced-in process that never loads the student's file: it runs what the
        student's code *made* (the IR text of a kernel, say) on the grader's inputs. Code in the
        student's process can change anything there, the tasks that compute answers included;
        the answers computed here come only from the artifact."""
        if self._runner is None:
            self._runner = StudentProcess(f"{self.exercise}_runner", None, [], self.limits)
        return self._runner

    def close(self) -> None:
        if self._runner is not None:
            self._runner.close()
        if self._process is not None:
            _kill(self._process)
            self._process = None
        if self._requests is not None:
            try:
                self._requests.close()
            except OSError:
                pass
        if self._answers is not None:
            os.close(self._answers)
        self._requests, self._answers = None, None
        for folder in (self._folder, self._logs):
            if folder is not None:
                remove_tree(folder)
        self._folder = self._logs = None

    @property
    def missing_protections(self) -> list[str]:
        """The protections the operating system did not allow (named in the report)."""
        return [p for p in self.protections if "not " in p or p.startswith("no Landlock") or p.startswith("no seccomp")]

    # ---- asking ------------------------------------------------------------------------------------------
    def call(self, task: str, seconds: float | None = None, **args: Any) -> Any:
        """Run ``task`` (see :mod:`student_tasks`) in the child; its result as plain data, or
        :class:`CaseFailed` with the feedback when the student's code failed."""
        if self._process is None or self._process.poll() is not None:
            self.start()
        if self.load_error:
            raise CaseFailed(self.load_error)
        limit = self.limits.seconds_per_case if seconds is None else seconds
        assert self._requests is not None
        try:
            self._requests.write(json.dumps({"task": task, "args": encode(args), "seconds": limit}) + "\n")
            self._requests.flush()
        except BrokenPipeError:
            raise CaseFailed(self._death("before the case started")) from None
        try:
            answer = self._receive(limit + GRACE_SECONDS, "this case")
        finally:
            self._copy_prints()
        if "failed" in answer:
            raise CaseFailed(str(answer["failed"]))
        return decode(answer.get("ok"))

    def _receive(self, seconds: float, doing: str) -> dict[str, Any]:
        """The child's next message, within ``seconds`` of wall clock however much else it writes:
        the deadline is checked before every read, so a child flooding the pipe with lines that
        are not messages (or one endless line) is stopped on time, and at most
        :data:`MESSAGE_BYTES` wait unread."""
        assert self._answers is not None and self._process is not None
        deadline = time.monotonic() + seconds
        while True:  # a line may already wait in _pending: look there before waiting on the pipe
            if time.monotonic() > deadline:
                return self._too_slow(seconds, doing)
            if len(self._pending) > MESSAGE_BYTES and b"\n" not in self._pending:
                _kill(self._process)
                raise CaseFailed(f"your code sent the grader more than {MESSAGE_BYTES >> 20} MiB in one message")
            line, newline, rest = self._pending.partition(b"\n")
            if newline:
                self._pending = rest
                try:
                    message = json.loads(line)
                except json.JSONDecodeError:
                    continue
                if isinstance(message, dict):
                    return message
                continue
            left = deadline - time.monotonic()
            ready, _, _ = select.select([self._answers], [], [], max(left, 0))
            if not ready:
                return self._too_slow(seconds, doing)
            chunk = os.read(self._answers, 1 << 16)
            if not chunk:
                raise CaseFailed(self._death(f"while {doing}"))
            self._pending += chunk

    def _too_slow(self, seconds: float, doing: str) -> dict[str, Any]:
        """Kill the child (a stopped one too: SIGKILL ends it) and fail the case."""
        assert self._process is not None
        _kill(self._process)
        raise CaseFailed(f"your code took longer than {seconds - GRACE_SECONDS:g} s (an endless loop?)"
                         if doing == "this case" else f"the grading process timed out while {doing}")

    def _death(self, when: str) -> str:
        """Why the child died, for the report."""
        assert self._process is not None
        try:
            code = self._process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            _kill(self._process)
            code = self._process.returncode
        why = {-signal.SIGKILL: "was killed (out of memory?)", -signal.SIGXCPU:
               f"used more than {self.limits.cpu_seconds} s of CPU time", -signal.SIGXFSZ:
               f"wrote a file larger than {self.limits.file_bytes >> 20} MiB", -signal.SIGSEGV:
               "crashed (segmentation fault)", -signal.SIGABRT: "aborted"}.get(code or 0, f"exited (code {code})")
        tail = self._tail_of_output()
        return f"the process running your code {why} {when}" + (f"; it printed:\n{tail}" if tail else "")

    def _tail_of_output(self) -> str:
        if self._logs is None or not (self._logs / "output.txt").is_file():
            return ""
        text = (self._logs / "output.txt").read_bytes()[-600:].decode("utf-8", "replace").strip()
        return "\n".join("  " + line for line in text.splitlines()[-8:])

    def _copy_prints(self) -> None:
        """The student's prints during a case go to the grader's stderr (clipped), never the report."""
        if self._logs is None:
            return
        path = self._logs / "output.txt"
        if not path.is_file():
            return
        with open(path, "rb") as f:
            f.seek(self._printed)
            printed = f.read(PRINTS_SHOWN + 1)
            self._printed = f.tell() if len(printed) <= PRINTS_SHOWN else os.path.getsize(path)
        if printed:
            text = printable(printed[:PRINTS_SHOWN].decode("utf-8", "replace"))
            sys.stderr.write(text + ("\n... (truncated)\n" if len(printed) > PRINTS_SHOWN else ""))


def remove_tree(folder: Path) -> None:
    """Delete ``folder`` whatever its contents did to their permissions (a ``chmod 000`` folder
    inside cannot be listed until it is given its rights back)."""

    def retry(function: Any, path: str, _: object) -> None:
        try:
            os.chmod(path, 0o700)
            parent = os.path.dirname(path)
            if parent:
                os.chmod(parent, 0o700)
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path, onerror=retry)
            else:
                function(path)
        except OSError:
            pass

    if folder.exists():
        for root, dirs, _files in os.walk(folder):  # give every folder its rights back first
            for d in dirs:
                try:
                    os.chmod(os.path.join(root, d), 0o700, follow_symlinks=False)
                except (OSError, NotImplementedError):
                    pass
        shutil.rmtree(folder, onerror=retry)


def _kill(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            process.kill()
    process.wait()


THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS",
                    "VECLIB_MAXIMUM_THREADS", "BLIS_NUM_THREADS", "GOTO_NUM_THREADS")


def child_environment(home: Path) -> dict[str, str]:
    """The child's whole environment, made here rather than inherited: nothing of the teacher's
    (tokens, paths, proxies) can be read by the student's code or leak into a report. A PATH of
    system folders, ``home`` (the child's own folder) as HOME and TMPDIR, a UTF-8 locale, and every
    BLAS/OpenMP thread count set to 1, so that importing NumPy starts no thread before the fences
    go up (a thread that exists then would keep full rights). ``PYTHONPATH`` is kept only when the
    grader itself runs from one (a checkout not installed)."""
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(home), "TMPDIR": str(home), "LANG": "C.UTF-8",
           "LC_ALL": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1", "PYTHONNOUSERSITE": "1",
           **{name: "1" for name in THREAD_VARIABLES}}
    if os.environ.get("PYTHONPATH"):
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    return env
