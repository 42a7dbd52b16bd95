"""XLA's own passes in the explorer (tools/explorer/xla_dump.py), from the dump XLA wrote for a JAX
program with --xla_dump_hlo_pass_re=.* (tests/data/xla_pass_dump): every step is a pass record in
XLA's order, judged against the dump files themselves; `xla-teach explore DIR` writes the page,
and the page steps through XLA's fusion with the same before/after pictures."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from tests.tools.conftest import console_errors
from xla_teach.hlo.text.parser import parse_hlo
from xla_teach.tools.cli import main
from xla_teach.tools.explorer.xla_dump import STEP, modules_with_pass_dumps, xla_dump_data, xla_pass_records

DUMP = Path(__file__).parents[1] / "data" / "xla_pass_dump"
PREFIX = "module_0000.jit__lambda"


def test_xlas_steps_are_read_in_order_each_from_the_module_before_it() -> None:
    """Oracle: the files. The records' modules are files' texts in the files' number order, each
    record starts from the module the one before ended with (the first from
    before_optimizations.txt), and every pass file (not a pipeline's start) is one record."""
    records, problems = xla_pass_records(DUMP, PREFIX)
    assert problems == [] and modules_with_pass_dumps(DUMP) == [PREFIX]
    files = sorted((int(m["n"]), p, m["after"]) for p in DUMP.glob(f"{PREFIX}.*.txt") if (m := STEP.search(p.name)))
    order = {p.read_text(): n for n, p, _ in files}
    assert [order[r.after] for r in records] == sorted(order[r.after] for r in records)
    assert records[0].before == (DUMP / f"{PREFIX}.before_optimizations.txt").read_text()
    assert all(a.after == b.before for a, b in zip(records, records[1:], strict=False))
    passes = [after for _, _, after in files if after != "pipeline-start"]
    assert [r.pass_name for r in records if r.pass_name != "(between pipelines)"] == passes
    fusion = next(r for r in records if r.pass_name == "fusion")
    assert fusion.changed and "kind=kLoop" in fusion.after and "kind=kLoop" not in fusion.before


def test_the_page_holds_xlas_optimized_module_and_its_kernels_ir() -> None:
    data = xla_dump_data(DUMP, PREFIX)
    optimized = parse_hlo((DUMP / f"{PREFIX}.cpu_after_optimizations.txt").read_text())
    assert set(data.instructions) == {i.name for c in optimized.computations for i in c.instructions}
    assert data.instructions["tanh_reduce_fusion"]["kernel"] == "tanh_reduce_fusion"
    fusion = next(p for p in data.passes if p["name"] == "fusion")
    assert fusion["diff"]["fused"] and fusion["sides"]
    # The bridge: XLA's fusion is xla_teach's fusion; copy-insertion has no counterpart.
    assert "xla_teach's fusion: xla_teach/passes/fusion/instruction_fusion.py" in fusion["notes"][1]
    copies = next(p for p in data.passes if p["name"] == "copy-insertion")
    assert copies["notes"][1] == "xla_teach has no pass named copy-insertion"


def test_explore_dir_writes_a_page_of_xlas_passes_and_names_unreadable_files(tmp_path: Path,
                                                                              capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "dump"
    shutil.copytree(DUMP, folder)
    assert main(["explore", str(folder)]) == 0
    page = folder / f"{PREFIX}.xla.explorer.html"
    out = capsys.readouterr().out
    assert "XLA's own passes" in out and page.is_file()
    assert "xla_teach has no pass of the same name for" in out and "copy-insertion" in out
    # Side by side: XLA's optimized module and xla_teach's compile of the same program.
    side = folder / f"{PREFIX}.vs_xla_teach.diff.html"
    assert side.is_file() and "XLA's optimized module (run by xla_teach)" in side.read_text()
    assert "tanh_reduce_fusion" in side.read_text()
    broken = next(folder.glob(f"{PREFIX}.0005.*.txt"))
    broken.write_bytes(b"\xff\xfe not text")
    data = xla_dump_data(folder, PREFIX)
    assert data.passes[0]["name"] == "unread files" and broken.name in data.passes[0]["notes"][0]


@pytest.mark.slow
def test_the_page_steps_through_xlas_fusion_in_a_browser(browser, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from xla_teach.tools.explorer.page import explorer_page

    path = tmp_path / "xla.html"
    path.write_text(explorer_page(xla_dump_data(DUMP, PREFIX)))
    browser.get(path.as_uri())
    browser.execute_script(
        "const d = JSON.parse(document.getElementById('data').textContent);"
        "const p = d.passes.find(p => p.name === 'fusion');"
        "document.querySelector('#pass-list li[data-index=\"' + p.index + '\"]').click()")
    sides = browser.execute_script("return [...document.querySelectorAll('#graph > svg text.side-title')].map(t => t.textContent)")
    assert sides == ["before fusion", "after fusion"]
    assert browser.execute_script("return document.querySelectorAll('#graph g.node.touched').length") >= 2
    assert re.search(r"tanh_reduce_fusion", browser.find_element("id", "details").text)
    browser.save_screenshot(str(tmp_path / "xla_fusion.png"))
    assert console_errors(browser) == []
