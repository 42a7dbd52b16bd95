"""The xla-teach command: subcommands end to end, XLA option spellings, exit codes (0 ok, 1 miscompile,
2 user error with a one-line message), and the console script / python -m entry points."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from xla_teach.flags import flags_table_markdown
from xla_teach.hlo.text.parser import parse_hlo
from xla_teach.tools.bugs.fake_data import fake_arguments
from xla_teach.tools.bugs.snapshot import load_snapshot, save_snapshot
from xla_teach.tools.cli import SUBCOMMANDS, main

EXAMPLE = """
HloModule cli_example

ENTRY %main (x: f32[8], y: f32[8]) -> f32[8] {
  %x = f32[8]{0} parameter(0)
  %y = f32[8]{0} parameter(1)
  %m = f32[8]{0} multiply(%x, %y)
  ROOT %s = f32[8]{0} subtract(%m, %y)
}
"""
SCRIPT = Path(sys.executable).parent / "xla-teach"


@pytest.fixture
def hlo(tmp_path):
    path = tmp_path / "example.hlo"
    path.write_text(EXAMPLE)
    return path


def _run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_replay_prints_xla_style_results(capsys, hlo):
    code, out, _ = _run(capsys, "replay", hlo, "--use_fake_data", "--num_runs=2", "--seed=4")
    x, y = fake_arguments(parse_hlo(EXAMPLE), seed=4)
    assert code == 0
    line = next(li for li in out.splitlines() if " :: " in li)
    values = [float(v) for v in line.split("{")[1].rstrip("}").split(",")]
    np.testing.assert_allclose(values, x * y - y, rtol=1e-6)
    assert line.startswith(f"{hlo}: cli_example :: f32[8] {{")
    assert "run 2/2:" in out and "Done executing in" in out


def test_replay_snapshot_and_bool_spellings(capsys, tmp_path):
    args = fake_arguments(parse_hlo(EXAMPLE))
    snap = save_snapshot(tmp_path / "s.npz", EXAMPLE, args, [args[0] * args[1] - args[1]], backend="cpu")
    code, out, _ = _run(capsys, "replay", snap, "--print_result=true")
    assert code == 0 and "results are bit-identical to the snapshot's recorded outputs" in out
    code, out, _ = _run(capsys, "replay", snap, "--noprint_result")
    assert code == 0 and " :: " not in out and "Done executing" in out


def test_run_hlo_module_exit_codes(capsys, hlo):
    code, out, _ = _run(capsys, "run-hlo-module", hlo, "--platform=Host", "--reference_platform=Interpreter")
    assert code == 0 and "** Results on cpu and interpreter are close enough. **" in out
    code, out, _ = _run(capsys, "run-hlo-module", hlo, "--inject-bug=broken-multiply-to-add",
                        "--inject-after=dce")
    assert code == 1 and "output 0 (f32[8])" in out and "1/1 runs miscompared." in out


def test_opt_passes_stage_and_output_file(capsys, hlo, tmp_path):
    code, out, _ = _run(capsys, "opt", hlo, "--passes=fusion")
    assert code == 0 and "fusion(" in out
    target = tmp_path / "out.ll"
    code, _, _ = _run(capsys, "opt", hlo, "--stage=llvm-before-optimizations", "-o", target)
    assert code == 0 and "define" in target.read_text()
    code, _, err = _run(capsys, "opt", hlo, "--stage=asm", "-o", target)  # never overwrite
    assert code == 2 and "already exists" in err and "define" in target.read_text()
    code, out, _ = _run(capsys, "opt", "--list-passes")
    assert code == 0 and "dce" in out.split()


def test_opt_accepts_xla_flags(capsys, hlo):
    code, out, _ = _run(capsys, "opt", hlo, "--xla_disable_hlo_passes=fusion")
    assert code == 0 and "fusion(" not in out
    code, _, err = _run(capsys, "opt", hlo, "--xla_dump_too=/tmp/x")
    assert code == 2 and "did you mean --xla_dump_to" in err


def test_bisect_command_writes_reproducer(capsys, hlo, tmp_path):
    code, out, err = _run(capsys, "bisect", hlo, "--use_fake_data", "--inject-bug=broken-multiply-to-add",
                          f"--dump_path={tmp_path / 'repro'}")
    assert code == 1
    assert "first bad pass: cpu-pipeline/broken-multiply-to-add" in out
    assert "bisect: stage" in err  # progress goes to stderr
    module = parse_hlo((tmp_path / "repro" / "reproducer.hlo").read_text())
    assert module.instruction_count() <= 5
    assert load_snapshot(tmp_path / "repro" / "reproducer.snapshot.npz").module().to_text() == module.to_text()


def test_timeline_command(capsys, hlo, tmp_path):
    trace = tmp_path / "trace.json"
    code, out, _ = _run(capsys, "timeline", hlo, f"--output={trace}", "--num_runs=2", "--eager")
    assert code == 0 and "eager (cpu)" in out
    events = json.loads(trace.read_text())["traceEvents"]
    assert sum(1 for e in events if e.get("cat") == "run") == 4


def test_flags_prints_the_generated_table(capsys):
    code, out, _ = _run(capsys, "flags")
    assert code == 0 and out.strip() == flags_table_markdown().strip()


@pytest.mark.parametrize("argv,message", [
    (["replay", "missing.hlo"], "missing.hlo: no such file"),
    (["replay", "{hlo}", "--platform=tpu", "--use_fake_data"], "unknown platform 'tpu'"),
    (["replay", "{hlo}"], "pass --use_fake_data"),
    (["run-hlo-module", "{bad}"], "bad.hlo:3:"),
    (["bisect", "{hlo}", "--inject-bug=nope"], "unknown --inject-bug 'nope'"),
])
def test_errors_are_one_clear_line_with_exit_2(capsys, hlo, tmp_path, argv, message):
    bad = tmp_path / "bad.hlo"
    bad.write_text("HloModule m\nENTRY e {\n  p = f32[2] parmeter(0)\n}\n")
    code, _, err = _run(capsys, *[a.format(hlo=hlo, bad=bad) for a in argv])
    assert code == 2
    first = err.strip().splitlines()[0]
    assert first.startswith(f"xla-teach {argv[0]}: error: ") and message in err
    assert "Traceback" not in err


def test_gpu_without_device_is_a_clear_error_or_runs(capsys, hlo):
    code, out, err = _run(capsys, "replay", hlo, "--platform=gpu", "--use_fake_data")
    if code == 0:  # a machine with a GPU: the results are printed
        assert " :: f32[8]" in out
    else:
        assert code == 2 and "no CUDA device/driver" in err and "Traceback" not in err


def test_subcommand_registry_is_open():
    assert {"replay", "run-hlo-module", "opt", "bisect", "timeline", "flags"} <= set(SUBCOMMANDS)


@pytest.mark.parametrize("launcher", [[str(SCRIPT)], [sys.executable, "-m", "xla_teach.tools.cli"]],
                         ids=["console-script", "python-m"])
def test_entry_points(hlo, launcher):
    if not Path(launcher[0]).exists():
        pytest.skip(f"{launcher[0]} not installed")
    ok = subprocess.run([*launcher, "run-hlo-module", str(hlo)], capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0 and "close enough" in ok.stdout
    bad = subprocess.run([*launcher, "replay", str(hlo) + ".missing"], capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "no such file" in bad.stderr
