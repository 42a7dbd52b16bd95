"""How the compile explorer scales: file size, time to write the page and time to the first picture
in headless Chromium, for residual MLP training steps of 1,000 to 2,700 instructions.

    python benchmarks/explorer_scale.py [LAYERS ...]      # default: 4 12

"First picture" is ``performance.now()`` when the page has drawn the module graph (parsing the
page's JSON, grouping by op_name scope, dagre's layout of the open groups, the SVG); "layout" is
dagre's part. Needs Chromium and chromedriver (the README's set-up installs them).
"""

from __future__ import annotations

import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import machine  # noqa: E402
from tests.tools.test_explorer import deep_mlp_compiled  # noqa: E402


def browser():  # type: ignore[no-untyped-def]
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or "/usr/bin/chromium"
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1600,1000"):
        options.add_argument(argument)
    return webdriver.Chrome(service=Service(shutil.which("chromedriver")), options=options)


def main(layer_counts: list[int]) -> None:
    print(machine())
    print(f"{'layers':>6} {'instructions':>12} {'entry':>6} {'page MiB':>8} {'write s':>8} {'first picture ms':>16} "
          f"{'layout ms':>9} {'boxes':>6}")
    driver = browser()
    try:
        with tempfile.TemporaryDirectory() as folder:
            for layers in layer_counts:
                compiled = deep_mlp_compiled(layers)
                module = compiled.executable.module
                started = time.perf_counter()
                path = compiled.explore(str(Path(folder) / f"deep{layers}.html")).path
                write = time.perf_counter() - started
                first, layout = [], []
                for _ in range(3):
                    driver.get(path.as_uri())
                    timings = driver.execute_script("return window.explorerTimings")
                    first.append(timings["firstPictureMs"])
                    layout.append(timings["layoutMs"])
                boxes = driver.execute_script(
                    "return document.querySelectorAll('#graph g.node, #graph g.scope-box').length")
                print(f"{layers:>6} {module.instruction_count():>12} {len(module.entry.instructions):>6} "
                      f"{path.stat().st_size / 2**20:>8.1f} {write:>8.1f} {statistics.median(first):>16.0f} "
                      f"{statistics.median(layout):>9.0f} {boxes:>6}")
    finally:
        driver.quit()


if __name__ == "__main__":
    main([int(a) for a in sys.argv[1:]] or [4, 12])
