"""Replica groups in all three forms XLA prints (lists, iota, and the mesh form of current XLA)
parse, print back as they were, verify and expand to the same device groups; reduce-scatter and
all-to-all are known opcodes with shape inference and the one-device meaning of the others."""

from __future__ import annotations

import numpy as np
import pytest

from xla_teach.api import execute
from xla_teach.hlo.errors import ShapeError
from xla_teach.hlo.replica_groups import expand_replica_groups, replica_groups_syntax_ok
from xla_teach.hlo.shape_inference import infer_shape
from xla_teach.hlo.text.parser import parse_hlo, parse_shape
from xla_teach.hlo.verifier import verify_module

# As XLA 0.10.2 writes it for jnp.tanh(x).sum() with x sharded over a 2x2 mesh (4 host devices).
XLA_LINE = ("%all-reduce.1 = f32[] all-reduce(%p), channel_id=2, replica_groups=mesh['axis_0'=2,'axis_1'=2] "
            "{'axis_1'}, use_global_device_ids=true, to_apply=%region_1.0.clone")
MODULE = f"""HloModule jit_f, num_partitions=4

%region_1.0.clone (a: f32[], b: f32[]) -> f32[] {{
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %add = f32[] add(%a, %b)
}}

ENTRY %main (p: f32[]) -> f32[] {{
  %p = f32[] parameter(0)
  ROOT {XLA_LINE}
}}
"""


@pytest.mark.parametrize(("text", "n", "groups"), [
    ("{{0,1},{2,3}}", 4, [[0, 1], [2, 3]]),
    ("{}", 3, [[0, 1, 2]]),
    ("[2,2]<=[4]", 4, [[0, 1], [2, 3]]),
    ("[2,2]<=[2,2]T(1,0)", 4, [[0, 2], [1, 3]]),
    ("mesh['axis_0'=2,'axis_1'=2] {'axis_1'}", 4, [[0, 1], [2, 3]]),
    ("mesh['axis_0'=2,'axis_1'=2] {'axis_0'}", 4, [[0, 2], [1, 3]]),
    ("mesh['a'=2,'b'=3] {'a','b'}", 6, [[0, 1, 2, 3, 4, 5]]),
    ("mesh['a'=2,'b'=3] {}", 6, [[0], [1], [2], [3], [4], [5]]),
])
def test_every_form_expands_to_its_device_groups(text: str, n: int, groups: list[list[int]]) -> None:
    assert replica_groups_syntax_ok(text)
    assert expand_replica_groups(text, n) == groups


def test_groups_that_do_not_cover_the_devices_are_refused() -> None:
    with pytest.raises(ValueError, match="not an axis"):
        expand_replica_groups("mesh['x'=2] {'y'}", 2)
    with pytest.raises(ValueError, match="once each"):
        expand_replica_groups("{{0,1},{1,2}}", 3)
    assert not replica_groups_syntax_ok("mesh['x'=2] 'x'")


def test_xlas_mesh_form_parses_prints_back_and_verifies() -> None:
    module = parse_hlo(MODULE)
    verify_module(module)
    printed = module.to_text()
    assert "replica_groups=mesh['axis_0'=2,'axis_1'=2] {'axis_1'}, use_global_device_ids=true" in printed
    assert parse_hlo(printed).to_text() == printed
    # num_partitions=4: the replicated 3.0 on four devices, summed over groups of two
    (got,) = execute(module, [np.float32(3.0)], backend="interpreter")
    assert got == np.float32(6.0)


def test_reduce_scatter_and_all_to_all_shapes() -> None:
    add = parse_hlo(MODULE).computations[0]
    attrs = {"dimensions": (0,), "replica_groups": "{}", "to_apply": add}
    shape = infer_shape("reduce-scatter", [parse_shape("f32[8,3]")], attrs, declared_shape=parse_shape("f32[2,3]"))
    assert shape.to_text(print_layout=False) == "f32[2,3]"
    with pytest.raises(ShapeError, match="scattered along dimension 0"):
        infer_shape("reduce-scatter", [parse_shape("f32[8,3]")], attrs, declared_shape=parse_shape("f32[3,3]"))
    a2a = infer_shape("all-to-all", [parse_shape("f32[4,6]")], {"dimensions": (1,), "replica_groups": "{}"})
    assert a2a.to_text(print_layout=False) == "f32[4,6]"
