"""The compile explorer: its structural diff, the data it gathers, the page it writes, and where it
is produced (dumps, the CLI, ``Compiled.explore()``); then the page itself in a headless Chromium."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

import xla_teach as xt
import xla_teach.numpy as xnp
from tests.tools.conftest import console_errors
from xla_teach import flags, nn
from xla_teach.api import compile_module
from xla_teach.tools import render
from xla_teach.tools.explorer import build_data, explore, explorer_html, structural_diff, write_explorer
from xla_teach.tools.explorer.dump_index import write_dump_index
from xla_teach.tools.explorer.kernel_code import unpack

needs_dot = pytest.mark.skipif(not render.have_dot(), reason="Graphviz dot not installed")

SOFTMAX = """HloModule softmax
add { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT r = f32[] add(a, b) }
max { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT r = f32[] maximum(a, b) }
ENTRY main {
  x = f32[8,100] parameter(0)
  ninf = f32[] constant(-inf)
  mx = f32[8] reduce(x, ninf), dimensions={1}, to_apply=max
  mxb = f32[8,100] broadcast(mx), dimensions={0}
  sub = f32[8,100] subtract(x, mxb)
  e = f32[8,100] exponential(sub)
  zero = f32[] constant(0)
  s = f32[8] reduce(e, zero), dimensions={1}, to_apply=add
  sb = f32[8,100] broadcast(s), dimensions={0}
  ROOT d = f32[8,100] divide(e, sb)
}
"""


def loss(params, x, y):  # type: ignore[no-untyped-def]
    h = nn.relu(x @ params["w1"] + params["b1"])
    logits = h @ params["w2"] + params["b2"]
    return -xnp.mean(xnp.sum(nn.log_softmax(logits) * y, axis=1))


def train_step(params, x, y):  # type: ignore[no-untyped-def]
    value, grads = xt.value_and_grad(loss)(params, x, y)
    return value, {k: params[k] - 0.1 * grads[k] for k in params}


def mlp_compiled():  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(0)
    params = {"w1": rng.standard_normal((64, 32), dtype=np.float32), "b1": np.zeros(32, np.float32),
              "w2": rng.standard_normal((32, 10), dtype=np.float32), "b2": np.zeros(10, np.float32)}
    x = rng.standard_normal((16, 64), dtype=np.float32)
    y = np.eye(10, dtype=np.float32)[rng.integers(0, 10, 16)]
    return xt.jit(train_step).lower(params, x, y).compile()


def layer_norm(x, g, b):  # type: ignore[no-untyped-def]
    mean = xnp.mean(x, axis=-1, keepdims=True)
    var = xnp.mean((x - mean) ** 2, axis=-1, keepdims=True)
    return (x - mean) / xnp.sqrt(var + 1e-5) * g + b


def transformer_block(p, x):  # type: ignore[no-untyped-def]
    """Pre-norm attention and MLP with residuals, as in a small transformer; named scopes as a
    model library writes them."""
    with xt.named_scope("attention"):
        with xt.named_scope("ln1"):
            h = layer_norm(x, p["ln1_g"], p["ln1_b"])
        q, k, v = h @ p["wq"], h @ p["wk"], h @ p["wv"]
        scores = xnp.einsum("bqd,bkd->bqk", q, k) / np.float32(np.sqrt(q.shape[-1]))
        x = x + xnp.einsum("bqk,bkd->bqd", nn.softmax(scores, axis=-1), v) @ p["wo"]
    with xt.named_scope("mlp"):
        with xt.named_scope("ln2"):
            h = layer_norm(x, p["ln2_g"], p["ln2_b"])
        return x + nn.gelu(h @ p["w1"]) @ p["w2"]


def transformer_step(p, x):  # type: ignore[no-untyped-def]
    value, grads = xt.value_and_grad(lambda p, x: xnp.mean(transformer_block(p, x) ** 2))(p, x)
    return value, {k: p[k] - 0.01 * grads[k] for k in p}


def transformer_compiled():  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(0)
    d, f = 32, 64
    p = {n: rng.standard_normal(s, dtype=np.float32) * 0.1 for n, s in
         [("wq", (d, d)), ("wk", (d, d)), ("wv", (d, d)), ("wo", (d, d)), ("w1", (d, f)), ("w2", (f, d))]}
    p.update({"ln1_g": np.ones(d, np.float32), "ln1_b": np.zeros(d, np.float32),
              "ln2_g": np.ones(d, np.float32), "ln2_b": np.zeros(d, np.float32)})
    x = rng.standard_normal((2, 16, d), dtype=np.float32)
    return xt.jit(transformer_step).lower(p, x).compile()


def test_structural_diff_of_fusion_names_what_moved_where() -> None:
    exe = compile_module(SOFTMAX, "cpu")
    fusion = next(r for r in exe.recorder.records if r.pass_name == "row-fusion")
    diff = structural_diff(fusion.before, fusion.after)
    (name,) = diff.fused
    assert name.endswith("row_fusion") and diff.added == [name]
    # Every computing instruction of the softmax moved into the one fusion; none is reported removed.
    assert sorted(diff.fused[name]) == sorted(["mx", "mxb", "sub", "e", "s", "sb", "d", "ninf", "zero"])
    assert diff.removed == [] and diff.changed == []
    assert set(diff.clones.values()) <= set(diff.fused[name])


def test_structural_diff_sorts_added_removed_and_changed() -> None:
    before = "HloModule m\nENTRY e {\n  x = f32[4] parameter(0)\n  n = f32[4] negate(x)\n  ROOT a = f32[4] abs(n)\n}\n"
    after = "HloModule m\nENTRY e {\n  x = f32[4] parameter(0)\n  n2 = f32[4] exponential(x)\n  ROOT a = f32[4] abs(n2)\n}\n"
    diff = structural_diff(before, after)
    assert diff.added == ["n2"] and diff.removed == ["n"] and [c[0] for c in diff.changed] == ["a"]
    assert diff.changed[0][1].endswith("abs(%n)") and diff.changed[0][2].endswith("abs(%n2)")


def test_data_carries_every_pass_and_each_instruction_s_source_line() -> None:
    compiled = mlp_compiled()
    data = build_data(compiled.executable, graphs=False)
    records = compiled.pass_records()
    assert [p["name"] for p in data.passes] == [r.pass_name for r in records]
    assert [p["changed"] for p in data.passes] == [r.changed for r in records]
    assert all(p["diff"] is not None for p in data.passes if p["changed"])
    dots = [(n, i) for n, i in data.instructions.items() if i["opcode"] == "dot"]
    assert dots
    lines = Path(__file__).read_text().splitlines()
    for _, info in dots:
        assert Path(info["source_file"]).resolve() == Path(__file__).resolve()
        assert info["op_name"].startswith("jit(train_step)/")
        assert data.sources[info["source_file"]][info["source_line"]] == lines[info["source_line"] - 1]
        # a product runs as a kernel of its own, or inside the fusion that holds it
        kernel_of = data.instructions[info["fusion"]] if info["fusion"] else info
        assert kernel_of["kernel"] and kernel_of["buffer"].startswith("allocation")
        sections = dict(unpack(data.code)[kernel_of["kernel"]])
        # the kernel, and the .wrapped function with the loops it calls; optimized; its machine code
        assert f'define void @"{kernel_of["kernel"]}"' in sections["LLVM IR"]
        assert f'@"{kernel_of["kernel"]}.wrapped"' in sections["LLVM IR"].split("\n\n", 1)[1]
        assert "define" in sections["LLVM IR, optimized"] and sections["assembly"].startswith(kernel_of["kernel"] + ":")
    fused = [i for i in data.instructions.values() if i["fusion"]]
    assert fused and all(data.instructions[i["fusion"]]["opcode"] == "fusion" for i in fused)


def test_a_gpu_kernel_s_code_is_its_ir_and_its_ptx() -> None:
    """Compiled for the GPU (no device needed to compile), a kernel's code is its LLVM IR before and
    after optimization and the PTX ptxas assembles."""
    data = build_data(compile_module(SOFTMAX, "gpu"), graphs=False)
    code = unpack(data.code)
    kernel = next(i["kernel"] for i in data.instructions.values() if i.get("kernel"))
    sections = dict(code[kernel])
    assert list(sections) == ["LLVM IR", "LLVM IR, optimized", "PTX"]
    assert sections["PTX"].startswith(".visible .entry " + kernel) or sections["PTX"].startswith(".entry " + kernel)


@pytest.mark.gpu
def test_a_gpu_profile_times_each_kernel_with_cuda_events() -> None:
    """On a device, the explorer's profile of a GPU executable times each kernel on its own (CUDA
    events around each launch, even where the kernels otherwise run as one CUDA graph): every
    kernel of the ENTRY has a time, and together they fit inside the run's time."""
    from xla_teach.backends.gpu.runtime import device_available

    if not device_available():
        pytest.skip("no CUDA device/driver")
    with flags.override(xla_gpu_graph_min_graph_size=1):
        executable = compile_module(SOFTMAX, "gpu")
    data = build_data(executable, graphs=False, profile_runs=3)
    assert data.profile is not None
    kernels = [i.name for i in executable.module.entry.instructions if i.backend_config]
    thunks = data.profile["thunks"]
    assert kernels and all(thunks[k]["us"] > 0 and thunks[k]["calls"] == 1 for k in kernels), thunks
    assert sum(thunks[k]["us"] for k in kernels) <= data.profile["run_us"] * 1.05


def test_page_is_self_contained_and_holds_the_data(tmp_path: Path) -> None:
    exe = compile_module(SOFTMAX, "cpu")
    page = explorer_html(exe)
    assert "<script src" not in page and "<link" not in page and "@import" not in page
    urls = set(re.findall(r"https?://[^\s\"'<>)\\]+", page))
    assert urls <= {"http://www.w3.org/2000/svg", "http://www.w3.org/1999/xlink"}, urls
    payload = re.search(r'<script type="application/json" id="data">(.*?)</script>', page, re.S)
    assert payload is not None
    data = json.loads(payload.group(1).replace("<\\/", "</"))
    assert len(data["passes"]) == len(exe.recorder.records)
    # Each changed pass: the piece it touched, before and after, for the page to draw side by side.
    changed = [p for p in data["passes"] if p["changed"] and not p["skipped"]]
    assert changed and all(p["sides"] is not None for p in changed)
    touching = [p for p in changed if p["sides"]["touched"]]
    assert touching
    for p in touching:
        sides = p["sides"]
        assert set(sides["touched"]) & (set(sides["after"]) | set(sides["before"])), p["name"]
        assert all(set(i["operands"]) <= set(sides[k]) for k in ("before", "after") for i in sides[k].values())
    # The module graph is laid out in the page, from each instruction's operands, by vendored dagre.
    assert "dagre" in page and "XlaTeachModuleGraph" in page
    entry = [n for n, i in data["instructions"].items() if i["computation"] == data["entry"]]
    assert sorted(entry) == sorted(i.name for i in exe.module.entry.instructions)
    for name in entry:
        assert data["instructions"][name]["operands"] == [o.name for o in exe.module.entry.instruction(name).operands]
        assert data["instructions"][name]["category"] in data["palette"]
    path = write_explorer(exe, tmp_path / "softmax.html")
    assert path.read_text() == page


def test_dump_writes_the_explorer_and_an_index(tmp_path: Path) -> None:
    with flags.override(xla_dump_to=str(tmp_path)):
        compile_module(SOFTMAX, "cpu")
        compile_module(SOFTMAX.replace("8,100", "4,50").replace("f32[8]", "f32[4]"), "cpu")
    explorers = sorted(tmp_path.glob("*.explorer.html"))
    assert [p.name for p in explorers] == ["module_0000.softmax.explorer.html", "module_0001.softmax.explorer.html"]
    index = (tmp_path / "index.html").read_text()
    assert 'href="module_0000.softmax.explorer.html"' in index and "<td><b>0001</b></td>" in index
    assert "before_optimizations.txt" in index  # the legend
    # The two softmax modules are told apart: their sizes, kernels and peak memory differ.
    summaries = [json.loads(p.read_text()) for p in sorted(tmp_path.glob("*.summary.json"))]
    assert [s["backend"] for s in summaries] == ["cpu", "cpu"] and summaries[0]["peak_bytes"] > summaries[1]["peak_bytes"]
    assert all(s["kernels"] >= 1 and s["compile_seconds"] > 0 for s in summaries)
    for summary in summaries:
        assert f"{summary['instructions_before']} &rarr; {summary['instructions_after']}" in index


def test_dump_index_never_replaces_a_page_it_did_not_write(tmp_path: Path) -> None:
    (tmp_path / "index.html").write_text("mine")
    with pytest.raises(FileExistsError, match="not written by xla_teach"):
        write_dump_index(tmp_path)
    assert (tmp_path / "index.html").read_text() == "mine"


def test_cli_explores_a_file_and_a_dump_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from xla_teach.tools.cli import main

    source = tmp_path / "softmax.hlo"
    source.write_text(SOFTMAX)
    assert main(["explore", str(source)]) == 0
    page = tmp_path / "softmax.explorer.html"
    assert page.is_file() and str(page) in capsys.readouterr().out
    assert main(["explore", str(source)]) == 2  # never overwritten
    assert "exists" in capsys.readouterr().err
    dump = tmp_path / "dump"
    dump.mkdir()
    with flags.override(xla_dump_to=str(dump), xla_teach_dump_explorer=False):
        compile_module(SOFTMAX, "cpu")
    assert not list(dump.glob("*.explorer.html"))
    assert main(["explore", str(dump)]) == 0
    assert (dump / "module_0000.softmax.explorer.html").is_file() and (dump / "index.html").is_file()
    assert main(["explore", str(tmp_path / "nothing_here")]) == 2


def test_compiled_explore_writes_a_page_and_shows_it_inline(tmp_path: Path) -> None:
    compiled = mlp_compiled()
    page = compiled.explore(str(tmp_path / "mlp.html"))
    assert page.path.is_file() and "jit_train_step" in page.path.read_text()
    inline = page._repr_html_()
    assert inline.startswith("<iframe srcdoc=") and "&lt;!DOCTYPE html&gt;" in inline
    with pytest.raises(FileExistsError):
        compiled.explore(str(tmp_path / "mlp.html"))
    temporary = explore(compiled.executable)
    assert temporary.path.is_file()
    temporary.path.unlink()


# ---- in a real browser (the `browser` fixture: tests/tools/conftest.py) ----------------------------


@needs_dot
@pytest.mark.slow
def test_explorer_in_a_browser_steps_searches_and_follows_a_source_line(browser, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.wait import WebDriverWait

    compiled = mlp_compiled()
    path = compiled.explore(str(tmp_path / "mlp.html"), profile_runs=3).path
    shots = Path(tmp_path)
    browser.get(path.as_uri())
    assert browser.execute_script("return document.body.classList.contains('js')")
    nodes = browser.execute_script("return document.querySelectorAll('#graph g.node[data-name]').length")
    entry = compiled.executable.module.entry.instructions
    # Scalar constants are inlined; the six parameters are gathered into one box until it is opened.
    assert nodes == sum(1 for i in entry if not (i.opcode == "constant" and i.shape.rank == 0) and i.opcode != "parameter")
    assert browser.execute_script("return document.querySelector('#graph g.scope-box[data-group=\"g:#parameters\"]')"
                                  ".textContent").startswith("6 parameters")
    browser.save_screenshot(str(shots / "1_optimized.png"))

    # Step to the fusion pass with the keyboard: its panel lists what was fused into what.
    passes = compiled.pass_records()
    fusion_at = next(i for i, r in enumerate(passes) if r.pass_name == "fusion")
    body = browser.find_element(By.TAG_NAME, "body")
    for _ in range(fusion_at + 1):
        body.send_keys("j")
    current = browser.find_element(By.CSS_SELECTOR, "#passes li.current .name").text
    assert current.startswith("fusion")
    details = browser.find_element(By.ID, "details").text
    assert "FUSED" in details.upper() and "fusion" in details
    assert browser.execute_script("return document.querySelector('#graph .caption').textContent").startswith(
        "fusion: before and after")
    assert browser.execute_script("return document.querySelectorAll('#graph g.node.touched').length") >= 2
    browser.save_screenshot(str(shots / "2_fusion_pass.png"))

    # Search for the dots, take the first: the panel shows its Python line, the same line's
    # instructions are outlined, and its kernel's LLVM IR is there.
    search = browser.find_element(By.ID, "search")
    search.send_keys("dot")
    assert browser.execute_script("return document.querySelectorAll('#results div[data-name]').length") >= 4
    search.send_keys(Keys.ENTER)
    details = browser.find_element(By.ID, "details").text
    assert "PYTHON SOURCE" in details.upper()
    assert 'x @ params["w1"]' in details or 'h @ params["w2"]' in details
    # what a dot computes, from the operation-semantics table, with its example
    from xla_teach.hlo.op_semantics import SEMANTICS

    assert SEMANTICS["dot"].summary.split("``")[0] in details
    assert browser.execute_script("return document.querySelector('#details details.semantics pre').textContent"
                                  ) == SEMANTICS["dot"].example.module
    assert browser.execute_script("return document.querySelectorAll('#graph g.node.selected').length") == 1
    WebDriverWait(browser, 5).until(lambda d: "LLVM IR of" in d.find_element(By.ID, "details").text)
    browser.save_screenshot(str(shots / "3_dot_selected.png"))

    # Click a fusion's box: its panel opens. "Open it in the graph" draws its fused instructions in a
    # cluster; clicking one of them, its panel links back to the fusion.
    click = "arguments[0].dispatchEvent(new MouseEvent('click', {bubbles: true}))"
    box = browser.find_element(By.CSS_SELECTOR, "#graph g.node.fusion")
    fusion = box.get_attribute("data-name")
    browser.execute_script(click, box)
    assert browser.find_element(By.CSS_SELECTOR, "#details h2").text.split()[0] == fusion
    browser.find_element(By.CSS_SELECTOR, "#details a[data-open-fusion]").click()
    members = set(compiled.executable.module.entry.instruction(fusion).fused_computation.instructions)
    drawn = browser.execute_script(
        "return [...document.querySelectorAll('#graph g.cluster.fused[data-fusion=\"' + arguments[0] + '\"]')].length", fusion)
    assert drawn == 1
    member = next(i.name for i in members if i.opcode not in ("parameter", "constant"))
    browser.execute_script(click, browser.find_element(By.CSS_SELECTOR, f'#graph g.node[data-name="{member}"]'))
    assert browser.find_element(By.CSS_SELECTOR, "#details h2").text.split()[0] == member
    link = browser.find_elements(By.CSS_SELECTOR, "#details dd a[data-name]")
    assert link and link[0].get_attribute("data-name") == fusion, "a fused instruction links to its fusion"
    link[0].click()
    assert browser.find_element(By.CSS_SELECTOR, "#details h2").text.split()[0] == fusion
    assert "FUSED INSTRUCTIONS" in browser.find_element(By.ID, "details").text.upper()
    browser.save_screenshot(str(shots / "4_fusion_opened.png"))
    # Why it was fused: the fusion passes' notes that name an instruction are in its panel.
    noted = next(r.notes[0].split()[0] for r in passes if r.pass_name == "row-fusion" and r.notes)
    search = browser.find_element(By.ID, "search")
    search.clear()
    search.send_keys(noted.rstrip(":"))
    search.send_keys(Keys.ENTER)
    assert "FUSION DECISIONS" in browser.find_element(By.ID, "details").text.upper()
    search.clear()
    # The memory view: a bar per buffer, the peak named in the panel.
    body.send_keys("m")
    assert browser.execute_script("return document.querySelectorAll('#graph g.buffer').length") >= 10
    assert "LIVE AT THE PEAK" in browser.find_element(By.ID, "details").text.upper()
    # Click a temporary's bar: it is outlined, and its panel says what it could not share bytes with.
    bar = browser.execute_script("""const bars = [...document.querySelectorAll('#graph g.buffer')];
        const bar = bars.find(b => b.querySelector('rect').getAttribute('fill') === '#ce93d8') || bars[0];
        bar.dispatchEvent(new MouseEvent('click', {bubbles: true})); return bar.dataset.name;""")
    assert browser.execute_script("return [...document.querySelectorAll('#graph g.buffer.selected')].map(b => b.dataset.name)") == [bar]
    assert "could not share bytes with" in browser.find_element(By.ID, "details").text
    browser.save_screenshot(str(shots / "5_memory.png"))
    # The profile: the last run's thunks as bars, the graph's boxes in heat colours.
    body.send_keys("p")
    assert browser.execute_script("return document.querySelectorAll('#graph g.thunk').length") >= 10
    assert "THUNKS BY TIME" in browser.find_element(By.ID, "details").text.upper()
    browser.save_screenshot(str(shots / "6_profile.png"))
    body.send_keys("0")
    assert not browser.execute_script("return [...document.querySelectorAll('#graph g.node polygon')].filter(p => p.style.fill).length")
    body.send_keys("h")  # heat on: fills from the times, a band keeps each box's category colour
    painted = browser.execute_script(
        "return [...document.querySelectorAll('#graph g.node polygon')].filter(p => p.style.fill).length")
    assert painted >= 10
    assert browser.execute_script("return document.querySelectorAll('#graph g.node rect.category').length") == painted
    # The profile estimates the time of each instruction inside a fusion: its panel ranks them, an
    # instruction's panel gives its share, and the scopes add up in the profile's panel.
    browser.execute_script(click, browser.find_element(By.CSS_SELECTOR, f'#graph g.node[data-name="{member}"]'))
    assert "estimated from" in browser.find_element(By.ID, "details").text
    browser.find_element(By.CSS_SELECTOR, "#details dd a[data-name]").click()
    assert "TIME INSIDE (ESTIMATED)" in browser.find_element(By.ID, "details").text.upper()
    browser.save_screenshot(str(shots / "7_time_inside_a_fusion.png"))
    body.send_keys("p")
    assert "TIME BY OP_NAME SCOPE" in browser.find_element(By.ID, "details").text.upper()
    body.send_keys("0")
    # Zoom and fit keep the picture; no script error reached the console.
    body.send_keys("+")
    body.send_keys("f")
    assert console_errors(browser) == []


def test_memory_view_adds_up_to_memory_analysis_to_the_byte() -> None:
    compiled = mlp_compiled()
    memory = build_data(compiled.executable, graphs=False).memory
    assert memory is not None
    peak = compiled.memory_analysis().peak_memory_in_bytes
    assert memory["peak_bytes"] == peak
    at_peak = [b for b in memory["buffers"] if b["start"] <= memory["peak_step"] <= b["end"]]
    assert sum(b["size"] for b in at_peak) == peak
    # No other step has more bytes live.
    for step in range(len(memory["steps"])):
        assert sum(b["size"] for b in memory["buffers"] if b["start"] <= step <= b["end"]) <= peak
    assert {b["kind"] for b in memory["buffers"]} >= {"parameter", "output", "temp"}


def test_dump_writes_xlas_three_buffer_reports(tmp_path: Path) -> None:
    with flags.override(xla_dump_to=str(tmp_path), xla_teach_dump_explorer=False):
        exe = compile_module(SOFTMAX, "cpu")
    prefix = tmp_path / "module_0000.softmax.cpu_after_optimizations"
    live = Path(f"{prefix}-live-range.txt").read_text()
    entry = exe.buffer_assignment.entry
    assert live.startswith(f"HloLiveRange (max {len(entry.order)}):") and f"Peak: {entry.peak_bytes} bytes" in live
    assert f"(cumulative: {entry.peak_bytes} bytes)" in live
    values = Path(f"{prefix}-buffer-assignment-values.txt").read_text()
    assert values.count(" from instruction: ") == len(entry.values) and "ROOT" not in values
    usage = Path(f"{prefix}-memory-usage-report.txt").read_text()
    assert usage.count("cumulative_size;") == len(entry.allocations)


def test_profile_times_every_kernel_after_warm_up() -> None:
    compiled = mlp_compiled()
    profile = build_data(compiled.executable, graphs=False, profile_runs=3).profile
    assert profile is not None and profile["runs"] == 3
    kernels = {i.name for i in compiled.executable.module.entry.instructions
               if i.opcode not in ("parameter", "constant", "tuple", "get-tuple-element", "bitcast")}
    assert kernels <= set(profile["thunks"]), kernels - set(profile["thunks"])
    # The thunks of one run happen inside it, one after another.
    assert sum(t["us"] for t in profile["thunks"].values()) <= profile["run_us"] * 1.05
    # The page's timeline holds every timed run: each run's thunks once each, inside the run.
    timeline = profile["timeline"]
    assert len(timeline["runs"]) == 3 and timeline["runs"][0][0] == 0
    for run, (start, us) in enumerate(timeline["runs"]):
        events = [e for e in timeline["events"] if e[1] == run]
        assert sorted(timeline["names"][e[0]] for e in events) == sorted(kernels)
        assert all(start <= e[2] and e[2] + e[3] <= start + us + 0.02 and e[5] == 0 for e in events)
        ordered = sorted(events, key=lambda e: e[2])
        assert all(a[2] + a[3] <= b[2] + 0.02 for a, b in zip(ordered, ordered[1:], strict=False)), "one after another"


def test_the_profile_timeline_nests_a_loop_s_kernels_inside_its_thunk() -> None:
    """A kernel of a while loop's body is one level down (depth 1), inside its loop's event."""
    from xla_teach.lax import fori_loop

    def iterate(x):  # type: ignore[no-untyped-def]
        return fori_loop(0, 6, lambda i, v: xnp.tanh(v @ v) + v, x)

    compiled = xt.jit(iterate).lower(np.eye(16, dtype=np.float32)).compile()
    timeline = build_data(compiled.executable, graphs=False, profile_runs=2).profile["timeline"]
    kind = {i: k for i, k in enumerate(timeline["kinds"])}
    loops = [e for e in timeline["events"] if kind[e[4]] == "while"]
    inner = [e for e in timeline["events"] if e[5] == 1]
    assert len(loops) == 2 and inner
    for e in inner:
        (loop,) = [w for w in loops if w[1] == e[1]]
        assert loop[2] <= e[2] and e[2] + e[3] <= loop[2] + loop[3] + 0.02


def test_profile_estimates_the_time_of_each_instruction_inside_a_fusion() -> None:
    """The defused module times each fused instruction alone; a fusion's measured time is shared
    in proportion, and op_name scopes add up what ran under them."""
    compiled = mlp_compiled()
    profile = build_data(compiled.executable, graphs=False, profile_runs=3, compile=compile_module).profile
    assert profile is not None
    module = compiled.executable.module
    fusions = {i.name: i for i in module.entry.instructions if i.opcode == "fusion"}
    assert set(profile["inside"]) == set(fusions)
    for name, inside in profile["inside"].items():
        members = {i.name for i in fusions[name].fused_computation.instructions}
        assert set(inside["members"]) <= members
        assert sum(m["us"] for m in inside["members"].values()) == pytest.approx(profile["thunks"][name]["us"])
        assert sum(m["alone_us"] for m in inside["members"].values()) == pytest.approx(inside["alone_us"])
    # The top scope holds every kernel that has an op_name: all of them here.
    assert profile["scopes"]["jit(train_step)"] == pytest.approx(sum(t["us"] for t in profile["thunks"].values()), rel=1e-6)
    assert profile["scopes"]["jit(train_step)/jvp(loss)"] > 0
    assert profile["scopes"]["jit(train_step)/transpose(jvp(loss))"] > 0


def test_chrome_trace_names_the_hlo_op_name_and_source_line() -> None:
    from xla_teach.tools.bugs.fake_data import fake_arguments
    from xla_teach.tools.timeline import trace_runs

    compiled = mlp_compiled()
    trace = trace_runs(compiled.executable, fake_arguments(compiled.executable.module), 1).to_chrome_trace()
    thunks = [e for e in trace["traceEvents"] if e.get("cat") == "kernel"]
    assert thunks
    for event in thunks:
        args = event["args"]
        assert args["hlo"] == event["name"] and "source" in args
        assert Path(args["source"].rsplit(":", 1)[0]).resolve() == Path(__file__).resolve()
    assert any(e["args"]["op_name"].startswith("jit(train_step)/") for e in thunks)


@needs_dot
@pytest.mark.slow
def test_explorer_of_a_transformer_block_in_a_browser(browser, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A transformer block's training step (attention, MLP, two layer norms, forward and backward):
    the page loads, steps to every changed pass, searches and selects, without a script error."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    compiled = transformer_compiled()
    assert compiled.executable.module.instruction_count() > 200
    browser.get(compiled.explore(str(tmp_path / "block.html")).path.as_uri())
    # The module is grouped by named scope; "Collapse all" closes every group: the forward block and
    # the backward pass are closed boxes, and a click on the first opens it.
    browser.find_element(By.CSS_SELECTOR, "#graph .tools button[data-act=collapse]").click()
    count = "return document.querySelectorAll('#graph g.node[data-name]').length"
    closed = browser.execute_script("return [...document.querySelectorAll('#graph g.scope-box')].map(b => b.dataset.group)")
    block = next(g for g in closed if g.startswith("g:jvp("))
    browser.execute_script("document.querySelector('#graph g.scope-box[data-group=\"' + arguments[0] + '\"]')"
                           ".dispatchEvent(new MouseEvent('click', {bubbles: true}))", block)
    closed = browser.execute_script("return [...document.querySelectorAll('#graph g.scope-box')].map(b => b.dataset.group)")
    attention = next(g for g in closed if g.endswith("/attention"))
    assert "g:transpose(jvp(lambda))" in closed
    before = browser.execute_script(count)
    browser.execute_script("document.querySelector('#graph g.scope-box[data-group=\"' + arguments[0] + '\"]')"
                           ".dispatchEvent(new MouseEvent('click', {bubbles: true}))", attention)
    assert browser.execute_script(count) > before
    assert browser.execute_script("return !!document.querySelector('#graph g.cluster[data-group=\"' + arguments[0] + '\"]')", attention)
    browser.save_screenshot(str(tmp_path / "block_attention_open.png"))
    # Its title closes it again.
    browser.execute_script("document.querySelector('#graph g.cluster[data-group=\"' + arguments[0] + '\"] text')"
                           ".dispatchEvent(new MouseEvent('click', {bubbles: true}))", attention)
    assert browser.execute_script(count) == before
    # Searching for an instruction inside a closed group opens the group and selects it.
    inside = next(n for n, i in build_data(compiled.executable, graphs=False).instructions.items()
                  if "/transpose(jvp(lambda))/" in i["op_name"] and i["computation"] == compiled.executable.module.entry.name
                  and i["opcode"] != "constant")
    search = browser.find_element(By.ID, "search")
    search.send_keys(inside)
    search.send_keys(Keys.ENTER)
    assert browser.execute_script("return [...document.querySelectorAll('#graph g.node.selected')].map(n => n.dataset.name)") == [inside]
    assert "TRANSPOSE(JVP(LAMBDA))" in browser.find_element(By.ID, "details").text.upper()  # its group
    search.clear()
    browser.find_element(By.ID, "changed-only").click()
    body = browser.find_element(By.TAG_NAME, "body")
    changed = sum(1 for r in compiled.pass_records() if r.changed)
    for _ in range(changed):
        body.send_keys("j")
    assert browser.find_element(By.CSS_SELECTOR, "#passes li.current").get_attribute("class").count("changed")
    search.send_keys("dot_general")
    search.send_keys(Keys.ENTER)
    panel = browser.find_element(By.ID, "details").text
    assert "dot_general" in panel and "PYTHON SOURCE" in panel.upper()
    body.send_keys("m")
    assert browser.execute_script("return document.querySelectorAll('#graph g.buffer').length") > 20
    assert console_errors(browser) == []
    browser.save_screenshot(str(tmp_path / "block.png"))


def deep_mlp_compiled(layers: int):  # type: ignore[no-untyped-def]
    """A residual MLP of ``layers`` named layers (dense, normalization, gelu) and its SGD step:
    about 230 instructions per layer before optimization, 12 layers make 2,700 after fusion."""

    def loss(p, x):  # type: ignore[no-untyped-def]
        for i in range(layers):
            with xt.named_scope(f"layer{i}"):
                h = x @ p[f"w{i}"]
                mean = xnp.mean(h, axis=-1, keepdims=True)
                var = xnp.mean((h - mean) ** 2, axis=-1, keepdims=True)
                x = x + nn.gelu((h - mean) / xnp.sqrt(var + 1e-5))
        return xnp.mean(x ** 2)

    def step(p, x):  # type: ignore[no-untyped-def]
        value, grads = xt.value_and_grad(loss)(p, x)
        return value, {k: p[k] - 0.01 * grads[k] for k in p}

    rng = np.random.default_rng(0)
    p = {f"w{i}": rng.standard_normal((32, 32), dtype=np.float32) * 0.1 for i in range(layers)}
    return xt.jit(step).lower(p, rng.standard_normal((8, 32), dtype=np.float32)).compile()


@pytest.mark.slow
def test_explorer_of_2000_instructions_opens_a_group_at_a_time(browser, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A module of more than 2,000 instructions: the first picture is its groups (one box per
    layer), drawn in well under a second of layout; a layer opens, then a fusion inside it."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    compiled = deep_mlp_compiled(13)
    assert compiled.executable.module.instruction_count() > 2000
    browser.get(compiled.explore(str(tmp_path / "deep.html")).path.as_uri())
    timings = browser.execute_script("return window.explorerTimings")
    assert timings["layoutMs"] < 2000, timings
    layers = browser.execute_script("return [...document.querySelectorAll('#graph g.scope-box')].map(b => b.dataset.group)")
    assert sum(1 for g in layers if re.search(r"/layer\d+$", g)) >= 10
    boxes = browser.execute_script("return document.querySelectorAll('#graph g.node, #graph g.scope-box').length")
    assert boxes <= 60
    layer = next(g for g in layers if g.endswith("/layer5"))
    browser.execute_script("document.querySelector('#graph g.scope-box[data-group=\"' + arguments[0] + '\"]')"
                           ".dispatchEvent(new MouseEvent('click', {bubbles: true}))", layer)
    fusion = browser.execute_script(
        "return document.querySelector('#graph g.cluster[data-group=\"' + arguments[0] + '\"]') && "
        "[...document.querySelectorAll('#graph g.node.fusion')].map(n => n.dataset.name)", layer)
    assert fusion
    browser.execute_script("[...document.querySelectorAll('#graph g.node.fusion')].find(n => n.dataset.name === arguments[0])"
                           ".dispatchEvent(new MouseEvent('dblclick', {bubbles: true}))", fusion[-1])
    assert browser.execute_script("return document.querySelectorAll('#graph g.cluster.fused').length") == 1
    # Found by search, the opened fusion is outlined and brought to the middle, close enough to read.
    search = browser.find_element(By.ID, "search")
    search.send_keys(fusion[-1])
    search.send_keys(Keys.ENTER)
    assert browser.execute_script("return document.querySelector('#graph g.cluster.fused.selected').dataset.fusion") == fusion[-1]
    assert console_errors(browser) == []
    browser.save_screenshot(str(tmp_path / "deep.png"))


@pytest.mark.slow
def test_explorer_shows_shardings_and_collectives_in_a_browser(browser, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A data-parallel training step on 4 CPU devices: the per-device module's graph marks each
    split value with a band coloured by how it is split, draws the all-reduces as collectives,
    and the details panel names the sharding."""
    from selenium.webdriver.common.by import By

    import xla_teach
    from xla_teach.hlo.sharding import parse_sharding
    from xla_teach.sharding import NamedSharding, P
    from xla_teach.tools.explorer.model import split_label

    with flags.override(xla_force_host_platform_device_count=4):
        mesh = xla_teach.make_mesh((4,), ("batch",))
        batch, whole = NamedSharding(mesh, P("batch")), NamedSharding(mesh, P())
        step = xla_teach.jit(train_step, in_shardings=(whole, batch, batch))
        rng = np.random.default_rng(0)
        params = {"w1": rng.standard_normal((16, 32)).astype(np.float32), "b1": np.zeros(32, np.float32),
                  "w2": rng.standard_normal((32, 4)).astype(np.float32), "b2": np.zeros(4, np.float32)}
        x = rng.standard_normal((64, 16)).astype(np.float32)
        y = np.eye(4, dtype=np.float32)[rng.integers(0, 4, 64)]
        compiled = step.lower(params, x, y).compile()
    assert split_label(parse_sharding("{devices=[4,1]<=[4]}")) == "split 4x1"
    assert split_label(parse_sharding("{devices=[2,1,2]<=[4] last_tile_dim_replicate}")) == "split 2x1, x2 copies"
    # The profile runs all four devices at once and times device 0: each collective's payload is
    # its operands' bytes.
    profile = build_data(compiled.executable, graphs=False, profile_runs=2).profile
    assert profile is not None and profile["devices"] == 4
    reduces = [i for i in compiled.executable.module.entry.instructions if i.opcode == "all-reduce"]
    assert reduces
    for instr in reduces:
        thunk = profile["thunks"][instr.name]
        assert thunk["kind"] == "collective" and thunk["us"] > 0
        assert thunk["bytes"] == sum(o.shape.byte_size() for o in instr.operands)
    browser.get(compiled.explore(str(tmp_path / "sharded.html"), profile_runs=2).path.as_uri())
    # The inputs are gathered into one box: opened, each parameter shows how it is split.
    browser.execute_script("document.querySelector('#graph g.scope-box[data-group=\"g:#parameters\"]')"
                           ".dispatchEvent(new MouseEvent('click', {bubbles: true}))")
    bands = browser.execute_script("return [...document.querySelectorAll('#graph rect.split')].map(r => [r.dataset.split, r.getAttribute('fill')])")
    assert ["split 4x1", bands[[b[0] for b in bands].index("split 4x1")][1]] in bands
    colours = {split: fill for split, fill in bands}
    assert len(set(colours.values())) == len(colours)  # one colour per way of splitting
    browser.find_element(By.CSS_SELECTOR, "#graph .tools button[data-act=expand]").click()  # every group open
    collectives = browser.execute_script("return [...document.querySelectorAll('#graph g.node.collective')].map(n => n.dataset.name)")
    assert collectives and all("all-reduce" in name for name in collectives)
    browser.execute_script("document.querySelector('#graph g.node[data-name=\"x\"]').dispatchEvent(new MouseEvent('click', {bubbles: true}))")
    assert "split 4x1: {devices=[4,1]" in browser.find_element(By.ID, "details").text
    assert console_errors(browser) == []
    browser.save_screenshot(str(tmp_path / "sharded.png"))
    browser.find_element(By.ID, "profile").click()
    details = browser.execute_script("return document.getElementById('details').textContent")
    assert "Between devices" in details and "runs on 4 devices" in details
    assert f"{len(reduces)} collective(s)" in details
    assert console_errors(browser) == []
    browser.save_screenshot(str(tmp_path / "sharded_profile.png"))
