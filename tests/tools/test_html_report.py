"""The self-contained pass report and graph pages, checked as text and in a headless browser."""

from __future__ import annotations

import difflib
import re
import shutil
import subprocess

import pytest

from tests.tools.dump_test_utils import XLA_DUMP, seed_hlo
from xla_teach import flags
from xla_teach.api import compile_module
from xla_teach.tools import render
from xla_teach.tools.render.html_report import diff_html, graph_page, pass_report_html, scope_svg_ids, write_pass_report

pytestmark = pytest.mark.skipif(not XLA_DUMP.is_dir(), reason="tests/data/xla_samples not present")
needs_dot = pytest.mark.skipif(not render.have_dot(), reason="Graphviz dot not installed")
BROWSER = next((shutil.which(b) for b in ("chromium", "chromium-browser", "google-chrome") if shutil.which(b)), None)


@pytest.fixture(scope="module")
def seed_exe():
    return compile_module(seed_hlo(), "cpu")


def sections(page: str) -> list[str]:
    return re.findall(r'<section class="pass" id="([^"]+)"', page)


def assert_self_contained(page: str) -> None:
    assert "<script src" not in page and "<link" not in page and "@import" not in page
    # The only URLs are XML namespace names inside the SVGs, which browsers never fetch.
    urls = set(re.findall(r"https?://[^\s\"'<>)]+", page))
    assert urls <= {"http://www.w3.org/2000/svg", "http://www.w3.org/1999/xlink"}, urls


@needs_dot
def test_report_has_every_pass_with_graphs_and_diff(seed_exe):
    records = seed_exe.recorder.records
    page = pass_report_html(seed_exe)
    assert sections(page) == [f"pass-{r.index}" for r in records]
    for r in records:
        assert f"{r.pipeline}/{r.pass_name}</a>" in page
    changed = [r for r in records if r.changed]
    # Two inline graphs per changing pass, none for the others.
    assert page.count("<svg") == 2 * len(changed)
    fusion = next(r for r in records if r.pass_name == "fusion")
    expected_added = [ln[1:] for ln in difflib.unified_diff(fusion.before.splitlines(), fusion.after.splitlines(),
                                                            lineterm="") if ln.startswith("+") and ln[1:].strip()
                      and not ln.startswith("+++")]
    fusion_section = page.split(f'id="pass-{fusion.index}"')[1].split("</section>")[0]
    assert "Fused expression for" in fusion_section
    for line in expected_added:
        assert _html_escape(line) in fusion_section
    assert_self_contained(page)


def _html_escape(text: str) -> str:
    import html

    return html.escape(text, quote=True)


def test_only_changed_and_no_graphs(seed_exe):
    page = pass_report_html(seed_exe.recorder, only_changed=True, graphs=False)
    assert sections(page) == [f"pass-{r.index}" for r in seed_exe.recorder.records if r.changed]
    assert "<svg" not in page


def test_diff_html_marks_added_and_removed_lines():
    before, after = "a\nb\nc\n", "a\nB\nc\nd\n"
    out = diff_html(before, after)
    assert out.count('class="add"') == 3  # "+++ after", "+B", "+d"
    assert out.count('class="del"') == 2  # "--- before", "-b"
    assert "(no difference)" in diff_html("x", "x")


def test_graph_page_without_graphviz_shows_the_dot_source(monkeypatch):
    monkeypatch.setattr(shutil, "which", lambda name: None)
    page = graph_page('digraph G { a -> b; }', title="t")
    assert "was not installed" in page and "digraph G { a -&gt; b; }" in page


def test_svg_ids_are_scoped():
    svg = '<svg><g id="node1"><a xlink:href="#node1"/></g><path fill="url(#grad)"/></svg>'
    scoped = scope_svg_ids(svg, "s3_")
    assert 'id="s3_node1"' in scoped and 'href="#s3_node1"' in scoped and "url(#s3_grad)" in scoped


def test_write_refuses_to_overwrite(seed_exe, tmp_path):
    path = write_pass_report(seed_exe, tmp_path / "r.html", graphs=False)
    with pytest.raises(FileExistsError):
        write_pass_report(seed_exe, path, graphs=False)
    with pytest.raises(TypeError, match="PassRecorder"):
        pass_report_html(42)


def _browser(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([BROWSER, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", *args],
                          capture_output=True, timeout=120, check=False)


@needs_dot
@pytest.mark.slow
@pytest.mark.skipif(BROWSER is None, reason="no headless Chromium")
def test_report_and_svgs_in_a_headless_browser(seed_exe, tmp_path):
    """The issue's acceptance check: the report and the dumped SVGs of the seed example
    load in a browser, the script runs, graph elements are there, screenshots are not blank."""
    report = write_pass_report(seed_exe, tmp_path / "report.html")
    fusion = next(r for r in seed_exe.recorder.records if r.pass_name == "fusion")
    dom = _browser("--dump-dom", f"file://{report}#pass-{fusion.index}").stdout.decode()
    assert re.search(r'<body class="js"', dom), "the page script ran"
    assert re.search(rf'<section class="pass current" id="pass-{fusion.index}"', dom)
    assert len(re.findall(r'<g id="s\d+_node\d+" class="node"', dom)) >= 10
    assert len(re.findall(r'class="cluster"', dom)) >= 1

    with flags.override(xla_dump_to=str(tmp_path / "dump"), xla_teach_dump_hlo_as_svg=True):
        compile_module(seed_hlo(), "cpu")
    blank = tmp_path / "blank.html"
    blank.write_text("<html><body></body></html>")
    sizes = {}
    for name, target in (("blank", blank), ("report", report),
                         ("svg", tmp_path / "dump" / "module_0000.jit_f.cpu_after_optimizations.svg")):
        shot = tmp_path / f"{name}.png"
        _browser(f"--screenshot={shot}", "--window-size=1200,900", f"file://{target}")
        assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        sizes[name] = shot.stat().st_size
    assert sizes["report"] > 5 * sizes["blank"] and sizes["svg"] > 3 * sizes["blank"], sizes
