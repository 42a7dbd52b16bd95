"""``shard_map`` with collectives by mesh axis name (frontend/shard_map.py, ``xla_teach.lax``):
each collective gives what JAX's gives (checked with NumPy on the global arrays), on the CPU's
devices and the interpreter's, and its replica groups are the devices that differ only along the
named axes."""

from __future__ import annotations

import numpy as np
import pytest

import xla_teach
from xla_teach import flags
from xla_teach.frontend.shard_map import axis_groups
from xla_teach.lax import all_gather, all_to_all, axis_index, pmax, ppermute, psum, psum_scatter
from xla_teach.sharding import Mesh, P

X = np.arange(32, dtype=np.float32).reshape(8, 4) - 7.5


@pytest.fixture
def mesh() -> Mesh:
    with flags.override(xla_force_host_platform_device_count=4):
        yield xla_teach.make_mesh((2, 2), ("x", "y"))


def test_groups_are_the_devices_that_differ_along_the_axes(mesh: Mesh) -> None:
    assert axis_groups(mesh, "x") == [[0, 2], [1, 3]]
    assert axis_groups(mesh, "y") == [[0, 1], [2, 3]]
    assert axis_groups(mesh, ("x", "y")) == [[0, 1, 2, 3]]


CASES = {
    # the column sums: each device sums its rows, psum over "x" adds the two row blocks
    "psum": (lambda b: psum(b.sum(0), "x"), P("x", "y"), P("y"), lambda x: x.sum(0)),
    "pmax": (lambda b: pmax(b.max(0), "x"), P("x", "y"), P("y"), lambda x: x.max(0)),
    "all_gather_tiled": (lambda b: all_gather(b, "x", axis=0, tiled=True), P("x", "y"), P(None, "y"), lambda x: x),
    "all_gather_stacked": (lambda b: all_gather(b, "x", axis=0), P("x", "y"), P(None, None, "y"),
                           lambda x: x.reshape(2, 4, 4)),
    "axis_index": (lambda b: b * 0 + axis_index("y"), P("x", "y"), P("x", "y"),
                   lambda x: np.repeat([[0.0, 0, 1, 1]], 8, axis=0)),
    "ppermute": (lambda b: ppermute(b, "x", [(0, 1), (1, 0)]), P("x", "y"), P("x", "y"),
                 lambda x: np.concatenate([x[4:], x[:4]])),
    "psum_scatter": (lambda b: psum_scatter(b, "x", scatter_dimension=0, tiled=True), P(None, "y"), P("x", "y"),
                     lambda x: 2 * x),
    "all_to_all": (lambda b: all_to_all(b, "x", 1, 0), P("x", None), P(None, "x"), lambda x: x),
}


@pytest.mark.parametrize("backend", ["cpu", "interpreter"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_each_collective_gives_jaxs_result(mesh: Mesh, case: str, backend: str) -> None:
    f, in_spec, out_spec, want = CASES[case]
    with flags.override(xla_force_host_platform_device_count=4):
        got = xla_teach.shard_map(f, mesh, in_specs=in_spec, out_specs=out_spec, backend=backend)(X)
    np.testing.assert_allclose(got, want(X), rtol=1e-6)


def test_collectives_need_a_shard_map() -> None:
    with pytest.raises(ValueError, match="only work inside shard_map"):
        xla_teach.jit(lambda x: psum(x, "x"))(X)


@pytest.mark.parametrize("case", sorted(CASES))
def test_each_collective_inside_jit(mesh: Mesh, case: str) -> None:
    """shard_map inside jit, next to ordinary code: JAX's manual computation (Shardy's custom calls
    around a call of the body), split by the SPMD partitioner, gives the same global results."""
    f, in_spec, out_spec, want = CASES[case]

    def program(x):  # type: ignore[no-untyped-def]
        y = xla_teach.shard_map(f, mesh, in_specs=in_spec, out_specs=out_spec)(x * 2.0)
        return y + 1.0

    with flags.override(xla_force_host_platform_device_count=4):
        jitted = xla_teach.jit(program)
        text = jitted.lower(X).as_text("hlo")
        got = jitted(X)
    assert 'custom_call_target="xla.sdy.GlobalToLocalShape"' in text and "xla.sdy.meshes" in text
    expect = want(2.0 * X) + 1.0 if case != "axis_index" else want(X) + 1.0
    np.testing.assert_allclose(got, expect, rtol=1e-6)


def test_a_mesh_with_its_devices_in_another_order_inside_jit() -> None:
    with flags.override(xla_force_host_platform_device_count=4):
        devices = xla_teach.devices()
        mesh = Mesh(np.array(devices)[::-1].reshape(2, 2), ("x", "y"))
        f = xla_teach.jit(lambda x: xla_teach.shard_map(lambda b: b * 0 + axis_index("x"), mesh,
                                                        in_specs=P("x", "y"), out_specs=P("x", "y"))(x))
        text = f.lower(X).as_text("hlo")
        got = f(X)
    assert "device_ids=[3, 2, 1, 0]" in text
    np.testing.assert_array_equal(got, np.repeat([[0.0], [1.0]], 4, axis=0) * np.ones((8, 4)))


def test_the_body_must_not_capture_traced_values(mesh: Mesh) -> None:
    def program(x):  # type: ignore[no-untyped-def]
        return xla_teach.shard_map(lambda b: b + x.sum(), mesh, in_specs=P("x", "y"), out_specs=P("x", "y"))(x)

    with flags.override(xla_force_host_platform_device_count=4), pytest.raises(ValueError, match="pass them as"):
        xla_teach.jit(program)(X)
