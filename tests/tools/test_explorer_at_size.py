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
# Every visible label's contrast with what is behind it (WCAG 2): an SVG text against the shape
# of its own group (a box, a bar) or else the group frame around it or the white page; an HTML
# text against the first ancestor with a background. Returns the labels under 4.5:1.
LOW_CONTRAST = """
const lum = (css) => { const [r, g, b] = (css.match(/[\\d.]+/g) || [0, 0, 0]).slice(0, 3).map(v => { const c = Number(v) / 255;
  return c <= 0.03928 ? c / 12.92 : Math.pow((c + 0.055) / 1.055, 2.4); }); return 0.2126 * r + 0.7152 * g + 0.0722 * b; };
const ratio = (a, b) => { const [x, y] = [lum(a), lum(b)].sort((p, q) => q - p); return (x + 0.05) / (y + 0.05); };
const opaque = (css) => css && css !== 'none' && !/rgba\\(.*,\\s*0\\)$/.test(css) && css !== 'transparent';
const visible = (el) => { const r = el.getBoundingClientRect(); return r.width > 0 && r.height > 0 && r.bottom > 0 &&
  r.top < innerHeight && r.right > 0 && r.left < innerWidth && getComputedStyle(el).visibility !== 'hidden'; };
const low = [];
for (const t of document.querySelectorAll('#graph > svg text')) {
  if (!visible(t)) continue;
  let back = 'rgb(255, 255, 255)';
  const shape = t.parentNode.tagName === 'g' ? t.parentNode.querySelector('polygon, ellipse, rect:not(.category):not(.split)') : null;
  if (shape && opaque(getComputedStyle(shape).fill)) back = getComputedStyle(shape).fill;
  else { const frame = t.closest('g.cluster'); if (frame) back = getComputedStyle(frame.querySelector('rect')).fill; }
  const r = ratio(getComputedStyle(t).fill, back);
  if (r < 4.5) low.push([t.textContent, getComputedStyle(t).fill, back, r]);
}
for (const el of document.querySelectorAll('header, header *, #passes *, #details *, #graph .caption, #graph .legend span, #graph .tools button')) {
  if (!visible(el) || ![...el.childNodes].some(n => n.nodeType === 3 && n.textContent.trim())) continue;
  let a = el, back = null;
  while (a && !back) { const c = getComputedStyle(a).backgroundColor; if (opaque(c)) back = c; a = a.parentElement; }
  const r = ratio(getComputedStyle(el).color, back || 'rgb(255, 255, 255)');
  if (r < 4.5) low.push([el.textContent.slice(0, 40), getComputedStyle(el).color, back, r]);
}
return low;
"""


def assert_legible(driver, what: str) -> int:  # type: ignore[no-untyped-def]
    labels = driver.execute_script(LABEL_HEIGHTS)
    assert labels, f"{what}: no label on screen"
    small = [(text, round(h, 1)) for text, h in labels if h < 11]
    assert not small, f"{what}: labels under 11 px: {small[:5]}"
    return len(labels)


@pytest.fixture(scope="module")
def pages(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, int, bool]]:
    """The three programs' explorer pages (the GPT's and the LSTM's with a profile: heat colours,
    loop times to check)."""
    folder = tmp_path_factory.mktemp("explorer_at_size")
    out = {}
    for name, make in MODELS.items():
        step, args = make()
        compiled = xt.jit(step).lower(*args).compile()
        runs = 2 if name in ("gpt", "rnn") else 0
        page = compiled.explore(str(folder / f"{name}.html"), profile_runs=runs).path
        out[name] = (page, compiled.executable.module.instruction_count(), runs > 0)
    return out


@pytest.mark.slow
@pytest.mark.parametrize("name", list(MODELS))
def test_every_picture_of_a_model_size_program_is_legible(browser, pages, name: str) -> None:  # type: ignore[no-untyped-def]
    from selenium.webdriver.common.by import By

    path, instructions, profiled = pages[name]
    assert instructions >= 500, f"{name}: {instructions} instructions, not a model-size program"
    browser.get(path.as_uri())
    assert_legible(browser, f"{name}: first picture")
    assert browser.execute_script(LOW_CONTRAST) == [], f"{name}: labels under 4.5:1 contrast"
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
    assert browser.execute_script(LOW_CONTRAST) == [], f"{name}: memory view"
    if profiled:  # heat keeps the labels readable: black or white text, the category in a band
        body.send_keys("0")
        body.send_keys("h")
        assert browser.execute_script("return document.querySelectorAll('#graph > svg rect.category').length") > 0
        assert browser.execute_script(LOW_CONTRAST) == [], f"{name}: heat"
        browser.execute_script(  # a pass that drew a picture of its change
            "const d = JSON.parse(document.getElementById('data').textContent);"
            "document.querySelector('#pass-list li[data-index=\"' + d.passes.findIndex(p => p.sides) + '\"]').click()")
        assert browser.execute_script("return document.querySelector('#graph > svg').classList.contains('pass-sides')")
        assert not browser.execute_script("return document.querySelectorAll('#graph > svg rect.category, #graph > svg "
                                          "[style*=fill]').length"), "a pass's picture shows no times of the optimized module"
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


@pytest.mark.slow
def test_keys_history_and_links_behave(browser, pages):  # type: ignore[no-untyped-def]
    """After Enter in the search box the keys are shortcuts again; 0 leaves the pass; Back steps
    through what the reader visited without leaving the page; only real names become links."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    path = pages["rnn"][0]
    browser.get(path.as_uri())
    body = browser.find_element(By.TAG_NAME, "body")
    search = browser.find_element(By.ID, "search")
    search.send_keys("dot")
    search.send_keys(Keys.ENTER)
    selected = browser.find_element(By.CSS_SELECTOR, "#details h2").text.split()[0]
    body.send_keys("j")
    assert search.get_attribute("value") == "dot", "j went to the pass list, not into the search box"
    assert browser.find_elements(By.CSS_SELECTOR, "#passes li.current")
    first_pass = browser.find_element(By.CSS_SELECTOR, "#passes li.current").get_attribute("data-index")
    body.send_keys("j")
    body.send_keys("0")
    assert not browser.find_elements(By.CSS_SELECTOR, "#passes li.current"), "0 leaves the pass"
    assert "pass runs" in browser.find_element(By.ID, "details").text
    browser.back()  # the second pass
    browser.back()  # the first pass
    assert browser.current_url.startswith(path.as_uri())
    assert browser.find_element(By.CSS_SELECTOR, "#passes li.current").get_attribute("data-index") == first_pass
    browser.back()  # the instruction found by search
    assert browser.find_element(By.CSS_SELECTOR, "#details h2").text.split()[0] == selected
    # Notes: a word that is also an instruction's name ("while", "tuple") is not a link.
    links = browser.execute_script(
        "const d = JSON.parse(document.getElementById('data').textContent);"
        "const i = d.passes.findIndex(p => p.name === 'fusion');"
        "document.querySelector('#pass-list li[data-index=\"' + i + '\"]').click();"
        "return [...document.querySelectorAll('#details .notes a[data-name]')].map(a => a.dataset.name)")
    assert links and all(any(c in name for c in "0123456789._-") for name in links)
    assert console_errors(browser) == []


@pytest.mark.slow
def test_the_dump_index_tells_two_jit_step_modules_apart_without_overlapping_text(browser, tmp_path):  # type: ignore[no-untyped-def]
    """Two training steps both called jit_step dumped into one folder: the index's rows give each
    its source line, sizes, kernels and peak memory, and no two pieces of text overlap."""
    from xla_teach import flags

    with flags.override(xla_dump_to=str(tmp_path)):
        for name in ("rnn", "cnn"):
            step, args = MODELS[name]()
            xt.jit(step).lower(*args).compile()
    browser.get((tmp_path / "index.html").as_uri())
    rows = browser.execute_script("return [...document.querySelector('table').querySelectorAll('tbody tr')].map(r => r.innerText)")
    assert len(rows) == 2 and all("jit_step" in r for r in rows)
    assert "examples/models.py" in rows[0] and rows[0] != rows[1]
    overlaps = browser.execute_script("""
        const boxes = [...document.querySelectorAll('td, th, td *')].filter(e => e.children.length === 0 && e.textContent.trim() && (!e.checkVisibility || e.checkVisibility()))
          .map(e => [e.textContent.trim().slice(0, 30), e.getBoundingClientRect()]).filter(([, r]) => r.width > 0);
        const out = [];
        for (let i = 0; i < boxes.length; i++) for (let j = i + 1; j < boxes.length; j++) {
          const [a, r] = boxes[i], [b, q] = boxes[j];
          if (r.left < q.right - 1 && q.left < r.right - 1 && r.top < q.bottom - 1 && q.top < r.bottom - 1) out.push([a, b]);
        }
        return out;""")
    assert overlaps == []
    browser.save_screenshot(str(tmp_path / "index.png"))


@pytest.mark.slow
def test_a_pass_shows_before_and_after_side_by_side_and_the_scheduler_its_order(browser, pages):  # type: ignore[no-untyped-def]
    """A changed pass is drawn before and after in the module graph's own look, what it touched
    outlined on both sides, one selection on both; the scheduler shows the order it chose; a
    note's name that fusion absorbed links to what holds it now."""
    from selenium.webdriver.common.by import By

    browser.get(pages["gpt"][0].as_uri())

    def open_pass(name: str) -> None:
        browser.execute_script(
            "const d = JSON.parse(document.getElementById('data').textContent);"
            "const i = d.passes.findIndex(p => p.name === arguments[0] && p.changed);"
            "document.querySelector('#pass-list li[data-index=\"' + i + '\"]').click()", name)

    open_pass("fusion")
    sides = browser.execute_script("return [...document.querySelectorAll('#graph > svg text.side-title')].map(t => t.textContent)")
    assert sides == ["before fusion", "after fusion"]
    assert_legible(browser, "fusion's before and after")
    assert browser.execute_script(LOW_CONTRAST) == []
    # A fused instruction is outlined on the left, its fusion on the right; one drawn on both sides
    # (an operand of the change) is selected on both at once.
    names = browser.execute_script(
        "const sides = [...document.querySelectorAll('#graph > svg > svg')];"
        "const at = (k) => new Set([...sides[k].querySelectorAll('g.node[data-name]')].map(n => n.dataset.name));"
        "const left = at(0), right = at(1); return [...left].filter(n => right.has(n))")
    assert names, "some instruction appears before and after"
    browser.execute_script(CLICK, browser.find_element(By.CSS_SELECTOR, f'#graph g.node[data-name="{names[0]}"]'))
    assert browser.execute_script("return document.querySelectorAll('#graph g.node.selected').length") == 2
    assert browser.execute_script("return document.querySelectorAll('#graph > svg > svg')[0].querySelectorAll('g.node.touched').length")
    assert browser.execute_script("return document.querySelectorAll('#graph > svg > svg')[1].querySelectorAll('g.node.touched').length")
    # A fused member in the pass's list links; its panel names the fusion that holds it now.
    open_pass("fusion")
    member = browser.execute_script("const a = [...document.querySelectorAll('#details li.fused a[data-name]')]"
                                    ".find(a => a !== a.parentNode.firstElementChild); return a && a.dataset.name")
    assert member
    browser.execute_script(CLICK, browser.find_element(By.CSS_SELECTOR, f'#details li.fused a[data-name="{member}"]'))
    panel = browser.find_element(By.ID, "details").text
    assert "fused into what is now" in panel or member in browser.execute_script(
        "return Object.keys(JSON.parse(document.getElementById('data').textContent).instructions)")

    open_pass("hlo-memory-scheduler")
    assert browser.execute_script("return document.querySelector('#graph > svg').classList.contains('order')")
    assert "moved" in browser.find_element(By.ID, "details").text
    assert_legible(browser, "the scheduler's order")
    assert console_errors(browser) == []


@pytest.mark.slow
def test_a_loop_opens_in_place_with_its_trip_count_and_its_time_counted_once(browser, pages):  # type: ignore[no-untyped-def]
    """The LSTM's scan is a while loop: it opens into its body and condition like a fusion, shows
    the trip count known when compiling and the time per iteration measured; the profile counts a
    loop's kernels once (the thunks add up to no more than the run); memory names loop state."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    browser.get(pages["rnn"][0].as_uri())
    loop = browser.execute_script("const d = JSON.parse(document.getElementById('data').textContent);"
                                  "return Object.keys(d.instructions).find(n => d.instructions[n].opcode === 'while')")
    search = browser.find_element(By.ID, "search")
    search.send_keys(loop)
    search.send_keys(Keys.ENTER)
    panel = browser.find_element(By.ID, "details").text
    assert "32 (known when compiled" in panel and "32 measured" in panel and "per iteration" in panel
    browser.find_element(By.CSS_SELECTOR, "#details a[data-open-fusion]").click()
    titles = browser.execute_script("return [...document.querySelectorAll('#graph > svg g.cluster[data-fusion] > text')]"
                                    ".map(t => t.lastChild.textContent)")
    assert f"body of {loop} (\u00d732)" in titles and f"condition of {loop}" in titles
    body = browser.execute_script(
        "const d = JSON.parse(document.getElementById('data').textContent); const part = d.instructions[arguments[0]].called[0];"
        "return part.members.filter(m => document.querySelector('#graph g.node[data-name=\"' + m + '\"]')).length", loop)
    assert body >= 5
    assert_legible(browser, "an opened loop")
    browser.find_element(By.TAG_NAME, "body").send_keys("p")
    sums = browser.execute_script("const p = JSON.parse(document.getElementById('data').textContent).profile;"
                                  "const own = Object.values(p.thunks).filter(t => !t.nested).reduce((s, t) => s + t.us, 0);"
                                  "return [own, p.run_us]")
    assert sums[0] <= sums[1] * 1.001, sums
    assert "iterations" in browser.find_element(By.ID, "details").text
    browser.find_element(By.TAG_NAME, "body").send_keys("m")
    labels = browser.execute_script("return [...document.querySelectorAll('#graph > svg text')].map(t => t.textContent)")
    assert any(": state element" in label for label in labels)
    assert console_errors(browser) == []


@pytest.mark.slow
def test_the_simplifier_and_fusion_are_stepped_rewrite_by_rewrite(browser, pages):  # type: ignore[no-untyped-def]
    """A pass that records its rewrites shows them one at a time: the rule, where its code is and the
    code itself, the lines before and after, and the rewrite's own before/after in the middle; ] and
    [ step through them."""
    from selenium.webdriver.common.by import By

    browser.get(pages["cnn"][0].as_uri())
    for name in ("algsimp", "fusion"):
        browser.execute_script(
            "const d = JSON.parse(document.getElementById('data').textContent);"
            "const i = d.passes.findIndex(p => p.name === arguments[0] && p.steps.length);"
            "document.querySelector('#pass-list li[data-index=\"' + i + '\"]').click()", name)
        assert "step through its" in browser.find_element(By.ID, "step").text  # the pass as a whole first
        browser.find_element(By.TAG_NAME, "body").send_keys("]")
        step = browser.find_element(By.ID, "step").text
        assert step.startswith("rewrite 1 of ") and ".py:" in step, step
        assert browser.execute_script("return document.querySelector('#step details pre').textContent").lstrip().startswith(
            ("@rule(", "def fusion_decision"))
        caption = browser.find_element(By.CSS_SELECTOR, "#graph .caption").text
        assert caption.startswith(f"{name}, rewrite 1 of ")
        assert browser.execute_script("return document.querySelectorAll('#graph g.node.touched').length") >= 1
        browser.find_element(By.TAG_NAME, "body").send_keys("]")
        assert browser.find_element(By.ID, "step").text.startswith("rewrite 2 of ")
        assert f"{name}, rewrite 2 of " in browser.find_element(By.CSS_SELECTOR, "#graph .caption").text
        assert_legible(browser, f"{name}'s second rewrite")
    assert console_errors(browser) == []


@pytest.mark.slow
def test_the_memory_view_draws_buffers_by_address_and_size_with_axes(browser, pages):  # type: ignore[no-untyped-def]
    """Each buffer is a rectangle over its live range at its offset in its allocation, as tall as its
    bytes (one scale per allocation); the chart above has a byte axis and a step axis."""
    from selenium.webdriver.common.by import By

    browser.get(pages["cnn"][0].as_uri())
    browser.find_element(By.TAG_NAME, "body").send_keys("m")
    rects = browser.execute_script("""
        const m = JSON.parse(document.getElementById('data').textContent).memory;
        return [...document.querySelectorAll('#graph > svg g.buffer')].map(g => {
          const r = g.querySelector('rect'); const b = m.buffers[Number(g.dataset.buffer)];
          return [b.allocation, b.size, b.offset, Number(r.getAttribute('height')), Number(r.getAttribute('y'))]; });""")
    assert len(rects) > 20
    by_allocation: dict[int, list[list[float]]] = {}
    for allocation, size, offset, height, y in rects:
        by_allocation.setdefault(allocation, []).append([size, offset, height, y])
    arena = max(by_allocation.values(), key=len)  # the temporaries' arena: many buffers share it
    scale = [h / size for size, _, h, _ in arena if h > 3]
    assert max(scale) / min(scale) < 1.01, "heights follow bytes"
    top = min(y - offset * scale[0] for size, offset, h, y in arena if h > 3)
    assert all(abs(y - (top + offset * scale[0])) < 1 for size, offset, h, y in arena if h > 3), "y follows the offset"
    texts = browser.execute_script("return [...document.querySelectorAll('#graph > svg > text')].map(t => t.textContent)")
    assert "0 B" in texts and "step" in texts and any(t.endswith("MiB") for t in texts)
    assert console_errors(browser) == []


# The timeline's tick labels in µs, its tracks, and its labels' heights and contrast with their bars.
TIMELINE = """
const us = (t) => t.endsWith(' ms') ? parseFloat(t) * 1000 : parseFloat(t);
const svg = document.querySelector('#graph .timeline svg');
const lum = (css) => { const [r, g, b] = (css.match(/[\\d.]+/g) || [0, 0, 0]).slice(0, 3).map(v => { const c = Number(v) / 255;
  return c <= 0.03928 ? c / 12.92 : Math.pow((c + 0.055) / 1.055, 2.4); }); return 0.2126 * r + 0.7152 * g + 0.0722 * b; };
const ratio = (a, b) => { const [x, y] = [lum(a), lum(b)].sort((p, q) => q - p); return (x + 0.05) / (y + 0.05); };
const texts = [...svg.querySelectorAll('text')].filter(t => t.getBoundingClientRect().width > 0);
return {
  ticks: [...svg.querySelectorAll('g.axis text')].map(t => us(t.textContent)),
  tickX: [...svg.querySelectorAll('g.axis text')].map(t => Number(t.getAttribute('x'))),
  tracks: [...svg.querySelectorAll('text.track')].map(t => t.textContent),
  smallest: Math.min(...texts.map(t => t.getBoundingClientRect().height)),
  low: texts.map(t => { const bar = t.parentNode.querySelector('rect');
    return [t.textContent, ratio(getComputedStyle(t).fill, bar && t.parentNode.tagName === 'g' && t.parentNode.classList.length ? getComputedStyle(bar).fill : 'rgb(255, 255, 255)')]; })
    .filter(([, r]) => r < 4.5),
  runs: [...svg.querySelectorAll('g.run text')].map(t => t.textContent),
  which: document.querySelector('#graph .timeline-tools .which').textContent,
};
"""


@pytest.mark.slow
def test_the_timeline_zooms_and_pans_along_time_over_every_run_with_nested_tracks_and_pool_lanes(browser, pages):  # type: ignore[no-untyped-def]
    """The profile's timeline: a time axis; runs, thunks, host work and one lane per pool thread
    as tracks (a loop's kernels a track below its loop); the wheel zooms around the pointer, a drag
    pans, the buttons step through the runs or show them all; a bar selects its instruction; every
    label at least 11 px and 4.5:1."""
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By

    def state() -> dict:
        return browser.execute_script(TIMELINE)

    browser.get(pages["gpt"][0].as_uri())
    browser.find_element(By.TAG_NAME, "body").send_keys("p")
    first = state()
    assert first["tracks"][:3] == ["runs", "thunks", "host"] and "pool lane 1" in first["tracks"], first["tracks"]
    assert first["which"] == "run 2 of 2", "the last run first"
    ticks = first["ticks"]
    assert len(ticks) >= 3 and all(b > a for a, b in zip(ticks, ticks[1:], strict=False))  # 1-2-5 steps: 3 to 8
    assert max(ticks[k + 1] - ticks[k] for k in range(len(ticks) - 1)) < 1.01 * min(ticks[k + 1] - ticks[k] for k in range(len(ticks) - 1))
    assert first["smallest"] >= 11 and first["low"] == [], first["low"][:5]

    plot = browser.find_element(By.CSS_SELECTOR, "#graph .timeline-plot")
    browser.execute_script("const r = arguments[0].getBoundingClientRect(); arguments[0].dispatchEvent(new WheelEvent('wheel', "
                           "{deltaY: -600, clientX: r.left + r.width * 0.6, clientY: r.top + 50, bubbles: true, cancelable: true}))", plot)
    browser.execute_script("return new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
    zoomed = state()
    def us_per_pixel(view: dict) -> float:
        return (view["ticks"][-1] - view["ticks"][0]) / (view["tickX"][-1] - view["tickX"][0])

    # deltaY -600 zooms by e^1.2 = 3.3 around the pointer
    assert us_per_pixel(zoomed) < us_per_pixel(first) / 3, "the wheel zooms in along time"
    assert zoomed["tracks"] == first["tracks"] and zoomed["smallest"] >= 11 and zoomed["low"] == []
    ActionChains(browser).move_to_element(plot).click_and_hold().move_by_offset(200, 0).release().perform()
    for _ in range(40):  # a loaded machine may take a few frames to redraw
        browser.execute_script("return new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
        panned = state()
        if panned["ticks"] != zoomed["ticks"] or panned["tickX"] != zoomed["tickX"]:
            break
    # dragging right shows earlier times: every tick moved right, or a smaller one came first
    assert panned["ticks"][0] < zoomed["ticks"][0] or panned["tickX"][0] > zoomed["tickX"][0] + 100, \
        ("dragging right shows earlier times", zoomed["ticks"][:2], zoomed["tickX"][:2], panned["ticks"][:2],
         panned["tickX"][:2])

    browser.find_element(By.CSS_SELECTOR, "#graph .timeline-tools button[data-act=all]").click()
    browser.execute_script("return new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
    every = state()
    assert every["runs"] == ["run 1", "run 2"] and every["which"] == "runs 1\u20132 of 2"
    browser.find_element(By.CSS_SELECTOR, "#graph .timeline-tools button[data-act=prev]").click()
    browser.execute_script("return new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
    assert state()["which"] == "run 1 of 2"

    # A bar is its instruction: clicked, the panel shows it and the bar is outlined.
    bar = browser.execute_script("return [...document.querySelectorAll('#graph .timeline g.thunk')]"
                                 ".sort((a, b) => b.getBBox().width - a.getBBox().width)[0]")
    name = bar.get_attribute("data-name")
    browser.execute_script(CLICK, bar.find_element(By.TAG_NAME, "rect"))
    assert browser.find_element(By.CSS_SELECTOR, "#details h2").text.split()[0] == name
    assert browser.execute_script("return [...document.querySelectorAll('#graph .timeline g.thunk.selected')].every(g => g.dataset.name === arguments[0])"
                                  " && document.querySelectorAll('#graph .timeline g.thunk.selected').length > 0", name)
    browser.save_screenshot(str(pages["gpt"][0].with_name("timeline.png")))

    # The LSTM's loop: its kernels on the track under the loops' thunks, inside their loop's bar.
    browser.get(pages["rnn"][0].as_uri())
    browser.find_element(By.TAG_NAME, "body").send_keys("p")
    assert "in loops" in state()["tracks"]
    assert console_errors(browser) == []


@pytest.mark.slow
def test_two_compiles_side_by_side_with_instructions_mapped(browser, tmp_path):  # type: ignore[no-untyped-def]
    """compiled.explore(compare=other): the CNN step with and without fusion, each module in its own
    pane (labels 11 px, 4.5:1), the passes that changed one side only, and a search or click on one
    side outlining the counterparts on the other."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    from xla_teach import flags

    step, args = MODELS["cnn"]()
    fused = xt.jit(step).lower(*args).compile()
    with flags.override(xla_disable_hlo_passes="fusion,multi_output_fusion,row-fusion"):
        unfused = xt.jit(step).lower(*args).compile()
    page = fused.explore(str(tmp_path / "compare.html"), compare=unfused, profile_runs=1)
    browser.get(page.path.as_uri())
    pane_labels = """
      return [...document.querySelectorAll('#sides .side')].map(pane => { const box = pane.getBoundingClientRect();
        return [...pane.querySelectorAll('svg text')].map(t => t.getBoundingClientRect())
          .filter(r => r.width > 0 && r.bottom > box.top && r.top < box.bottom && r.right > box.left && r.left < box.right)
          .map(r => r.height); });"""
    for heights in browser.execute_script(pane_labels):
        assert heights and min(heights) >= 11, heights[:5]
    captions = [c.text for c in browser.find_elements(By.CSS_SELECTOR, "#sides .caption")]
    assert captions[0].startswith("A: ") and captions[1].startswith("B: ") and "kernels" in captions[1]
    panel = browser.find_element(By.ID, "details").text
    assert "fusion/fusion: A changed the module, B did not run" in panel
    assert "FUSIONS THAT DIFFER" in panel.upper() and "TIME BY OP_NAME SCOPE" in panel.upper()

    # Search a fusion of A: it is selected there, its unfused instructions outlined on B.
    fusion = browser.execute_script("const d = JSON.parse(document.getElementById('data').textContent);"
                                    "return Object.keys(d.map.a).find(n => d.a.instructions[n].opcode === 'fusion' && d.map.a[n].length > 2)")
    search = browser.find_element(By.ID, "search")
    search.send_keys(fusion)
    search.send_keys(Keys.ENTER)
    assert browser.execute_script(f"return !!document.querySelector('#side-a g.node.selected[data-name=\"{fusion}\"]')")
    outlined = browser.execute_script("return [...document.querySelectorAll('#side-b g.node.counterpart')].map(n => n.dataset.name)")
    expected = browser.execute_script(f"return JSON.parse(document.getElementById('data').textContent).map.a['{fusion}']")
    assert outlined and set(outlined) <= set(expected)
    assert "counterpart(s)" in browser.find_element(By.ID, "details").text
    # A click on B's side selects there and outlines the fusion on A.
    node = browser.find_element(By.CSS_SELECTOR, f'#side-b g.node.counterpart[data-name="{outlined[0]}"]')
    browser.execute_script(CLICK, node)
    assert browser.execute_script(f"return !!document.querySelector('#side-a g.node.counterpart[data-name=\"{fusion}\"]')")
    for heights in browser.execute_script(pane_labels):
        assert min(heights) >= 11
    browser.save_screenshot(str(tmp_path / "compare.png"))
    browser.find_element(By.ID, "summary").click()
    assert not browser.find_elements(By.CSS_SELECTOR, "#sides g.node.selected, #sides g.node.counterpart")
    assert browser.execute_script(LOW_CONTRAST.replace("#graph > svg text", "#sides svg text")
                                  .replace("#graph .caption, #graph .legend span, #graph .tools button",
                                           "#sides .caption, #sides .tools button")) == []
    assert console_errors(browser) == []
