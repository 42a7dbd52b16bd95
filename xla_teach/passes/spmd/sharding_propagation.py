"""Sharding propagation: give every instruction of the ENTRY computation a sharding.

JAX writes shardings on the parameters, on the results and wherever the user asked
(``with_sharding_constraint`` becomes a ``Sharding`` custom call); XLA's ``ShardingPropagation``
spreads them to every other instruction before the SPMD partitioner rewrites the program. This
one walks the computation forward, in dataflow order, one rule per kind of instruction:

* an instruction that carries ``sharding=`` keeps it (the ``Sharding`` custom call, parameters);
* elementwise ops take the sharding of their first tiled operand (the others are resharded to
  it), so ``tanh(x)`` is split the way ``x`` is; so do a ``reshape`` or ``copy`` that keeps the shape;
* ``transpose`` permutes the tile dimensions with the data dimensions; a ``broadcast`` keeps each
  split where its dimension lands; a ``reshape`` keeps a split on the major dimension of a group
  of dimensions it merges or splits, when the group's major output dimension divides evenly
  (``[8,6] -> [4,2,6]`` or ``[48]`` with the rows split four ways);
* ``dot`` of ``[m, k] x [k, n]``: rows split and the right side whole -> the result's rows are
  split the same way (data parallelism); the right side's columns split and the left side
  whole -> the result's columns; both split along ``k`` alike -> each device has a partial
  sum, and the result is replicated after an ``all-reduce``;
* ``reduce``: the kept dimensions stay split as they were; split reduced dimensions become
  replication (their devices hold partial results that an ``all-reduce`` combines);
* ``slice``, ``pad``, ``concatenate`` and ``reverse`` keep the first operand's split when they
  only rearrange dimensions that are not split (each device slices or pads its own piece);
* ``reduce-window`` (pooling, moving sums) keeps its operand's split when each device's windows
  start in its own piece (:func:`halo_plan`): the few elements they reach beyond it -- the *halo*
  -- come from the neighbours; so does a ``convolution`` of a split input with a whole kernel
  (split images: data parallelism; split rows or columns: halos); a ``scatter`` into a table split
  by rows keeps the table's split (each device applies the updates to its own rows); a ``gather``
  from a whole table with split indices is split as its indices (:func:`lookups_split`);
* ``tuple``/``get-tuple-element`` pass shardings through, and so does a ``while``: its state stays
  split as it came in; a ``conditional`` takes what propagation inside its first branch gives;
  everything else is replicated;
* a ``shard_map`` as Shardy writes it -- ``xla.sdy.GlobalToLocalShape``, a ``call`` of the body,
  ``xla.sdy.LocalToGlobalShape`` -- is *manual* inside (each device's own value, the body
  written per device) and takes the ``xla.sdy.out_shardings`` at its end.

Then a backward walk (:func:`_backward`), from users to operands, splits what the forward walk
left whole when every user asks for the same split (an elementwise op, a transpose, the rows of
a ``dot``): a result the caller wants split is computed split from the start. XLA's propagation
alternates the two directions until nothing changes and weighs alternatives by cost; this one
does one walk each way, and an instruction without a rule is computed whole on every device.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from xla_teach.hlo.ir import HloComputation, HloInstruction
from xla_teach.hlo.opcodes import is_elementwise
from xla_teach.hlo.sharding import HloSharding, parse_sdy_mesh, parse_sdy_shardings

REPLICATED = HloSharding.replicate()
MANUAL = HloSharding("manual")  # a value inside shard_map: each device's own, not a piece of a whole
ANNOTATIONS = ("Sharding", "xla.sdy.FuncResultSharding", "xla.sdy.ShardingConstraint")


def sdy_shardings(instr: HloInstruction, key: str) -> list[HloSharding]:
    """Shardy's shardings of a shard_map's boundary (``xla.sdy.in_shardings`` /
    ``xla.sdy.out_shardings``), over the mesh the module's frontend attributes declare."""
    module = instr.parent.parent if instr.parent is not None else None
    mesh = parse_sdy_mesh(module.header_attributes.get("frontend_attributes", "")) if module is not None else None
    if mesh is None:
        raise ValueError(f"{instr.name}: a shard_map boundary, but the module declares no xla.sdy.meshes")
    return parse_sdy_shardings(instr.frontend_attributes.get(key, ""), mesh)


def tiled(sharding: HloSharding) -> bool:
    """Splits some dimension of its value (not just replication)."""
    return sharding.kind == "tiled" and math.prod(sharding.data_tile_dims) > 1


def with_assignment(assignment: np.ndarray, data_rank: int) -> HloSharding:
    """A tiled sharding from a tile assignment array whose first ``data_rank`` dimensions split
    the data (the rest, merged into one, replicate it); replicated when nothing is split."""
    data_dims = tuple(int(d) for d in assignment.shape[:data_rank])
    replicas = int(np.prod(assignment.shape[data_rank:], dtype=np.int64))
    if math.prod(data_dims) == 1:
        return REPLICATED
    dims = data_dims + ((replicas,) if replicas > 1 else ())
    return HloSharding("tiled", dims, device_list=tuple(int(d) for d in assignment.reshape(-1)),
                       last_tile_dim_replicate=replicas > 1)


def data_assignment(sharding: HloSharding) -> np.ndarray:
    """The tile assignment with every subgroup dimension merged into one trailing dimension."""
    assignment = sharding.tile_assignment()
    return assignment.reshape(*sharding.data_tile_dims, -1)


def propagate(comp: HloComputation) -> dict[int, HloSharding]:
    """Every instruction's sharding (by ``unique_id``), walking ``comp`` in dataflow order."""
    shardings: dict[int, HloSharding] = {}
    for instr in comp.post_order():
        shardings[instr.unique_id] = _rule(instr, shardings)
    _backward(comp, shardings)
    return shardings


def _backward(comp: HloComputation, shardings: dict[int, HloSharding]) -> None:
    """Backward propagation, from users to operands: a value the forward walk left whole, whose
    every user asks for it split the same way -- an elementwise op or a transpose split, a ``dot``
    whose rows are split and whose right side is whole -- is split that way too. Then each device
    computes only its piece (a whole parameter or constant is sliced where it is read: nothing
    moves), instead of everything followed by a slice at the end. Users come before operands in
    this walk, so a chain of such ops splits all the way up."""
    for instr in reversed(comp.post_order()):
        if (not instr.shape.is_array or not instr.users or tiled(shardings[instr.unique_id])
                or (instr.sharding is not None and instr.opcode != "parameter") or instr.shape.rank == 0):
            continue
        if instr.opcode == "parameter" and instr.sharding is not None:
            continue  # the caller's split (or whole) is fixed
        asked = [_asked_of(user, instr, shardings) for user in instr.users]
        first = asked[0]
        if first is None or not tiled(first) or any(a is None or not _same(a, first) for a in asked[1:]):
            continue
        shardings[instr.unique_id] = first


def _same(a: HloSharding, b: HloSharding) -> bool:
    return a.data_tile_dims == b.data_tile_dims and np.array_equal(data_assignment(a), data_assignment(b))


def _asked_of(user: HloInstruction, operand: HloInstruction, shardings: dict[int, HloSharding]) -> HloSharding | None:
    """The split ``user`` (already given its sharding) would like ``operand`` in, or None."""
    mine = shardings[user.unique_id]
    if not tiled(mine) or sum(o is operand for o in user.operands) != 1:
        return None
    if is_elementwise(user.opcode) and tuple(operand.shape.dimensions) == tuple(user.shape.dimensions):
        return mine
    if user.opcode == "transpose":
        inverse = list(np.argsort(user.dimensions))
        return with_assignment(data_assignment(mine).transpose(inverse + [len(inverse)]), len(inverse))
    if user.opcode == "dot" and user.operand(0) is operand:
        rhs = user.operand(1)
        lc = tuple(user.attrs.get("lhs_contracting_dims", ()))
        if not tiled(shardings[rhs.unique_id]) and len(lc) == 1 and operand.shape.rank == 2 \
                and user.shape.rank == 2 and mine.data_tile_dims[1] == 1 and not user.attrs.get("lhs_batch_dims"):
            (lc_dim,) = lc  # rows split: the left side's free dimension split alike, its contraction whole
            assignment = data_assignment(mine)  # [m tiles, 1, replicas]
            return with_assignment(assignment if lc_dim == 1 else assignment.transpose(1, 0, 2), 2)
    return None


def _rule(instr: HloInstruction, known: dict[int, HloSharding]) -> HloSharding:
    annotated = instr.sharding is not None and not (instr.opcode == "custom-call" and
                                                    instr.attrs.get("custom_call_target") != "Sharding")
    if annotated:
        assert instr.sharding is not None
        return instr.sharding
    return natural_sharding(instr, lambda op: known[op.unique_id])


def keeps_dimensions(instr: HloInstruction) -> bool:
    """A reshape, bitcast or copy whose result has its operand's dimensions: a split passes
    through it as it is."""
    return instr.opcode in ("reshape", "bitcast", "copy") and \
        tuple(instr.shape.dimensions) == tuple(instr.operand(0).shape.dimensions)


def natural_sharding(instr: HloInstruction, of: Callable[[HloInstruction], HloSharding]) -> HloSharding:
    """The sharding ``instr``'s rule gives from its operands' shardings ``of(operand)``."""
    op = instr.opcode
    if op == "parameter":
        return REPLICATED
    target = instr.attrs.get("custom_call_target") if op == "custom-call" else None
    if target in ANNOTATIONS:
        return of(instr.operand(0))
    if target == "xla.sdy.GlobalToLocalShape" or (op == "call" and any(of(o).kind == "manual" for o in instr.operands)):
        return MANUAL  # shard_map's body: per-device values, written by hand
    if target == "xla.sdy.LocalToGlobalShape":
        outs = sdy_shardings(instr, "xla.sdy.out_shardings")
        return outs[0] if len(outs) == 1 and not instr.shape.is_tuple else HloSharding("tuple", elements=tuple(outs))
    if op == "tuple":
        return HloSharding("tuple", elements=tuple(of(o) for o in instr.operands))
    if op == "get-tuple-element":
        parent = of(instr.operand(0))
        if parent.kind == "manual":
            return MANUAL
        return parent.elements[instr.tuple_index] if parent.is_tuple else REPLICATED
    if op == "while":  # the loop keeps its state split as it came in (the partitioner sees to it)
        return of(instr.operand(0))
    if op == "conditional":  # as the first branch computes it from its operand's split
        return branch_result_sharding(instr, of(instr.operand(1)))
    if instr.shape.is_tuple or not instr.shape.is_array:
        return REPLICATED
    if is_elementwise(op) or keeps_dimensions(instr):
        for operand in instr.operands:
            s = of(operand)
            if tiled(s) and operand.shape.rank == instr.shape.rank:
                return s
        return REPLICATED
    if op == "transpose":
        s = of(instr.operand(0))
        if not tiled(s):
            return REPLICATED
        perm = list(instr.dimensions)
        assignment = data_assignment(s)
        return with_assignment(assignment.transpose(perm + [len(perm)]), len(perm))
    if op == "reshape" or op == "broadcast":
        return reshaped_sharding(instr, of(instr.operand(0)))
    if op in ("slice", "pad", "concatenate", "reverse"):
        first = of(instr.operand(0))
        if tiled(first) and not any(first.data_tile_dims[d] != 1 for d in moved_dimensions(instr)):
            return first
        return REPLICATED
    if op == "dot":
        return dot_plan(instr, of(instr.operand(0)), of(instr.operand(1))).sharding
    if op == "reduce" and instr.operand_count == 2:
        return reduce_plan(instr, of(instr.operand(0)))[1]
    if op == "reduce-window" and instr.operand_count == 2 and halo_plan(instr, of(instr.operand(0))) is not None:
        return of(instr.operand(0))
    if op == "convolution":
        return convolution_plan(instr, of(instr.operand(0)), of(instr.operand(1)))[1]
    if op == "scatter" and scatter_split(instr, [of(o) for o in instr.operands]) is not None:
        return of(instr.operand(0))
    if op == "gather":
        return lookups_split(instr, of(instr.operand(0)), of(instr.operand(1))) or REPLICATED
    return REPLICATED


def lookups_split(gather: HloInstruction, table: HloSharding, indices: HloSharding) -> HloSharding | None:
    """A ``gather`` from a whole table whose indices are split (a data-parallel embedding lookup):
    each device looks up its own indices, and the result's lookup dimensions are split as the
    indices' are (the looked-up slices whole). None when the table is split or the indices are
    split along their index vector."""
    if tiled(table) or not tiled(indices) or indices.kind != "tiled":
        return None
    vector = int(gather.attr("index_vector_dim"))
    rank = gather.operand(1).shape.rank
    if vector < rank and indices.data_tile_dims[vector] != 1:
        return None
    lookup_dims = [k for k in range(rank) if k != vector]
    batch_dims = [d for d in range(gather.shape.rank) if d not in gather.attr("offset_dims")]
    tiles = [1] * gather.shape.rank
    for k, d in zip(lookup_dims, batch_dims, strict=True):
        tiles[d] = indices.data_tile_dims[k]
    return splits_moved_to(indices, tiles)


def scatter_split(scatter: HloInstruction, shardings: list[HloSharding]) -> int | None:
    """The split dimension of a one-operand ``scatter`` into a table split by rows (an embedding's
    gradient) that each device can apply alone: the split dimension is the one its indices
    address (and a window dimension of size 1), indices and updates are whole. None otherwise."""
    if scatter.operand_count != 3 or not scatter.shape.is_array:
        return None
    table, indices, updates = shardings
    if not tiled(table) or table.kind != "tiled" or tiled(indices) or tiled(updates):
        return None
    split = [d for d, t in enumerate(table.data_tile_dims) if t > 1]
    if (len(split) != 1 or tuple(scatter.attr("scatter_dims_to_operand_dims")) != (split[0],)
            or split[0] not in scatter.attr("inserted_window_dims") or scatter.attr("input_batching_dims")):
        return None
    return split[0]


def convolution_plan(conv: HloInstruction, lhs: HloSharding,
                     rhs: HloSharding) -> tuple[list[tuple[int, int, int]] | None, HloSharding]:
    """A convolution whose input is split along its batch and/or spatial dimensions and whose kernel
    is whole: each device convolves its images (data parallelism), its spatial piece extended by
    halos from its neighbours (``(input dimension, left, right)`` for each split spatial dimension,
    as :func:`halo_plan`). The result is split the same way. ``(None, REPLICATED)`` otherwise."""
    d = conv.attr("dim_labels")
    if (not tiled(lhs) or tiled(rhs) or int(conv.attr("feature_group_count")) != 1
            or int(conv.attr("batch_group_count")) != 1 or lhs.data_tile_dims[d.input_feature_dimension] != 1):
        return None, REPLICATED
    dims, out_dims = conv.operand(0).shape.dimensions, conv.shape.dimensions
    if dims[d.input_batch_dimension] % lhs.data_tile_dims[d.input_batch_dimension]:
        return None, REPLICATED
    plan = []
    for k, w in enumerate(conv.attr("window").dimensions):
        dim = d.input_spatial_dimensions[k]
        tiles = lhs.data_tile_dims[dim]
        if tiles == 1:
            continue
        piece = dims[dim] // tiles
        left, right = w.padding_low, w.size - w.stride - w.padding_low
        if (dims[dim] % tiles or piece % w.stride or out_dims[d.output_spatial_dimensions[k]] * w.stride != dims[dim]
                or w.base_dilation != 1 or w.window_dilation != 1 or w.window_reversal
                or not 0 <= left <= piece or not 0 <= right <= piece):
            return None, REPLICATED
        plan.append((dim, left, right))
    source = {d.output_batch_dimension: d.input_batch_dimension, d.output_feature_dimension: d.input_feature_dimension}
    source.update(zip(d.output_spatial_dimensions, d.input_spatial_dimensions, strict=True))
    rank = conv.shape.rank
    order = [source[o] for o in range(rank)]
    return plan, with_assignment(data_assignment(lhs).transpose(order + [rank]), rank)


def halo_plan(instr: HloInstruction, operand: HloSharding) -> list[tuple[int, int, int]] | None:
    """A ``reduce-window`` split along some dimensions: ``(dimension, left, right)`` for each, the
    elements a device needs from its left and right neighbours' pieces (its *halo*), when every
    device's windows fit that way: even pieces, a stride that divides them, each device's outputs
    exactly the windows that start in its piece, no dilation, halos no wider than a piece. None
    otherwise."""
    if not tiled(operand):
        return None
    dims = instr.operand(0).shape.dimensions
    plan = []
    for d, (tiles, w) in enumerate(zip(operand.data_tile_dims, instr.attr("window").dimensions, strict=True)):
        if tiles == 1:
            continue
        piece = dims[d] // tiles
        left, right = w.padding_low, w.size - w.stride - w.padding_low
        if (dims[d] % tiles or piece % w.stride or instr.shape.dimensions[d] * w.stride != dims[d]
                or w.base_dilation != 1 or w.window_dilation != 1 or w.window_reversal
                or not 0 <= left <= piece or not 0 <= right <= piece):
            return None
        plan.append((d, left, right))
    return plan


def branch_result_sharding(cond: HloInstruction, operand: HloSharding) -> HloSharding:
    """The sharding a conditional's first branch gives its result, for an operand split as
    ``operand`` (propagation inside the branch); replicated when nothing is split."""
    leaves = [operand] if not operand.is_tuple else list(operand.elements)
    branch = cond.branch_computations()[0]
    if branch.num_parameters != 1 or not any(tiled(leaf) or leaf.is_tuple for leaf in leaves):
        return REPLICATED
    parameter = branch.parameter(0)
    saved, parameter.sharding = parameter.sharding, operand
    try:
        return propagate(branch)[branch.root.unique_id]
    finally:
        parameter.sharding = saved


def moved_dimensions(instr: HloInstruction) -> list[int]:
    """The dimensions a slice, pad, concatenate or reverse rearranges (the others it leaves alone:
    split there, each device can do its part alone)."""
    dims = instr.operand(0).shape.dimensions
    if instr.opcode == "slice":
        return [d for d, s in enumerate(instr.attr("slice")) if (s.start, s.limit, s.stride) != (0, dims[d], 1)]
    if instr.opcode == "pad":
        return [d for d, p in enumerate(instr.attr("padding")) if (p.low, p.high, p.interior) != (0, 0, 0)]
    return list(instr.dimensions)  # concatenate: its dimension; reverse: the reversed ones


def reshape_groups(in_dims: tuple[int, ...], out_dims: tuple[int, ...]) -> list[tuple[list[int], list[int]]] | None:
    """A reshape as groups of consecutive input and output dimensions with equal products (each
    group reshaped on its own: ``[8,6] -> [4,2,6]`` is ``([0], [0,1]), ([1], [2])``); None when the
    sizes do not line up (a zero-sized array)."""
    groups, i, o = [], 0, 0
    while i < len(in_dims) or o < len(out_dims):
        gi, go = [i] if i < len(in_dims) else [], [o] if o < len(out_dims) else []
        pi = in_dims[i] if gi else 1
        po = out_dims[o] if go else 1
        i, o = i + len(gi), o + len(go)
        while pi != po:
            if pi < po and i < len(in_dims):
                pi, gi, i = pi * in_dims[i], gi + [i], i + 1
            elif po < pi and o < len(out_dims):
                po, go, o = po * out_dims[o], go + [o], o + 1
            else:
                return None
        groups.append((gi, go))
    return groups


def reshaped_sharding(instr: HloInstruction, operand: HloSharding) -> HloSharding:
    """A ``broadcast`` (operand dimensions in order) keeps each split where its dimension lands,
    the new dimensions whole. A ``reshape`` is taken group by group (:func:`reshape_groups`): a
    group whose major input dimension alone is split ``t`` ways, and whose major output dimension
    ``t`` divides, keeps the split there -- both cut the group's elements at the same multiples of
    ``1/t`` -- so each device reshapes its own piece (dimensions of size 1 are not major: a bias
    ``[32] -> [1,32]`` keeps its split). Other reshapes are replicated."""
    if not tiled(operand):
        return REPLICATED
    in_dims, out_dims = instr.operand(0).shape.dimensions, instr.shape.dimensions
    tiles = [1] * len(out_dims)
    if instr.opcode == "broadcast":
        where = list(instr.dimensions)
        if where != sorted(where):
            return REPLICATED
        for i, o in enumerate(where):
            tiles[o] = operand.data_tile_dims[i]
    else:
        groups = reshape_groups(tuple(in_dims), tuple(out_dims))
        if groups is None:
            return REPLICATED
        for gi, go in groups:
            split = [d for d in gi if operand.data_tile_dims[d] != 1]
            if not split:
                continue
            t = operand.data_tile_dims[split[0]]
            # dimensions of size 1 do not order anything: the major ones are the first of other sizes
            major_in = next((d for d in gi if in_dims[d] != 1), gi[0])
            major_out = next((d for d in go if out_dims[d] != 1), None)
            if split != [major_in] or major_out is None or out_dims[major_out] % t or in_dims[major_in] % t:
                return REPLICATED
            tiles[major_out] = t
    return splits_moved_to(operand, tiles)


def splits_moved_to(source: HloSharding, tiles: list[int]) -> HloSharding:
    """The sharding whose split dimensions are ``tiles`` (one count per result dimension), taking
    ``source``'s split dimensions in order -- the first split one goes to the first result
    dimension with more than one tile, and so on -- with the same devices for the same tiles."""
    assignment = data_assignment(source)  # [tiles per source dimension..., replicas]
    rank = len(source.data_tile_dims)
    split = [d for d in range(rank) if source.data_tile_dims[d] != 1]
    moved = assignment.transpose([*split, *[d for d in range(rank) if d not in split], rank])
    return with_assignment(moved.reshape(*tiles, assignment.shape[-1]), len(tiles))


@dataclass(frozen=True)
class DotPlan:
    """How a ``dot`` runs on split operands: ``"local"`` (each device's pieces give its piece of
    the result), ``"partial"`` (they give a partial sum over its piece of the contraction: add the
    pieces of ``groups`` with an ``all-reduce``), or ``"replicated"`` (no rule: run it whole)."""

    how: str
    sharding: HloSharding
    groups: tuple[tuple[int, ...], ...] = ()


def _tile_of(sharding: HloSharding, rank: int) -> dict[int, tuple[int, ...]]:
    """Each device's tile coordinates in a value of ``rank`` dimensions split by ``sharding``."""
    if not tiled(sharding):
        return {}
    assignment = data_assignment(sharding)
    return {int(assignment[index]): index[:rank] for index in np.ndindex(*assignment.shape)}


def dot_plan(dot: HloInstruction, lhs: HloSharding, rhs: HloSharding) -> DotPlan:
    """The plan of a dot for any splits of its batch, free and contracting dimensions on a mesh of
    any shape -- XLA's rule: if every device holds the left piece ``(batch b, rows i, contraction
    k)`` and the right piece ``(batch b, contraction k, columns j)`` of the *same* ``b`` and ``k``,
    its local dot is the result's piece ``(b, i, j)`` summed over its share of the contraction;
    the devices that hold the same ``(b, i, j)`` for different ``k`` then add their partial sums
    (one ``all-reduce``). Data parallelism (rows or batch split), a split weight (columns), a split
    contraction (megatron's second matmul), attention split by heads, and their combinations on
    2-D meshes are all this one case; anything else runs whole."""
    lc, rc = tuple(dot.attrs.get("lhs_contracting_dims", ())), tuple(dot.attrs.get("rhs_contracting_dims", ()))
    lb, rb = tuple(dot.attrs.get("lhs_batch_dims", ())), tuple(dot.attrs.get("rhs_batch_dims", ()))
    lhs_dims, rhs_dims = dot.operand(0).shape.dimensions, dot.operand(1).shape.dimensions
    if not (tiled(lhs) or tiled(rhs)):
        return DotPlan("local", REPLICATED)
    for sharding, dims in ((lhs, lhs_dims), (rhs, rhs_dims)):
        if tiled(sharding) and (sharding.kind != "tiled" or any(d % t for d, t in zip(dims, sharding.data_tile_dims,
                                                                                       strict=True))):
            return DotPlan("replicated", REPLICATED)  # uneven pieces: padded, so not summed as they are
    lhs_tiles = lhs.data_tile_dims if tiled(lhs) else (1,) * len(lhs_dims)
    rhs_tiles = rhs.data_tile_dims if tiled(rhs) else (1,) * len(rhs_dims)
    if [lhs_tiles[d] for d in lc + lb] != [rhs_tiles[d] for d in rc + rb]:
        return DotPlan("replicated", REPLICATED)
    lf = [d for d in range(len(lhs_dims)) if d not in lc + lb]
    rf = [d for d in range(len(rhs_dims)) if d not in rc + rb]
    out_tiles = tuple(lhs_tiles[d] for d in lb + tuple(lf)) + tuple(rhs_tiles[d] for d in rf)
    k_tiles = math.prod(lhs_tiles[d] for d in lc)
    devices = sorted(set(lhs.devices() if tiled(lhs) else ()) | set(rhs.devices() if tiled(rhs) else ()))
    left, right = _tile_of(lhs, len(lhs_dims)), _tile_of(rhs, len(rhs_dims))
    holders: dict[tuple[tuple[int, ...], tuple[int, ...]], list[int]] = {}
    for device in devices:
        li = left.get(device, (0,) * len(lhs_dims))
        ri = right.get(device, (0,) * len(rhs_dims))
        if [li[d] for d in lc + lb] != [ri[d] for d in rc + rb]:
            return DotPlan("replicated", REPLICATED)  # this device's two pieces cover different parts
        out = tuple(li[d] for d in lb + tuple(lf)) + tuple(ri[d] for d in rf)
        holders.setdefault((out, tuple(li[d] for d in lc)), []).append(device)
    copies = {len(v) for v in holders.values()}
    if len(holders) != math.prod(out_tiles) * k_tiles or len(copies) != 1:
        return DotPlan("replicated", REPLICATED)
    (r,) = copies
    assignment = np.empty((*out_tiles, k_tiles * r), dtype=np.int64)
    k_order = {k: n for n, k in enumerate(np.ndindex(*(lhs_tiles[d] for d in lc)))}
    for (out, k), held in holders.items():
        assignment[out][k_order[k] * r:(k_order[k] + 1) * r] = held
    result = with_assignment(assignment, len(out_tiles))
    if k_tiles == 1:
        return DotPlan("local", result)
    groups = tuple(tuple(int(d) for d in assignment[out][rep::r]) for out in np.ndindex(*out_tiles)
                   for rep in range(r))
    return DotPlan("partial", result, groups)


def reduce_plan(reduce: HloInstruction, operand: HloSharding) -> tuple[str, HloSharding]:
    """``"local"`` (no reduced dimension split), ``"partial"`` (split reduced dimensions, evenly:
    local reduce + all-reduce among the devices that share the kept tiles), or ``"replicated"``."""
    if not tiled(operand):
        return "replicated", REPLICATED
    dims = reduce.operand(0).shape.dimensions
    reduced = sorted(reduce.dimensions)
    kept = [d for d in range(len(dims)) if d not in reduced]
    tiles = operand.data_tile_dims
    assignment = data_assignment(operand)
    moved = assignment.transpose(kept + reduced + [len(dims)])  # kept tiles, then the rest replicate
    if all(tiles[d] == 1 for d in reduced):
        return "local", with_assignment(moved, len(kept))
    if any(dims[d] % tiles[d] for d in reduced):
        return "replicated", REPLICATED
    return "partial", with_assignment(moved, len(kept))
