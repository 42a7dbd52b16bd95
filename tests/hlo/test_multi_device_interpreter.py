"""The interpreter runs a partitioned (per-device) program on several simulated devices: XLA's
own SPMD output for sharded JAX programs gives XLA's per-device results, and every collective
does what XLA's semantics say on a hand-written 4-device program."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from xla_teach.hlo.evaluator.devices import run_partitioned
from xla_teach.hlo.text.parser import parse_hlo

DATA = Path(__file__).parents[1] / "data" / "spmd"
# XLA's SPMD programs (tests/data/spmd/generate.py): sums and a transpose on a 2x2 mesh, data parallelism,
# a matmul on the 2-D mesh, a softmax, a transpose by all-to-all, a gather from a split table, a prefix sum
SPMD_PROGRAMS = sorted(p.stem for p in DATA.glob("*.npz"))


@pytest.mark.parametrize("name", SPMD_PROGRAMS)
def test_xlas_spmd_programs_give_xlas_results_on_every_device(name: str) -> None:
    module = parse_hlo((DATA / f"{name}.txt").read_text())
    data = np.load(DATA / f"{name}.npz")
    n_args = len([k for k in data.files if k.startswith("dev0_arg")])
    n_outs = len([k for k in data.files if k.startswith("dev0_out")])
    args = [[data[f"dev{d}_arg{i}"] for i in range(n_args)] for d in range(4)]
    got = run_partitioned(module, args)
    for d in range(4):
        for i in range(n_outs):
            np.testing.assert_allclose(got[d][i], data[f"dev{d}_out{i}"], rtol=1e-5, atol=1e-6)


COLLECTIVES = """HloModule collectives, num_partitions=4

add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = f32[] add(a, b)
}

ENTRY main {
  x = f32[4,2] parameter(0)
  sum = f32[4,2] all-reduce(x), replica_groups={{0,1},{2,3}}, to_apply=add
  gathered = f32[8,2] all-gather(x), replica_groups=[2,2]<=[2,2]T(1,0), dimensions={0}
  scattered = f32[1,2] reduce-scatter(x), replica_groups=mesh['x'=1,'y'=4] {'y'}, dimensions={0}, to_apply=add
  exchanged = f32[4,2] all-to-all(x), replica_groups={{0,1,2,3}}, dimensions={0}
  shifted = f32[4,2] collective-permute(x), source_target_pairs={{0,1},{1,2},{2,3}}
  id = u32[] partition-id()
  ROOT t = (f32[4,2], f32[8,2], f32[1,2], f32[4,2], f32[4,2], u32[]) tuple(sum, gathered, scattered, exchanged, shifted, id)
}
"""


def test_every_collective_on_four_devices() -> None:
    xs = [np.arange(8, dtype=np.float32).reshape(4, 2) + 100 * d for d in range(4)]
    results = run_partitioned(parse_hlo(COLLECTIVES), [[x] for x in xs])
    for d, (total, gathered, scattered, exchanged, shifted, index) in enumerate(results):
        pair = [0, 1] if d < 2 else [2, 3]
        np.testing.assert_array_equal(total, xs[pair[0]] + xs[pair[1]])
        partner = [0, 2] if d in (0, 2) else [1, 3]  # [2,2]<=[2,2]T(1,0): groups {0,2} and {1,3}
        np.testing.assert_array_equal(gathered, np.concatenate([xs[p] for p in partner]))
        np.testing.assert_array_equal(scattered, sum(xs)[d:d + 1])
        np.testing.assert_array_equal(exchanged, np.concatenate([xs[j][d:d + 1] for j in range(4)]))
        np.testing.assert_array_equal(shifted, xs[d - 1] if d > 0 else np.zeros((4, 2), np.float32))
        assert int(index) == d


def test_a_failing_device_stops_the_others() -> None:
    """A device whose argument is wrong fails at once; the others, waiting at the all-reduce,
    are woken and the run raises the first device's error, not a hang."""
    xs = [[np.zeros((4, 2), np.float32)] for _ in range(4)]
    xs[3] = [np.zeros((3, 2), np.float32)]
    with pytest.raises(ValueError, match="parameter 0"):
        run_partitioned(parse_hlo(COLLECTIVES), xs)
