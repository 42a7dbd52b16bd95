"""Across processes over MPI (xla_teach/distributed.py): ``mpiexec -n 4`` processes, one device
each, give the interpreter's simulated devices' results for every collective, and XLA's for its
data-parallel SPMD module on global arrays; a host file places them; a failing process stops the
others; a missing MPI is stated plainly."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from tests.hlo.test_multi_device_interpreter import COLLECTIVES
from xla_teach.hlo.evaluator.devices import run_partitioned
from xla_teach.hlo.text.parser import parse_hlo

pytest.importorskip("mpi4py", reason="MPI is not installed (pip install -e '.[mpi]')")
MPIEXEC = shutil.which("mpiexec", path=str(Path(sys.executable).parent)) or shutil.which("mpiexec")
PROGRAM = Path(__file__).parent / "mpi_program.py"
DATA = Path(__file__).parents[1] / "data" / "spmd"
pytestmark = pytest.mark.skipif(MPIEXEC is None, reason="no mpiexec (pip install -e '.[mpi]' brings MPICH's)")


def _mpiexec(*args: str, launcher: tuple[str, ...] = ("-n", "4"), timeout: float = 120) -> subprocess.CompletedProcess:
    assert MPIEXEC is not None
    return subprocess.run([MPIEXEC, *launcher, sys.executable, str(PROGRAM), *args], capture_output=True, text=True,
                          timeout=timeout, cwd=Path(__file__).parents[2])


@pytest.mark.parametrize("backend", ["cpu", "interpreter"])
def test_every_collective_on_four_processes(backend: str, tmp_path: Path) -> None:
    out = tmp_path / "out.npz"
    run = _mpiexec("collectives", backend, str(out))
    assert run.returncode == 0, run.stderr
    got = np.load(out)
    xs = [np.arange(8, dtype=np.float32).reshape(4, 2) + 100 * d for d in range(4)]
    want = run_partitioned(parse_hlo(COLLECTIVES), [[x] for x in xs])
    for d, leaves in enumerate(want):
        for i, w in enumerate(leaves):
            np.testing.assert_array_equal(got[f"dev{d}_out{i}"], w)


@pytest.mark.parametrize("backend", ["cpu", "interpreter"])
def test_mpi_runs_the_collectives_itself_and_leaves_it_only_what_it_cannot_reduce(backend: str,
                                                                                  tmp_path: Path) -> None:
    """Along any dimension, on sub-groups, variadic, by maximum, a broadcast, bf16 moved as bytes:
    MPI's own operations give the simulated devices' results (float sums within the bound of a
    reduction in another order: here they are exact); a bf16 sum (MPI has no bf16) and a
    reduction by a computation fall back to exchanging values, and only they."""
    from tests.distributed.mpi_program import ENGINE, engine_input

    out = tmp_path / "out.npz"
    run = _mpiexec("engine", backend, str(out))
    assert run.returncode == 0, run.stderr
    got = np.load(out)
    assert sorted(set(got["exchanged"].tolist())) == ["odd", "summed_bf16"]
    want = run_partitioned(parse_hlo(ENGINE), [[engine_input(d)] for d in range(4)])
    for d, leaves in enumerate(want):
        for i, w in enumerate(leaves):
            mine = got[f"dev{d}_out{i}"]
            if str(w.dtype) == "bfloat16":  # np.savez keeps bf16 as raw bytes
                mine, w = mine.view(np.uint16), w.view(np.uint16)
            np.testing.assert_array_equal(mine, w, err_msg=f"device {d} output {i}")


@pytest.mark.parametrize("when", ["first", "second"])
def test_a_process_that_never_reaches_a_collective_stops_every_process_after_the_timeout(when: str,
                                                                                         tmp_path: Path) -> None:
    """Process 3 sleeps instead of running: the others stop every process after the 3 s timeout,
    and the error names the member that did not arrive and where it is (read from the memory the
    processes share). Every process waits for all of them (before each collective they say which
    one they are at), so the error names process 3, computing -- or, the second time, whichever
    process gives up first may name a process that is itself waiting for 3 in an earlier
    collective."""
    start = time.monotonic()
    run = _mpiexec("hang", "cpu" if when == "first" else "cpu-twice", str(tmp_path / "out.npz"), timeout=120)
    took = time.monotonic() - start
    assert run.returncode != 0
    assert re.search(rf"process [0-2] waited 3 s in [a-z-]+ [\w.-]+ \(run {1 if when == 'first' else 2}\) for "
                     r"every process: one of them never reached it", run.stderr), run.stderr[-2000:]
    # (on a busy machine another process may still be compiling when the first gives up: it is
    # named too, as computing)
    computing = (r"processes \[(?:\d, )*3\] did not arrive at this collective \(number \d+ here\): .*process 3 is "
                 r"computing before its collective number \d+, outside any collective")
    waiting = (r"did not arrive at this collective \(number (\d+) here\): .*process [0-2] is waiting in its "
               r"collective number (\d+)")
    found = re.search(computing, run.stderr) or (when == "second" and re.search(waiting, run.stderr))
    assert found, run.stderr[-2000:]
    if found.re.pattern == waiting:  # stuck in an earlier collective than the one waited in here
        assert int(found.group(2)) < int(found.group(1)), found.group(0)
    assert took < 60, took


def test_xlas_data_parallel_module_on_four_processes_from_a_host_file(tmp_path: Path) -> None:
    """Global arrays in, global result out, on every process; the processes placed by MPICH's
    host file (one line per machine, name:slots -- here this machine)."""
    hosts = tmp_path / "hosts"
    hosts.write_text("localhost:4\n")
    out = tmp_path / "out.npz"
    run = _mpiexec("global", "cpu", str(out), launcher=("-f", str(hosts), "-n", "4"))
    assert run.returncode == 0, run.stderr
    np.testing.assert_allclose(np.load(out)["arr_0"], np.load(DATA / "data_parallel.npz")["global_out0"], rtol=1e-5)


def test_data_parallel_training_on_four_processes_follows_the_one_process_loss_curve(tmp_path: Path) -> None:
    from tests.distributed.mpi_program import train_losses

    out = tmp_path / "losses.npz"
    run = _mpiexec("train", "cpu", str(out), timeout=300)
    assert run.returncode == 0, run.stderr
    single = train_losses()
    assert single[-1] < single[0]
    np.testing.assert_allclose(np.load(out)["losses"], single, rtol=1e-4)


def test_each_process_feeds_its_own_rows_and_the_weights_stay_on_the_devices(tmp_path: Path) -> None:
    """make_array_from_process_local_data: each process passes its 16 rows of the 64-row batch;
    device_put keeps the weights on the devices, and jit's results stay there between steps. The
    loss curve is the one-process curve; an array split over the processes is read whole only by
    process_allgather (np.asarray refuses, naming it)."""
    from tests.distributed.mpi_program import train_losses

    out = tmp_path / "local.npz"
    run = _mpiexec("local", "cpu", str(out), timeout=300)
    assert run.returncode == 0, run.stderr
    got = np.load(out)
    np.testing.assert_allclose(got["losses"], train_losses(), rtol=1e-4)
    x = np.random.default_rng(0).standard_normal((64, 16)).astype(np.float32)
    np.testing.assert_array_equal(got["doubled"], 2 * x)
    assert "split over devices of other processes" in str(got["message"])
    assert "process_allgather" in str(got["message"])


def test_a_failing_process_stops_the_others(tmp_path: Path) -> None:
    start = time.monotonic()
    run = _mpiexec("fail", "cpu", str(tmp_path / "out.npz"), timeout=120)
    assert run.returncode != 0
    assert time.monotonic() - start < 60
    assert "parameter 0" in run.stderr  # the failing process's own error, printed first, before MPI_Abort
    assert not (tmp_path / "out.npz").exists()


def test_missing_mpi_is_stated_plainly(monkeypatch: pytest.MonkeyPatch) -> None:
    from xla_teach import distributed
    from xla_teach.runtime import distributed as runtime_distributed

    monkeypatch.setitem(sys.modules, "mpi4py", None)
    monkeypatch.setattr(runtime_distributed, "_state", {})
    with pytest.raises(distributed.DistributedError, match=r"MPI is not installed: pip install 'xla_teach\[mpi\]'"):
        distributed.initialize()



def test_an_error_outside_any_collective_stops_every_process_at_once(tmp_path: Path) -> None:
    """Process 1 raises before the others reach their collective: every process stops, in
    seconds, with process 1's own error (the others would otherwise wait for it forever)."""
    start = time.monotonic()
    run = _mpiexec("raise", "cpu", str(tmp_path / "out.npz"), timeout=120)
    assert run.returncode != 0
    assert "process 1 fails before any collective" in run.stderr
    # One line, printed before the traceback (mpiexec may stop forwarding a long one at MPI_Abort).
    assert "process 1 failed (RuntimeError: process 1 fails before any collective): stopping all 4 processes" \
        in run.stderr
    assert time.monotonic() - start < 60
    assert not (tmp_path / "out.npz").exists()


def test_processes_that_run_different_programs_refuse_together(tmp_path: Path) -> None:
    """One process passes arrays of another shape: every process refuses with one message naming
    which processes differ, instead of meeting in mismatched collectives."""
    start = time.monotonic()
    run = _mpiexec("mismatch", "cpu", str(tmp_path / "out.npz"), timeout=120)
    assert run.returncode != 0
    assert time.monotonic() - start < 60
    for message in _each_process_error(tmp_path / "out.npz"):
        assert "the processes are not running the same program: processes [0, 1, 2]; [3] differ" in message


def test_processes_that_pass_different_global_values_refuse_together(tmp_path: Path) -> None:
    """Same shapes, other values on process 3 (a different seed, say): at the first run every
    process refuses, instead of training on data that differs per process."""
    start = time.monotonic()
    run = _mpiexec("other-data", "cpu", str(tmp_path / "out.npz"), timeout=120)
    assert run.returncode != 0
    assert time.monotonic() - start < 60
    for message in _each_process_error(tmp_path / "out.npz"):
        assert "the processes are not running the same global arguments: processes [0, 1, 2]; [3] differ" in message
        assert "make_array_from_process_local_data" in message


FAULT_MESSAGES = {
    "skip": r"the processes are not at the same collective: processes \[0\] at all-reduce[\w.-]* of jit_\w+ "
            r"#(\w+) \(run 2\).*; processes \[1\] at all-reduce[\w.-]* of jit_\w+ #(?!\1)\w+ \(run 2\)",
    "extra": r"the processes are not at the same collective: (processes \[1\] at all-reduce[\w.-]* of "
             r"jit_\w+ #\w+ \(run 5\).*processes \[0\] at the end of the program|processes \[0\] at the end "
             r"of the program.*processes \[1\] at all-reduce)",
    "exit": r"the processes are not at the same collective: .*at the end of the program",
    "trace": r"ValueError: matmul: contracting dimensions differ",  # process 1's own error; it stops both
    "mesh": r"the processes are not running the same program: processes \[0\]; \[1\] differ",
}


@pytest.mark.parametrize("fault", sorted(FAULT_MESSAGES))
def test_a_process_that_leaves_the_common_path_stops_every_process_in_seconds(fault: str, tmp_path: Path) -> None:
    """Process 1 of two skips a collective, runs an extra step, exits early, fails while tracing,
    or uses another mesh: every process stops (a non-zero exit) in seconds -- not at the
    collective timeout (600 s by default) -- and the errors say what differs. Before each
    collective the processes say which one they are at, and at exit that they have ended;
    without that, a skipped all-reduce paired with the next one and returned wrong sums."""
    out = tmp_path / "out.npz"
    start = time.monotonic()
    run = _mpiexec(fault, "cpu", str(out), launcher=("-n", "2"), timeout=120)
    took = time.monotonic() - start
    assert run.returncode != 0, run.stderr[-2000:]
    messages = [f.read_text() for f in (Path(f"{out}.{rank}.err") for rank in range(2)) if f.exists()]
    printed = "\n".join(messages) + run.stderr
    assert re.search(FAULT_MESSAGES[fault], printed), printed[-3000:]
    assert took < 60, took


def _each_process_error(out: Path) -> list[str]:
    """The errors the processes raised (kept in a file per process: their tracebacks interleave
    character by character on the shared stderr). Every process refuses, but the first to fail
    stops the others (MPI_Abort), so some may be gone before they write theirs: at least one."""
    errors = [f.read_text() for f in (Path(f"{out}.{rank}.err") for rank in range(4)) if f.exists()]
    assert errors, "no process wrote the error it raised"
    return errors
