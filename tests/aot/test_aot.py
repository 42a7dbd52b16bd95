"""AOT: the object file links into a C program whose output equals the interpreter's."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

import xla_teach.numpy as xnp
from xla_teach.aot import AotError, compile_aot
from xla_teach.api import execute
from xla_teach.hlo.text.parser import parse_hlo
from xla_teach.tools.bugs.fake_data import fake_arguments
from xla_teach.tools.cli import main as cli_main

needs_cc = pytest.mark.skipif(shutil.which("cc") is None, reason="no system C compiler (cc)")

TUPLE_MODULE = """
HloModule mixed_outputs, entry_computation_layout={(f32[6,5]{1,0}, s32[6]{0})->(f32[6]{0}, s32[6]{0}, f32[6,5]{1,0})}

%add_f32 (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %add = f32[] add(%a, %b)
}

ENTRY %main (x: f32[6,5], i: s32[6]) -> (f32[6], s32[6], f32[6,5]) {
  %x = f32[6,5]{1,0} parameter(0)
  %i = s32[6]{0} parameter(1)
  %e = f32[6,5]{1,0} exponential(%x)
  %zero = f32[] constant(0)
  %row = f32[6]{0} reduce(%e, %zero), dimensions={1}, to_apply=%add_f32
  %c = s32[6]{0} constant({3, 1, 4, 1, 5, 9})
  %m = s32[6]{0} multiply(%i, %c)
  ROOT %t = (f32[6]{0}, s32[6]{0}, f32[6,5]{1,0}) tuple(%row, %m, %x)
}
"""

WHILE_MODULE = """
HloModule counting

%cond (s: s32[]) -> pred[] {
  %s = s32[] parameter(0)
  %ten = s32[] constant(10)
  ROOT %lt = pred[] compare(%s, %ten), direction=LT
}

%body (s.1: s32[]) -> s32[] {
  %s.1 = s32[] parameter(0)
  %one = s32[] constant(1)
  ROOT %next = s32[] add(%s.1, %one)
}

ENTRY %main (p: s32[]) -> s32[] {
  %p = s32[] parameter(0)
  ROOT %w = s32[] while(%p), condition=%cond, body=%body
}
"""


def _run_c_program(result, args: list[np.ndarray], workdir: Path) -> list[np.ndarray]:  # noqa: ANN001
    subprocess.run(result.build_command.split(), check=True, capture_output=True)
    files = []
    for i, a in enumerate(args):
        path = workdir / f"arg{i}.bin"
        np.ascontiguousarray(a).tofile(path)
        files.append(str(path))
    out = subprocess.run([str(result.main_path.with_suffix("")), *files], check=True, capture_output=True,
                         text=True).stdout
    blocks: list[list[str]] = []
    for line in out.splitlines():
        if line.startswith("#"):
            blocks.append([])
        else:
            blocks[-1].append(line)
    values = []
    for buf, lines in zip(result.results, blocks, strict=True):
        values.append(np.array([float(v) for v in lines]).reshape(buf.shape.dimensions))
    return values


@needs_cc
def test_c_program_from_a_jit_function_matches_the_interpreter(tmp_path: Path) -> None:
    def mlp(x, w, b):  # noqa: ANN001, ANN202
        h = xnp.maximum(x @ w + b, 0.0)
        return xnp.tanh(h).sum(axis=1), h

    rng = np.random.default_rng(0)
    args = [rng.standard_normal((16, 96)).astype(np.float32), rng.standard_normal((96, 80)).astype(np.float32),
            rng.standard_normal(80).astype(np.float32)]  # 16*96*80 flops: the JIT would call BLAS here
    result = compile_aot(mlp, tmp_path, entry_point="mlp", example_args=args)
    header = result.header_path.read_text()
    assert "void mlp(const float* x, const float* w, const float* b, float* result0, float* result1, void* temp);" \
        in header
    assert "#define MLP_ARG0_SIZE 6144" in header and "#define MLP_RESULT1_ELEMENTS 1280" in header
    assert not any("gemm" in s for s in result.external_symbols)
    got = _run_c_program(result, args, tmp_path)
    expected = execute(_traced(mlp, args), args, "interpreter")
    for g, e in zip(got, expected, strict=True):
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-5)


def _traced(fn, args):  # noqa: ANN001, ANN202
    import xla_teach

    return xla_teach.jit(fn).lower(*args).module


@needs_cc
def test_c_program_from_an_hlo_file_with_tuple_results_and_constants(tmp_path: Path) -> None:
    hlo = tmp_path / "mixed.hlo"
    hlo.write_text(TUPLE_MODULE)
    assert cli_main(["aot", str(hlo), "--entry_point=mixed", f"--out_dir={tmp_path}"]) == 0
    module = parse_hlo(TUPLE_MODULE)
    args = fake_arguments(module, seed=3)
    result = compile_aot(TUPLE_MODULE, tmp_path / "api", entry_point="mixed")
    assert "const int32_t* arg1" in result.header_path.read_text()  # `i` is taken by the example program
    got = _run_c_program(result, args, tmp_path)
    expected = execute(module, args, "interpreter")
    for g, e in zip(got, expected, strict=True):
        np.testing.assert_allclose(g, e.astype(np.float64), rtol=1e-6)
    assert (tmp_path / "mixed.o").exists() and (tmp_path / "mixed_main.c").exists()


CONV_MODULE = """
HloModule conv
ENTRY %main (x: f32[2,6,6,3], w: f32[3,3,3,4]) -> f32[2,6,6,4] {
  %x = f32[2,6,6,3]{3,2,1,0} parameter(0)
  %w = f32[3,3,3,4]{3,2,1,0} parameter(1)
  ROOT %c = f32[2,6,6,4]{3,2,1,0} convolution(%x, %w), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f
}
"""


@needs_cc
def test_a_convolution_compiles_into_the_object_itself(tmp_path: Path) -> None:
    """The JIT's convolutions call the runtime library, which an object file cannot: AOT emits
    them as element loops."""
    result = compile_aot(CONV_MODULE, tmp_path, entry_point="conv")
    assert not any(s.startswith("xla_teach_") or "gemm" in s for s in result.external_symbols)
    module = parse_hlo(CONV_MODULE)
    args = fake_arguments(module, seed=5)
    (got,) = _run_c_program(result, args, tmp_path)
    (expected,) = execute(module, args, "interpreter")
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


def test_host_thunks_are_refused_with_the_op_named(tmp_path: Path) -> None:
    with pytest.raises(AotError, match=r"%w \(while\) runs as a Python host thunk"):
        compile_aot(WHILE_MODULE, tmp_path)
    assert not list(tmp_path.iterdir())


def test_existing_files_are_not_overwritten(tmp_path: Path) -> None:
    compile_aot(TUPLE_MODULE, tmp_path, entry_point="m", emit_main=False)
    with pytest.raises(FileExistsError, match="refusing to overwrite"):
        compile_aot(TUPLE_MODULE, tmp_path, entry_point="m", emit_main=False)
    compile_aot(TUPLE_MODULE, tmp_path, entry_point="m", emit_main=False, overwrite=True)


def test_cli_errors_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    hlo = tmp_path / "w.hlo"
    hlo.write_text(WHILE_MODULE)
    assert cli_main(["aot", str(hlo), f"--out_dir={tmp_path}"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("xla-teach aot: error: cannot compile counting ahead of time") and err.count("\n") == 1


@pytest.mark.parametrize("name", ["int", "while", "3d", "a-b"])
def test_the_entry_point_must_be_a_usable_c_name(tmp_path: Path, name: str) -> None:
    """``int`` used to be accepted, and the generated header then failed to compile."""
    hlo = tmp_path / "n.hlo"
    hlo.write_text("HloModule n\nENTRY e {\n  p = f32[2] parameter(0)\n  ROOT r = f32[2] negate(p)\n}\n")
    with pytest.raises(AotError, match="is not a C identifier"):
        compile_aot(hlo, tmp_path / "out", entry_point=name)


def test_a_function_needs_example_args(tmp_path: Path) -> None:
    with pytest.raises(AotError, match="needs example_args"):
        compile_aot(lambda x: x, tmp_path)


RNG_MODULE = """
HloModule draws
ENTRY main {
  lo = s32[] parameter(0)
  hi = s32[] parameter(1)
  a = s32[7] rng(lo, hi), distribution=rng_uniform
  m = f32[] constant(0)
  s = f32[] constant(1)
  n = f32[2,3] rng(m, s), distribution=rng_normal
  b = s32[5] rng(lo, hi), distribution=rng_uniform
  ROOT t = (s32[7], f32[2,3], s32[5]) tuple(a, n, b)
}
"""


@needs_cc
def test_c_program_with_legacy_rng_draws_what_the_interpreter_draws(tmp_path: Path) -> None:
    """The Philox state is a global of the object, reset by the entry function's first kernel."""
    result = compile_aot(RNG_MODULE, tmp_path, entry_point="draws")
    args = [np.int32(-1000), np.int32(1000)]
    got = _run_c_program(result, [np.asarray(a) for a in args], tmp_path)
    expected = execute(parse_hlo(RNG_MODULE), args, "interpreter")
    for g, e in zip(got, expected, strict=True):
        np.testing.assert_allclose(g, e.astype(np.float64), rtol=1e-6)
    assert len({tuple(g.ravel()) for g in (got[0][:5], got[2])}) == 2  # b draws after a, not again
