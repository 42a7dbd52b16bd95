"""Exercise `sharding`: which piece of an array each device holds, and what moves it.

A program for several devices gives every value a *sharding* (``xla_teach/hlo/sharding.py``;
XLA's ``HloSharding``): ``sharding={devices=[4,1]<=[4]}`` cuts an array's rows into 4 tiles,
tile ``i`` on device ``i``; ``{devices=[2,2]<=[2,2]T(1,0)}`` cuts both dimensions in two and
lists the devices of the 2x2 tiles in the order of the transposed iota ``0,2,1,3``;
``{devices=[2,1,2]<=[4] last_tile_dim_replicate}`` cuts the rows in two and keeps two copies of
each tile (the last tile dimension counts copies, not cuts); ``{replicated}`` gives every device
the whole array. A tile is ``ceil(size / tiles)`` long, so the last one may be short, or empty.

1. Write ``device_slices(dims, sharding, num_devices)``: for every device ``0 .. num_devices-1``
   the ``[start, limit)`` of each dimension of the part of the global array (of sizes ``dims``)
   that it holds, clipped to the array: ``{0: [(0, 2), (0, 6)], 1: [(2, 4), (0, 6)], ...}``.
2. Write ``reshard(dims, src, dst, num_devices)``: the collective that turns a value sharded as
   ``src`` into one sharded as ``dst``, as the SPMD partitioner would pick it:

   * ``"none"``: every device already holds what it needs (two spellings of one sharding);
   * ``"all-gather"``: ``dst`` gives every device the whole array, ``src`` only pieces;
   * ``"dynamic-slice"``: ``src`` gives every device the whole array: each cuts out its own piece
     of ``dst``, and nothing moves between devices;
   * ``"collective-permute"``: the same cuts, but the pieces sit on other devices;
   * ``"all-to-all"``: cut along another dimension (rows to columns, say).

What you have: ``sharding.kind`` (``"replicated"`` or ``"tiled"``), ``sharding.tile_dims``
(the tile counts, copies last when ``sharding.last_tile_dim_replicate``),
``sharding.data_tile_dims`` (the cuts of the array's own dimensions) and
``sharding.tile_assignment()`` (a NumPy array of device ids, of shape ``tile_dims``). The
library's own ``tile_index``, ``tile_shape``, ``shard`` and the SPMD partitioner are not
available while grading.

Grade it:  xla-teach grade sharding path/to/sharding.py
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from xla_teach.hlo.sharding import HloSharding


def device_slices(dims: Sequence[int], sharding: HloSharding, num_devices: int) -> dict[int, list[tuple[int, int]]]:
    # TODO: the whole array on every device, or each tile's clipped span on the devices of that tile
    raise NotImplementedError("TODO (sharding): the whole array on every device, or each tile's clipped span on the devices of that tile")


def reshard(dims: Sequence[int], src: HloSharding, dst: HloSharding, num_devices: int) -> str:
    # TODO: compare who holds what before and after
    raise NotImplementedError("TODO (sharding): compare who holds what before and after")
