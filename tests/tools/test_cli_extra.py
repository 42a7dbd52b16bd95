"""``xla-teach render`` and ``xla-teach demo``."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from xla_teach.tools.cli import main

SEED = """HloModule seed
add { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT s = f32[] add(a, b) }
ENTRY main {
  x = f32[64] parameter(0)
  y = f32[64] parameter(1)
  m = f32[64] multiply(x, y)
  zero = f32[] constant(0)
  ROOT r = f32[] reduce(m, zero), dimensions={0}, to_apply=add
}
"""


def test_render_writes_dot_and_never_overwrites(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    src = tmp_path / "seed.txt"
    src.write_text(SEED)
    out = tmp_path / "seed.dot"
    assert main(["render", str(src), "-o", str(out)]) == 0
    text = out.read_text()
    assert "digraph" in text and "multiply" in text
    assert main(["render", str(src), "-o", str(out)]) == 2
    assert "already exists" in capsys.readouterr().err
    assert out.read_text() == text


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's dot is not installed")
def test_render_optimized_svg_shows_the_fusion(tmp_path: Path) -> None:
    src = tmp_path / "seed.txt"
    src.write_text(SEED)
    assert main(["render", str(src), "--optimized", "-o", str(tmp_path / "opt.svg")]) == 0
    svg = (tmp_path / "opt.svg").read_text()
    assert svg.lstrip().startswith("<?xml") or "<svg" in svg
    assert "fusion" in svg


def test_render_reports_a_parse_error_with_a_caret(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    src = tmp_path / "bad.txt"
    src.write_text("HloModule m\nENTRY e {\n  x = f32[4] paramter(0)\n}\n")
    assert main(["render", str(src), "-o", str(tmp_path / "bad.svg")]) == 2
    assert "^" in capsys.readouterr().err


def test_demo_subcommand(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    assert main(["demo", "--n", "1024", "--skip_gpu", "--dump-to", str(tmp_path / "d")]) == 0
    assert "fusion" in capsys.readouterr().out
    assert any(p.name.endswith("cpu_after_optimizations.txt") for p in (tmp_path / "d").iterdir())
