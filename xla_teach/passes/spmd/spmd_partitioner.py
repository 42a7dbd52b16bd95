"""The SPMD partitioner (``spmd-partitioning``): one sharded program becomes the program every
device runs on its own piece, with the collectives that move data between them.

A module for ``num_partitions`` devices whose parameters (and any value) carry shardings is
rewritten, instruction by instruction in dataflow order, into the per-device program. Each value
gets the sharding :mod:`sharding_propagation` chose, and each instruction is computed *locally*
where its operands' pieces suffice:

* elementwise ops and ``transpose`` on pieces split alike: the same op on the pieces, no data
  moves; so do ``slice``, ``pad``, ``concatenate`` and ``reverse`` along dimensions that are not split;
* data parallelism, a ``dot`` whose left rows are split and whose right side is whole: a local
  ``dot`` on each device's rows (and the mirror image: the right side's columns split);
* a ``dot`` split along its contracting dimension on both sides: each device multiplies its
  slices -- a *partial* sum -- and an ``all-reduce`` adds the partial sums;
* a ``reduce`` over split dimensions: a local ``reduce`` of the piece, then an ``all-reduce``
  among the devices that hold the same kept part (over dimensions that are not split: local).

Anything else runs whole, on every device: its operands are first **resharded** to replicated.
Resharding is the partitioner's general tool, used also where a value must change sharding (a
``Sharding`` custom call, an annotated result):

* to *replicated*: every device's piece is gathered (``all-gather`` of all devices' pieces,
  stacked on a new dimension), and the whole array is put back together from the first device
  holding each tile (static slices and concatenations, cropping the padding of uneven tiles);
* to *tiled*: each device slices its own tile out of the whole array, at offsets it looks up
  in a constant table by its ``partition-id`` (``dynamic-slice``).

Every choice is written in the pass notes. The parameters get their per-device shapes and keep
their shardings, and the ROOT carries its sharding (and, when a result's tiles are uneven, the
whole results' shapes in its frontend attribute ``xla_teach.global_shapes``), so
:func:`~xla_teach.hlo.evaluator.devices.run_global` splits the global arguments and puts the
results back.

Before (``num_partitions=2``)::

    HloModule m, num_partitions=2

    ENTRY main {
      x = f32[4,3] parameter(0), sharding={devices=[2,1]<=[2]}
      ROOT t = f32[4,3] tanh(x)
    }

After::

    HloModule m, num_partitions=2

    ENTRY main.spmd {
      x = f32[2,3] parameter(0), sharding={devices=[2,1]<=[2]}
      ROOT t = f32[2,3] tanh(x), sharding={devices=[2,1]<=[2]}
    }

A value split along one dimension that must be split along another over the same devices is
resharded with one ``all-to-all`` instead (each device keeps ``1/n`` of its piece and trades the
rest), as XLA does for a transpose of a split matrix.

A ``gather`` from a table split by rows (an embedding lookup) looks up in each device's own rows,
zeroes the lookups another device holds and adds them with an ``all-reduce``: the table never moves.
(A ``-0.0`` looked up comes out ``+0.0``: the sum adds zeros to it.) With the table whole and the
indices split (data parallelism), each device simply looks up its own indices.

A ``reduce-window`` (pooling, a moving sum) over a split dimension runs on each device's piece
extended by a *halo*: the few elements its windows reach in the neighbours' pieces, each side
sent by one ``collective-permute`` (the padding value at the ends of the array).

A ``convolution`` of split images with a whole kernel runs on each device's images (data
parallelism); split rows or columns of the images get the same halos (zeros at the edges).

A ``scatter`` into a table split by rows (an embedding's gradient) runs on each device's rows
with shifted indices: updates for other devices' rows fall outside its piece, which ``scatter``
skips. Nothing moves.

A ``while`` loop keeps its state split as it comes in: the body and the condition are partitioned
as computations of their own (for a parameter split like the state), and the body's result is
resharded to the state's split when it comes out otherwise; a ``conditional``'s branches are
partitioned the same way, each for its operand's split, all giving the result's planned split.

XLA's ``SpmdPartitioner`` knows many more local rules (a split convolution kernel, slices of a
split dimension, ...); here those cases take the general route, which is always correct and
moves the most data.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable

import numpy as np

from xla_teach.hlo.attributes import PaddingDim, SliceDim
from xla_teach.hlo.ir import HloComputation, HloInstruction, HloModule, NameUniquer
from xla_teach.hlo.opcodes import is_elementwise
from xla_teach.hlo.replica_groups import replica_groups_text
from xla_teach.hlo.shape import Shape
from xla_teach.hlo.sharding import HloSharding
from xla_teach.hlo.types import PrimitiveType
from xla_teach.passes.pass_base import HloPass
from xla_teach.passes.rewrite_utils import add_constant, add_instruction
from xla_teach.passes.spmd.sharding_propagation import (
    ANNOTATIONS,
    MANUAL,
    REPLICATED,
    convolution_plan,
    data_assignment,
    dot_plan,
    halo_plan,
    keeps_dimensions,
    lookups_split,
    natural_sharding,
    propagate,
    reduce_plan,
    scatter_split,
    sdy_shardings,
    tiled,
)

GLOBAL_SHAPES = "xla_teach.global_shapes"  # the ROOT's frontend attribute when its pieces are padded


def same_sharding(a: HloSharding, b: HloSharding) -> bool:
    """Do ``a`` and ``b`` put the same piece on every device?"""
    if not tiled(a) or not tiled(b):
        return not tiled(a) and not tiled(b)
    return a.data_tile_dims == b.data_tile_dims and np.array_equal(data_assignment(a), data_assignment(b))


class SpmdPartitioner(HloPass):
    """Rewrites a sharded module into its per-device program (module docstring)."""

    name = "spmd-partitioning"

    def __init__(self, num_partitions: int | None = None, only_unpartitioned: bool = False) -> None:
        super().__init__()
        self.num_partitions = num_partitions
        self.only_unpartitioned = only_unpartitioned  # in a pipeline: leave per-device modules alone

    def run(self, module: HloModule) -> bool:
        n = self.num_partitions or int(module.header_attributes.get("num_partitions", "1"))
        if n <= 1:
            return False
        if self.only_unpartitioned and not needs_partitioning(module):
            return False  # a per-device program already (XLA's after-SPMD module, jit's partitioned one)
        entry = module.entry
        new = _PerDeviceBuilder(module, entry, n, self.note).build()
        # The per-device ENTRY replaces the old one and takes over its instructions' names.
        module.computations.remove(entry)
        entry.parent, module.entry_computation = None, None
        module.uniquer = NameUniquer()
        for comp in module.computations:
            for instr in comp.instructions:
                module.uniquer.get_unique_name(instr.name)
        module.add_computation(new, is_entry=True)
        module.header_attributes["num_partitions"] = str(n)
        _drop_shardy_mesh(module)  # as XLA's partitioned modules: the mesh was for the partitioner
        module.entry_computation_layout = None
        reachable: set[int] = set()
        stack = [new]
        while stack:  # the old loop bodies and conditions are no longer called
            comp = stack.pop()
            if id(comp) not in reachable:
                reachable.add(id(comp))
                stack.extend(c for i in comp.instructions for c in i.called_computations())
        for comp in [c for c in module.computations if id(c) not in reachable]:
            module.remove_computation(comp)
        return True


def _leaves(sharding: HloSharding) -> list[HloSharding]:
    if sharding.is_tuple:
        return [leaf for e in sharding.elements for leaf in _leaves(e)]
    return [sharding]


def same_sharding_tree(a: HloSharding, b: HloSharding) -> bool:
    """:func:`same_sharding` element by element through tuple shardings."""
    if a.is_tuple and b.is_tuple:
        return len(a.elements) == len(b.elements) and all(
            same_sharding_tree(x, y) for x, y in zip(a.elements, b.elements, strict=True))
    if a.is_tuple or b.is_tuple:
        tuple_one = a if a.is_tuple else b
        return all(same_sharding_tree(e, REPLICATED) for e in tuple_one.elements) and not tiled(b if a.is_tuple else a)
    return same_sharding(a, b)


def local_shape(shape: Shape, sharding: HloSharding) -> Shape:
    """Each device's piece of a value of ``shape`` split as ``sharding`` (tuples element by element)."""
    if shape.is_tuple:
        elements = sharding.elements if sharding.is_tuple else (REPLICATED,) * len(shape.tuple_shapes)
        return Shape.make_tuple([local_shape(s, e) for s, e in zip(shape.tuple_shapes, elements, strict=True)])
    if not shape.is_array or not tiled(sharding):
        return shape
    return Shape.array(shape.element_type, tuple(sharding.tile_shape(shape.dimensions)))


class _PerDeviceBuilder:
    def __init__(self, module: HloModule, entry: HloComputation, devices: int, note: Callable[[str], None],
                 adders: dict[PrimitiveType, HloComputation] | None = None) -> None:
        """``entry``: the computation to partition (the ENTRY, or a loop's body or condition)."""
        self.module, self.entry, self.n, self.note = module, entry, devices, note
        self.comp = HloComputation(f"{entry.name}.spmd")  # joins the module when built
        self.shardings = propagate(entry)
        self.local: dict[int, HloInstruction] = {}
        self.have: dict[int, HloSharding] = {}  # the sharding each local value actually has
        self._partition_id: HloInstruction | None = None
        self._adders = adders if adders is not None else {}

    # ---- the walk ------------------------------------------------------------------------
    def build(self, is_entry: bool = True) -> HloComputation:
        params = self.entry.parameter_instructions  # first, in their order (an unused one stays)
        for instr in params + [i for i in self.entry.post_order() if i.opcode != "parameter"]:
            value, has = self.lower(instr)
            want = self.shardings[instr.unique_id]
            if instr.shape.is_array and not same_sharding(has, want):
                self.note(f"{instr.name}: resharded from {has} to {want}")
                value, has = self.reshard(value, has, want, instr.shape.dimensions), want
            value.metadata = instr.metadata
            self.local[instr.unique_id], self.have[instr.unique_id] = value, has
        root = self.local[self.entry.root.unique_id]
        if not is_entry:
            self.comp.root_instruction = root
            return self.comp
        root.sharding = self.have[self.entry.root.unique_id]
        self.comp.root_instruction = root
        leaves = self.entry.root.shape.leaf_shapes()
        shardings = list(root.sharding.elements) if root.sharding.is_tuple else [root.sharding]
        uneven = [tiled(s) and any(d % n for d, n in zip(leaf.dimensions, s.data_tile_dims, strict=True))
                  for s, leaf in zip(shardings, leaves, strict=True)]
        if any(uneven) and self.entry is self.module.entry:
            # the pieces are padded: say how large the whole results are (in the module's header,
            # which the optimizing passes leave alone, unlike the ROOT they may replace)
            add_module_frontend_attribute(self.module, GLOBAL_SHAPES,
                                          ";".join(leaf.to_text(print_layout=False) for leaf in leaves))
        return self.comp

    def lower(self, instr: HloInstruction) -> tuple[HloInstruction, HloSharding]:
        """This device's value of ``instr`` and the sharding it has."""
        op, comp = instr.opcode, self.comp
        if op == "parameter":
            sharding = instr.sharding or REPLICATED
            param = comp.add_instruction(HloInstruction("parameter", local_shape(instr.shape, sharding),
                                                        attrs={"parameter_number": instr.parameter_number}), instr.name)
            param.sharding = sharding
            return param, sharding
        if op == "while":
            return self.lower_while(instr)
        if op == "conditional":
            return self.lower_conditional(instr)
        target = instr.attrs.get("custom_call_target") if op == "custom-call" else None
        if target in ANNOTATIONS:
            operand = instr.operand(0)
            return self.local[operand.unique_id], self.have[operand.unique_id]
        if target == "xla.sdy.GlobalToLocalShape":  # into shard_map: each device's piece, as in_shardings say
            (want,) = sdy_shardings(instr, "xla.sdy.in_shardings")
            self.note(f"{instr.name}: shard_map's body gets each device's piece ({want})")
            return self.to(instr.operand(0), want), MANUAL
        if target == "xla.sdy.LocalToGlobalShape":  # out of shard_map: the pieces of out_shardings
            outs = sdy_shardings(instr, "xla.sdy.out_shardings")
            parts = [self.local[o.unique_id] for o in instr.operands]
            if not instr.shape.is_tuple:
                return parts[0], outs[0]
            return (add_instruction(comp, "tuple", parts, shape=Shape.make_tuple([p.shape for p in parts])),
                    HloSharding("tuple", elements=tuple(outs)))
        if op == "call" and any(self.have[o.unique_id].kind == "manual" for o in instr.operands):
            self.note(f"{instr.name}: shard_map's body, as written, on every device")
            return self.clone(instr, [self.local[o.unique_id] for o in instr.operands], None), MANUAL
        if op == "tuple":
            parts = [self.local[o.unique_id] for o in instr.operands]
            shape = Shape.make_tuple([p.shape for p in parts])
            return (add_instruction(comp, "tuple", parts, shape=shape, name=instr.name),
                    HloSharding("tuple", elements=tuple(self.have[o.unique_id] for o in instr.operands)))
        if op == "get-tuple-element":
            parent = self.local[instr.operand(0).unique_id]
            index = instr.tuple_index
            has = self.have[instr.operand(0).unique_id]
            element = MANUAL if has.kind == "manual" else has.elements[index] if has.is_tuple else REPLICATED
            return (add_instruction(comp, "get-tuple-element", [parent], {"index": index},
                                    shape=parent.shape.tuple_shapes[index], name=instr.name), element)
        keeps_shape = keeps_dimensions(instr)
        # the result's split follows the (first) operand's
        follows = op in ("transpose", "reshape", "broadcast", "slice", "pad", "concatenate", "reverse")
        if instr.shape.is_array and (is_elementwise(op) or keeps_shape or follows):
            target = natural_sharding(instr, lambda o: self.have[o.unique_id])
            planned = self.shardings[instr.unique_id]
            if (is_elementwise(op) or keeps_shape) and tiled(planned) and not tiled(target):
                target = planned  # split by backward propagation: whole operands are sliced first
            operands = []
            for k, o in enumerate(instr.operands):
                want = target if o.shape.rank == instr.shape.rank else REPLICATED
                if follows and op != "concatenate":
                    want = self.have[o.unique_id] if tiled(target) and k == 0 else REPLICATED
                operands.append(self.to(o, want))
            dims = target.tile_shape(instr.shape.dimensions) if tiled(target) else instr.shape.dimensions
            if tiled(target):
                self.note(f"{instr.name}: {op} on each device's piece")
            local = self.clone(instr, operands, dims)
            if op == "slice" and tiled(target):  # a split dimension is sliced whole: the whole piece
                local.attrs["slice"] = tuple(SliceDim(0, t) if n > 1 else s for s, t, n in zip(
                    instr.attr("slice"), dims, target.data_tile_dims, strict=True))
            return local, target
        if op == "dot":
            return self.lower_dot(instr)
        if op == "gather":
            return self.lower_gather(instr) or self.whole(instr)
        if op == "reduce-window" and instr.operand_count == 2 and instr.shape.is_array:
            return self.lower_reduce_window(instr)
        if op == "convolution":
            return self.lower_convolution(instr)
        if op == "scatter":
            return self.lower_scatter(instr)
        if op == "reduce" and instr.operand_count == 2 and instr.shape.is_array:
            return self.lower_reduce(instr)
        return self.whole(instr)

    # ---- the local rules -------------------------------------------------------------------
    def lower_dot(self, dot: HloInstruction) -> tuple[HloInstruction, HloSharding]:
        lhs, rhs = dot.operands
        has_lhs, has_rhs = self.have[lhs.unique_id], self.have[rhs.unique_id]
        plan = dot_plan(dot, has_lhs, has_rhs)
        if plan.how == "replicated" or (plan.how == "local" and not tiled(plan.sharding)):
            return self.whole(dot)
        dims = plan.sharding.tile_shape(dot.shape.dimensions) if tiled(plan.sharding) else dot.shape.dimensions
        local = self.clone(dot, [self.local[lhs.unique_id], self.local[rhs.unique_id]], dims)
        splits = f"left {has_lhs}, right {has_rhs}"
        if plan.how == "local":
            self.note(f"{dot.name}: each device's pieces ({splits}) give its piece of the result: a local dot")
            return local, plan.sharding
        groups = [list(g) for g in plan.groups]
        self.note(f"{dot.name}: the contraction is split ({splits}): local partial sums + all-reduce over "
                  f"{replica_groups_text(groups)}")
        return self.all_reduce(local, groups, self.adder(dot.shape.element_type)), plan.sharding

    def lower_reduce(self, reduce: HloInstruction) -> tuple[HloInstruction, HloSharding]:
        operand, init = reduce.operands
        has = self.have[operand.unique_id]
        how, result = reduce_plan(reduce, has)
        if how == "replicated" or not self.is_replicated(init):
            return self.whole(reduce)
        dims = result.tile_shape(reduce.shape.dimensions) if tiled(result) else reduce.shape.dimensions
        local = self.clone(reduce, [self.local[operand.unique_id], self.local[init.unique_id]], dims)
        if how == "local":
            self.note(f"{reduce.name}: reduces dimensions that are not split: a local reduce")
            return local, result
        reduced = sorted(reduce.dimensions)
        kept = [d for d in range(operand.shape.rank) if d not in reduced]
        moved = data_assignment(has).transpose(kept + reduced + [operand.shape.rank])
        kept_tiles = moved.shape[:len(kept)]
        groups = [list(map(int, moved[k].reshape(-1, moved.shape[-1])[:, j]))
                  for k in itertools.product(*(range(t) for t in kept_tiles)) for j in range(moved.shape[-1])]
        self.note(f"{reduce.name}: reduces split dimensions: a local reduce + all-reduce over "
                  f"{replica_groups_text(groups)}")
        return self.all_reduce(local, groups, reduce.to_apply), result

    def lower_gather(self, gather: HloInstruction) -> tuple[HloInstruction, HloSharding] | None:
        """A lookup in a table split by rows (an embedding): each device looks up in its own rows,
        zeroes the results whose row another device holds, and an ``all-reduce`` adds them up --
        the table never moves, only the looked-up rows do. The row index is clamped first, as
        ``gather`` does with the whole table. None when the gather is not of that form: the
        split dimension collapsed and the only one indexed, indices whole, one index per lookup."""
        table, indices = gather.operands
        has = self.have[table.unique_id]
        split_lookups = lookups_split(gather, has, self.have[indices.unique_id])
        if split_lookups is not None:  # a whole table, split indices: each device looks up its own
            self.note(f"{gather.name}: a lookup in a whole table with split indices: each device looks up its own")
            local = self.clone(gather, [self.local[table.unique_id], self.local[indices.unique_id]],
                               split_lookups.tile_shape(gather.shape.dimensions))
            return local, split_lookups
        if not tiled(has) or not self.is_replicated(indices) or has.kind != "tiled":
            return None
        split = [d for d, t in enumerate(has.data_tile_dims) if t > 1]
        vector_dim = int(gather.attr("index_vector_dim"))
        index_dims = indices.shape.dimensions
        etype = gather.shape.element_type
        if (len(split) != 1 or tuple(gather.attr("start_index_map")) != (split[0],)
                or split[0] not in gather.attr("collapsed_slice_dims") or gather.attr("operand_batching_dims")
                or (vector_dim < len(index_dims) and index_dims[vector_dim] != 1)
                or etype in (PrimitiveType.PRED,) or not gather.shape.is_array):
            return None
        (s,) = split
        comp, s32 = self.comp, PrimitiveType.S32
        rows, tile = table.shape.dimensions[s], has.tile_shape(table.shape.dimensions)[s]
        idx = self.local[indices.unique_id]
        if idx.shape.element_type is not s32:
            idx = add_instruction(comp, "convert", [idx], result_element_type=s32)

        def full(value: int) -> HloInstruction:
            return add_instruction(comp, "broadcast", [add_constant(comp, value, s32)], {"dimensions": ()},
                                   result_dims=index_dims)

        clamped = add_instruction(comp, "clamp", [full(0), idx, full(rows - 1)])
        offset = add_instruction(comp, "broadcast", [self.first_row(has, s, table.shape.dimensions)],
                                 {"dimensions": ()}, result_dims=index_dims)
        local_idx = add_instruction(comp, "subtract", [clamped, offset])
        pred = PrimitiveType.PRED
        at_least = add_instruction(comp, "compare", [local_idx, full(0)], {"direction": "GE"},
                                   result_element_type=pred)
        below = add_instruction(comp, "compare", [local_idx, full(tile)], {"direction": "LT"}, result_element_type=pred)
        held = add_instruction(comp, "and", [at_least, below])
        looked_up = self.clone(gather, [self.local[table.unique_id], local_idx], gather.shape.dimensions)
        batch = [d for d in range(gather.shape.rank) if d not in gather.attr("offset_dims")]
        batch_dims = tuple(d for k, d in enumerate(index_dims) if k != vector_dim)
        if held.shape.dimensions != batch_dims:
            held = add_instruction(comp, "reshape", [held], result_dims=batch_dims)
        held = add_instruction(comp, "broadcast", [held], {"dimensions": tuple(batch)},
                               result_dims=gather.shape.dimensions)
        zeros = add_instruction(comp, "broadcast", [add_constant(comp, 0, etype)], {"dimensions": ()},
                                result_dims=gather.shape.dimensions)
        masked = add_instruction(comp, "select", [held, looked_up, zeros])
        groups = [list(map(int, column)) for column in data_assignment(has).reshape(has.data_tile_dims[s], -1).T]
        self.note(f"{gather.name}: a lookup in a table split by rows: each device looks up its own rows, "
                  f"zeroes the rest, all-reduce over {replica_groups_text(groups)}")
        return self.all_reduce(masked, groups, self.adder(etype)), REPLICATED

    def lower_while(self, loop: HloInstruction) -> tuple[HloInstruction, HloSharding]:
        """A loop whose state is split: its body and condition become per-device computations of
        their own, the state stays split across iterations (the body's result is resharded to the
        state's split if it came out otherwise) and nothing is gathered."""
        init = loop.operand(0)
        state = self.have[init.unique_id]
        if not any(tiled(leaf) for leaf in _leaves(state)):
            return self.whole(loop)
        body = self.per_device(loop.attrs["body"], state, state)  # the next state split like this one
        condition = self.per_device(loop.attrs["condition"], state, None)
        value = self.local[init.unique_id]
        self.note(f"{loop.name}: the loop's state stays split; body and condition run on each device's pieces")
        local = add_instruction(self.comp, "while", [value], {"body": body, "condition": condition},
                                shape=value.shape, name=loop.name)
        return local, state

    def per_device(self, comp: HloComputation, param: HloSharding, result: HloSharding | None) -> HloComputation:
        """``comp`` (a loop's body or condition, a branch) partitioned for a parameter split as
        ``param``; its result resharded to ``result`` where it comes out otherwise (None: as is)."""
        parameter = comp.parameter(0)
        saved, parameter.sharding = parameter.sharding, param
        try:
            builder = _PerDeviceBuilder(self.module, comp, self.n, self.note, self._adders)
            new = builder.build(is_entry=False)
        finally:
            parameter.sharding = saved
        if result is not None:
            has = builder.have[comp.root.unique_id]
            if not same_sharding_tree(has, result):
                self.note(f"{comp.name}: its result is resharded from {has} to {result}")
                new.root_instruction = builder.reshard_tree(new.root_instruction, has, result, comp.root.shape)
        return self.module.add_computation(new)

    def lower_conditional(self, cond: HloInstruction) -> tuple[HloInstruction, HloSharding]:
        """Branches over split operands: each branch partitioned for its operand's split, every
        branch's result split as propagation planned (the first branch's own), the selector whole."""
        branches = cond.branch_computations()
        operands = cond.operands[1:]
        if (not any(any(tiled(leaf) for leaf in _leaves(self.have[o.unique_id])) for o in operands)
                or not self.is_replicated(cond.operand(0))
                or any(b.num_parameters != 1 for b in branches)):
            return self.whole(cond)
        result = self.shardings[cond.unique_id]
        new = [self.per_device(b, self.have[o.unique_id], result) for b, o in zip(branches, operands, strict=True)]
        attrs = ({"branch_computations": tuple(new)} if cond.attrs.get("branch_computations")
                 else {"true_computation": new[0], "false_computation": new[1]})
        self.note(f"{cond.name}: each branch runs on each device's pieces of its operand")
        local = add_instruction(self.comp, "conditional", [self.local[o.unique_id] for o in cond.operands], attrs,
                                shape=new[0].root_instruction.shape, name=cond.name)
        return local, result

    def reshard_tree(self, value: HloInstruction, has: HloSharding, want: HloSharding, shape: Shape) -> HloInstruction:
        """:meth:`reshard` through tuples, element by element."""
        if not shape.is_tuple:
            return self.reshard(value, has, want, shape.dimensions)
        parts = []
        for k, element_shape in enumerate(shape.tuple_shapes):
            element = add_instruction(self.comp, "get-tuple-element", [value], {"index": k},
                                      shape=value.shape.tuple_shapes[k])
            parts.append(self.reshard_tree(element, has.elements[k] if has.is_tuple else REPLICATED,
                                           want.elements[k] if want.is_tuple else REPLICATED, element_shape))
        return add_instruction(self.comp, "tuple", parts, shape=Shape.make_tuple([p.shape for p in parts]))

    def lower_reduce_window(self, window_op: HloInstruction) -> tuple[HloInstruction, HloSharding]:
        """Windows over a split dimension: each device extends its piece with a *halo* -- the last
        ``left`` elements of its left neighbour's piece and the first ``right`` of its right
        neighbour's, each sent by one ``collective-permute`` (the padding value at the ends of
        the whole array) -- then runs the windows on it without padding along that dimension."""
        operand, init = window_op.operands
        has = self.have[operand.unique_id]
        plan = halo_plan(window_op, has)
        if plan is None or not self.is_replicated(init):
            return self.whole(window_op)
        value, pad = self.local[operand.unique_id], self.local[init.unique_id]
        windows = list(window_op.attr("window").dimensions)
        for d, left, right in plan:
            value = self.with_halo(value, has, d, left, right, pad)
            windows[d] = dataclasses.replace(windows[d], padding_low=0, padding_high=0)
            self.note(f"{window_op.name}: windows across the split dimension {d}: " + (
                f"a halo of {left} element(s) from the left neighbour and {right} from the right, by "
                "collective-permute" if left or right else "each window inside one device's piece, no halo"))
        dims = has.tile_shape(window_op.shape.dimensions)
        local = self.clone(window_op, [value, pad], dims)
        local.attrs["window"] = dataclasses.replace(window_op.attr("window"), dimensions=tuple(windows))
        return local, has

    def lower_convolution(self, conv: HloInstruction) -> tuple[HloInstruction, HloSharding]:
        """Split images convolve on their own devices; split rows or columns get halos first (zeros
        at the image's edges, where the convolution pads), as for windows."""
        lhs, rhs = conv.operands
        has = self.have[lhs.unique_id]
        plan, result = convolution_plan(conv, has, self.have[rhs.unique_id])
        if plan is None:
            return self.whole(conv)
        value = self.local[lhs.unique_id]
        zero = add_constant(self.comp, 0, conv.operand(0).shape.element_type)
        window = list(conv.attr("window").dimensions)
        spatial = list(conv.attr("dim_labels").input_spatial_dimensions)
        for dim, left, right in plan:
            value = self.with_halo(value, has, dim, left, right, zero)
            k = spatial.index(dim)
            window[k] = dataclasses.replace(window[k], padding_low=0, padding_high=0)
            self.note(f"{conv.name}: the input's dimension {dim} is split: " + (
                f"a halo of {left} row(s) from the left neighbour and {right} from the right, by collective-permute"
                if left or right else "each window inside one device's piece, no halo"))
        if not plan:
            self.note(f"{conv.name}: the images are split, the kernel whole: a local convolution (data parallelism)")
        local = self.clone(conv, [value, self.local[rhs.unique_id]], result.tile_shape(conv.shape.dimensions))
        local.attrs["window"] = dataclasses.replace(conv.attr("window"), dimensions=tuple(window))
        return local, result

    def with_halo(self, piece: HloInstruction, has: HloSharding, d: int, left: int, right: int,
                  pad: HloInstruction) -> HloInstruction:
        """``piece`` with ``left`` elements of the left neighbour's piece before it and ``right`` of
        the right neighbour's after it, along ``d``; at the ends of the array, ``pad``."""
        if not left and not right:
            return piece
        comp = self.comp
        assignment = data_assignment(has)
        tiles = has.data_tile_dims[d]
        moved = np.moveaxis(assignment, d, 0).reshape(tiles, -1)  # [tile along d, everything else]
        size = piece.shape.dimensions[d]
        index = np.zeros(self.n, np.int32)
        for t in range(tiles):
            index[moved[t]] = t
        mine = self.mine_of(index)  # this device's tile index along d

        def halo(start: int, stop: int, step: int, edge: int) -> HloInstruction:
            spec = tuple(SliceDim(start, stop) if k == d else SliceDim(0, n)
                         for k, n in enumerate(piece.shape.dimensions))
            part = add_instruction(comp, "slice", [piece], {"slice": spec})
            pairs = [(int(moved[t, r]), int(moved[t + step, r])) for t in range(tiles) if 0 <= t + step < tiles
                     for r in range(moved.shape[1])]
            received = add_instruction(comp, "collective-permute", [part], {
                "source_target_pairs": "{" + ",".join(f"{{{a},{b}}}" for a, b in pairs) + "}"}, shape=part.shape)
            at_edge = add_instruction(comp, "compare", [mine, add_constant(comp, edge, PrimitiveType.S32)],
                                      {"direction": "EQ"})
            dims = part.shape.dimensions
            at_edge = add_instruction(comp, "broadcast", [at_edge], {"dimensions": ()}, result_dims=dims)
            padding = add_instruction(comp, "broadcast", [pad], {"dimensions": ()}, result_dims=dims)
            return add_instruction(comp, "select", [at_edge, padding, received])

        parts = []
        if left:
            parts.append(halo(size - left, size, 1, 0))  # sent to the right neighbour
        parts.append(piece)
        if right:
            parts.append(halo(0, right, -1, tiles - 1))  # sent to the left neighbour
        return add_instruction(comp, "concatenate", parts, {"dimensions": (d,)})

    def lower_scatter(self, scatter: HloInstruction) -> tuple[HloInstruction, HloSharding]:
        """Updates into a table split by rows: every device shifts the row indices by its first
        row and scatters into its own rows. An update for another device's row lands outside this
        device's piece, and ``scatter`` skips updates outside its operand -- no mask, no collective."""
        table, indices, updates = scatter.operands
        has = self.have[table.unique_id]
        s = scatter_split(scatter, [self.have[o.unique_id] for o in scatter.operands])
        if s is None:
            return self.whole(scatter)
        comp, s32 = self.comp, PrimitiveType.S32
        idx = self.local[indices.unique_id]
        if idx.shape.element_type is not s32:
            idx = add_instruction(comp, "convert", [idx], result_element_type=s32)
        first = add_instruction(comp, "broadcast", [self.first_row(has, s, table.shape.dimensions)],
                                {"dimensions": ()}, result_dims=idx.shape.dimensions)
        local_idx = add_instruction(comp, "subtract", [idx, first])
        self.note(f"{scatter.name}: updates into a table split by rows: each device scatters into its own rows "
                  "(the others' updates fall outside its piece and are skipped)")
        local = self.clone(scatter, [self.local[table.unique_id], local_idx, self.local[updates.unique_id]],
                           has.tile_shape(scatter.shape.dimensions))
        return local, has

    def whole(self, instr: HloInstruction) -> tuple[HloInstruction, HloSharding]:
        """Computed whole on every device, from replicated operands."""
        operands = []
        for o in instr.operands:
            if o.shape.is_array:
                operands.append(self.to(o, REPLICATED))
            elif self.is_replicated(o):
                operands.append(self.local[o.unique_id])
            else:  # a tuple with split elements (a while loop's state): gather each element
                operands.append(self.reshard_tree(self.local[o.unique_id], self.have[o.unique_id], REPLICATED,
                                                  o.shape))
        if any(tiled(self.have[o.unique_id]) for o in instr.operands if o.shape.is_array):
            self.note(f"{instr.name}: {instr.opcode} runs whole on every device (operands gathered)")
        return self.clone(instr, operands, None), REPLICATED

    # ---- resharding ------------------------------------------------------------------------
    def is_replicated(self, instr: HloInstruction) -> bool:
        has = self.have[instr.unique_id]
        if has.is_tuple:
            return not any(tiled(e) for e in has.elements)
        return not tiled(has)

    def to(self, instr: HloInstruction, want: HloSharding) -> HloInstruction:
        return self.reshard(self.local[instr.unique_id], self.have[instr.unique_id], want, instr.shape.dimensions)

    def reshard(self, value: HloInstruction, has: HloSharding, want: HloSharding,
                dims: tuple[int, ...]) -> HloInstruction:
        if same_sharding(has, want):
            return value
        if not tiled(has) and value.opcode == "broadcast" and value.operand(0).shape.rank == 0:
            # a broadcast scalar: every tile is the same broadcast, made at the tile's shape
            tile = want.tile_shape(dims)
            return add_instruction(self.comp, "broadcast", [value.operand(0)], {"dimensions": ()}, result_dims=tile)
        refined = self.refine(value, has, want, dims)
        if refined is not None:
            return refined
        swapped = self.all_to_all(value, has, want, dims)
        if swapped is not None:
            return swapped
        whole = self.gather(value, has, dims) if tiled(has) else value
        return self.slice_mine(whole, want, dims) if tiled(want) else whole

    def refine(self, value: HloInstruction, has: HloSharding, want: HloSharding,
               dims: tuple[int, ...]) -> HloInstruction | None:
        """When every device's wanted tile lies inside the piece it already has (a bias split by
        columns and replicated over rows, wanted split by rows too), each device cuts it out of its
        own piece -- nothing moves. None when some device would need another's elements."""
        if not (tiled(has) and tiled(want)) or any(d % t for d, t in zip(dims, has.data_tile_dims, strict=True)) \
                or any(d % t for d, t in zip(dims, want.data_tile_dims, strict=True)):
            return None
        have_tile, want_tile = has.tile_shape(dims), want.tile_shape(dims)
        table = np.zeros((self.n, len(dims)), np.int32)
        for device in range(self.n):
            h = has.tile_index(device) or (0,) * len(dims)
            w = want.tile_index(device) or (0,) * len(dims)
            for k in range(len(dims)):
                start, offset = w[k] * want_tile[k] - h[k] * have_tile[k], w[k] * want_tile[k]
                if not (0 <= start and offset + want_tile[k] <= (h[k] + 1) * have_tile[k]):
                    return None
                table[device, k] = start
        self.note(f"{value.name}: resharded from {has} to {want} by each device cutting its own piece")
        offsets = [self.mine_of(table[:, k]) for k in range(len(dims))]
        return add_instruction(self.comp, "dynamic-slice", [value, *offsets], {"dynamic_slice_sizes": tuple(want_tile)})

    def all_to_all(self, value: HloInstruction, has: HloSharding, want: HloSharding,
                   dims: tuple[int, ...]) -> HloInstruction | None:
        """From split along ``a`` to split along ``b`` over the same devices, with one ``all-to-all``:
        each device cuts its piece into one chunk per device along ``b``, sends chunk ``j`` to the
        device that will hold column block ``j``, and stacks what it receives along ``a`` -- every
        device sends and receives ``(n-1)/n`` of its piece, where gathering everything moves
        ``n-1`` whole pieces. None when the shardings do not have that form (evenly split)."""
        if not (tiled(has) and tiled(want)):
            return None
        split_has = [d for d, t in enumerate(has.data_tile_dims) if t > 1]
        split_want = [d for d, t in enumerate(want.data_tile_dims) if t > 1]
        if len(split_has) != 1 or len(split_want) != 1 or split_has == split_want:
            return None
        (a,), (b,) = split_has, split_want
        n = has.data_tile_dims[a]
        mine, theirs = data_assignment(has).reshape(n, -1), data_assignment(want).reshape(n, -1)
        if want.data_tile_dims[b] != n or dims[a] % n or dims[b] % n or not np.array_equal(mine, theirs):
            return None
        groups = [list(map(int, mine[:, r])) for r in range(mine.shape[1])]
        comp = self.comp
        piece = list(value.shape.dimensions)  # dims with dims[a] / n
        cut = piece[:b] + [n, dims[b] // n] + piece[b + 1:]  # b cut into (chunk, part of the chunk)
        chunks = add_instruction(comp, "reshape", [value], result_dims=tuple(cut))
        swapped = add_instruction(comp, "all-to-all", [chunks], {
            "dimensions": (b,), "replica_groups": replica_groups_text(groups)}, shape=chunks.shape)
        a_at = a if a < b else a + 1  # where the split dimension is in `cut`
        order = [k for k in range(len(cut)) if k != b]
        order.insert(order.index(a_at), b)  # the received chunks go just before the rows they are
        moved = add_instruction(comp, "transpose", [swapped], {"dimensions": tuple(order)})
        final = list(dims)
        final[b] = dims[b] // n
        self.note(f"{value.name}: resharded by all-to-all from dimension {a} to dimension {b} over "
                  f"{replica_groups_text(groups)}")
        return add_instruction(comp, "reshape", [moved], result_dims=tuple(final))

    def gather(self, value: HloInstruction, has: HloSharding, dims: tuple[int, ...]) -> HloInstruction:
        """The whole array on every device, from each device's tile of it."""
        comp, etype = self.comp, value.shape.element_type
        tile = value.shape.dimensions
        stacked = add_instruction(comp, "reshape", [value], result_dims=(1, *tile))
        everyone = add_instruction(comp, "all-gather", [stacked], {
            "dimensions": (0,), "replica_groups": replica_groups_text([list(range(self.n))])},
            shape=Shape.array(etype, (self.n, *tile)))
        assignment = data_assignment(has)
        tiles = assignment.shape[:-1]

        def piece(index: tuple[int, ...]) -> HloInstruction:
            device = int(assignment[index][0])  # the first device holding this tile
            spec = (SliceDim(device, device + 1), *(SliceDim(0, t) for t in tile))
            one = add_instruction(comp, "slice", [everyone], {"slice": spec})
            return add_instruction(comp, "reshape", [one], result_dims=tile)

        def build(prefix: tuple[int, ...]) -> HloInstruction:
            if len(prefix) == len(tiles):
                return piece(prefix)
            parts = [build((*prefix, i)) for i in range(tiles[len(prefix)])]
            if len(parts) == 1:
                return parts[0]
            return add_instruction(comp, "concatenate", parts, {"dimensions": (len(prefix),)})

        whole = build(())
        if tuple(whole.shape.dimensions) != tuple(dims):  # uneven tiles: crop the padding
            whole = add_instruction(comp, "slice", [whole], {"slice": tuple(SliceDim(0, d) for d in dims)})
        return whole

    def slice_mine(self, whole: HloInstruction, want: HloSharding, dims: tuple[int, ...]) -> HloInstruction:
        """This device's tile of the whole array: offsets from a table, by partition-id."""
        comp = self.comp
        tile = want.tile_shape(dims)
        padded = tuple(t * n for t, n in zip(tile, want.data_tile_dims, strict=True))
        if padded != tuple(dims):
            zero = add_constant(comp, 0, whole.shape.element_type)
            padding = tuple(PaddingDim(0, p - d) for p, d in zip(padded, dims, strict=True))
            whole = add_instruction(comp, "pad", [whole, zero], {"padding": padding})
        table = np.zeros((self.n, len(dims)), np.int32)
        for d in range(self.n):
            index = want.tile_index(d)
            table[d] = [i * t for i, t in zip(index or (0,) * len(dims), tile, strict=True)]
        row = add_instruction(comp, "dynamic-slice", [add_constant(comp, table, PrimitiveType.S32), self.partition_id(),
                                                      add_constant(comp, 0, PrimitiveType.S32)],
                              {"dynamic_slice_sizes": (1, len(dims))})
        offsets = []
        for k in range(len(dims)):
            one = add_instruction(comp, "slice", [row], {"slice": (SliceDim(0, 1), SliceDim(k, k + 1))})
            offsets.append(add_instruction(comp, "reshape", [one], result_dims=()))
        return add_instruction(comp, "dynamic-slice", [whole, *offsets], {"dynamic_slice_sizes": tuple(tile)})

    # ---- helpers ---------------------------------------------------------------------------
    def mine_of(self, table: np.ndarray) -> HloInstruction:
        """``table[partition-id]``, an ``s32[]``: a per-device number known at compile time."""
        row = add_instruction(self.comp, "dynamic-slice", [add_constant(self.comp, table.astype(np.int32),
                                                                        PrimitiveType.S32), self.partition_id()],
                              {"dynamic_slice_sizes": (1,)})
        return add_instruction(self.comp, "reshape", [row], result_dims=())

    def first_row(self, has: HloSharding, d: int, dims: tuple[int, ...]) -> HloInstruction:
        """Where this device's piece starts along dimension ``d`` of a value split as ``has``."""
        tile = has.tile_shape(dims)[d]
        return self.mine_of(np.array([(has.tile_index(k) or (0,) * len(dims))[d] * tile for k in range(self.n)]))

    def partition_id(self) -> HloInstruction:
        if self._partition_id is None:
            pid = add_instruction(self.comp, "partition-id", [], shape=Shape.array(PrimitiveType.U32, ()))
            self._partition_id = add_instruction(self.comp, "convert", [pid], result_element_type=PrimitiveType.S32)
        return self._partition_id

    def adder(self, etype: PrimitiveType) -> HloComputation:
        if etype not in self._adders:
            scalar = Shape.array(etype, ())
            add = HloComputation(f"add.{etype.name.lower()}")
            a, b = add.add_parameter(scalar, "a"), add.add_parameter(scalar, "b")
            add.root_instruction = add.add_instruction(HloInstruction("add", scalar, [a, b]), "sum")
            self._adders[etype] = self.module.add_computation(add)
        return self._adders[etype]

    def all_reduce(self, value: HloInstruction, groups: list[list[int]], reducer: HloComputation) -> HloInstruction:
        if all(len(g) == 1 for g in groups):
            return value
        return add_instruction(self.comp, "all-reduce", [value], {"replica_groups": replica_groups_text(groups),
                                                                  "to_apply": reducer}, shape=value.shape)

    def clone(self, instr: HloInstruction, operands: list[HloInstruction],
              dims: tuple[int, ...] | None) -> HloInstruction:
        shape = instr.shape if dims is None else Shape.array(instr.shape.element_type, tuple(dims))
        new = instr.clone_with_new_operands(shape, operands)
        new.sharding = None
        return self.comp.add_instruction(new, instr.name)


def add_module_frontend_attribute(module: HloModule, key: str, value: str) -> None:
    """Add ``key="value"`` to the header's ``frontend_attributes={...}``."""
    inner = str(module.header_attributes.get("frontend_attributes", "{}")).strip()[1:-1].strip()
    module.header_attributes["frontend_attributes"] = "{" + (inner + "," if inner else "") + f'{key}="{value}"' + "}"


def _drop_shardy_mesh(module: HloModule) -> None:
    """Remove ``xla.sdy.meshes={...}`` from the header's frontend attributes (the key too when it
    was the only one)."""
    text = str(module.header_attributes.get("frontend_attributes", ""))
    start = text.find("xla.sdy.meshes={")
    if start < 0:
        return
    depth, end = 0, len(text) - 1
    for k in range(start + len("xla.sdy.meshes="), len(text)):
        depth += {"{": 1, "}": -1}.get(text[k], 0)
        if depth == 0:
            end = k
            break
    rest = (text[:start] + text[end + 1:]).replace("{,", "{").replace(",}", "}").replace(",,", ",")
    if rest.strip() in ("{}", ""):
        module.header_attributes.pop("frontend_attributes", None)
    else:
        module.header_attributes["frontend_attributes"] = rest


# What only a module *before* partitioning holds: the annotations JAX writes (GSPMD's ``Sharding``
# custom call, Shardy's ``xla.sdy.*`` ones), which the partitioner consumes.
UNPARTITIONED_MARKS = (*ANNOTATIONS, "xla.sdy.GlobalToLocalShape", "xla.sdy.LocalToGlobalShape",
                       "SPMDFullToShardShape", "SPMDShardToFullShape")


def needs_partitioning(module: HloModule) -> bool:
    """Whether ``module`` is a global program for several devices that the SPMD partitioner has not
    yet made per-device: what JAX writes before XLA's partitioner runs (``num_partitions`` in the
    header, and its sharding annotations or Shardy mesh still in the module). XLA's own
    after-partitioning modules hold neither, and run as they are."""
    if int(module.header_attributes.get("num_partitions", "1")) <= 1:
        return False
    if "xla.sdy.meshes" in str(module.header_attributes.get("frontend_attributes", "")):
        return True
    return any(i.opcode == "custom-call" and i.attrs.get("custom_call_target") in UNPARTITIONED_MARKS
               for c in module.computations for i in c.instructions)


def partition(module: HloModule, num_partitions: int | None = None) -> HloModule:
    """A partitioned copy of ``module`` (the module itself is left as it is)."""
    copy = module.clone()
    SpmdPartitioner(num_partitions).run(copy)
    return copy


__all__ = ["SpmdPartitioner", "needs_partitioning", "partition", "same_sharding"]
