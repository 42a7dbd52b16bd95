"""Arrays that stay split over the devices between calls (JAX's sharded ``jax.Array``).

A global NumPy array passed to a sharded ``jit`` is cut into pieces on every call, and its
results are put back together: simple, but each call moves the whole data twice. In a
training loop the parameters and the batch should *stay* on the devices. That is what a
:class:`ShardedArray` is -- each device's piece, and the sharding that says which part of the
global array every piece is::

    x = xla_teach.device_put(batch, NamedSharding(mesh, P("batch")))   # cut once
    state = step(state, x)          # jit takes the pieces as they are; its results stay split
    x.sharding, x.addressable_shards # which device holds which part
    np.asarray(state)               # put back together only when asked

Sharded in, sharded out: when any argument of a ``jit`` call is a ``ShardedArray`` (and the
program runs on several devices) the results are ``ShardedArray`` s too, split as the
partitioner left them (or as ``out_shardings`` says); with NumPy arguments ``jit`` returns
global NumPy arrays, as before.

Under MPI (one process per device) a process holds only its own device's piece: nothing moves
between processes unless a collective in the program moves it. Each process can then feed its
own part of the data -- :func:`make_array_from_process_local_data`, JAX's name -- instead of
every process loading the whole global batch, and ``np.asarray`` of an array split over other
processes refuses (as JAX does) and points to :func:`process_allgather`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from xla_teach.frontend.pytree import tree_flatten, tree_unflatten
from xla_teach.frontend.sharding import Device, GSPMDSharding, NamedSharding, sharding_per_leaf
from xla_teach.hlo.evaluator.devices import Pieces
from xla_teach.hlo.sharding import HloSharding, ShardingError

Sharding = NamedSharding | GSPMDSharding


@dataclass(frozen=True)
class Shard:
    """One device's part of a :class:`ShardedArray` (JAX's ``Shard``): ``data`` is
    ``global[index]``."""

    device: Device
    index: tuple[slice, ...]
    data: np.ndarray


class ShardedArray:
    """A global array of ``shape`` kept as pieces on the devices (module docstring)."""

    __array_priority__ = 100  # NumPy asks this object, not the other way round

    def __init__(self, pieces: Pieces, sharding: Sharding) -> None:
        self.pieces = pieces
        self.sharding = sharding

    # ---- what it is ---------------------------------------------------------------------
    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.pieces.dims)

    @property
    def dtype(self) -> np.dtype:
        return self.pieces.dtype

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d array")
        return self.shape[0]

    def __repr__(self) -> str:
        return (f"ShardedArray({self.dtype}{list(self.shape)}, sharding={self.sharding!r}, "
                f"pieces on devices {sorted(self.pieces.by_device)})")

    # ---- where it is --------------------------------------------------------------------
    @property
    def addressable_shards(self) -> list[Shard]:
        """The pieces this process holds, each with the global region it covers (padding cut off)."""
        split = self.pieces.sharding
        shards = []
        for device, piece in sorted(self.pieces.by_device.items()):
            index = split.index(self.shape, device)
            data = piece[tuple(slice(0, s.stop - s.start) for s in index)]
            shards.append(Shard(Device(device), index, data))
        return shards

    @property
    def is_fully_addressable(self) -> bool:
        """Whether this process holds every device's piece (always, in one process)."""
        return set(self.sharding.device_ids) <= set(self.pieces.by_device)

    def addressable_data(self, i: int) -> np.ndarray:
        return self.addressable_shards[i].data

    def block_until_ready(self) -> ShardedArray:
        return self  # the devices finished when the call returned

    # ---- back to one array ----------------------------------------------------------------
    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        out = self._assemble(self.addressable_shards)
        return out if dtype is None else out.astype(dtype)

    def __float__(self) -> float:
        return float(np.asarray(self))

    def __int__(self) -> int:
        return int(np.asarray(self))

    def item(self) -> Any:
        return np.asarray(self).item()

    def _assemble(self, shards: list[Shard]) -> np.ndarray:
        out = np.zeros(self.shape, self.dtype)
        covered = np.zeros(self.shape, bool)
        for shard in shards:
            out[shard.index] = shard.data
            covered[shard.index] = True
        if not covered.all():
            raise ValueError(f"this {self.dtype}{list(self.shape)} array is split over devices of other processes "
                             f"(this one holds devices {sorted(self.pieces.by_device)}): fetch the whole of it with "
                             "xla_teach.multihost_utils.process_allgather(x), as in JAX, "
                             "or read x.addressable_shards")
        return out


# ---- making them ------------------------------------------------------------------------------
def _here(sharding: Sharding) -> list[int]:
    """The devices of ``sharding`` whose pieces this process holds: all of them in one process,
    its own under MPI."""
    from xla_teach.runtime import distributed

    if distributed.process_count() > 1:
        return [d for d in sharding.device_ids if d == distributed.process_index()]
    return list(sharding.device_ids)


def _check_sharding(sharding: Any, where: str) -> Sharding:
    if not isinstance(sharding, (NamedSharding, GSPMDSharding)):
        raise ValueError(f"{where}: expected a NamedSharding (xla_teach.sharding), got {type(sharding).__name__}")
    return sharding


def _put_one(x: Any, sharding: Any) -> Any:
    if sharding is None:
        return x
    sharding = _check_sharding(sharding, "device_put")
    if isinstance(x, ShardedArray):
        if _same(x.sharding, sharding, x.ndim):
            return x
        x = np.asarray(x)  # to another split: through one array (in one process)
    array = np.asarray(x)
    split = sharding.hlo_sharding(array.ndim)
    pieces = {d: split.shard(array, d) for d in _here(sharding)}
    return ShardedArray(Pieces(split, tuple(array.shape), pieces), sharding)


def device_put(x: Any, sharding: Any = None) -> Any:
    """Put ``x`` (an array or a pytree of them) on the devices, split by ``sharding`` (one
    ``NamedSharding`` for every leaf, or a pytree prefix of them; JAX's ``jax.device_put``).
    Under MPI every process passes the global value and keeps its own device's piece."""
    leaves, tree = tree_flatten(x)
    shardings = sharding_per_leaf(sharding, tree, "device_put")
    return tree_unflatten(tree, [_put_one(leaf, s) for leaf, s in zip(leaves, shardings, strict=True)])


def make_array_from_process_local_data(sharding: Any, local_data: Any,
                                       global_shape: tuple[int, ...] | None = None) -> ShardedArray:
    """A global array from the part each process holds (JAX's
    ``jax.make_array_from_process_local_data``): under MPI, process ``i`` passes the part of the
    global array its device ``i`` holds -- its rows of the batch, say -- so no process loads the
    whole. ``global_shape`` defaults to the local shape times the number of parts along each
    dimension (give it when the split is uneven). In one process the local data is all of it."""
    from xla_teach.runtime import distributed

    sharding = _check_sharding(sharding, "make_array_from_process_local_data")
    local = np.asarray(local_data)
    split = sharding.hlo_sharding(local.ndim)
    if distributed.process_count() <= 1:
        if global_shape is not None and tuple(global_shape) != local.shape:
            raise ValueError(f"make_array_from_process_local_data: one process holds all of the data, so the local "
                             f"shape {list(local.shape)} is the global shape, not {list(global_shape)}")
        return _put_one(local, sharding)
    parts = split.data_tile_dims if split.kind == "tiled" else (1,) * local.ndim
    dims = tuple(global_shape) if global_shape is not None else tuple(n * p for n, p in zip(local.shape, parts,
                                                                                               strict=True))
    pieces = {}
    for device in _here(sharding):
        index = split.index(dims, device)
        expected = tuple(s.stop - s.start for s in index)
        if local.shape != expected:
            raise ShardingError(f"make_array_from_process_local_data: process {distributed.process_index()} holds "
                                f"the part {_slices(index)} of the global {list(dims)} array, of shape "
                                f"{list(expected)}, but passed {local.dtype}{list(local.shape)}")
        piece = np.zeros(split.tile_shape(dims), local.dtype)
        piece[tuple(slice(0, n) for n in local.shape)] = local
        pieces[device] = piece
    return ShardedArray(Pieces(split, dims, pieces), sharding)


def process_allgather(x: Any) -> Any:
    """Every process gets the whole of ``x`` (an array or pytree), put together from every
    process's pieces with ``MPI_Allgather`` (JAX: ``multihost_utils.process_allgather``)."""
    from xla_teach.runtime import distributed

    def one(leaf: Any) -> Any:
        if not isinstance(leaf, ShardedArray):
            return np.asarray(leaf)
        if leaf.is_fully_addressable or distributed.process_count() <= 1:
            return np.asarray(leaf)
        mine = leaf.addressable_shards
        if len(mine) != 1:
            raise ValueError("process_allgather: a process holds one device's piece under MPI")
        pieces = distributed.allgather_array(leaf.pieces.by_device[mine[0].device.id])
        everyone = Pieces(leaf.pieces.sharding, leaf.pieces.dims, dict(enumerate(pieces)))
        return np.asarray(ShardedArray(everyone, leaf.sharding))

    leaves, tree = tree_flatten(x)
    return tree_unflatten(tree, [one(leaf) for leaf in leaves])


def _same(a: Sharding, b: Sharding, ndim: int) -> bool:
    return a.hlo_sharding(ndim) == b.hlo_sharding(ndim) and tuple(a.device_ids) == tuple(b.device_ids)


def _slices(index: tuple[slice, ...]) -> str:
    return "[" + ", ".join(f"{s.start}:{s.stop}" for s in index) + "]"


def output_sharding(split: HloSharding, given: Any, device_ids: tuple[int, ...]) -> Sharding:
    """The ``sharding`` of a ``jit`` result: ``out_shardings``'s entry when given, else XLA's own
    sharding of the result over the program's devices."""
    return given if given is not None else GSPMDSharding(device_ids, split)
