"""Asynchronous collective pairs (``all-reduce-start``/``-done``, ``all-gather-start``/``-done``,
``collective-permute-start``/``-done``) and ``collective-broadcast``: they parse, print back,
verify, run on simulated devices with the synchronous collectives' results (checked against
NumPy), and on CPU devices -- where ``convert-async-collectives-to-sync`` makes each pair one
collective -- with the interpreter's bits."""

from __future__ import annotations

import numpy as np
import pytest

from xla_teach.api import compile_module
from xla_teach.hlo.evaluator.devices import run_devices, run_partitioned
from xla_teach.hlo.text.parser import parse_hlo
from xla_teach.hlo.verifier import verify_module

PAIRS = """HloModule async_pairs, num_partitions=4

add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}

ENTRY main {
  x = f32[4,2] parameter(0)
  ars = f32[4,2] all-reduce-start(x), replica_groups={{0,1},{2,3}}, to_apply=add
  ard = f32[4,2] all-reduce-done(ars)
  ags = (f32[4,2], f32[8,2]) all-gather-start(x), replica_groups={{0,2},{1,3}}, dimensions={0}
  agd = f32[8,2] all-gather-done(ags)
  cps = (f32[4,2], f32[4,2], u32[], u32[]) collective-permute-start(x), source_target_pairs={{0,1},{1,2},{2,3},{3,0}}
  cpd = f32[4,2] collective-permute-done(cps)
  bc = f32[4,2] collective-broadcast(x), replica_groups={{3,2,1,0}}
  ROOT t = (f32[4,2], f32[8,2], f32[4,2], f32[4,2]) tuple(ard, agd, cpd, bc)
}
"""

XS = [np.arange(8, dtype=np.float32).reshape(4, 2) + 10 * d for d in range(4)]


def _check(results: list[list[np.ndarray]]) -> None:
    for d, (reduced, gathered, permuted, broadcast) in enumerate(results):
        pair = [0, 1] if d < 2 else [2, 3]
        np.testing.assert_array_equal(reduced, XS[pair[0]] + XS[pair[1]])
        partner = [0, 2] if d in (0, 2) else [1, 3]
        np.testing.assert_array_equal(gathered, np.concatenate([XS[p] for p in partner]))
        np.testing.assert_array_equal(permuted, XS[(d - 1) % 4])
        np.testing.assert_array_equal(broadcast, XS[3])  # the first of the group {3,2,1,0}


def test_the_pairs_parse_print_back_and_verify() -> None:
    module = parse_hlo(PAIRS)
    verify_module(module)
    printed = module.to_text()
    assert parse_hlo(printed).to_text() == printed
    assert "collective-permute-start(%x), source_target_pairs={{0,1},{1,2},{2,3},{3,0}}" in printed


def test_a_start_must_return_what_its_done_needs() -> None:
    bad = PAIRS.replace("ags = (f32[4,2], f32[8,2]) all-gather-start", "ags = (f32[8,2], f32[8,2]) all-gather-start")
    with pytest.raises(Exception, match="returns \\(operand, gathered result\\)"):
        verify_module(parse_hlo(bad))


def test_on_simulated_devices() -> None:
    _check(run_partitioned(parse_hlo(PAIRS), [[x] for x in XS]))


def test_on_cpu_devices_the_pairs_become_collectives() -> None:
    executable = compile_module(PAIRS, "cpu")
    ops = [i.opcode for i in executable.module.instructions()]
    assert not [op for op in ops if op.endswith(("-start", "-done"))]
    assert {"all-reduce", "all-gather", "collective-permute", "collective-broadcast"} <= set(ops)
    _check(run_devices(4, lambda device: executable.execute([XS[device.index]])))


@pytest.mark.parametrize("backend", ["interpreter", "cpu"])
def test_on_one_device(backend: str) -> None:
    one = ("HloModule one\n\nENTRY main {\n  x = f32[3] parameter(0)\n"
           "  s = (f32[3], f32[3]) collective-permute-start(x), source_target_pairs={{0,0}}\n"
           "  p = f32[3] collective-permute-done(s)\n"
           "  ROOT b = f32[3] collective-broadcast(p), replica_groups={}\n}\n")
    x = np.arange(3, dtype=np.float32)
    from xla_teach.api import execute

    (got,) = execute(one, [x], backend=backend)
    np.testing.assert_array_equal(got, x)
