"""The CPU backend runs a module for several devices as one thread per device in this process:
its collectives (and partition-id/replica-id) become host thunks that meet the other devices at
a rendezvous and combine their values as the interpreter does. Checked against the interpreter's
simulated devices (every collective, inside a loop too) and against XLA's own SPMD modules."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.hlo.test_multi_device_interpreter import COLLECTIVES
from xla_teach import flags
from xla_teach.api import compile_module, execute
from xla_teach.hlo.evaluator.devices import run_devices, run_global, run_partitioned
from xla_teach.hlo.sharding import parse_sharding
from xla_teach.hlo.text.parser import parse_hlo

DATA = Path(__file__).parents[2] / "data" / "spmd"
# XLA's SPMD programs (tests/data/spmd/generate.py): sums and a transpose on a 2x2 mesh, data parallelism,
# a matmul on the 2-D mesh, a softmax, a transpose by all-to-all, a gather from a split table, a prefix sum
SPMD_PROGRAMS = sorted(p.stem for p in DATA.glob("*.npz"))

LOOP = """HloModule loop, num_partitions=4

add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = f32[] add(a, b)
}

cond {
  s = (s32[], f32[3]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  five = s32[] constant(5)
  ROOT lt = pred[] compare(i, five), direction=LT
}

body {
  s = (s32[], f32[3]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  one = s32[] constant(1)
  next = s32[] add(i, one)
  x = f32[3] get-tuple-element(s), index=1
  half = f32[] constant(0.5)
  halves = f32[3] broadcast(half), dimensions={}
  scaled = f32[3] multiply(x, halves)
  summed = f32[3] all-reduce(scaled), replica_groups={{0,1,2,3}}, to_apply=add
  id = u32[] partition-id()
  idf = f32[] convert(id)
  idv = f32[3] broadcast(idf), dimensions={}
  y = f32[3] add(summed, idv)
  ROOT t = (s32[], f32[3]) tuple(next, y)
}

ENTRY main {
  x = f32[3] parameter(0)
  zero = s32[] constant(0)
  init = (s32[], f32[3]) tuple(zero, x)
  w = (s32[], f32[3]) while(init), condition=cond, body=body
  ROOT r = f32[3] get-tuple-element(w), index=1
}
"""


def _on_cpu_devices(text: str, per_device: list[list[np.ndarray]]) -> list[list[np.ndarray]]:
    executable = compile_module(text, "cpu")
    return run_devices(len(per_device), lambda device: executable.execute(per_device[device.index]))


@pytest.mark.parametrize("text", [COLLECTIVES, LOOP], ids=["every_collective", "all_reduce_in_a_loop"])
def test_cpu_devices_give_the_interpreters_results(text: str) -> None:
    rng = np.random.default_rng(0)
    shape = (4, 2) if text is COLLECTIVES else (3,)
    per_device = [[rng.standard_normal(shape).astype(np.float32)] for _ in range(4)]
    want = run_partitioned(parse_hlo(text), per_device)
    got = _on_cpu_devices(text, per_device)
    for g_device, w_device in zip(got, want, strict=True):
        for g, w in zip(g_device, w_device, strict=True):
            np.testing.assert_array_equal(g, w)  # the same combination, in group order: the same bits


def test_the_collectives_are_host_steps_only_on_several_devices() -> None:
    several = compile_module(COLLECTIVES, "cpu")
    kinds = [t.describe().split()[0] for t in several.entry.thunks]
    assert kinds.count("collective") == 5 and kinds.count("device-id") == 1  # five collectives, partition-id
    one_device = ("HloModule one\n\nadd {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n"
                  "  ROOT c = f32[] add(a, b)\n}\n\nENTRY main {\n  x = f32[4] parameter(0)\n"
                  "  ROOT s = f32[4] all-reduce(x), replica_groups={}, to_apply=add\n}\n")
    executable = compile_module(one_device, "cpu")
    assert not [t for t in executable.entry.thunks if t.describe().startswith("collective")]
    x = np.arange(4, dtype=np.float32)
    np.testing.assert_array_equal(executable.execute([x])[0], x)  # a group of one: the operand


@pytest.mark.parametrize("name", SPMD_PROGRAMS)
def test_xlas_spmd_modules_on_four_cpu_devices(name: str) -> None:
    """XLA's per-device modules: every device's shards are XLA's, and on global arrays (split by
    the parameters' shardings, put back by XLA's output shardings) the results are XLA's."""
    text = (DATA / f"{name}.txt").read_text()
    data = np.load(DATA / f"{name}.npz")
    n_args = len([k for k in data.files if k.startswith("dev0_arg")])
    n_outs = len([k for k in data.files if k.startswith("dev0_out")])
    per_device = [[data[f"dev{d}_arg{i}"] for i in range(n_args)] for d in range(4)]
    for d, outputs in enumerate(_on_cpu_devices(text, per_device)):
        for i in range(n_outs):
            np.testing.assert_allclose(outputs[i], data[f"dev{d}_out{i}"], rtol=1e-5, atol=1e-6)
    args = [data[f"global_arg{i}"] for i in range(n_args)]
    shardings = [parse_sharding(str(data[f"out_sharding{i}"])) for i in range(n_outs)]
    executable = compile_module(text, "cpu")
    got = run_global(parse_hlo(text), args, shardings,
                     run=lambda pieces: run_devices(4, lambda device: executable.execute(pieces[device.index])))
    for i, g in enumerate(got):
        np.testing.assert_allclose(g, data[f"global_out{i}"], rtol=1e-5, atol=1e-6)


def test_execute_runs_cpu_devices_and_checks_the_device_count_flag() -> None:
    args = [np.load(DATA / "data_parallel.npz")[f"global_arg{i}"] for i in range(2)]
    text = (DATA / "data_parallel.txt").read_text()
    (got,) = execute(text, args, backend="cpu")
    np.testing.assert_allclose(got, np.load(DATA / "data_parallel.npz")["global_out0"], rtol=1e-5)
    with flags.override(xla_force_host_platform_device_count=2):
        with pytest.raises(ValueError, match="runs on 4 devices, but --xla_force_host_platform_device_count=2"):
            execute(text, args, backend="cpu")


def test_a_failing_cpu_device_stops_the_others() -> None:
    per_device = [[np.zeros((4, 2), np.float32)] for _ in range(4)]
    per_device[2] = [np.zeros((3, 2), np.float32)]
    with pytest.raises(ValueError):
        _on_cpu_devices(COLLECTIVES, per_device)
