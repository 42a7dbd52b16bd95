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
    assert re.search(r"\*\s+-\s+<- differs", row), row
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


def test_diff_writes_a_page_never_over_a_file_and_flags_only_real_differences(tmp_path: Path,
                                                                              capsys: pytest.CaptureFixture[str]) -> None:
    """By default the comparison is also a page beside A (refused when that file exists; --text
    writes none); a pass disabled on both sides is not a difference."""
    module = _softmax(tmp_path)
    both = "--xla_disable_hlo_passes=cse"
    args = ["diff", str(module), f"--a_flags={both}", f"--b_flags={both},row-fusion", "--runs", "0"]
    assert main(args) == 0
    out = capsys.readouterr().out
    page = tmp_path / "softmax_64.diff.html"
    assert f"open {page}" in out and page.read_text().startswith("<!DOCTYPE html>")
    cse = [line for line in out.splitlines() if line.startswith("simplification/cse")]
    assert cse and all(re.search(r"-\s+-$", line) for line in cse), cse
    assert main(args) == 2 and "already exists" in capsys.readouterr().err
    assert main([*args, "--text"]) == 0
    assert "open " not in capsys.readouterr().out


def test_diff_and_explore_compile_a_dump_whose_constants_were_elided(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """XLA's dumps print constants of more than ten elements as {...}: diff and explore still
    compile such a module (with made-up values, said on stderr), since they look at the compile."""
    text = """HloModule elided

ENTRY %main (x: f32[4,16]) -> f32[4,16] {
  %x = f32[4,16]{1,0} parameter(0)
  %table = f32[4,16]{1,0} constant({...})
  %sum = f32[4,16]{1,0} add(%x, %table)
  ROOT %out = f32[4,16]{1,0} exponential(%sum)
}
"""
    path = tmp_path / "elided.hlo"
    path.write_text(text)
    assert main(["diff", str(path), "--b_flags=--xla_disable_hlo_passes=fusion", "--runs", "1", "--text"]) == 0
    captured = capsys.readouterr()
    assert "table" in captured.err and "made-up values" in captured.err
    assert "fusions: A 1, B 0" in captured.out
    assert main(["explore", str(path)]) == 0
    assert (tmp_path / "elided.explorer.html").exists()
