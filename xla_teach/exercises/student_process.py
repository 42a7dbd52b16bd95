"""The child process of the autograder: load one submission, then answer tasks about it.

Started by :class:`~xla_teach.exercises.sandbox.StudentProcess` as
``python -m xla_teach.exercises.student_process SETTINGS_JSON``, in a fresh folder holding only
the submission. In order, it:

1. sets its resource limits and imports what the tasks need;
2. takes away xla_teach's own implementation of the exercised thing (:mod:`withheld`), fences
   itself in (:mod:`confinement`: Landlock, which also leaves those files out, a seccomp
   allow-list on every thread, a thread limit) and tells the parent what held, and how many
   threads it had then (one);
3. loads the student's file and checks its entry points;
4. reads one request per line from its request pipe -- ``{"task": ..., "args": ..., "seconds": ...}``
   -- runs the task (:mod:`student_tasks`) under a time limit and writes one JSON answer per
   line: ``{"ok": result}``, or ``{"failed": feedback}`` when the student's code failed.

Its stdout and stderr are files the parent reads (the student's prints); the protocol has pipes
of its own, so a print cannot pass for an answer.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from pathlib import Path
from typing import Any

from xla_teach.exercises.confinement import (
    Limits,
    apply_resource_limits,
    forbid_processes_and_network,
    limit_threads,
    restrict_files,
    threads_now,
)
from xla_teach.exercises.wire import decode, encode
from xla_teach.exercises.withheld import withheld_files, withhold


def main(argv: list[str]) -> int:
    settings = json.loads(argv[0])
    limits = Limits(**settings["limits"])
    requests = os.fdopen(settings["requests_fd"], "r", encoding="utf-8")
    answers = os.fdopen(settings["answers_fd"], "w", encoding="utf-8")

    def send(message: dict[str, Any]) -> None:
        answers.write(json.dumps(message) + "\n")
        answers.flush()

    apply_resource_limits(limits)
    from xla_teach.exercises import grading, student_tasks  # noqa: F401 - the heavy imports, before the fences

    folder = Path.cwd()
    hidden: list[Path] = []
    taken: list[str] = []
    if settings["solution"]:  # xla_teach's own answer to the exercise, out of the student's reach
        hidden = withheld_files(settings["exercise"])
        taken = withhold(settings["exercise"])
    threads = threads_now()  # 1, if nothing imported above started a thread (see sandbox.child_environment)
    protections = [f"own process, limits: {limits.seconds_per_case:g} s per case, {limits.memory_bytes >> 20} MiB "
                   f"of memory, files up to {limits.file_bytes >> 20} MiB",
                   restrict_files(folder, hidden=hidden), forbid_processes_and_network(), limit_threads()]
    if taken:
        protections.append(f"withheld: xla_teach's own {', '.join(taken)} (the exercise is to write it)")
    if threads > 1:
        protections.append(f"not confined: {threads} threads were running when the fences went up, and Landlock "
                           "holds only for the thread that set it")
    send({"protections": protections})
    if not settings["solution"]:  # a runner: it runs what a student's code made, never that code
        send({"loaded": True})
        serve(requests, send, None, folder)
        return 0
    path = folder / settings["solution"]
    try:
        with grading.time_limit(limits.seconds_per_case):
            solution = grading.load_solution(path, f"xla_teach_solution_{settings['exercise']}")
        for name, kind in settings["entry_points"]:
            grading.require(solution, name, kind, path)
    except grading.CaseFailed as err:
        send({"load_error": str(err)})
        return 0
    except grading.CaseTimeout as err:
        send({"load_error": f"running {path.name} {err}"})
        return 0
    send({"loaded": True})
    serve(requests, send, solution, path)
    return 0


def serve(requests: Any, send: Any, solution: Any, path: Path) -> None:
    """Answer one request per line until the grader closes the pipe."""
    from xla_teach.exercises import grading, student_tasks

    tasks = student_tasks.TASKS if solution is not None else student_tasks.RUNNER_TASKS
    for line in requests:
        request = json.loads(line)
        task = tasks[request["task"]]
        try:
            with grading.time_limit(float(request["seconds"])), grading.quiet_stdout():
                result = task(solution, **decode(request["args"]))
            send({"ok": encode(result)})
        except BaseException as err:  # noqa: BLE001 - every failure of the student's code is feedback
            if isinstance(err, KeyboardInterrupt):
                raise
            send({"failed": grading.failure_message(err, path)})


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except Exception:  # noqa: BLE001 - the parent reads this from the child's stderr
        traceback.print_exc()
        sys.exit(70)
