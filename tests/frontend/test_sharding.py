"""Meshes and shardings with JAX's names (frontend/sharding.py): NamedSharding writes the
sharding XLA writes; ``jit(in_shardings=..., out_shardings=...)`` partitions the traced program
and runs it on CPU devices (and simulated ones) on global arrays; a data-parallel MLP trained on 4
devices follows the one-device loss curve."""

from __future__ import annotations

import numpy as np
import pytest

import xla_teach
import xla_teach.nn as nn
import xla_teach.numpy as xnp
from xla_teach import flags
from xla_teach.hlo.sharding import parse_sharding
from xla_teach.sharding import Mesh, NamedSharding, P


@pytest.fixture
def mesh() -> Mesh:
    with flags.override(xla_force_host_platform_device_count=4):
        yield xla_teach.make_mesh((2, 2), ("x", "y"))


# What JAX 0.10.2 writes for an [8,8] array on a 2x2 mesh ("x", "y"), spec by spec.
JAX_WRITES = [
    (P("x", "y"), "{devices=[2,4]<=[8]}", None),
    (P("x", "y"), "{devices=[2,2]<=[4]}", (2, 2)),
    (P("y"), "{devices=[2,1,2]<=[2,2]T(1,0) last_tile_dim_replicate}", (2, 2)),
    (P(None, "x"), "{devices=[1,2,2]<=[4] last_tile_dim_replicate}", (2, 2)),
    (P(("x", "y")), "{devices=[4,1]<=[4]}", (2, 2)),
    (P("y", "x"), "{devices=[2,2]<=[2,2]T(1,0)}", (2, 2)),
    (P(), "{replicated}", (2, 2)),
]


@pytest.mark.parametrize("spec,xla,shape", [c for c in JAX_WRITES if c[2] is not None])
def test_named_shardings_are_the_ones_jax_writes(spec: P, xla: str, shape: tuple[int, int]) -> None:
    with flags.override(xla_force_host_platform_device_count=4):
        ours = NamedSharding(xla_teach.make_mesh(shape, ("x", "y")), spec).hlo_sharding(2)
    theirs = parse_sharding(xla)
    assert ours.tile_dims == theirs.tile_dims and ours.devices() == theirs.devices()
    assert ours.last_tile_dim_replicate == theirs.last_tile_dim_replicate


def test_a_mesh_needs_the_devices() -> None:
    assert len(xla_teach.devices()) == 1  # XLA's CPU: one device unless the flag says more
    with pytest.raises(ValueError, match="xla_force_host_platform_device_count=4"):
        xla_teach.make_mesh((2, 2), ("x", "y"))


@pytest.mark.parametrize("backend", ["cpu", "interpreter"])
def test_jit_with_shardings_runs_on_the_mesh(mesh: Mesh, backend: str) -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((16, 8)).astype(np.float32)
    w = rng.standard_normal((8, 4)).astype(np.float32)
    with flags.override(xla_force_host_platform_device_count=4):
        f = xla_teach.jit(lambda x, w: (xnp.tanh(x @ w), xnp.tanh(x @ w).sum()), backend=backend,
                          in_shardings=(NamedSharding(mesh, P(("x", "y"))), NamedSharding(mesh, P())))
        rows, total = f(x, w)
        g = xla_teach.jit(lambda x: (x * 2, xla_teach.with_sharding_constraint(x.sum(0), NamedSharding(mesh, P("y")))),
                          backend=backend, in_shardings=NamedSharding(mesh, P("x", "y")),
                          out_shardings=(NamedSharding(mesh, P("x")), NamedSharding(mesh, P())))
        doubled, sums = g(x)
    np.testing.assert_allclose(rows, np.tanh(x @ w), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(total, np.tanh(x @ w).sum(), rtol=1e-5)
    np.testing.assert_allclose(doubled, 2 * x)
    np.testing.assert_allclose(sums, x.sum(0), rtol=1e-5, atol=1e-6)


def _mlp_losses(in_shardings: object, steps: int = 5) -> list[float]:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 16)).astype(np.float32)
    y = np.eye(4, dtype=np.float32)[rng.integers(0, 4, 64)]
    w1 = (rng.standard_normal((16, 32)) * 0.3).astype(np.float32)
    w2 = (rng.standard_normal((32, 4)) * 0.3).astype(np.float32)

    def loss(w1, w2, x, y):  # type: ignore[no-untyped-def]
        logits = nn.relu(x @ w1) @ w2
        return -(nn.log_softmax(logits) * y).sum() / x.shape[0]

    def step(w1, w2, x, y):  # type: ignore[no-untyped-def]
        value, (g1, g2) = xla_teach.value_and_grad(loss, argnums=(0, 1))(w1, w2, x, y)
        return value, w1 - 0.5 * g1, w2 - 0.5 * g2

    train = xla_teach.jit(step, in_shardings=in_shardings)
    losses = []
    for _ in range(steps):
        value, w1, w2 = train(w1, w2, x, y)
        losses.append(float(value))
    return losses


def test_data_parallel_training_follows_the_one_device_loss_curve(mesh: Mesh) -> None:
    """The batch split four ways, the weights replicated: the per-device program computes its
    rows' gradients and the partitioner adds them up (all-reduce)."""
    with flags.override(xla_force_host_platform_device_count=4):
        batch, whole = NamedSharding(mesh, P(("x", "y"))), NamedSharding(mesh, P())
        parallel = _mlp_losses((whole, whole, batch, batch))
    single = _mlp_losses(None)
    assert single[-1] < single[0]
    np.testing.assert_allclose(parallel, single, rtol=1e-4)


def test_data_parallel_training_moves_only_gradients(mesh: Mesh) -> None:
    """The per-device training step is local dots and all-reduces (the two weight gradients, and
    the loss's sum that the traced, not yet simplified, gradient still computes): no value is
    gathered or sliced."""
    from xla_teach.passes.spmd.spmd_partitioner import SpmdPartitioner

    with flags.override(xla_force_host_platform_device_count=4):
        batch, whole = NamedSharding(mesh, P(("x", "y"))), NamedSharding(mesh, P())

        def loss(w1, w2, x, y):  # type: ignore[no-untyped-def]
            return -(nn.log_softmax(nn.relu(x @ w1) @ w2) * y).sum() / x.shape[0]

        step = xla_teach.jit(lambda w1, w2, x, y: xla_teach.grad(loss, argnums=(0, 1))(w1, w2, x, y),
                             in_shardings=(whole, whole, batch, batch))
        shapes = [(16, 32), (32, 4), (64, 16), (64, 4)]
        module = step.lower(*[np.ones(s, np.float32) for s in shapes]).module.clone()
    SpmdPartitioner().run(module)
    ops = [i.opcode for i in module.instructions()]
    assert ops.count("all-reduce") in (2, 3) and "all-gather" not in ops and "dynamic-slice" not in ops


def test_in_shardings_may_be_a_pytree_prefix_of_the_arguments(mesh: Mesh) -> None:
    """As JAX: one sharding per argument, or a tree shaped like the argument (a dict of parameters
    with a sharding or None per entry); each leaf's parameter gets its sharding; the results are
    the one-device ones; a tree that does not fit the argument is a clear error."""
    rows, whole = NamedSharding(mesh, P(("x", "y"))), NamedSharding(mesh, P())

    def f(params, x):  # type: ignore[no-untyped-def]
        return xnp.sum(xnp.tanh(x @ params["w"] + params["b"]))

    params = {"w": np.linspace(-1, 1, 6, dtype=np.float32).reshape(3, 2), "b": np.ones(2, np.float32)}
    x = np.arange(24, dtype=np.float32).reshape(8, 3) / 24
    want = np.sum(np.tanh(x @ params["w"] + params["b"]))
    with flags.override(xla_force_host_platform_device_count=4):
        for shardings in (({"w": whole, "b": None}, rows), (whole, rows), ({"b": whole, "w": whole}, rows)):
            jitted = xla_teach.jit(f, in_shardings=shardings)
            np.testing.assert_allclose(jitted(params, x), want, rtol=1e-5)
        module = xla_teach.jit(f, in_shardings=({"w": whole, "b": None}, rows)).lower(params, x).module
        shardings = {p.name: p.sharding for p in module.entry.parameter_instructions}
        assert sum(s is None for s in shardings.values()) == 1 and module.device_count() == 4
        with pytest.raises(ValueError, match=r"in_shardings\[0\] has the keys \['w'\], the argument \['b', 'w'\]"):
            xla_teach.jit(f, in_shardings=({"w": whole}, rows))(params, x)
        with pytest.raises(ValueError, match=r"in_shardings\[1\] is a dict, but the argument is \*"):
            xla_teach.jit(f, in_shardings=(whole, {"a": rows}))(params, x)


def test_a_sharded_jit_is_partitioned_by_the_pipelines_recorded_stage_and_its_lowered_text_runs_alone(
        mesh: Mesh) -> None:
    """jit writes what JAX writes for in_shardings (a ``Sharding`` custom call after each split
    parameter), and the compile pipeline's spmd-partitioning stage partitions it -- a recorded
    pass, in dumps and the explorer like any other. The lowered text alone says it is a global
    program: executed as text, it gives the jitted function's results."""
    from xla_teach.passes.spmd.spmd_partitioner import needs_partitioning

    x = np.arange(24, dtype=np.float32).reshape(8, 3)
    with flags.override(xla_force_host_platform_device_count=4):
        f = xla_teach.jit(lambda v: (2 * v).sum(0), in_shardings=NamedSharding(mesh, P(("x", "y"))))
        lowered = f.lower(x)
        assert 'custom_call_target="Sharding"' in lowered.as_text()
        assert needs_partitioning(lowered.module)
        compiled = lowered.compile()
        stages = [(r.pass_name, r.changed) for r in compiled.executable.recorder.records]
        assert ("spmd-partitioning", True) in stages
        assert compiled.executable.module.entry.parameter(0).shape.dimensions == (2, 3)  # each device's rows
        want = 2 * x.sum(0)  # small integers: exact in any order
        np.testing.assert_array_equal(f(x), want)
        np.testing.assert_array_equal(xla_teach.execute(lowered.as_text(), [x])[0], want)
