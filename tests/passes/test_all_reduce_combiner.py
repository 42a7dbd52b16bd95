"""all-reduce-combiner: independent all-reduces with the same groups and reducer become one (the
devices meet once), dependent ones and ones over other groups stay apart, degenerate ones (every
group one device) disappear, one-device modules are left alone; results are unchanged on 4
simulated and 4 CPU devices."""

from __future__ import annotations

import numpy as np

from xla_teach.api import compile_module
from xla_teach.hlo.evaluator.devices import run_devices, run_partitioned
from xla_teach.hlo.text.parser import parse_hlo
from xla_teach.passes.spmd.all_reduce_combiner import AllReduceCombiner

MODULE = """HloModule m, num_partitions=4

add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}

max {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT m = f32[] maximum(a, b)
}

ENTRY main {
  x = f32[4] parameter(0)
  y = f32[3] parameter(1)
  sx = f32[4] all-reduce(x), replica_groups={{0,1,2,3}}, to_apply=add
  sy = f32[3] all-reduce(y), replica_groups={{0,1,2,3}}, to_apply=add
  chained = f32[4] all-reduce(sx), replica_groups={{0,1,2,3}}, to_apply=add
  pairs = f32[3] all-reduce(y), replica_groups={{0,1},{2,3}}, to_apply=add
  biggest = f32[3] all-reduce(y), replica_groups={{0,1,2,3}}, to_apply=max
  alone = f32[4] all-reduce(x), replica_groups={{0},{1},{2},{3}}, to_apply=add
  ROOT t = (f32[4], f32[3], f32[4], f32[3], f32[3], f32[4]) tuple(sx, sy, chained, pairs, biggest, alone)
}
"""


def test_what_is_combined_and_what_is_not() -> None:
    module = parse_hlo(MODULE)
    combiner = AllReduceCombiner()
    assert combiner.run(module)
    reduces = [i for i in module.instructions() if i.opcode == "all-reduce"]
    combined = [i for i in reduces if i.shape.is_tuple]
    assert len(combined) == 1 and [o.name for o in combined[0].operands] == ["x", "y"]
    assert len(reduces) == 4  # the combined one, the chained one, the pairs, the maximum
    assert not any("alone" == i.name and i.opcode == "all-reduce" for i in module.instructions())
    assert any("combined" in note for note in combiner.notes) and any("one device" in n for n in combiner.notes)


def test_one_device_modules_are_left_alone() -> None:
    assert not AllReduceCombiner().run(parse_hlo(MODULE.replace("num_partitions=4", "num_partitions=1")))


def test_results_are_unchanged_on_simulated_and_cpu_devices() -> None:
    rng = np.random.default_rng(0)
    per_device = [[rng.standard_normal(4).astype(np.float32), rng.standard_normal(3).astype(np.float32)]
                  for _ in range(4)]
    want = run_partitioned(parse_hlo(MODULE), per_device)
    combined = parse_hlo(MODULE)
    AllReduceCombiner().run(combined)
    executable = compile_module(MODULE, "cpu")  # the CPU pipeline combines too
    assert sum(t.describe().startswith("collective") for t in executable.entry.thunks) == 4
    for got in (run_partitioned(combined, per_device),
                run_devices(4, lambda device: executable.execute(per_device[device.index]))):
        for g_device, w_device in zip(got, want, strict=True):
            for g, w in zip(g_device, w_device, strict=True):
                np.testing.assert_allclose(g, w, rtol=1e-6)
