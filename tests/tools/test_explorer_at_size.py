"""The compile explorer on programs of a real model's size (examples/models.py: a GPT training step,
a CIFAR-shaped CNN step with RMSprop, an LSTM over a scan with Adam), in headless Chromium at
1600x1000: every label of the first picture and of every picture after a click is at least 11 CSS
pixels high, measured from the rendered text boxes; the parameters are gathered; expand all,
collapse all, focus and the minimap work; no script error."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import xla_teach as xt
from tests.tools.conftest import console_errors

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from examples.models import MODELS  # noqa: E402

# Text in the picture itself (not the minimap, which has none), inside the pane, and its height.
LABEL_HEIGHTS = """
const pane = document.getElementById('graph').getBoundingClientRect();
return [...document.querySelectorAll('#graph > svg text')].map(t => [t.textContent, t.getBoundingClientRect()])
  .filter(([, r]) => r.width > 0 && r.bottom > pane.top && r.top < pane.bottom && r.right > pane.left && r.left < pane.right)
  .map(([text, r]) => [text, r.height]);
"""
CLICK = "arguments[0].dispatchEvent(new MouseEvent('click', {bubbles: true}))"


def assert_legible(driver, what: str) -> int:  # type: ignore[no-untyped-def]
    labels = driver.execute_script(LABEL_HEIGHTS)
    assert labels, f"{what}: no label on screen"
    small = [(text, round(h, 1)) for text, h in labels if h < 11]
    assert not small, f"{what}: labels under 11 px: {small[:5]}"
    return len(labels)


@pytest.fixture(scope="module")
def pages(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, int]]:
    folder = tmp_path_factory.mktemp("explorer_at_size")
    out = {}
    for name, make in MODELS.items():
        step, args = make()
        compiled = xt.jit(step).lower(*args).compile()
        out[name] = (compiled.explore(str(folder / f"{name}.html")).path, compiled.executable.module.instruction_count())
    return out


@pytest.mark.slow
@pytest.mark.parametrize("name", list(MODELS))
def test_every_picture_of_a_model_size_program_is_legible(browser, pages, name: str) -> None:  # type: ignore[no-untyped-def]
    from selenium.webdriver.common.by import By

    path, instructions = pages[name]
    assert instructions >= 500, f"{name}: {instructions} instructions, not a model-size program"
    browser.get(path.as_uri())
    assert_legible(browser, f"{name}: first picture")
    boxes = browser.execute_script("return document.querySelectorAll('#graph > svg g.node, #graph > svg g.scope-box').length")
    assert 3 <= boxes <= 80, f"{name}: {boxes} boxes in the first picture"
    params = browser.execute_script("return document.querySelector('#graph > svg g.scope-box[data-group=\"g:#parameters\"]').textContent")
    assert "parameters" in params and "the program's inputs" in params

    # Open the largest closed group, as a reader would: still legible, more boxes.
    closed = browser.execute_script(
        "return [...document.querySelectorAll('#graph > svg g.scope-box')].map(b => [b.dataset.group, [...b.querySelectorAll('text')].pop().textContent])")
    target = max(closed, key=lambda g: int(g[1].split()[-2]) if g[1].split()[-1] == "instructions" else 0)[0]
    browser.execute_script(CLICK, browser.find_element(By.CSS_SELECTOR, f'#graph > svg g.scope-box[data-group="{target}"]'))
    assert browser.execute_script(f"return !!document.querySelector('#graph > svg g.cluster[data-group=\"{target}\"]')")
    assert_legible(browser, f"{name}: {target} opened")

    # Expand all: as much as stays readable, the rest said in the caption; the minimap shows where we are.
    browser.find_element(By.CSS_SELECTOR, "#graph .tools button[data-act=expand]").click()
    assert_legible(browser, f"{name}: expand all")
    expanded = browser.execute_script("return document.querySelectorAll('#graph > svg g.node').length")
    assert expanded > boxes
    minimap = browser.execute_script("const m = document.querySelector('#graph .minimap'); return m && !m.classList.contains('hidden')")
    assert minimap, f"{name}: a picture larger than the pane has a minimap"
    assert not browser.execute_script("return document.querySelectorAll('#graph .minimap text, #graph .minimap [data-name]').length")

    # Select an instruction, focus on its group: only that group is drawn, then the whole module again.
    node = browser.find_element(By.CSS_SELECTOR, "#graph > svg g.node[data-name]")
    browser.execute_script(CLICK, node)
    focus = browser.find_elements(By.CSS_SELECTOR, "#graph .tools button[data-act=focus]")
    if focus:
        focus[0].click()
        assert "focused on" in browser.find_element(By.CSS_SELECTOR, "#graph .caption").text
        assert_legible(browser, f"{name}: focused")
        browser.find_element(By.CSS_SELECTOR, "#graph .tools button[data-act=unfocus]").click()
    browser.find_element(By.CSS_SELECTOR, "#graph .tools button[data-act=collapse]").click()
    assert_legible(browser, f"{name}: collapse all")
    assert browser.execute_script("return document.querySelectorAll('#graph > svg g.node').length") <= 8

    # The fit key never shrinks a picture below readable; nor does zooming out.
    body = browser.find_element(By.TAG_NAME, "body")
    body.send_keys("f")
    for _ in range(10):
        body.send_keys("-")
    assert_legible(browser, f"{name}: zoomed out")
    # A pass's picture and the memory view: legible too.
    body.send_keys("j")
    assert_legible(browser, f"{name}: first pass") if browser.find_elements(By.CSS_SELECTOR, "#graph > svg text") else None
    body.send_keys("m")
    assert_legible(browser, f"{name}: memory")
    assert console_errors(browser) == []
    browser.save_screenshot(str(path.with_suffix(".png")))


@pytest.mark.slow
def test_the_kernel_panel_holds_the_loops_and_the_library_call_with_the_instruction_s_lines_marked(browser, pages):  # type: ignore[no-untyped-def]
    """The panel's kernel code is the body that runs, not the wrapper that calls it: a fused
    instruction's panel shows its fusion's kernel with the ``.wrapped`` loops and marks the
    instruction's own lines; a convolution's shows the runtime-library function it calls."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.wait import WebDriverWait

    def select(name: str) -> list[str]:
        search = browser.find_element(By.ID, "search")
        search.clear()
        search.send_keys(name)
        search.send_keys(Keys.ENTER)
        WebDriverWait(browser, 5).until(lambda d: d.find_elements(By.CSS_SELECTOR, "#details .code details"))
        return browser.execute_script("return [...document.querySelectorAll('#details .code summary')].map(s => s.textContent)")

    browser.get(pages["gpt"][0].as_uri())
    fused = browser.execute_script(
        "const d = JSON.parse(document.getElementById('data').textContent);"
        "return Object.keys(d.instructions).find(n => ['subtract', 'multiply'].includes(d.instructions[n].opcode) &&"
        " d.instructions[n].fusion && d.instructions[d.instructions[n].fusion].fusion_kind === 'kLoop' &&"
        " d.instructions[d.instructions[n].fusion].kernel)")
    titles = select(fused)
    assert titles[:3] == [t + " of " + titles[0].split(" of ")[1] for t in ("LLVM IR", "LLVM IR, optimized", "assembly")]
    ir = browser.execute_script("return document.querySelector('#details .code pre').textContent")
    assert ".wrapped" in ir and " phi " in ir, "the loops of the .wrapped function are in the panel"
    marked = browser.execute_script("return [...document.querySelectorAll('#details mark.own')].map(m => m.textContent)")
    assert marked and all(f'%"{fused}' in line for line in marked)

    browser.get(pages["cnn"][0].as_uri())
    convolution = browser.execute_script(
        "const d = JSON.parse(document.getElementById('data').textContent);"
        "return Object.keys(d.instructions).find(n => d.instructions[n].opcode === 'convolution' && d.instructions[n].kernel)")
    titles = select(convolution)
    assert any(t.startswith("runtime library: xla_teach_conv") for t in titles), titles
    assert console_errors(browser) == []
