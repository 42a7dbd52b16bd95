"""The documentation: the site builds with ``mkdocs build --strict`` (no broken links, no
missing pages), the generated flags page is current, the code examples in the pages run,
and the folder map names only paths that exist.

The built site is checked against the code it is generated from (``docs/hooks/``): one page
per pass of the CPU pipeline with its graphs, one tutorial page per notebook, and a CLI
reference that covers every registered subcommand."""

from __future__ import annotations

import html
import importlib
import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
DOCS = ROOT / "docs"
# Pages whose ```python blocks are runnable examples (each page's blocks run in order, sharing names).
EXAMPLE_PAGES = ["index.md", "getting-started.md", "ir.md", "hlo-text-format.md", "public-api.md"]
HAVE_MKDOCS = importlib.util.find_spec("mkdocs") is not None and importlib.util.find_spec("material") is not None
needs_mkdocs = pytest.mark.skipif(not HAVE_MKDOCS, reason="mkdocs-material is not installed (pip install -e '.[test]')")


def _load_flags_generator():
    spec = importlib.util.spec_from_file_location("gen_flags_doc", ROOT / "scripts" / "gen_flags_doc.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site, built once for this file's tests with ``mkdocs build --strict``."""
    if not HAVE_MKDOCS:
        pytest.skip("mkdocs-material is not installed (pip install -e '.[test]')")
    site_dir = tmp_path_factory.mktemp("docs") / "site"
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(ROOT / "mkdocs.yml"),
         "--site-dir", str(site_dir)],
        cwd=ROOT, capture_output=True, text=True, timeout=300, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert result.returncode == 0, f"mkdocs build --strict failed:\n{result.stdout}\n{result.stderr}"
    return site_dir


def _page_text(page: Path) -> str:
    """The text of a built page, without tags (code blocks are split into highlighting spans)."""
    return html.unescape(re.sub(r"<[^>]+>", "", page.read_text()))


def test_mkdocs_build_strict(site: Path) -> None:
    assert (site / "index.html").is_file()
    for page in ["getting-started", "architecture", "hlo-text-format", "flags", "performance", "cli-reference"]:
        assert (site / page / "index.html").is_file(), f"{page} is not in the site"


def _cpu_pipeline_pass_names() -> list[str]:
    """Every pass of the CPU pipeline, nested pipelines walked, each name once."""
    from xla_teach.backends.cpu.cpu_pipeline import cpu_pipeline
    from xla_teach.passes.pass_base import HloPassPipeline

    names: list[str] = []

    def walk(pipeline: HloPassPipeline) -> None:
        for p in pipeline.passes:
            if isinstance(p, HloPassPipeline):
                walk(p)
            elif p.name not in names:
                names.append(p.name)

    walk(cpu_pipeline())
    return names


def test_one_page_per_pipeline_pass_with_before_and_after_graphs(site: Path) -> None:
    from xla_teach.tools.render import have_dot

    names = _cpu_pipeline_pass_names()
    assert {"fusion", "multi_output_fusion", "row-fusion", "hlo-memory-scheduler"} <= set(names)
    index = (site / "pass-reference" / "index.html").read_text()
    for name in names:
        page = site / "pass-reference" / name / "index.html"
        assert page.is_file(), f"no generated page for pass {name}"
        assert f'href="{name}/"' in index, f"the pipeline page does not link to {name}"
        content = page.read_text()
        if have_dot():
            graphs = re.findall(r'<div class="hlo-graph">\s*<svg', content)
            assert len(graphs) == 2, f"pass {name}: expected a before and an after graph, found {len(graphs)}"
        else:
            assert "digraph" in content, f"pass {name}: no DOT source although Graphviz is missing"
        text = _page_text(page)
        assert f"After {name}" in text and "Run on an example" in text
        assert "The pass changed the module." in text, f"pass {name}: its example does not show it doing anything"


def test_pass_page_shows_what_the_pass_did(site: Path) -> None:
    """The seed example's page: the after-text is the pass's real output (one kInput fusion)."""
    text = _page_text(site / "pass-reference" / "fusion" / "index.html")
    after = text[text.index("After fusion"):]
    assert "kind=kInput" in after and "kind=kInput" not in text[text.index("Before"):text.index("After fusion")]


def _notebook_sources() -> list[Path]:
    return sorted((ROOT / "notebooks" / "src").glob("[0-9][0-9]_*.py"))


def test_one_tutorial_page_per_notebook(site: Path) -> None:
    sources = _notebook_sources()
    assert sources
    index = (site / "tutorials" / "index.html").read_text()
    for source in sources:
        page = site / "tutorials" / source.stem / "index.html"
        assert page.is_file(), f"no tutorial page for {source.name}"
        assert f'href="{source.stem}/"' in index
        content = page.read_text()
        assert f'href="../{source.stem}.ipynb"' in content, f"{source.stem}: no link to download the notebook"
        notebook = json.loads((site / "tutorials" / f"{source.stem}.ipynb").read_text())
        code_cells = [c for c in notebook["cells"] if c["cell_type"] == "code"]
        assert code_cells and notebook["nbformat"] == 4
        text = _page_text(page)
        for cell in code_cells:  # every code cell is on the page
            first_line = next(line for line in "".join(cell["source"]).splitlines() if line.strip())
            assert first_line in text, f"{source.stem}: code cell starting {first_line!r} is not on the page"
        assert 'class="nb-output"' in content, f"{source.stem}: the page shows no output of its cells"


def test_tutorial_pages_show_what_the_cells_printed_and_drew(site: Path) -> None:
    """The notebooks ran when the site was built: a printed module, a graph, the explorer."""
    fusion = (site / "tutorials" / "04_fusion" / "index.html").read_text()
    assert "kind=kLoop" in html.unescape(fusion) and "<iframe srcdoc=" in fusion  # a module printed, the explorer
    for stem in ("01_first_jit", "04_fusion", "05_llvm_ir_assembly_ptx", "07_dumps_and_bug_reproduction",
                 "09_autodiff_as_hlo"):
        page = (site / "tutorials" / stem / "index.html").read_text()
        assert "<iframe srcdoc=" in page or "<svg" in page, f"{stem}: no picture"


def test_cli_reference_lists_every_subcommand(site: Path) -> None:
    from xla_teach.tools.cli import SUBCOMMANDS, build_parser

    content = (site / "cli-reference" / "index.html").read_text()
    text = _page_text(site / "cli-reference" / "index.html")
    parser = build_parser()
    subparsers = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    assert set(SUBCOMMANDS) <= set(subparsers.choices)
    for name in SUBCOMMANDS:
        assert f'id="xla-teach-{name}"' in content, f"the CLI reference has no section for {name}"
        assert f"usage: xla-teach {name}" in text
        for action in subparsers.choices[name]._actions:  # every visible option is documented
            if action.option_strings and action.help != "==SUPPRESS==":
                assert action.option_strings[-1] in text, f"{name}: option {action.option_strings[-1]} missing"


def test_pass_page_without_graphviz_shows_dot_source(monkeypatch: pytest.MonkeyPatch) -> None:
    pass_pages = _load_hook("pass_pages")
    monkeypatch.setattr(pass_pages, "have_dot", lambda: False)
    entry = next(e for e in pass_pages.pipeline_passes() if e.name == "dce")
    page = pass_pages.pass_page(entry)
    assert "Graphviz is not installed" in page and "```dot\ndigraph" in page
    assert "XLATEACHGRAPH" not in page


def test_generated_page_never_hides_a_real_file(tmp_path: Path) -> None:
    hook_utils = _load_hook("hook_utils")
    from mkdocs.config.defaults import MkDocsConfig
    from mkdocs.exceptions import PluginError
    from mkdocs.structure.files import File, Files

    docs, site_dir = tmp_path / "docs", tmp_path / "site"
    docs.mkdir()
    (docs / "cli-reference.md").write_text("# by hand\n")
    config = MkDocsConfig()
    config.load_dict({"site_name": "t", "docs_dir": str(docs), "site_dir": str(site_dir)})
    assert not config.validate()[0]
    files = Files([File("cli-reference.md", str(docs), str(site_dir), True)])
    with pytest.raises(PluginError, match="exists"):
        hook_utils.add_generated_file(files, config, "cli-reference.md", "# generated\n", "test")


def test_docstring_literal_blocks_become_code_blocks() -> None:
    pass_pages = _load_hook("pass_pages")
    md = pass_pages.docstring_to_markdown(
        "Intro, see :func:`a.b`.\n\nBefore::\n\n    x = f32[] parameter(0)\n\n* item::\n\n      code\n")
    assert "``a.b``" in md and "Before:\n\n```text\nx = f32[] parameter(0)\n```" in md
    assert "* item:\n\n    ```text\n    code\n    ```" in md
    table = "Rules:\n\n====  =====\nrule  note\n====  =====\nx * 1 -> x  exact\n====  =====\n\nAfter.\n"
    assert "```text\n====  =====\nrule  note\n====  =====\nx * 1 -> x  exact\n====  =====\n```\n\n\nAfter." \
        in pass_pages.docstring_to_markdown(table)


def _load_hook(name: str):
    if not HAVE_MKDOCS:
        pytest.skip("mkdocs-material is not installed")
    hooks = str(DOCS / "hooks")
    if hooks not in sys.path:
        sys.path.insert(0, hooks)  # mkdocs does the same when it loads a hook
    return importlib.import_module(name)


def test_flags_page_is_generated_from_the_registry() -> None:
    from xla_teach.flags import flags_table_markdown

    page = (DOCS / "flags.md").read_text()
    assert flags_table_markdown() in page
    assert page == _load_flags_generator().render(), (
        "docs/flags.md is stale: run .venv/bin/python scripts/gen_flags_doc.py")


@pytest.mark.parametrize("page", EXAMPLE_PAGES)
def test_python_examples_in_docs_run(page: str) -> None:
    blocks = re.findall(r"^```python\n(.*?)^```", (DOCS / page).read_text(), flags=re.S | re.M)
    assert blocks, f"{page} has no python examples"
    namespace: dict[str, object] = {"__name__": f"docs_{page}"}
    for i, block in enumerate(blocks):
        try:
            exec(compile(block, f"{page} example {i + 1}", "exec"), namespace)  # noqa: S102 - our own docs
        except Exception as err:  # pragma: no cover - the message is the point
            pytest.fail(f"{page}, python example {i + 1} failed: {type(err).__name__}: {err}\n{block}")


def test_architecture_folder_map_names_existing_paths() -> None:
    text = (DOCS / "architecture.md").read_text()
    paths = set(re.findall(r"`((?:xla_teach|tests|scripts|examples|benchmarks|notebooks|docs)/[^`\s]*)`", text))
    assert paths, "the folder map names no paths"
    missing = sorted(p for p in paths if not (ROOT / p).exists())
    assert not missing, f"docs/architecture.md names paths that do not exist: {missing}"


def test_architecture_folder_map_lists_every_top_level_folder() -> None:
    folder_map = (DOCS / "architecture.md").read_text().split("## Folder map", 1)[1]
    listed = set(re.findall(r"^\| `([^`]+)` \|", folder_map, flags=re.M))
    packages = [f"xla_teach/{d.name}/" for d in (ROOT / "xla_teach").iterdir() if (d / "__init__.py").is_file()]
    expected = {*packages, "tests/", "scripts/", "examples/", "benchmarks/", "notebooks/", "docs/"}
    missing = sorted(d for d in expected if not any(path.startswith(d) for path in listed))  # or its subfolders
    assert not missing, f"the folder map in docs/architecture.md misses {missing}"


def test_the_architecture_page_draws_the_house_from_the_code(site: Path) -> None:
    """Every floor of xla_teach/tools/house.py is a box, and every arrow carries the number of
    imports counted in the code now."""
    from xla_teach.tools.house import FLOOR_NAMES, floor_edges

    page = (site / "architecture" / "index.html").read_text()
    assert "<!-- the house, generated -->" not in page
    # drawn at build time, inline: nothing for a browser to fetch, so it shows offline too
    assert "mermaid" not in page and page.count('<div class="diagram">') == 2
    for number, name in FLOOR_NAMES.items():
        assert f"{number}: {name}" in page.replace("&amp;", "&")
    edges = {m.group(1): m.group(2) for m in re.finditer(
        r'<title>(F\d+&#45;&gt;F\d+)</title>.*?<text[^>]*>(\d+)</text>', page, re.S)}
    for (source, target), count in floor_edges().items():
        assert edges.get(f"F{source}&#45;&gt;F{target}") == str(count), (source, target)


def test_the_passes_page_prints_each_pipeline_from_the_code(site: Path) -> None:
    """docs/passes.md shows the CPU and GPU pipelines as the code builds them, in order."""
    from xla_teach.backends.cpu.cpu_pipeline import cpu_pipeline
    from xla_teach.backends.gpu.gpu_pipeline import gpu_pipeline

    page = html.unescape((site / "passes" / "index.html").read_text())
    text = re.sub(r"<[^>]+>", "", page)
    for pipeline in (cpu_pipeline(), gpu_pipeline()):
        assert pipeline.describe() in text
    assert "pipeline, generated" not in text


def test_the_tutorials_index_gives_every_chapter_a_sentence() -> None:
    import importlib.util

    hooks = Path(__file__).resolve().parents[1] / "docs" / "hooks"
    sys.path.insert(0, str(hooks))
    try:
        spec = importlib.util.spec_from_file_location("tutorials_hook", hooks / "tutorials.py")
        assert spec is not None and spec.loader is not None
        tutorials = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(tutorials)
        builder = tutorials._script("build_notebooks")
        for source in builder.sources():
            cells = builder.parse_percent_source(source.read_text(), source.name)
            line = tutorials.first_line(cells[0].source)
            assert line.endswith(".") and len(line) > 25 and "```" not in line, (source.name, line)
    finally:
        sys.path.remove(str(hooks))


def test_the_built_site_loads_nothing_from_the_network_and_names_no_build_folder(site: Path) -> None:
    """Offline: no page loads a script, stylesheet or font from another host; and no page shows a
    folder of the machine that built it (the checkout, a home, the notebooks' run folders)."""
    loads = re.compile(r"<(?:script|link|img|iframe)\b[^>]*(?:src|href)=[\"']https?://|@import\s+url\([\"']?https?://|"
                       r"fonts\.googleapis|fonts\.gstatic")
    machine = re.compile(r"/work/|/root/|/home/\w+/|/tmp/xla_teach_nb_")
    problems = []
    for page in sorted(site.rglob("*.html")) + sorted(site.rglob("*.css")):
        text = page.read_text(errors="replace")
        problems += [f"{page.relative_to(site)}: loads {m.group(0)[:80]}" for m in loads.finditer(text)]
        problems += [f"{page.relative_to(site)}: names {m.group(0)}" for m in machine.finditer(html.unescape(text))][:3]
    assert not problems, "\n".join(problems[:20])
