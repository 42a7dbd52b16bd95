"""``--xla_dump_to`` dumps: XLA's file names, per-pass rules, never overwriting, filters.

The oracles: the real XLA dump folder in tests/data/xla_samples (file name kinds), the pass
recorder of the same compilation (which passes changed the module, and their text),
and the printer (file contents).
"""

from __future__ import annotations

import gc
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.tools.dump_test_utils import XLA_DUMP, kind_of, seed_hlo
from xla_teach import flags
from xla_teach.api import compile_module, execute
from xla_teach.hlo.text.parser import parse_hlo
from xla_teach.passes.pass_base import PassRecord
from xla_teach.tools.dump import DumpError, ModuleDumper, after_optimizations_name

pytestmark = pytest.mark.skipif(not XLA_DUMP.is_dir(), reason="tests/data/xla_samples not present")

ALL_FORMATS = {"xla_dump_hlo_as_text": True, "xla_dump_hlo_as_dot": True, "xla_dump_hlo_as_html": True}
PER_PASS = re.compile(r"^module_(\d{4})\.jit_f\.(\d{4})\.([\w.\-]+)\.after_([\w\-]+)\.before_([\w\-]+)\.(txt|dot|html)$")


def dump(tmp_path: Path, backend: str = "cpu", **flag_values: object):
    with flags.override(xla_dump_to=str(tmp_path), **flag_values):
        return compile_module(seed_hlo(), backend)


def names(folder: Path) -> set[str]:
    """The module files of a dump folder (not xla_teach's folder-level index.html)."""
    return {p.name for p in folder.iterdir() if p.name != "index.html"}


def test_sample_folder_kinds_are_all_known():
    """Every file real XLA wrote for the seed example falls into one FILE_KINDS entry
    (so the kinds the next test checks are XLA's, not invented)."""
    unknown = [n for n in names(XLA_DUMP) if kind_of(n) is None and not (XLA_DUMP / n).is_dir()]
    assert unknown == []


def test_seed_example_dump_has_xlas_file_set(tmp_path):
    exe = dump(tmp_path, xla_dump_hlo_pass_re=".*", **ALL_FORMATS)
    ours = names(tmp_path)
    kinds = {kind_of(n) for n in ours}
    assert None not in kinds, [n for n in ours if kind_of(n) is None]
    xla_kinds = {kind_of(n) for n in names(XLA_DUMP)} - {None}
    # Everything XLA's CPU dump has, except its object files and extra buffer reports, we have too.
    assert xla_kinds - {"object_file", "buffer_assignment_extra"} <= kinds
    for stage in ("before_optimizations", "cpu_after_optimizations"):
        for ext in ("txt", "dot", "html"):
            assert f"module_0000.jit_f.{stage}.{ext}" in ours
    for name in ("cpu_after_optimizations.top_level.html", "cpu_after_optimizations-buffer-assignment.txt",
                 "ir-no-opt.ll", "ir-with-opt.ll", "s", "debug_options"):
        assert f"module_0000.jit_f.{name}" in ours
    # Contents: what the printer prints for the module before and after the passes.
    assert (tmp_path / "module_0000.jit_f.before_optimizations.txt").read_text() == \
        parse_hlo(seed_hlo()).to_text(print_large_constants=False)
    assert (tmp_path / "module_0000.jit_f.cpu_after_optimizations.txt").read_text() == \
        exe.module.to_text(print_large_constants=False)
    assert (tmp_path / "module_0000.jit_f.ir-no-opt.ll").read_text() == exe.artifacts.llvm_ir
    assert (tmp_path / "module_0000.jit_f.cpu_after_optimizations-buffer-assignment.txt").read_text() == \
        exe.artifacts.buffer_assignment_text
    assert (tmp_path / "module_0000.jit_f.debug_options").read_text().count('xla_dump_hlo_pass_re: ".*"') == 1


def test_per_pass_dumps_follow_xlas_rules(tmp_path):
    exe = dump(tmp_path, xla_dump_hlo_pass_re=".*", **ALL_FORMATS)
    per_pass = sorted(m.groups() for n in names(tmp_path) if (m := PER_PASS.match(n)))
    steps = sorted({g[1] for g in per_pass})
    assert steps == [f"{i:04d}" for i in range(len(steps))], "NNNN counts every dump step from 0000"
    for step in steps:
        assert {g[5] for g in per_pass if g[1] == step} == {"txt", "dot", "html"}
    first = [g for g in per_pass if g[1] == "0000"][0]
    assert first[3] == "pipeline-start"
    # With exactly '.*', a pass gets an after_ dump iff it changed the module, and holds its result.
    changed = [r for r in exe.recorder.records if r.changed]
    after_dumps = [g for g in per_pass if g[3] != "pipeline-start" and g[5] == "txt"]
    assert len(after_dumps) == len(changed) >= 1
    for record, g in zip(changed, sorted(after_dumps, key=lambda g: g[1]), strict=True):
        assert g[3] == record.pass_name and g[2] == record.pipeline
        name = f"module_0000.jit_f.{g[1]}.{g[2]}.after_{g[3]}.before_{g[4]}.txt"
        assert (tmp_path / name).read_text() == parse_hlo(record.after).to_text(print_large_constants=False)


def test_pass_re_other_than_dot_star_dumps_unchanged_passes_too(tmp_path):
    exe = dump(tmp_path, xla_dump_hlo_pass_re="^dce$")
    dce_runs = [r for r in exe.recorder.records if r.pass_name == "dce"]
    assert dce_runs and not all(r.changed for r in dce_runs)
    per_pass = [m.groups() for n in names(tmp_path) if (m := PER_PASS.match(n))]
    after_dce = [g for g in per_pass if g[3] == "dce"]
    assert len(after_dce) == len(dce_runs)
    # Every dump has 'dce' on one side: passes whose neighbours are not dce are not dumped.
    assert all("dce" in (g[3], g[4]) for g in per_pass)
    assert all(g[5] == "txt" for g in per_pass), "text is the default format"


def test_no_pass_re_means_no_per_pass_files_and_text_is_default(tmp_path):
    dump(tmp_path)
    ours = names(tmp_path)
    assert not any(PER_PASS.match(n) for n in ours)
    assert not any(n.endswith((".dot", ".html", ".svg")) and kind_of(n) != "explorer" for n in ours)
    assert "module_0000.jit_f.before_optimizations.txt" in ours


def test_svg_format(tmp_path):
    if not _have_dot():
        pytest.skip("Graphviz dot not installed")
    dump(tmp_path, xla_teach_dump_hlo_as_svg=True)
    svg = (tmp_path / "module_0000.jit_f.cpu_after_optimizations.svg").read_text()
    assert "<svg" in svg and "Fused expression for" in svg
    assert not (tmp_path / "module_0000.jit_f.cpu_after_optimizations.txt").exists()


def test_dot_files_are_valid_graphviz(tmp_path):
    if not _have_dot():
        pytest.skip("Graphviz dot not installed")
    dump(tmp_path, xla_dump_hlo_pass_re=".*", xla_dump_hlo_as_dot=True)
    dots = sorted(tmp_path.glob("*.dot"))
    assert len(dots) >= 3
    for path in dots:
        done = subprocess.run(["dot", "-Tsvg", str(path)], capture_output=True, text=True, check=False)
        assert done.returncode == 0, (path.name, done.stderr)


def _have_dot() -> bool:
    from xla_teach.tools.render import have_dot

    return have_dot()


# ---- numbering and never overwriting ------------------------------------------------------
def test_numbers_continue_after_highest_present_and_nothing_is_overwritten(tmp_path):
    (tmp_path / "module_0041.other.before_optimizations.txt").write_text("theirs")
    (tmp_path / "module_0007.jit_x").mkdir()  # JAX's per-module folders count too
    (tmp_path / "notes.txt").write_text("keep me")
    dump(tmp_path)
    dump(tmp_path)
    ids = {int(m.group(1)) for n in names(tmp_path) if (m := re.match(r"module_(\d+)\.jit_f\.", n))}
    assert ids == {42, 43}
    assert (tmp_path / "module_0041.other.before_optimizations.txt").read_text() == "theirs"
    assert (tmp_path / "notes.txt").read_text() == "keep me"


def test_numbering_continues_after_a_real_xla_dump(tmp_path):
    for path in XLA_DUMP.iterdir():
        if path.is_file() and path.name.endswith(".txt"):
            (tmp_path / path.name).write_text(path.read_text())
    before = {p.name: p.read_text() for p in tmp_path.iterdir()}
    dump(tmp_path)
    assert "module_0001.jit_f.before_optimizations.txt" in names(tmp_path)
    assert all((tmp_path / n).read_text() == text for n, text in before.items())


def test_a_number_taken_meanwhile_by_another_writer_is_skipped(tmp_path):
    module = parse_hlo(seed_hlo())
    dumper = ModuleDumper.create(module, {**flags.current(), "xla_dump_to": str(tmp_path)}, "cpu")
    assert dumper is not None and dumper.module_id == 0
    clash = tmp_path / "module_0000.jit_f.before_optimizations.txt"
    clash.write_text("another process got here first")
    dumper.before_optimizations(module)
    assert clash.read_text() == "another process got here first"
    assert dumper.module_id == 1
    assert (tmp_path / "module_0001.jit_f.before_optimizations.txt").exists()


def test_numbering_across_processes(tmp_path):
    script = ("import sys; from xla_teach import flags; from xla_teach.api import compile_module\n"
              "with flags.override(xla_dump_to=sys.argv[1]): compile_module(open(sys.argv[2]).read(), 'interpreter')")
    from tests.tools.dump_test_utils import SEED_HLO_FILE

    root = Path(__file__).resolve().parents[2]
    subprocess.run([sys.executable, "-c", script, str(tmp_path), str(SEED_HLO_FILE)], check=True, cwd=root)
    dump(tmp_path, backend="interpreter")
    assert {"module_0000.jit_f.before_optimizations.txt", "module_0001.jit_f.before_optimizations.txt"} <= \
        names(tmp_path)


# ---- which modules are dumped ----------------------------------------------------------------
def test_module_re_filters_by_module_name(tmp_path):
    dump(tmp_path / "a", xla_dump_hlo_module_re="jit_g")
    assert not (tmp_path / "a").exists() or names(tmp_path / "a") == set()
    dump(tmp_path / "b", xla_dump_hlo_module_re="t_f")  # partial match, as XLA's RE2 PartialMatch
    assert "module_0000.jit_f.before_optimizations.txt" in names(tmp_path / "b")


def test_max_hlo_modules(tmp_path):
    (tmp_path / "module_0000.a.txt").write_text("")
    (tmp_path / "module_0001.b.txt").write_text("")
    with pytest.warns(UserWarning, match="xla_dump_max_hlo_modules"):
        dump(tmp_path, xla_dump_max_hlo_modules=2)
    assert len(names(tmp_path)) == 2
    dump(tmp_path, xla_dump_max_hlo_modules=3)
    assert "module_0002.jit_f.before_optimizations.txt" in names(tmp_path)


def test_timestamp_prefix(tmp_path):
    dump(tmp_path, xla_dump_include_timestamp=True)
    prefixes = {n.split(".module_")[0] for n in names(tmp_path)}
    assert len(prefixes) == 1, "every file of one module shares one timestamp"
    assert re.fullmatch(r"\d{16}", prefixes.pop())
    assert all(re.match(r"\d{16}\.module_0000\.jit_f\.", n) for n in names(tmp_path))


def test_creates_missing_folder_and_rejects_a_file(tmp_path):
    dump(tmp_path / "x" / "y")
    assert (tmp_path / "x" / "y" / "module_0000.jit_f.before_optimizations.txt").exists()
    (tmp_path / "file").write_text("")
    with pytest.raises(DumpError, match="names a file"):
        dump(tmp_path / "file")


def test_bad_regex_is_a_clear_error(tmp_path):
    with pytest.raises(DumpError, match="xla_dump_hlo_pass_re"):
        dump(tmp_path, xla_dump_hlo_pass_re="(")


def test_dump_to_stdout(tmp_path, capsys):
    with flags.override(xla_dump_to="-"):
        compile_module(seed_hlo(), "interpreter")
    out = capsys.readouterr().out
    assert "*** Begin module_0000.jit_f.before_optimizations.txt ***" in out
    assert "*** End module_0000.jit_f.after_optimizations.txt ***" in out


def test_interpreter_and_gpu_names():
    assert after_optimizations_name("interpreter") == "after_optimizations"
    assert after_optimizations_name("cpu") == "cpu_after_optimizations"
    # The reference's example: CUDA sm_80 -> sm_8.0_gpu_after_optimizations.
    assert after_optimizations_name("gpu", "sm_80") == "sm_8.0_gpu_after_optimizations"
    assert after_optimizations_name("gpu", "sm_90a") == "sm_9.0a_gpu_after_optimizations"


def test_interpreter_dump_has_no_llvm_files(tmp_path):
    dump(tmp_path, backend="interpreter")
    ours = names(tmp_path)
    assert "module_0000.jit_f.after_optimizations.txt" in ours
    assert not any(n.endswith((".ll", ".s")) for n in ours)


# ---- snapshots and crashes ---------------------------------------------------------------------
def test_snapshots_are_numbered_per_run_and_hold_module_args_outputs(tmp_path):
    from xla_teach.tools.bugs.snapshot import load_snapshot

    rng = np.random.default_rng(0)
    args = [rng.standard_normal(1024).astype(np.float32) for _ in range(3)]
    with flags.override(xla_dump_to=str(tmp_path), xla_dump_hlo_snapshots=True):
        outputs = execute(seed_hlo(), args, backend="cpu")
    path = tmp_path / "module_0000.jit_f.snapshot.0.npz"
    snap = load_snapshot(path)
    assert snap.module_text == parse_hlo(seed_hlo()).to_text()
    assert all(np.array_equal(a, b) for a, b in zip(snap.arguments, args, strict=True))
    assert np.array_equal(snap.outputs[0], outputs[0])
    # A second run of the same executable is snapshot 1; an existing file is skipped, not replaced.
    with flags.override(xla_dump_to=str(tmp_path)):
        exe = compile_module(seed_hlo(), "interpreter")
    (tmp_path / "module_0001.jit_f.snapshot.1.npz").write_text("keep")
    first = exe.dumper.snapshot(args, exe.execute(args))
    second = exe.dumper.snapshot(args, exe.execute(args))
    assert (first.name, second.name) == ("module_0001.jit_f.snapshot.0.npz", "module_0001.jit_f.snapshot.2.npz")
    assert (tmp_path / "module_0001.jit_f.snapshot.1.npz").read_text() == "keep"


def test_last_pass_dump_survives_a_crashed_compilation(tmp_path):
    module = parse_hlo(seed_hlo())
    values = {**flags.current(), "xla_dump_to": str(tmp_path), "xla_dump_hlo_pass_re": ".*"}
    dumper = ModuleDumper.create(module, values, "cpu")
    text = module.to_text()
    changed = text.replace("ENTRY %main.2", "ENTRY %main.3")
    dumper.on_pass(PassRecord(0, "p", "first-pass", True, text, changed, 0, 0, 0, 0, 0.0))
    del dumper  # the compilation died: after_compilation() never comes
    gc.collect()
    assert (tmp_path / "module_0000.jit_f.0000.p.after_pipeline-start.before_first-pass.txt").exists()
    assert "main.3" in (tmp_path / "module_0000.jit_f.0001.p.after_first-pass.before_pipeline-end.txt").read_text()


def test_text_options_metadata_and_short_form(tmp_path):
    dump(tmp_path, xla_dump_disable_metadata=True, xla_dump_hlo_as_long_text=False)
    text = (tmp_path / "module_0000.jit_f.before_optimizations.txt").read_text()
    assert text == parse_hlo(seed_hlo()).to_text(print_metadata=False, long_form=False, print_large_constants=False)
    assert "metadata=" not in text and "%" not in text


def test_large_constants_are_elided_unless_asked(tmp_path):
    hlo = ("HloModule big\n\nENTRY %main (x: f32[12]) -> f32[12] {\n  %x = f32[12] parameter(0)\n"
           "  %c = f32[12] constant({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12})\n  ROOT %a = f32[12] add(%x, %c)\n}\n")
    with flags.override(xla_dump_to=str(tmp_path / "a"), xla_dump_hlo_pass_re=".*"):
        compile_module(hlo, "cpu")
    texts = [p.read_text() for p in (tmp_path / "a").glob("*.txt")]
    assert all("constant({...})" in t for t in texts if "constant(" in t) and len(texts) >= 3
    with flags.override(xla_dump_to=str(tmp_path / "b"), xla_dump_large_constants=True):
        compile_module(hlo, "cpu")
    assert "constant({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12})" in \
        (tmp_path / "b" / "module_0000.big.before_optimizations.txt").read_text()


def test_gpu_files_are_named_from_the_ptx_target(tmp_path):
    """No GPU needed: an executable with PTX for sm_90 (what the GPU backend returns)."""
    from xla_teach.runtime.executable import CompiledArtifacts, CompiledExecutable

    module = parse_hlo(seed_hlo())
    ptx = "//\n.version 7.8\n.target sm_90\n.address_size 64\n"
    exe = CompiledExecutable()
    exe.backend, exe.module = "gpu", module
    exe.artifacts = CompiledArtifacts(optimized_module=module, llvm_ir="; ir", ptx=ptx)
    dumper = ModuleDumper.create(module, {**flags.current(), "xla_dump_to": str(tmp_path)}, "gpu")
    dumper.before_optimizations(module)
    dumper.after_compilation(exe)
    assert {"module_0000.jit_f.sm_9.0_gpu_after_optimizations.txt", "module_0000.jit_f.ptx",
            "module_0000.jit_f.ir-no-opt.ll"} <= names(tmp_path)
    assert (tmp_path / "module_0000.jit_f.ptx").read_text() == ptx
    assert not (tmp_path / "module_0000.jit_f.ir-with-opt.ll").exists(), "empty artifacts are not written"
