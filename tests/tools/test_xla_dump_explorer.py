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


def _show_pass(browser, name: str) -> list[str]:  # type: ignore[no-untyped-def]
    """Click XLA's pass ``name`` in the open page's pass list; the titles of the sides drawn."""
    browser.execute_script(
        "const d = JSON.parse(document.getElementById('data').textContent);"
        "const p = d.passes.find(p => p.name === arguments[0]);"
        "document.querySelector('#pass-list li[data-index=\"' + p.index + '\"]').click()", name)
    return browser.execute_script(  # type: ignore[no-any-return]
        "return [...document.querySelectorAll('#graph > svg text.side-title')].map(t => t.textContent)")


def _stored_gpu_dump(folder: Path) -> Path:
    """tests/data/xla_gpu_dump's tarball unpacked into ``folder``: the dump's own folder."""
    import tarfile

    with tarfile.open(Path(__file__).parents[1] / "data" / "xla_gpu_dump" / "gpu_dump.tar.gz") as tar:
        tar.extractall(folder, filter="data")
    return folder / "gpu_dump"


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
    sides = _show_pass(browser, "fusion")
    assert sides == ["before fusion", "after fusion"]
    assert browser.execute_script("return document.querySelectorAll('#graph g.node.touched').length") >= 2
    assert re.search(r"tanh_reduce_fusion", browser.find_element("id", "details").text)
    browser.save_screenshot(str(tmp_path / "xla_fusion.png"))
    assert console_errors(browser) == []


def test_the_memory_view_draws_xlas_own_buffer_assignment() -> None:
    """Oracle: XLA's own files. The peak is the one XLA's live-range report states, every
    buffer's allocation and size are the ones its buffer assignment lists, and the schedule is its
    instruction sequence."""
    from xla_teach.tools.explorer.xla_memory import xla_memory

    memory, problems = xla_memory(DUMP, PREFIX)
    assert problems == [] and memory is not None
    live = (DUMP / f"{PREFIX}.cpu_after_optimizations-live-range.txt").read_text()
    assert memory["peak_bytes"] == int(re.search(r"peak usage: (\d+) bytes", live)[1])  # type: ignore[index]
    assert memory["steps"] == re.findall(r"^\s+\d+:(\S+)$", live, re.MULTILINE)
    listed = (DUMP / f"{PREFIX}.cpu_after_optimizations-buffer-assignment.txt").read_text()
    for buffer in memory["buffers"]:
        allocation = re.search(rf"allocation {buffer['allocation']}: size (\d+), ([^\n]*):\n(?: value: [^\n]*\n)*? "
                               rf"value: <\d+ {re.escape(buffer['names'][0])} [^\n]*size={buffer['size']},", listed)
        assert allocation, buffer
    kinds = {b["names"][0]: b["kind"] for b in memory["buffers"]}
    assert kinds == {"x.1": "parameter", "w.1": "parameter", "ynn_fusion": "temp", "tanh_reduce_fusion": "output"}
    assert xla_dump_data(DUMP, PREFIX).memory == memory


def test_the_dump_index_tables_xlas_passes_those_xla_teach_lacks_first(tmp_path: Path) -> None:
    from xla_teach.tools.explorer.dump_index import write_dump_index
    from xla_teach.tools.explorer.xla_dump import passes_xla_teach_lacks, xla_passes_table

    rows = xla_passes_table(DUMP)
    lacking = [r["pass"] for r in rows if r["xla_teach"] is None]
    assert lacking == list(passes_xla_teach_lacks(DUMP)) and rows[:len(lacking)] == [r for r in rows
                                                                                   if r["xla_teach"] is None]
    assert {"fusion", "layout-assignment"} <= {r["pass"] for r in rows if r["xla_teach"]}
    folder = tmp_path / "dump"
    shutil.copytree(DUMP, folder)
    page = write_dump_index(folder).read_text()
    assert "XLA's passes here" in page and f"The {len(lacking)} it lacks come first" in page
    assert "<code>copy-insertion</code>" in page


def test_a_dump_of_protos_alone_gets_a_clear_message(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "module_0000.jit_f.before_optimizations.hlo.pb").write_bytes(b"\x0a\x05jit_f")
    assert main(["explore", str(tmp_path)]) != 0
    err = capsys.readouterr().err
    assert "protos" in err and "--xla_dump_hlo_as_text" in err


JAX_PROGRAM = """
import jax, jax.numpy as jnp, numpy as np
from jax.sharding import NamedSharding, PartitionSpec as P

def step(w1, w2, x, y):  # 3-D activations (x @ W as XLA fuses it: a dot, then a bitcast) and a lookup loss
    def loss(w1, w2):
        h = x @ w1
        h = (h - h.mean(-1, keepdims=True)) / jnp.sqrt(h.var(-1, keepdims=True) + 1e-5)
        logits = jax.nn.log_softmax(jax.nn.gelu(h) @ w2)
        return -jnp.take_along_axis(logits, y[..., None], -1).mean()
    g1, g2 = jax.grad(loss, argnums=(0, 1))(w1, w2)
    return w1 - 0.1 * g1, w2 - 0.1 * g2

rng = np.random.default_rng(0)
args = [rng.standard_normal((64, 128)).astype(np.float32) * 0.1, rng.standard_normal((128, 10)).astype(np.float32) * 0.1,
        rng.standard_normal((4, 8, 64)).astype(np.float32), rng.integers(0, 10, (4, 8)).astype(np.int32)]
compiled = jax.jit(step).lower(*args).compile()
print("TEMP", compiled.memory_analysis().temp_size_in_bytes)
mesh = jax.make_mesh((4,), ("b",))
split = NamedSharding(mesh, P("b"))
jax.jit(lambda x, w: jnp.tanh(x @ w).sum(0), in_shardings=(split, NamedSharding(mesh, P())))(
    args[2].reshape(32, 64), args[0])
"""


def test_explore_dir_on_fresh_jax_dumps_of_a_training_step_and_a_sharded_program(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """When JAX is installed: XLA dumps (every pass) of a training step with layer norm, GELU,
    log-softmax and a lookup, and of a program split over 4 devices, become pages -- XLA's passes,
    and XLA's optimized module run by xla_teach's kernels beside xla_teach's compile (XLA's dots on
    3-D activations end in bitcasts, its lookup's gradient is a scatter it wraps in a fusion); the
    training step's memory view holds XLA's temporaries as its memory_analysis() counts them."""
    import os
    import subprocess
    import sys

    pytest.importorskip("jax")
    dump = tmp_path / "dump"
    env = {**os.environ, "XLA_FLAGS": f"--xla_dump_to={dump} --xla_dump_hlo_pass_re=.* "
                                      "--xla_force_host_platform_device_count=4"}
    run = subprocess.run([sys.executable, "-c", JAX_PROGRAM], env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    temp = int(re.search(r"TEMP (\d+)", run.stdout)[1])  # type: ignore[index]
    assert main(["explore", str(dump)]) == 0
    capsys.readouterr()
    prefixes = modules_with_pass_dumps(dump)
    step = next(p for p in prefixes if p.endswith("jit_step"))
    sharded = next(p for p in prefixes if "lambda" in p)
    for prefix in (step, sharded):
        assert (dump / f"{prefix}.xla.explorer.html").is_file()
    assert (dump / f"{step}.vs_xla_teach.diff.html").is_file()
    data = xla_dump_data(dump, step, graphs=False)
    assert data.memory is not None and data.memory["temp_bytes"] == temp
    assert len(data.passes) > 10 and any(p["name"] == "fusion" for p in data.passes)
    partitioned = xla_dump_data(dump, sharded, graphs=False)
    assert any(p["name"] == "spmd-partitioning" or "spmd" in str(p["pipeline"]) for p in partitioned.passes)


def test_a_stored_gpu_dump_steps_through_xlas_gpu_passes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """XLA's GPU dump of the training step (tests/data/xla_gpu_dump, made on an H200 by JAX 0.11.2):
    `xla-teach explore` steps through XLA's GPU passes in the files' order, draws XLA's own buffer
    assignment (its live-range report's peak) and puts each kernel's launch from XLA's thunk
    sequence (grid, threads, shared memory, the CUDA graph it is recorded in) on its fusion."""
    from xla_teach.tools.explorer.kernel_code import unpack
    from xla_teach.tools.explorer.xla_memory import xla_memory

    dump, prefix = _stored_gpu_dump(tmp_path), "module_0000.jit_step"
    records, problems = xla_pass_records(dump, prefix)
    files = sorted((int(m["n"]), m["after"], p.read_text()) for p in dump.glob(f"{prefix}.*.txt")
                   if (m := STEP.search(p.name)))
    steps = [(after, text) for _, after, text in files if after != "pipeline-start"]
    assert problems == [] and len(records) > 50
    assert [(r.pass_name, r.after) for r in records if r.pass_name != "(between pipelines)"] == steps
    assert any(r.pass_name == "priority-fusion" and r.changed for r in records)
    memory, missing = xla_memory(dump, prefix)
    live = next(dump.glob(f"{prefix}.*gpu_after_optimizations-live-range.txt")).read_text()
    assert missing == [] and memory is not None
    peak = re.search(r"peak usage: ([\d ]+) bytes", live)[1]  # type: ignore[index]  # JAX 0.11: "85 376"
    assert memory["peak_bytes"] == int(peak.replace(" ", ""))
    data = xla_dump_data(dump, prefix)
    sequence = (dump / f"{prefix}.thunk_sequence.txt").read_text()
    launched = re.findall(r"kCustomKernel \[[^\]]*\] (\S+) grid: \[([^\]]*)\]", sequence)
    kernels = {re.sub(r"[.-]", "_", name): name for name, i in data.instructions.items() if i.get("kernel")}
    assert sorted(kernels) == sorted(symbol for symbol, _ in launched) and len(launched) == 10
    code = unpack(data.code)
    for symbol, grid in launched:
        text = code[kernels[symbol]][0][1]
        assert f"grid (blocks): [{grid}]" in text and "CUDA graph" in text
    assert main(["explore", str(dump)]) == 0
    assert (dump / f"{prefix}.xla.explorer.html").is_file() and (dump / f"{prefix}.vs_xla_teach.diff.html").is_file()
    assert "priority-fusion" in capsys.readouterr().out  # XLA's GPU fusion pass, which xla_teach has not


@pytest.mark.slow
def test_a_gpu_dump_s_priority_fusion_in_a_browser(browser, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """The stored GPU dump's page in headless Chromium (1600x1000): XLA's priority-fusion step drawn
    before and after, no script error (the kernels' launches are checked in the data above)."""
    from xla_teach.tools.explorer.page import explorer_page

    path = tmp_path / "gpu.html"
    path.write_text(explorer_page(xla_dump_data(_stored_gpu_dump(tmp_path), "module_0000.jit_step")))
    browser.get(path.as_uri())
    sides = _show_pass(browser, "priority-fusion")
    assert sides == ["before priority-fusion", "after priority-fusion"]
    browser.save_screenshot(str(tmp_path / "gpu_priority_fusion.png"))
    assert console_errors(browser) == []


@pytest.mark.gpu
def test_explore_dir_on_a_fresh_jax_gpu_dump(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """On a machine where JAX has a CUDA GPU: XLA's GPU dump (every pass) of the same training
    step becomes pages that step through XLA's GPU passes, with XLA's optimized module and its
    buffer assignment. ``scripts/gpu_check.sh`` sets GPU_CHECK_OUTDIR: the dump is kept there (a
    tarball and a file list), for tests/data and for reading what a GPU dump holds."""
    import os
    import subprocess
    import sys
    import tarfile

    jax = pytest.importorskip("jax")
    try:
        jax.devices("gpu")
    except RuntimeError:
        pytest.skip("JAX has no GPU here")
    dump = tmp_path / "gpu_dump"
    program = JAX_PROGRAM.split("mesh = jax.make_mesh")[0]  # one GPU: the training step alone
    env = {**os.environ, "XLA_FLAGS": f"--xla_dump_to={dump} --xla_dump_hlo_pass_re=.*", "JAX_PLATFORMS": "cuda"}
    run = subprocess.run([sys.executable, "-c", program], env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    keep = os.environ.get("GPU_CHECK_OUTDIR")
    if keep:
        (Path(keep) / "xla_gpu_dump_files.txt").write_text("\n".join(
            f"{p.stat().st_size:10d} {p.name}" for p in sorted(dump.iterdir())))
        with tarfile.open(Path(keep) / "xla_gpu_dump.tar.gz", "w:gz") as tar:
            tar.add(dump, arcname="gpu_dump")
    assert main(["explore", str(dump)]) == 0
    capsys.readouterr()
    step = next(p for p in modules_with_pass_dumps(dump) if p.endswith("jit_step"))
    assert (dump / f"{step}.xla.explorer.html").is_file()
    data = xla_dump_data(dump, step, graphs=False)
    assert len(data.passes) > 10
    assert any("fusion" in p["name"] for p in data.passes)
    assert any(f.name.startswith(step) and "gpu_after_optimizations" in f.name for f in dump.iterdir())
