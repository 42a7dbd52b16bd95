"""run-hlo-module: agreement on correct backends, a planted miscompile (broken pass, wrong runner) is
flagged with the right output/index/errors, and the comparison follows XLA's abs-AND-rel rule."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from xla_teach.hlo.text.parser import parse_hlo
from xla_teach.tools.bugs.bisect import inject_pass
from xla_teach.tools.bugs.fake_data import fake_arguments
from xla_teach.tools.cli.run_hlo_module import run_hlo_module
from xla_teach.tools.tool_support import (
    backend_pipeline,
    compare_array,
    compare_outputs,
    load_hlo_input,
    reference_outputs,
)

EXAMPLE = """
HloModule rhm_example

%add_f32 (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %sum = f32[] add(%a, %b)
}

ENTRY %main (x: f32[32], y: f32[32], z: f32[32]) -> (f32[32], f32[]) {
  %x = f32[32]{0} parameter(0)
  %y = f32[32]{0} parameter(1)
  %z = f32[32]{0} parameter(2)
  %d = f32[32]{0} subtract(%x, %y)
  %mul = f32[32]{0} multiply(%d, %z)
  %zero = f32[] constant(0)
  %total = f32[] reduce(%mul, %zero), dimensions={0}, to_apply=%add_f32
  ROOT %t = (f32[32]{0}, f32[]) tuple(%d, %total)
}
"""


@pytest.mark.parametrize("platform", ["cpu", "interpreter"])
def test_correct_backend_is_close_enough(platform):
    report = run_hlo_module(parse_hlo(EXAMPLE), platform, iterations=2)
    assert report.ok and len(report.runs) == 2
    # each iteration drew new inputs
    assert not np.array_equal(report.runs[0].args[0], report.runs[1].args[0])
    assert f"** Results on {platform} and interpreter are close enough. **" in report.text()
    assert report.text().endswith("0/2 runs miscompared.")


def test_planted_broken_pass_is_flagged():
    module = parse_hlo(EXAMPLE)
    pipeline = inject_pass(backend_pipeline("cpu"), "broken-swap-operands", after="fusion")
    report = run_hlo_module(module, "cpu", test_pipeline=pipeline)
    assert not report.ok and report.miscompared == 1
    run = report.runs[0]
    x, y, z = run.args
    # oracle: the broken pass computed (y - x); output 0 is exactly its negation
    np.testing.assert_array_equal(run.test_outputs[0], y - x)
    bad = [c for c in run.comparisons if not c.ok]
    assert [c.index for c in bad] == [0, 1]
    first = bad[0]
    assert first.mismatches == int(np.sum(np.abs(2 * (x - y)) > 1e-3))
    assert first.first_mismatch == (int(np.argmax(np.abs(x - y) > 5e-4)),)
    np.testing.assert_allclose(first.max_abs_error, np.max(np.abs(2 * (x - y))), rtol=1e-6)
    text = report.text()
    assert "DIFFER" in text and "output 0 (f32[32])" in text and text.endswith("1/1 runs miscompared.")


def test_wrong_reference_runner_is_flagged_at_the_right_index():
    module = parse_hlo(EXAMPLE)
    args = fake_arguments(module, seed=5)

    def off_by_one_at_7(m, a):
        outputs = reference_outputs(m, a)
        outputs[0] = outputs[0].copy()
        outputs[0][7] += 1.0
        return outputs

    report = run_hlo_module(module, "interpreter", off_by_one_at_7, args=args)
    comparison = report.runs[0].comparisons[0]
    assert not comparison.ok and comparison.mismatches == 1 and comparison.first_mismatch == (7,)
    assert comparison.max_abs_error == pytest.approx(1.0, abs=1e-5)
    assert report.runs[0].comparisons[1].ok
    assert report.reference_platform == "off_by_one_at_7"


def test_no_reference_only_runs():
    report = run_hlo_module(parse_hlo(EXAMPLE), "cpu", None)
    assert report.reference_platform == "" and report.runs[0].comparisons == [] and report.ok


def test_comparison_rule_abs_and_rel():
    expected = np.array([1000.0, 0.0, 1.0, np.nan, np.inf, 2.0], np.float32)
    actual = np.array([1000.5, 0.0005, 1.01, np.nan, np.inf, np.nan], np.float32)
    c = compare_array(0, actual, expected, abs_error_bound=1e-3, rel_error_bound=1e-3)
    # 1000.5: abs 0.5 > 1e-3 but rel 5e-4 <= 1e-3 -> ok; 0.0005 vs 0: abs <= bound -> ok;
    # 1.01: both exceeded -> differs; nan==nan ok; inf==inf ok; nan vs 2 -> differs
    assert c.mismatches == 2 and c.first_mismatch == (2,)
    ints = compare_array(0, np.array([1, 2, 3]), np.array([1, 2, 4]), 10.0, 10.0)
    assert ints.mismatches == 1 and ints.first_mismatch == (2,)  # integers compare exactly
    shape = compare_outputs([np.zeros(3, np.float32)], [np.zeros(4, np.float32)])[0]
    assert not shape.ok and "expected f32[4], got f32[3]" in shape.problem
    assert not compare_outputs([], [np.zeros(1)])[0].ok


XLA_DUMP = Path(__file__).parents[2] / "tests" / "data" / "xla_samples" / "xla_cpu_dump_of_seed_example"
XLA_DUMP_MODULES = sorted(p for p in XLA_DUMP.glob("module_*.txt")
                          if not any(k in p.name for k in ("buffer-assignment", "live-range", "memory-usage")))


@pytest.mark.skipif(not XLA_DUMP_MODULES, reason="no real XLA dump")
@pytest.mark.parametrize("path", XLA_DUMP_MODULES, ids=lambda p: p.name.split(".", 2)[2][:60])
def test_every_module_of_a_real_xla_dump_runs_and_agrees(path):
    """Every stage XLA dumped (before, per pass, after optimizations), run as is on our CPU backend."""
    report = run_hlo_module(load_hlo_input(path).module, "cpu", run_test_hlo_passes=False)
    assert report.ok, report.text()


def test_a_partitioned_module_runs_on_simulated_devices(capsys) -> None:  # type: ignore[no-untyped-def]
    """XLA's per-device output (num_partitions=4) runs on 4 simulated devices with the interpreter
    and on 4 CPU devices; the GPU backend, which runs one device, says so plainly."""
    from pathlib import Path

    from xla_teach.tools.cli import main

    spmd = str(Path(__file__).parents[1] / "data" / "spmd" / "sums_2x2.txt")
    assert main(["run-hlo-module", spmd, "--platform=interpreter"]) == 0
    printed = capsys.readouterr().out
    assert "ran on 4 simulated devices" in printed and printed.count("device ") == 4
    assert main(["run-hlo-module", spmd]) == 0
    printed = capsys.readouterr().out
    assert "ran on 4 CPU devices" in printed and printed.count("device ") == 4
    assert main(["run-hlo-module", spmd, "--platform=gpu"]) != 0
    assert "the CPU runs them as threads" in capsys.readouterr().err


def test_replay_runs_a_partitioned_module_on_simulated_devices(capsys) -> None:  # type: ignore[no-untyped-def]
    """Every device of XLA's data-parallel program ends with the same mean (an all-reduce)."""
    from pathlib import Path

    from xla_teach.tools.cli import main

    spmd = str(Path(__file__).parents[1] / "data" / "spmd" / "data_parallel.txt")
    assert main(["replay", spmd, "--platform=interpreter"]) == 0
    printed = capsys.readouterr().out
    means = {line.split("=", 1)[1] for line in printed.splitlines() if line.strip().startswith("out0 =")}
    assert "ran on 4 simulated devices" in printed and len(means) == 1
    assert main(["replay", spmd]) == 0  # the CPU: four threads
    printed = capsys.readouterr().out
    cpu_means = {line.split("=", 1)[1] for line in printed.splitlines() if line.strip().startswith("out0 =")}
    assert "ran on 4 CPU devices" in printed and len(cpu_means) == 1  # the same on every device
    cpu, interpreter = (float(next(iter(m)).split()[-1]) for m in (cpu_means, means))
    assert cpu == pytest.approx(interpreter, rel=1e-5)  # the reductions before the all-reduce round differently


def test_a_jax_dump_of_a_sharded_program_runs_partitioned_on_its_devices(capsys: pytest.CaptureFixture[str]) -> None:
    """What ``--xla_dump_to`` wrote for a sharded jax.jit (before XLA's partitioner): run-hlo-module
    partitions it, runs the devices on global fake arguments, and compares with the whole program
    run on one device."""
    from xla_teach.tools.cli import main

    dump = Path(__file__).parents[1] / "data" / "spmd" / "jax_dump" / "module_0000.jit__lambda.before_optimizations.txt"
    for platform in ("cpu", "interpreter"):
        assert main(["run-hlo-module", str(dump), "--use_fake_data", f"--platform={platform}"]) == 0
        out = capsys.readouterr().out
        assert "after SPMD partitioning, on global arguments" in out and "on 4 " in out
        assert "out0: float32[4] OK" in out


def test_run_hlo_module_and_replay_run_a_jax_sharded_dump_on_its_real_inputs(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The same dump with JAX's own inputs (--input_literals_file): run-hlo-module and replay both
    partition it and give JAX's result (kept in the dump's io.npz), within the rounding of a sum
    of 8 products per output."""
    from xla_teach.tools.cli import main

    folder = Path(__file__).parents[1] / "data" / "spmd" / "jax_dump"
    dump = folder / "module_0000.jit__lambda.before_optimizations.txt"
    io = np.load(folder / "io.npz")
    inputs = tmp_path / "inputs.npz"
    np.savez(inputs, arg0=io["x"], arg1=io["w"])
    assert main(["run-hlo-module", str(dump), f"--input_literals_file={inputs}", "--platform=cpu",
                 "--print_literals"]) == 0
    printed = capsys.readouterr().out
    assert "after SPMD partitioning, on global arguments" in printed and "out0: float32[4] OK" in printed
    bound = 16 * 8 * np.finfo(np.float32).eps * (np.abs(io["x"]).sum(0) @ np.abs(io["w"]) + 1)
    got = np.array([float(v) for v in printed.split("out0 = ")[1].split("{", 1)[1].split("}")[0].split(",")])
    assert np.all(np.abs(got - io["out"]) <= bound.max())
    assert main(["replay", str(dump), f"--input_literals_file={inputs}", "--platform=cpu", "--num_runs=2"]) == 0
    printed = capsys.readouterr().out
    assert "compiled" in printed and "f32[4]" in printed


def test_num_partitions_stands_in_for_a_header_that_does_not_say(capsys: pytest.CaptureFixture[str]) -> None:
    """A global program with sharding annotations but no num_partitions in its header (as JAX's
    lowering writes it, before XLA's options add one): --num_partitions=4 partitions it, as the
    header would."""
    from xla_teach.tools.cli import main

    headerless = Path(__file__).parents[1] / "data" / "spmd" / "data_parallel.before.txt"
    assert "num_partitions" not in headerless.read_text().split("\n", 1)[0]
    assert main(["run-hlo-module", str(headerless), "--use_fake_data", "--platform=interpreter",
                 "--num_partitions=4"]) == 0
    printed = capsys.readouterr().out
    assert "after SPMD partitioning, on global arguments" in printed and "OK" in printed
    assert "DIFFERS" not in printed
