"""How the compile explorer scales: page size, time to write the page, time to the first picture in
headless Chromium (1600x1000) and the smallest label on screen, for GPT training steps
(examples/models.py) of about 1,000, 5,000 and 11,000 instructions.

    python benchmarks/explorer_scale.py [LAYERS ...]      # default: 2 12 24

"First picture" is ``performance.now()`` when the page has drawn the module graph (parsing the
page's JSON, grouping by op_name scope, choosing what fits -- several dagre layouts -- and the
SVG); "layout" is dagre's part for the picture shown. Needs Chromium and chromedriver (the README's
set-up installs them).
"""

from __future__ import annotations

import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import xla_teach as xt  # noqa: E402
from benchmarks.common import machine  # noqa: E402
from examples.models import gpt_step  # noqa: E402

LABELS = """const pane = document.getElementById('graph').getBoundingClientRect();
return [...document.querySelectorAll('#graph > svg text')].map(t => t.getBoundingClientRect())
  .filter(r => r.width > 0 && r.bottom > pane.top && r.top < pane.bottom && r.right > pane.left && r.left < pane.right)
  .map(r => r.height);"""


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
          f"{'layout ms':>9} {'boxes':>6} {'smallest label px':>17}")
    driver = browser()
    try:
        with tempfile.TemporaryDirectory() as folder:
            for layers in layer_counts:
                step, args = gpt_step(layers=layers)
                compiled = xt.jit(step).lower(*args).compile()
                module = compiled.executable.module
                started = time.perf_counter()
                path = compiled.explore(str(Path(folder) / f"gpt{layers}.html")).path
                write = time.perf_counter() - started
                first, layout = [], []
                for _ in range(3):
                    driver.get(path.as_uri())
                    timings = driver.execute_script("return window.explorerTimings")
                    first.append(timings["firstPictureMs"])
                    layout.append(timings["layoutMs"])
                boxes = driver.execute_script(
                    "return document.querySelectorAll('#graph > svg g.node, #graph > svg g.scope-box').length")
                smallest = min(driver.execute_script(LABELS))
                print(f"{layers:>6} {module.instruction_count():>12} {len(module.entry.instructions):>6} "
                      f"{path.stat().st_size / 2**20:>8.1f} {write:>8.1f} {statistics.median(first):>16.0f} "
                      f"{statistics.median(layout):>9.0f} {boxes:>6} {smallest:>17.1f}", flush=True)
    finally:
        driver.quit()


if __name__ == "__main__":
    main([int(a) for a in sys.argv[1:]] or [2, 12, 24])
