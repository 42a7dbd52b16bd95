"""Several devices in one process: the interpreter runs a partitioned program on each.

XLA's SPMD partitioner turns a sharded program into *one* per-device program: every device runs
the same HLO on its own shard of the data, and the collectives (``all-reduce``, ``all-gather``,
``reduce-scatter``, ``all-to-all``, ``collective-permute``) are where devices exchange values.
:func:`run_partitioned` runs such a module on N simulated devices, one thread each, and is the
oracle multi-device backends are checked against.

Each device has its own :class:`~xla_teach.hlo.evaluator.core.HloEvaluator` whose ``device`` is a
:class:`DeviceContext`: its index (what ``partition-id`` returns) and the :class:`Rendezvous`
all devices share. A collective deposits the device's operand there, waits until every member
of its group (``replica_groups``, any of XLA's forms) has deposited, and computes its result
from all of them -- in group order, so that every member gets the same bits::

    all-reduce      reduce the members' operands (group order) with to_apply
    all-gather      concatenate them along the dimension
    reduce-scatter  reduce, then keep this member's slice along the dimension
    all-to-all      split each operand into one piece per member; member j gets the j-th pieces
                    (tuple form: one operand per member, operand j goes to member j)
    collective-permute  receive the operand of the device whose pair targets this one (else zeros)

:func:`run_global` takes and returns *global* arrays, as ``jax.jit`` does: the parameters'
``sharding`` attributes split the arguments, and the outputs' shardings put the results back.
An argument may also arrive already split -- :class:`Pieces`, each device's piece and the
sharding that cut them -- and the results may stay split (``keep_split``): data that lives on
the devices between calls, as a sharded ``jax.Array`` does.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from xla_teach.hlo.evaluator.core import HloEvaluator
from xla_teach.hlo.evaluator.device_context import DeviceContext, Rendezvous, as_device, current_device

__all__ = ["DeviceContext", "Pieces", "Rendezvous", "as_device", "current_device", "run_devices", "run_global",
           "run_partitioned"]

if TYPE_CHECKING:
    from xla_teach.hlo.ir import HloModule
    from xla_teach.hlo.sharding import HloSharding


@dataclass(frozen=True)
class Pieces:
    """A global array of ``dims`` that is already split over the devices: ``by_device[d]`` is
    device ``d``'s piece as ``sharding`` cuts it (padded to the tile shape when the split is
    uneven). Under MPI a process holds the pieces of its own device only."""

    sharding: HloSharding
    dims: tuple[int, ...]
    by_device: dict[int, np.ndarray]

    @property
    def dtype(self) -> np.dtype:
        return next(iter(self.by_device.values())).dtype

    def piece(self, device: int, where: str) -> np.ndarray:
        if device not in self.by_device:
            from xla_teach.hlo.sharding import ShardingError

            raise ShardingError(f"{where}: the array's piece for device {device} is not here (this process "
                                f"holds devices {sorted(self.by_device)})")
        return self.by_device[device]


def run_devices(count: int, run_one: Callable[[DeviceContext], list[np.ndarray]]) -> list[list[np.ndarray]]:
    """Run ``run_one(device)`` for ``count`` devices sharing one rendezvous, one thread each (the
    thread's :func:`current_device` is its device); returns each device's results. A device that
    fails wakes the others, and the first real error is raised."""
    rendezvous = Rendezvous(count)
    results: list[list[np.ndarray] | None] = [None] * count
    errors: list[BaseException | None] = [None] * count

    def run(i: int) -> None:
        device = DeviceContext(i, rendezvous)
        try:
            with as_device(device):
                results[i] = run_one(device)
        except BaseException as error:  # noqa: BLE001 - reported below, and wakes the others
            errors[i] = error
            rendezvous.fail(error)

    threads = [threading.Thread(target=run, args=(i,), name=f"xla_teach-device-{i}") for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    first = next((e for e in errors if e is not None and "another device failed" not in str(e)), None)
    first = first or next((e for e in errors if e is not None), None)
    if first is not None:
        raise first
    return [r for r in results if r is not None]


def run_partitioned(module: HloModule, per_device_args: Sequence[Sequence[Any]]) -> list[list[np.ndarray]]:
    """Run ``module`` (a per-device program) on ``len(per_device_args)`` simulated devices, device
    ``i`` on ``per_device_args[i]``; returns each device's result leaves."""
    def run_one(device: DeviceContext) -> list[np.ndarray]:
        evaluator = HloEvaluator()
        evaluator.device = device
        return evaluator.evaluate_module(module, list(per_device_args[device.index]))

    return run_devices(len(per_device_args), run_one)


def run_global(module: HloModule, args: Sequence[np.ndarray | Pieces],
               out_shardings: Sequence[HloSharding] | None = None,
               run: Callable[[list[list[np.ndarray]]], list[list[np.ndarray]]] | None = None,
               only: int | None = None, keep_split: bool = False) -> list[Any]:
    """Run a per-device module on *global* arrays, as ``jax.jit`` does with sharded ones.

    Each ENTRY parameter's ``sharding`` says which piece of the global argument every device
    gets (none: all of it); the devices run (:func:`run_partitioned`), and each output is put
    back together from the devices' pieces by its sharding: ``out_shardings`` (one per result
    leaf) or the ROOT's own. XLA's optimized SPMD modules do not print the ROOT's sharding;
    without one an output must be the same on every device, else this says so. ``run`` runs the
    devices on their pieces (default: the interpreter, :func:`run_partitioned`). ``only``: cut the
    pieces of that device alone (one process of several, each running its own device).
    """
    from xla_teach.hlo.sharding import HloSharding, ShardingError

    n = module.device_count()
    partitions = int(module.header_attributes.get("num_partitions", "1"))
    params = module.entry.parameter_instructions
    if len(args) != len(params):
        raise ValueError(f"{module.name} takes {len(params)} arguments, got {len(args)}")
    per_device: list[list[np.ndarray]] = [[] for _ in range(n)]
    for param, arg in zip(params, args, strict=True):
        sharding = param.sharding or HloSharding.replicate()
        where = f"parameter {param.parameter_number} ({param.name})"
        if isinstance(arg, Pieces) and not _same_split(arg.sharding, sharding):
            raise ShardingError(f"{where} is split as {sharding}, but the argument given is split as {arg.sharding} "
                                "(put it there first: device_put(x, sharding))")
        if not isinstance(arg, Pieces):
            arg = np.asarray(arg)
        for d in range(n) if only is None else [only]:
            if isinstance(arg, Pieces):
                per_device[d].append(arg.piece(d, where))
                continue
            piece = sharding.shard(arg, d % partitions)
            if piece.shape != tuple(param.shape.dimensions):
                raise ShardingError(f"parameter {param.parameter_number} ({param.name}): a global {arg.dtype}"
                                    f"{list(arg.shape)} split by {sharding} gives device {d} a {list(piece.shape)}"
                                    f" piece, but the per-device module takes {param.shape}")
            per_device[d].append(piece)
    results = run(per_device) if run is not None else run_partitioned(module, per_device)
    root_instr = module.entry.root_instruction
    if out_shardings is None and root_instr.sharding is not None:
        root = root_instr.sharding
        out_shardings = list(root.elements) if root.is_tuple else [root]
    # xla_teach's partitioner names the whole results' shapes in the header when their pieces are padded
    header = str(module.header_attributes.get("frontend_attributes", ""))
    named = re.search(r'xla_teach\.global_shapes="([^"]*)"', header)
    global_shapes = named.group(1) if named else ""
    out_dims = [tuple(int(d) for d in text.split("[", 1)[1].rstrip("]").split(",") if d)
                for text in global_shapes.split(";")] if global_shapes else None
    outputs: list[Any] = []
    for i in range(len(results[0])):
        pieces = {d: results[d][i] for d in range(min(n, partitions))}
        if keep_split:
            split = out_shardings[i] if out_shardings is not None else HloSharding.replicate()
            dims = out_dims[i] if out_dims else _global_dims(split, pieces[min(pieces)].shape)
            outputs.append(Pieces(split, dims, pieces if only is None else {only: pieces[only]}))
            continue
        if out_shardings is not None:
            outputs.append(out_shardings[i].assemble(pieces, out_dims[i] if out_dims else None))
            continue
        first = pieces[0]
        if any(not np.array_equal(p, first, equal_nan=True) for p in pieces.values()):
            raise ShardingError(f"output {i} differs between devices and the module does not say how it is split "
                                "(XLA's optimized modules do not print the ROOT's sharding): pass out_shardings")
        outputs.append(first)
    return outputs


def _same_split(a: HloSharding, b: HloSharding) -> bool:
    """Whether two shardings put the same part on every device (texts may differ: iota or list)."""
    if a.is_replicated and b.is_replicated:
        return True
    if a.kind != b.kind or a.kind != "tiled":
        return a == b
    return (a.tile_dims == b.tile_dims and a.last_tile_dims == b.last_tile_dims
            and a.last_tile_dim_replicate == b.last_tile_dim_replicate and a.devices() == b.devices())


def _global_dims(sharding: HloSharding, piece: tuple[int, ...]) -> tuple[int, ...]:
    if sharding.kind != "tiled":
        return tuple(piece)
    return tuple(p * t for p, t in zip(piece, sharding.data_tile_dims, strict=True))
