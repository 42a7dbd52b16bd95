"""The documentation: the site builds with ``mkdocs build --strict`` (no broken links, no
missing pages), the generated flags page is current, the code examples in the pages run,
and the folder map names only paths that exist."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
DOCS = ROOT / "docs"
# Pages whose ```python blocks are runnable examples (each page's blocks run in order, sharing names).
EXAMPLE_PAGES = ["index.md", "ir.md", "hlo-text-format.md", "public-api.md"]


def _load_flags_generator():
    spec = importlib.util.spec_from_file_location("gen_flags_doc", ROOT / "scripts" / "gen_flags_doc.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.skipif(importlib.util.find_spec("mkdocs") is None or importlib.util.find_spec("material") is None,
                    reason="mkdocs-material is not installed (pip install -e '.[test]')")
def test_mkdocs_build_strict(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(ROOT / "mkdocs.yml"),
         "--site-dir", str(tmp_path / "site")],
        cwd=ROOT, capture_output=True, text=True, timeout=300, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert result.returncode == 0, f"mkdocs build --strict failed:\n{result.stdout}\n{result.stderr}"
    assert (tmp_path / "site" / "index.html").is_file()


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
    paths = set(re.findall(r"`((?:xla_teach|tests|scripts)/[^`\s]*)`", text))
    assert paths, "the folder map names no paths"
    missing = sorted(p for p in paths if not (ROOT / p).exists())
    assert not missing, f"docs/architecture.md names paths that do not exist: {missing}"
