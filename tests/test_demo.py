"""The main job (``make demo``) runs end to end: HLO before/after, a single fused kernel, a result
equal to NumPy's, and XLA-style dumps in a folder that is never overwritten."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from xla_teach.demo import main, seed_module


def test_demo_runs_and_dumps(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    dump = tmp_path / "dump"
    assert main(["--n", "4096", "--dump-to", str(dump)]) == 0
    out = capsys.readouterr().out
    assert "reduce(" in out and "fusion(" in out
    match = re.search(r"CPU backend\s+: (\S+)\s+\(f64 NumPy reference (\S+),", out)
    assert match, out
    np.testing.assert_allclose(float(match.group(1)), float(match.group(2).rstrip(",")), rtol=1e-4)
    names = {p.name for p in dump.iterdir()}
    assert any(n.endswith("before_optimizations.txt") for n in names)
    assert any(n.endswith("cpu_after_optimizations.txt") for n in names)
    assert any(n.endswith(".ir-with-opt.ll") for n in names)
    assert any(".snapshot." in n for n in names)
    assert any(n.endswith(".explorer.html") for n in names) and "index.html" in names
    assert out.rstrip().endswith(".explorer.html"), "the demo prints the explorer's path last"
    # A second run continues the module numbering instead of overwriting (index.html, the folder's
    # listing, is rewritten to list the new module too).
    before = {p: p.read_bytes() for p in dump.iterdir() if p.name != "index.html"}
    assert main(["--n", "4096", "--dump-to", str(dump), "--no-gpu"]) == 0
    assert all(p.read_bytes() == data for p, data in before.items())
    assert len(list(dump.iterdir())) > len(before)


def test_seed_module_is_one_fusion_on_cpu() -> None:
    from xla_teach.api import compile_module

    exe = compile_module(seed_module(1 << 12), "cpu")
    kernels = [i for i in exe.module.entry.instructions if i.opcode not in ("parameter", "constant", "bitcast")]
    assert [k.opcode for k in kernels] == ["fusion"], exe.module.to_text()
