"""Meshes and shardings with JAX's names: ``Mesh``, ``PartitionSpec``, ``NamedSharding``.

A *mesh* arranges the devices in a named grid -- ``Mesh(devices().reshape(2, 2), ("x", "y"))`` --
and a ``PartitionSpec`` says, per array dimension, which mesh axes split it: ``P("x", None)``
splits the rows two ways and keeps the columns whole (so each row block lives on the two devices
of a mesh row: it is *replicated* along ``y``). ``NamedSharding(mesh, spec)`` is the pair, and
:meth:`NamedSharding.hlo_sharding` the sharding XLA writes into HLO: one tile per combination of
the splitting axes, the devices in the mesh's order, the unused axes as a last, replicating
dimension (``{devices=[2,1,2]0,1,2,3 last_tile_dim_replicate}``).

``jit(f, in_shardings=..., out_shardings=...)`` puts them on the parameters and results, the SPMD
partitioner (``passes/spmd``) turns the traced program into the per-device one, and the devices
run it: CPU devices (threads) or simulated ones, as many as ``devices()`` gives --
``--xla_force_host_platform_device_count``, as in JAX. Inside a traced function
:func:`with_sharding_constraint` fixes a value's sharding (a ``Sharding`` custom call).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from xla_teach import flags
from xla_teach.frontend.pytree import PyTreeDef
from xla_teach.hlo.sharding import HloSharding, sharding_from_mesh_axes


@dataclass(frozen=True)
class Device:
    """One CPU device of this process (a thread when a program runs on several)."""

    id: int
    platform: str = "cpu"

    def __repr__(self) -> str:
        return f"CpuDevice(id={self.id})"


def devices() -> list[Device]:
    """The devices: one per process under ``mpiexec`` (after ``distributed.initialize()``), else
    ``--xla_force_host_platform_device_count`` of them (one by default, as XLA's CPU)."""
    from xla_teach.runtime import distributed

    count = distributed.process_count() if distributed.is_initialized() else 0
    count = count or int(flags.get("xla_force_host_platform_device_count")) or 1
    return [Device(i) for i in range(count)]


def device_count() -> int:
    return len(devices())


class PartitionSpec(tuple):  # noqa: SLOT001 - a tuple, as JAX's
    """Per array dimension: ``None`` (whole), a mesh axis name, or a tuple of names."""

    def __new__(cls, *dims: str | tuple[str, ...] | None) -> PartitionSpec:
        return super().__new__(cls, dims)

    def __repr__(self) -> str:
        return "P(" + ", ".join(repr(d) for d in self) + ")"


P = PartitionSpec


class Mesh:
    """Devices in a named grid: ``Mesh(np.array(devices()).reshape(2, 2), ("x", "y"))``."""

    def __init__(self, devices: Any, axis_names: Sequence[str]) -> None:
        grid = np.asarray(devices, dtype=object)
        self.device_ids = np.vectorize(lambda d: d.id if isinstance(d, Device) else int(d), otypes=[np.int64])(grid)
        self.axis_names = tuple(axis_names)
        if self.device_ids.ndim != len(self.axis_names):
            raise ValueError(f"a mesh of shape {list(self.device_ids.shape)} needs {self.device_ids.ndim} axis names, "
                             f"got {list(self.axis_names)}")
        if len(set(self.axis_names)) != len(self.axis_names):
            raise ValueError(f"mesh axis names must differ: {list(self.axis_names)}")

    @property
    def shape(self) -> dict[str, int]:
        return dict(zip(self.axis_names, self.device_ids.shape, strict=True))

    @property
    def size(self) -> int:
        return int(self.device_ids.size)

    def __repr__(self) -> str:
        return "Mesh(" + ", ".join(f"'{n}': {s}" for n, s in self.shape.items()) + ")"


def make_mesh(axis_shapes: Sequence[int], axis_names: Sequence[str]) -> Mesh:
    """A mesh of the first ``prod(axis_shapes)`` devices, in order (JAX's ``jax.make_mesh``)."""
    needed = math.prod(axis_shapes)
    available = devices()
    if needed > len(available):
        raise ValueError(f"a mesh of {list(axis_shapes)} needs {needed} devices, this process has {len(available)} "
                         f"(set --xla_force_host_platform_device_count={needed} in XLA_FLAGS)")
    return Mesh(np.array(available[:needed], dtype=object).reshape(tuple(axis_shapes)), axis_names)


@dataclass(frozen=True)
class NamedSharding:
    """An array split over ``mesh`` as ``spec`` says (JAX's ``jax.sharding.NamedSharding``)."""

    mesh: Mesh
    spec: PartitionSpec

    @property
    def device_ids(self) -> tuple[int, ...]:
        """The mesh's devices (JAX's ``device_set``, as ids)."""
        return tuple(int(d) for d in self.mesh.device_ids.reshape(-1))

    @property
    def num_devices(self) -> int:
        return self.mesh.size

    def hlo_sharding(self, ndim: int) -> HloSharding:
        """The sharding XLA writes for an array of ``ndim`` dimensions (module docstring)."""
        if len(self.spec) > ndim:
            raise ValueError(f"{self.spec!r} names {len(self.spec)} dimensions, the array has {ndim}")
        per_dim: list[tuple[str, ...]] = []
        for entry in tuple(self.spec) + (None,) * (ndim - len(self.spec)):
            per_dim.append(() if entry is None else (entry,) if isinstance(entry, str) else tuple(entry))
        try:
            return sharding_from_mesh_axes(self.mesh.device_ids, self.mesh.axis_names, per_dim)
        except ValueError as err:
            raise ValueError(f"{self.spec!r} on {self.mesh!r}: {err}") from None


@dataclass(frozen=True)
class GSPMDSharding:
    """A split given as XLA's own ``HloSharding`` over ``device_ids`` (JAX's ``GSPMDSharding``):
    the sharding of a ``jit`` result that ``out_shardings`` did not name -- wherever the SPMD
    partitioner left it. It can be passed back as an ``in_shardings`` entry, like a NamedSharding."""

    device_ids: tuple[int, ...]
    hlo: HloSharding

    @property
    def num_devices(self) -> int:
        return len(self.device_ids)

    def hlo_sharding(self, ndim: int) -> HloSharding:
        self.hlo.check_fits((0,) * ndim)
        return self.hlo

    def __repr__(self) -> str:
        return f"GSPMDSharding({self.hlo}, devices={list(self.device_ids)})"


def sharding_per_leaf(prefix: Any, tree: PyTreeDef, where: str) -> list[Any]:
    """One sharding (or None) per leaf of ``tree`` from ``prefix``, as JAX reads ``in_shardings``:
    a sharding (or None) stands for every leaf below it; a dict, list or tuple goes down the
    argument's own structure (a *prefix* of it: ``{"w": rows, "b": None}`` for a dict of
    parameters, a sharding for a whole sub-tree)."""
    if prefix is None or hasattr(prefix, "hlo_sharding"):
        return [prefix] * tree.num_leaves
    if tree.kind == "dict" and isinstance(prefix, dict):
        keys = list(tree.data)  # type: ignore[call-overload]
        if sorted(map(str, prefix)) != sorted(map(str, keys)):
            raise ValueError(f"jit: {where} has the keys {sorted(map(str, prefix))}, the argument "
                             f"{sorted(map(str, keys))}")
        parts, names = [prefix[k] for k in keys], [f"{where}[{k!r}]" for k in keys]
    elif tree.kind in ("tuple", "list", "namedtuple") and isinstance(prefix, (list, tuple)):
        if len(prefix) != len(tree.children):
            raise ValueError(f"jit: {where} has {len(prefix)} entries for an argument of {len(tree.children)}")
        parts, names = list(prefix), [f"{where}[{k}]" for k in range(len(prefix))]
    else:
        raise ValueError(f"jit: {where} is a {type(prefix).__name__}, but the argument is {tree}: give a "
                         "NamedSharding for all of it, or a tree of them shaped like it")
    found: list[Any] = []
    for part, child, name in zip(parts, tree.children, names, strict=True):
        found += sharding_per_leaf(part, child, name)
    return found


def with_sharding_constraint(x: Any, sharding: NamedSharding) -> Any:
    """Fix ``x``'s sharding inside a traced function (a ``Sharding`` custom call, as JAX writes);
    outside ``jit`` it returns ``x``."""
    from xla_teach.frontend.tracer import Tracer, current_context

    if current_context() is None or not isinstance(x, Tracer):
        return x
    builder = x.op.builder
    op = builder.custom_call("Sharding", [x.op], x.op.shape)  # type: ignore[attr-defined]
    op.instruction.sharding = sharding.hlo_sharding(x.op.shape.rank)
    return Tracer(x.ctx, op, x.weak_type)
