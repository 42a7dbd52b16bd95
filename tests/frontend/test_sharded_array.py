"""Arrays that stay on the devices (frontend/sharded_array.py): device_put cuts once, jit takes
the pieces as they are and leaves its results split, and every value read back equals NumPy's."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

import xla_teach
from xla_teach import flags
from xla_teach.sharding import GSPMDSharding, NamedSharding, P


@pytest.fixture(autouse=True)
def four_devices() -> Iterator[None]:
    with flags.override(xla_force_host_platform_device_count=4):
        yield


def _mesh() -> xla_teach.sharding.Mesh:
    return xla_teach.make_mesh((2, 2), ("x", "y"))


def test_device_put_gives_each_device_its_part_of_the_global_array() -> None:
    x = np.arange(8 * 6, dtype=np.float32).reshape(8, 6)
    put = xla_teach.device_put(x, NamedSharding(_mesh(), P("x", "y")))
    assert isinstance(put, xla_teach.ShardedArray)
    assert put.shape == (8, 6) and put.dtype == np.float32 and put.is_fully_addressable
    shards = put.addressable_shards
    assert [s.device.id for s in shards] == [0, 1, 2, 3]
    assert [s.data.shape for s in shards] == [(4, 3)] * 4
    for shard in shards:
        np.testing.assert_array_equal(shard.data, x[shard.index])
    np.testing.assert_array_equal(np.asarray(put), x)


def test_an_uneven_split_keeps_the_last_part_short() -> None:
    x = np.arange(10 * 3, dtype=np.float32).reshape(10, 3)
    put = xla_teach.device_put(x, NamedSharding(xla_teach.make_mesh((4,), ("b",)), P("b")))
    assert [s.data.shape[0] for s in put.addressable_shards] == [3, 3, 3, 1]
    np.testing.assert_array_equal(np.asarray(put), x)
    doubled = xla_teach.jit(lambda v: v * 2)(put)
    np.testing.assert_array_equal(np.asarray(doubled), 2 * x)


@pytest.mark.parametrize("backend", ["cpu", "interpreter"])
def test_sharded_in_sharded_out_and_the_values_are_numpys(backend: str) -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((8, 4)).astype(np.float32)
    w = rng.standard_normal((4, 3)).astype(np.float32)
    rows = NamedSharding(xla_teach.make_mesh((4,), ("b",)), P("b"))
    f = xla_teach.jit(lambda x, w: (x @ w, (x @ w).sum()), backend=backend)
    product, total = f(xla_teach.device_put(x, rows), w)
    assert isinstance(product, xla_teach.ShardedArray) and isinstance(product.sharding, GSPMDSharding)
    assert product.sharding.hlo_sharding(2).data_tile_dims == (4, 1)  # rows stay split, as XLA leaves them
    assert total.sharding.hlo_sharding(0).is_replicated
    # |error| of a 4-term f32 dot: 4 * eps * sum |x||w|; of the sum of 24 of them: 28 eps sum |x||w|
    bound = 28 * np.finfo(np.float32).eps * (np.abs(x) @ np.abs(w)).sum()
    np.testing.assert_allclose(np.asarray(product), x @ w, atol=bound)
    assert abs(float(total) - float((x.astype(np.float64) @ w).sum())) <= bound
    again = xla_teach.jit(lambda p: p + 1, backend=backend)(product)  # the pieces go in as they are
    np.testing.assert_allclose(np.asarray(again), x @ w + 1, atol=bound)


def test_numpy_in_numpy_out_is_unchanged() -> None:
    rows = NamedSharding(xla_teach.make_mesh((4,), ("b",)), P("b"))
    out = xla_teach.jit(lambda v: v + 1, in_shardings=rows)(np.zeros((8, 2), np.float32))
    assert type(out) is np.ndarray


def test_a_loop_keeps_its_state_on_the_devices_and_follows_the_numpy_loop() -> None:
    """Weights put once and fed back each step give the same weights as global NumPy arrays
    passed every step (the same program: the same bits)."""
    rng = np.random.default_rng(1)
    x = rng.standard_normal((16, 5)).astype(np.float32)
    w0 = rng.standard_normal((5, 2)).astype(np.float32)
    mesh = xla_teach.make_mesh((4,), ("b",))
    batch, whole = NamedSharding(mesh, P("b")), NamedSharding(mesh, P())

    def step(w, x):  # type: ignore[no-untyped-def]
        return w - 0.1 * xla_teach.grad(lambda w: ((x @ w) ** 2).mean())(w)

    sharded = xla_teach.jit(step)
    global_ = xla_teach.jit(step, in_shardings=(whole, batch), out_shardings=whole)
    w_dev, xs, w_np = xla_teach.device_put(w0, whole), xla_teach.device_put(x, batch), w0
    for _ in range(3):
        w_dev, w_np = sharded(w_dev, xs), global_(w_np, x)
    assert isinstance(w_dev, xla_teach.ShardedArray) and type(w_np) is np.ndarray
    np.testing.assert_array_equal(np.asarray(w_dev), w_np)
    assert sharded.cache_info().misses == 1  # the same splits each step: one compile


def test_device_put_takes_a_pytree_and_a_prefix_of_shardings() -> None:
    mesh = xla_teach.make_mesh((4,), ("b",))
    params = {"w": np.ones((8, 2), np.float32), "b": np.zeros((2,), np.float32)}
    put = xla_teach.device_put(params, {"w": NamedSharding(mesh, P("b")), "b": NamedSharding(mesh, P())})
    assert put["w"].addressable_shards[1].index[0] == slice(2, 4)
    assert put["b"].addressable_shards[3].data.shape == (2,)


def test_an_argument_split_unlike_in_shardings_is_refused_by_name() -> None:
    mesh = xla_teach.make_mesh((4,), ("b",))
    put = xla_teach.device_put(np.zeros((8, 4), np.float32), NamedSharding(mesh, P("b")))
    f = xla_teach.jit(lambda v: v + 1, in_shardings=NamedSharding(mesh, P(None, "b")))
    with pytest.raises(ValueError, match=r"argument v is split as .*but in_shardings says"):
        f(put)


def test_process_local_data_in_one_process_is_all_of_it() -> None:
    sharding = NamedSharding(xla_teach.make_mesh((4,), ("b",)), P("b"))
    x = np.arange(12, dtype=np.int32).reshape(4, 3)
    made = xla_teach.make_array_from_process_local_data(sharding, x)
    np.testing.assert_array_equal(np.asarray(made), x)
    with pytest.raises(ValueError, match=r"one process holds all of the data"):
        xla_teach.make_array_from_process_local_data(sharding, x, global_shape=(16, 3))
