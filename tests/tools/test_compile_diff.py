"""``xla-teach diff``: the same softmax with and without fusion, and two different modules."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from xla_teach.tools.cli import main


def _softmax(tmp_path: Path, rows: int = 64) -> Path:
    from tests.tools.test_explorer import SOFTMAX as TEXT

    path = tmp_path / f"softmax_{rows}.hlo"
    path.write_text(TEXT.replace("8,100", f"{rows},100").replace("f32[8]", f"f32[{rows}]"))
    return path


def test_diff_of_one_module_under_two_flag_sets(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    module = _softmax(tmp_path)
    assert main(["diff", str(module), "--b_flags=--xla_disable_hlo_passes=row-fusion,fusion", "--runs", "3"]) == 0
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if line.startswith("cpu-pipeline/row-fusion"))
    assert re.search(r"\*\s+skipped\s+<- differs", row), row
    fusions = re.search(r"fusions: A (\d+), B (\d+); kernels: A (\d+), B (\d+)", out)
    assert fusions and fusions.group(1) == "1" and fusions.group(2) == "0"
    assert int(fusions.group(3)) < int(fusions.group(4))
    assert "only in A: 1 x kCustom(" in out
    peak = re.search(r"peak memory: A (\d+) bytes, B (\d+) bytes", out)
    assert peak and int(peak.group(1)) < int(peak.group(2))  # unfused: temporaries between kernels
    assert re.search(r"run time: A [\d.]+ ms, B [\d.]+ ms", out)


def test_diff_of_two_modules_and_its_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = _softmax(tmp_path, 64), _softmax(tmp_path, 32)
    assert main(["diff", str(a), str(b), "--runs", "0"]) == 0
    out = capsys.readouterr().out
    assert "the same fusions on both sides" in out and "run time" not in out
    assert main(["diff", str(a)]) == 2
    assert "two modules" in capsys.readouterr().err
    assert main(["diff", str(a), "--b_flags=--xla_no_such_flag"]) == 2
    assert "unknown flag --xla_no_such_flag in --a_flags/--b_flags" in capsys.readouterr().err
