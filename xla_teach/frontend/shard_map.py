"""``shard_map``: write the per-device program yourself, with collectives by mesh axis name.

``jit(f, in_shardings=...)`` lets the SPMD partitioner decide what every device computes.
``shard_map(f, mesh, in_specs, out_specs)`` is the other way round, as in JAX: ``f`` *is* the
per-device program. It sees each argument's local piece (``in_specs`` say how the global array
is cut) and talks to the other devices through collectives named by mesh axes::

    def f(x_block):                               # this device's rows of x
        return psum(x_block.sum(0), "rows")       # the column sums, over every device on "rows"

    shard_map(f, mesh, in_specs=P("rows"), out_specs=P())(x)

Each collective becomes one HLO collective whose ``replica_groups`` are the devices that differ
only along the named axes (``psum(x, "x")`` on a 2x2 mesh ``("x", "y")``: ``{{0,2},{1,3}}``):

=========================================  =====================================================
``psum``, ``pmax``, ``pmin``               ``all-reduce`` with ``add``, ``maximum``, ``minimum``
``all_gather(x, axis, axis=0, tiled=)``    ``all-gather`` (``tiled=False`` stacks on a new axis)
``psum_scatter(x, axis, scatter_dimension)`` ``reduce-scatter``
``all_to_all(x, axis, split, concat)``     ``all-to-all`` (+ transposes when the axes differ)
``ppermute(x, axis, perm)``                ``collective-permute`` (``perm``: pairs of axis indices)
``axis_index(axis)``                       ``partition-id`` -> this device's index along the axis
=========================================  =====================================================

Called on arrays, the traced module has ``num_partitions`` = the mesh's size, parameters and
ROOT carry the shardings ``in_specs``/``out_specs`` give, and it runs like any per-device module
(CPU threads, simulated devices, MPI processes) on global arrays in and out.

Called inside ``jit`` (on traced values), it writes what JAX writes: Shardy's *manual
computation* -- ``xla.sdy.GlobalToLocalShape`` (each device's piece, as ``in_specs`` say), a
``call`` of the traced body, ``xla.sdy.LocalToGlobalShape`` (the pieces of ``out_specs``), the
mesh in the module's ``xla.sdy.meshes`` frontend attribute -- and the SPMD partitioner turns it
into each device's program, next to whatever the rest of the function needs. (JAX's
``shard_map`` also differentiates; this one does not.)
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from xla_teach.frontend.sharding import Mesh, NamedSharding, PartitionSpec
from xla_teach.frontend.tracer import Tracer, current_context
from xla_teach.hlo.replica_groups import replica_groups_text
from xla_teach.hlo.sharding import HloSharding

_active = threading.local()  # .mesh: the mesh of the shard_map being traced


def _mesh() -> Mesh:
    mesh = getattr(_active, "mesh", None)
    if mesh is None or current_context() is None:
        raise ValueError("collectives by axis name (psum, all_gather, ...) only work inside shard_map")
    return mesh


def axis_groups(mesh: Mesh, axes: str | Sequence[str]) -> list[list[int]]:
    """The device groups of a collective over ``axes``: devices that differ only along them."""
    names = [axes] if isinstance(axes, str) else list(axes)
    for name in names:
        if name not in mesh.axis_names:
            raise ValueError(f"'{name}' is not an axis of {mesh!r}")
    others = [i for i, n in enumerate(mesh.axis_names) if n not in names]
    named = [mesh.axis_names.index(n) for n in names]
    grid = mesh.device_ids.transpose(others + named)
    size = math.prod(mesh.device_ids.shape[i] for i in named)
    return [list(map(int, row)) for row in grid.reshape(-1, size)]


def _traced(x: Any, what: str) -> Tracer:
    if not isinstance(x, Tracer):
        raise ValueError(f"{what} takes a traced array inside shard_map, got {type(x).__name__}")
    return x


def _all_reduce(x: Any, axes: str | Sequence[str], opcode: str) -> Tracer:
    mesh = _mesh()
    t = _traced(x, "psum/pmax/pmin")
    b = t.op.builder
    reducer = b.create_scalar_computation(opcode, t.op.shape.element_type)  # type: ignore[attr-defined]
    op = b.all_reduce(t.op, reducer, replica_groups_text(axis_groups(mesh, axes)))  # type: ignore[attr-defined]
    return Tracer(t.ctx, op, t.weak_type)


def psum(x: Any, axis_name: str | Sequence[str]) -> Tracer:
    """The sum of ``x`` over the devices along ``axis_name`` (every one of them gets it)."""
    return _all_reduce(x, axis_name, "add")


def pmax(x: Any, axis_name: str | Sequence[str]) -> Tracer:
    return _all_reduce(x, axis_name, "maximum")


def pmin(x: Any, axis_name: str | Sequence[str]) -> Tracer:
    return _all_reduce(x, axis_name, "minimum")


def all_gather(x: Any, axis_name: str | Sequence[str], *, axis: int = 0, tiled: bool = False) -> Tracer:
    """Every device's ``x`` along ``axis_name``, concatenated along ``axis`` (``tiled``) or
    stacked on a new ``axis``."""
    mesh = _mesh()
    t = _traced(x, "all_gather")
    b = t.op.builder
    groups = axis_groups(mesh, axis_name)
    op = t.op
    if not tiled:
        dims = list(op.shape.dimensions)
        op = b.reshape(op, dims[:axis] + [1] + dims[axis:])  # type: ignore[attr-defined]
    op = b.all_gather(op, axis, len(groups[0]), replica_groups_text(groups))  # type: ignore[attr-defined]
    return Tracer(t.ctx, op, t.weak_type)


def psum_scatter(x: Any, axis_name: str | Sequence[str], *, scatter_dimension: int = 0,
                 tiled: bool = False) -> Tracer:
    """The sum over ``axis_name``, of which each device keeps its slice along ``scatter_dimension``
    (``tiled=False``: the dimension's size must equal the group size, and it is dropped)."""
    mesh = _mesh()
    t = _traced(x, "psum_scatter")
    b = t.op.builder
    groups = axis_groups(mesh, axis_name)
    reducer = b.create_scalar_computation("add", t.op.shape.element_type)  # type: ignore[attr-defined]
    op = b.reduce_scatter(t.op, reducer, scatter_dimension, len(groups[0]), replica_groups_text(groups))  # type: ignore[attr-defined]
    if not tiled:
        dims = list(op.shape.dimensions)
        op = b.reshape(op, dims[:scatter_dimension] + dims[scatter_dimension + 1:])  # type: ignore[attr-defined]
    return Tracer(t.ctx, op, t.weak_type)


def all_to_all(x: Any, axis_name: str | Sequence[str], split_axis: int, concat_axis: int, *,
               tiled: bool = True) -> Tracer:
    """Split ``x`` along ``split_axis`` into one piece per device of ``axis_name``, send piece i to
    device i, and concatenate what arrives along ``concat_axis`` (``tiled`` form)."""
    if not tiled:
        raise NotImplementedError("all_to_all(tiled=False) is not supported; use tiled=True")
    mesh = _mesh()
    t = _traced(x, "all_to_all")
    b = t.op.builder
    groups = axis_groups(mesh, axis_name)
    n = len(groups[0])
    dims = list(t.op.shape.dimensions)
    if dims[split_axis] % n:
        raise ValueError(f"all_to_all: dimension {split_axis} of size {dims[split_axis]} does not split {n} ways")
    # pieces along a new leading axis, exchanged (array-form all-to-all on it), then put back
    pieces = dims[:split_axis] + [n, dims[split_axis] // n] + dims[split_axis + 1:]
    op = b.reshape(t.op, pieces)  # type: ignore[attr-defined]
    perm = [split_axis] + [i for i in range(len(pieces)) if i != split_axis]
    op = b.transpose(op, perm)  # type: ignore[attr-defined]
    op = b.all_to_all(op, 0, replica_groups_text(groups))  # type: ignore[attr-defined]
    # now piece j (leading axis) came from device j; concatenate them along concat_axis
    rest = [pieces[i] for i in perm[1:]]  # the piece's own dimensions
    move = list(range(1, len(rest) + 1))
    move.insert(concat_axis, 0)
    op = b.transpose(op, move)  # type: ignore[attr-defined]
    out = list(rest)
    out[concat_axis] *= n
    op = b.reshape(op, out)  # type: ignore[attr-defined]
    return Tracer(t.ctx, op, t.weak_type)


def ppermute(x: Any, axis_name: str, perm: Sequence[tuple[int, int]]) -> Tracer:
    """Send ``x`` from axis index ``s`` to axis index ``t`` for every pair; a device no pair
    targets gets zeros."""
    mesh = _mesh()
    t = _traced(x, "ppermute")
    pairs = []
    for group in axis_groups(mesh, axis_name):
        pairs += [(group[s], group[d]) for s, d in perm]
    op = t.op.builder.collective_permute(t.op, pairs)  # type: ignore[attr-defined]
    return Tracer(t.ctx, op, t.weak_type)


def axis_index(axis_name: str) -> Tracer:
    """This device's index along ``axis_name``, an ``s32[]``."""
    mesh = _mesh()
    ctx = current_context()
    assert ctx is not None
    b = ctx.builder
    axis = mesh.axis_names.index(axis_name)
    coordinates = np.zeros(mesh.size, np.int32)
    for index in np.ndindex(*mesh.device_ids.shape):
        coordinates[int(mesh.device_ids[index])] = index[axis]
    pid = b.convert_element_type(b.partition_id(), "s32")
    table = b.constant(coordinates)
    op = b.reshape(b.dynamic_slice(table, [pid], [1]), [])
    return Tracer(ctx, op, False)


def shard_map(f: Callable[..., Any], mesh: Mesh, in_specs: Any, out_specs: Any, *,
              backend: str | None = None) -> Callable[..., Any]:
    """``f`` run on every device of ``mesh`` on its piece of the arguments (module docstring)."""
    from xla_teach.api import compile_module, run_on_devices
    from xla_teach.backends.registry import DEFAULT_BACKEND
    from xla_teach.frontend.jit import jit

    chosen = backend or DEFAULT_BACKEND
    cache: dict[Any, Any] = {}

    def specs_for(specs: Any, count: int, what: str) -> list[PartitionSpec]:
        if isinstance(specs, PartitionSpec):
            return [specs] * count
        specs = list(specs)
        if len(specs) != count:
            raise ValueError(f"shard_map: {what} has {len(specs)} specs for {count} values")
        return specs

    def call(*args: Any) -> Any:
        if current_context() is not None:  # inside jit: a manual computation the partitioner splits
            return _manual_computation(f, mesh, specs_for(in_specs, len(args), "in_specs"), out_specs, specs_for,
                                       args)
        arrays = [np.asarray(a) for a in args]
        ins = specs_for(in_specs, len(arrays), "in_specs")
        shardings = [NamedSharding(mesh, s).hlo_sharding(a.ndim) for s, a in zip(ins, arrays, strict=True)]
        key = tuple((a.shape, a.dtype.str) for a in arrays)
        if key not in cache:
            local = []
            for a, s in zip(arrays, shardings, strict=True):
                if s.kind == "tiled" and any(d % n for d, n in zip(a.shape, s.data_tile_dims, strict=True)):
                    raise ValueError(f"shard_map: {a.dtype}{list(a.shape)} does not split evenly as {s}")
                local.append(np.zeros(s.tile_shape(a.shape) if s.kind == "tiled" else a.shape, a.dtype))
            _active.mesh = mesh
            try:
                lowered = jit(f, backend=chosen).lower(*local)
            finally:
                _active.mesh = None
            module = lowered.module.clone()
            module.header_attributes["num_partitions"] = str(mesh.size)
            for param, s in zip(module.entry.parameter_instructions, shardings, strict=True):
                param.sharding = s
            root = module.entry.root_instruction
            leaves = list(root.shape.tuple_shapes) if root.shape.is_tuple else [root.shape]
            outs = specs_for(out_specs, len(leaves), "out_specs")
            elements = [NamedSharding(mesh, s).hlo_sharding(leaf.rank) for s, leaf in zip(outs, leaves, strict=True)]
            root.sharding = HloSharding("tuple", elements=tuple(elements)) if root.shape.is_tuple else elements[0]
            cache[key] = (module, compile_module(module, chosen), root.shape.is_tuple)
        module, executable, is_tuple = cache[key]
        results = run_on_devices(module, executable, arrays, chosen)
        return tuple(results) if is_tuple else results[0]

    return call


def _sdy_mesh_text(mesh: Mesh) -> str:
    """The mesh as Shardy writes it: ``mesh = #sdy.mesh<["x"=2, "y"=2]>`` (+ ``device_ids`` when
    the devices are not in order)."""
    axes = ", ".join(f'"{name}"={size}' for name, size in zip(mesh.axis_names, mesh.device_ids.shape, strict=True))
    ids = [int(d) for d in mesh.device_ids.reshape(-1)]
    order = "" if ids == list(range(len(ids))) else ", device_ids=[" + ", ".join(map(str, ids)) + "]"
    return f"mesh = #sdy.mesh<[{axes}]{order}>"


def _sdy_shardings_text(specs: Sequence[PartitionSpec], ranks: Sequence[int]) -> str:
    """``#sdy.sharding_per_value<[<@mesh, [{"x"}, {}]>, ...]>`` for one PartitionSpec per value."""
    values = []
    for spec, rank in zip(specs, ranks, strict=True):
        entries = list(spec) + [None] * (rank - len(spec))
        dims = []
        for entry in entries:
            names = [] if entry is None else [entry] if isinstance(entry, str) else list(entry)
            dims.append("{" + ", ".join(f'"{n}"' for n in names) + "}")
        values.append("<@mesh, [" + ", ".join(dims) + "]>")
    return "#sdy.sharding_per_value<[" + ", ".join(values) + "]>"


def _manual_computation(f: Callable[..., Any], mesh: Mesh, ins: list[PartitionSpec], out_specs: Any,
                        specs_for: Callable[[Any, int, str], list[PartitionSpec]], args: Sequence[Any]) -> Any:
    """shard_map on traced values: Shardy's manual computation (module docstring)."""
    from xla_teach.frontend.control_flow_trace import trace_closed
    from xla_teach.frontend.pytree import tree_unflatten
    from xla_teach.frontend.tracer import ShapedArray
    from xla_teach.hlo.shape import Shape

    ctx = current_context()
    assert ctx is not None
    b = ctx.builder
    module = b.module
    mesh_text = _sdy_mesh_text(mesh)
    attributes = module.header_attributes.get("frontend_attributes", "")
    if "xla.sdy.meshes" in attributes and mesh_text not in attributes:
        raise ValueError("shard_map inside jit: every shard_map of one function must use the same mesh")
    module.header_attributes["frontend_attributes"] = "{xla.sdy.meshes={" + mesh_text + "}}"
    module.header_attributes["num_partitions"] = str(mesh.size)
    locals_, avals = [], []
    for arg, spec in zip(args, ins, strict=True):
        t = ctx.lift(arg)
        sharding = NamedSharding(mesh, spec).hlo_sharding(len(t.shape))
        dims = tuple(t.shape)
        if sharding.kind == "tiled" and any(d % n for d, n in zip(dims, sharding.data_tile_dims, strict=True)):
            raise ValueError(f"shard_map: {t.dtype}{list(dims)} does not split evenly as {sharding}")
        local = tuple(sharding.tile_shape(dims)) if sharding.kind == "tiled" else dims
        op = b.custom_call("xla.sdy.GlobalToLocalShape", [t.op], Shape.array(t.op.shape.element_type, local), True)
        op.instruction.frontend_attributes["xla.sdy.in_shardings"] = _sdy_shardings_text([spec], [len(dims)])
        locals_.append(op)
        avals.append(ShapedArray(local, t.dtype, t.weak_type))
    previous = getattr(_active, "mesh", None)
    _active.mesh = mesh
    try:
        closed = trace_closed(f, avals, "shmap_body")
    finally:
        _active.mesh = previous
    if closed.captured:
        raise ValueError("shard_map inside jit: the body uses values from outside it; pass them as arguments")
    body = b.call(closed.computation, locals_)
    pieces = [b.get_tuple_element(body, i) for i in range(len(closed.out_avals))]
    outs = specs_for(out_specs, len(pieces), "out_specs")
    shapes = []
    for piece, spec in zip(pieces, outs, strict=True):
        sharding = NamedSharding(mesh, spec).hlo_sharding(piece.shape.rank)
        tiles = sharding.data_tile_dims if sharding.kind == "tiled" else (1,) * piece.shape.rank
        shapes.append(Shape.array(piece.shape.element_type, tuple(d * n for d, n in zip(
            piece.shape.dimensions, tiles, strict=True))))
    whole = b.custom_call("xla.sdy.LocalToGlobalShape", pieces, Shape.make_tuple(shapes), True)
    whole.instruction.frontend_attributes["xla.sdy.out_shardings"] = _sdy_shardings_text(
        outs, [s.rank for s in shapes])
    results = [Tracer(ctx, b.get_tuple_element(whole, i), a.weak_type)
               for i, a in enumerate(closed.out_avals)]
    return tree_unflatten(closed.out_tree, results)
