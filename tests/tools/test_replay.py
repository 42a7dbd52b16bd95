"""replay (replay_computation): results equal NumPy's and the interpreter's, real XLA dumps run with
their recorded inputs, num_runs/compile_only behave, errors are clear."""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pytest

from xla_teach.hlo.evaluator import evaluate_module
from xla_teach.hlo.text.parser import parse_hlo
from xla_teach.tools.bugs.fake_data import fake_arguments
from xla_teach.tools.bugs.replay import replay
from xla_teach.tools.tool_support import ToolError, load_hlo_input, load_literals

SAMPLES = Path(__file__).parents[2] / "tests" / "data" / "xla_samples"
PROGRAMS = sorted(p for p in SAMPLES.glob("*") if (p / "meta.json").is_file()) if SAMPLES.is_dir() else []

EXAMPLE = """
HloModule tools_example

%add_f32 (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %sum = f32[] add(%a, %b)
}

ENTRY %main (x: f32[64], y: f32[64], z: f32[64]) -> (f32[], f32[64]) {
  %x = f32[64]{0} parameter(0)
  %y = f32[64]{0} parameter(1)
  %z = f32[64]{0} parameter(2)
  %mul = f32[64]{0} multiply(%y, %z)
  %add = f32[64]{0} add(%x, %mul)
  %zero = f32[] constant(0)
  %total = f32[] reduce(%add, %zero), dimensions={0}, to_apply=%add_f32
  ROOT %t = (f32[], f32[64]{0}) tuple(%total, %add)
}
"""


@pytest.fixture
def example_file(tmp_path):
    path = tmp_path / "example.hlo"
    path.write_text(EXAMPLE)
    return path


@pytest.mark.parametrize("platform", ["cpu", "interpreter"])
def test_replay_with_fake_data_matches_numpy(example_file, platform):
    out = io.StringIO()
    result = replay(example_file, platform, use_fake_data=True, seed=3, out=out)
    x, y, z = fake_arguments(parse_hlo(EXAMPLE), seed=3)
    np.testing.assert_allclose(result.outputs[1], x + y * z, rtol=1e-6)
    np.testing.assert_allclose(result.outputs[0], np.sum(x.astype(np.float64) + y * z), rtol=1e-5, atol=1e-5)
    text = out.getvalue()
    assert f"{example_file}: tools_example :: f32[] " in text
    assert "Done executing in" in text


def test_replay_equals_interpreter_bitwise_for_elementwise(example_file):
    result = replay(example_file, "cpu", use_fake_data=True, print_result=False)
    expected = evaluate_module(parse_hlo(EXAMPLE), fake_arguments(parse_hlo(EXAMPLE)))
    assert np.array_equal(result.outputs[1], expected[1])  # x + y*z: one rounding per op either way


def test_num_runs_times_each_run_and_compile_only(example_file):
    result = replay(example_file, "cpu", use_fake_data=True, num_runs=4, print_result=False)
    assert len(result.run_seconds) == 4 and all(s > 0 for s in result.run_seconds)
    assert result.compile_seconds > 0
    compiled = replay(example_file, "cpu", compile_only=True, print_result=False)
    assert compiled.run_seconds == [] and compiled.outputs == []


def test_text_without_fake_data_is_an_error(example_file):
    with pytest.raises(ToolError, match="--use_fake_data"):
        replay(example_file, "cpu", print_result=False)


def test_errors_for_missing_file_and_bad_platform(tmp_path, example_file):
    with pytest.raises(ToolError, match="no such file"):
        replay(tmp_path / "missing.hlo", "cpu")
    with pytest.raises(ToolError, match="unknown platform 'tpu'"):
        replay(example_file, "tpu", use_fake_data=True)


def test_parse_error_names_line_and_column(tmp_path):
    bad = tmp_path / "bad.hlo"
    bad.write_text("HloModule m\nENTRY e {\n  p = f32[2] parameter(0)\n  ROOT r = f32[2] addd(p, p)\n}\n")
    with pytest.raises(ToolError) as info:
        load_hlo_input(bad)
    first, source, caret = str(info.value).splitlines()
    assert first.startswith(f"{bad}:4:19: ")
    assert source.strip() == "ROOT r = f32[2] addd(p, p)"
    assert source.index("addd") == caret.index("^")


def _sample_cases():
    return [pytest.param(program, platform, id=f"{program.name}-{platform}")
            for program in PROGRAMS for platform in ("cpu", "interpreter")]


@pytest.mark.skipif(not PROGRAMS, reason="no samples of real XLA runs")
@pytest.mark.parametrize("program,platform", list(_sample_cases()))
def test_real_xla_dump_replays_to_xla_outputs(program, platform):
    """XLA's own dump + the inputs it ran on: we reproduce XLA's outputs (within the sample's tolerance)."""
    meta = json.loads((program / "meta.json").read_text())
    result = replay(program / "before_optimizations.txt", platform,
                    input_literals_file=str(program / "inputs.npz"), print_result=False)
    expected = np.load(program / "outputs.npz")
    assert len(result.outputs) == len(meta["outputs"])
    for got, out in zip(result.outputs, meta["outputs"], strict=True):
        want = expected[out["key"]]
        if want.dtype == np.uint16 and got.dtype != np.uint16:  # bf16 stored as bits
            want = want.view(got.dtype)
        assert got.shape == want.shape
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64),
                                   rtol=meta["tolerance"]["rtol"], atol=meta["tolerance"]["atol"])


def test_literals_file_missing_key(tmp_path, example_file):
    np.savez(tmp_path / "in.npz", arg0=np.zeros(64, np.float32))
    with pytest.raises(ToolError, match="missing arg1, arg2"):
        load_literals(tmp_path / "in.npz", parse_hlo(EXAMPLE))
