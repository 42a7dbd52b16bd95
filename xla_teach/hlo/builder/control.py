"""Builder methods for tuples, calls and control flow, collectives, random numbers and
other special ops (XLA ``XlaBuilder`` names in snake_case).

Computations passed in (``to_apply``, loop bodies, branches...) come from
sub-builders: ``sub = b.create_sub_builder("body"); ...; body = sub.build_computation()``.
"""

from __future__ import annotations

from collections.abc import Sequence

from xla_teach.hlo.builder.base import BuilderBase, XlaOp
from xla_teach.hlo.errors import ShapeError
from xla_teach.hlo.ir import HloComputation
from xla_teach.hlo.shape import Shape


class ControlFlowMixin(BuilderBase):
    """tuple, get_tuple_element, call, map, while_loop, conditional and the special ops."""

    # ---- tuples ---------------------------------------------------------------------
    def tuple(self, elements: Sequence[XlaOp], *, name: str | None = None) -> XlaOp:
        return self._emit("tuple", list(elements), name=name)

    def get_tuple_element(self, tuple_data: XlaOp, index: int, *, name: str | None = None) -> XlaOp:
        return self._emit("get-tuple-element", [tuple_data], {"index": int(index)}, name=name)

    # ---- calls and control flow -----------------------------------------------------
    def call(self, computation: HloComputation, operands: Sequence[XlaOp], *, name: str | None = None) -> XlaOp:
        comp = self._check_computation(computation, "call", "to_apply")
        return self._emit("call", list(operands), {"to_apply": comp}, name=name)

    def map(self, operands: Sequence[XlaOp], computation: HloComputation, dimensions: Sequence[int] | None = None,
            *, name: str | None = None) -> XlaOp:
        """Apply a scalar computation elementwise; ``dimensions`` defaults to all."""
        ops = list(operands)
        dims = tuple(range(ops[0].rank)) if dimensions is None and ops else tuple(int(d) for d in dimensions or ())
        comp = self._check_computation(computation, "map", "to_apply")
        return self._emit("map", ops, {"dimensions": dims, "to_apply": comp}, name=name)

    def while_loop(self, condition: HloComputation, body: HloComputation, init: XlaOp, *,
                   name: str | None = None) -> XlaOp:
        """``state = init; while condition(state): state = body(state)``."""
        attrs = {"condition": self._check_computation(condition, "while", "condition"),
                 "body": self._check_computation(body, "while", "body")}
        return self._emit("while", [init], attrs, name=name)

    def scan(self, inputs: Sequence[XlaOp], inits: Sequence[XlaOp], body: HloComputation, dimension: int, *,
             is_reverse: bool = False, is_associative: bool = False, length: int | None = None,
             name: str | None = None) -> XlaOp:
        """``carries = inits; for i along dimension: (outputs_i..., carries...) = body(x_i..., carries...)``
        (``x_i``: each input without ``dimension``); returns ``(outputs stacked along dimension...,
        final carries...)``. A scan without inputs needs its ``length``."""
        ops = [*inputs, *inits]
        attrs = {"dimensions": (int(dimension),), "num_carries": len(inits), "is_reverse": bool(is_reverse),
                 "is_associative": bool(is_associative), "to_apply": self._check_computation(body, "scan", "to_apply")}
        declared = None
        if not inputs:
            if length is None:
                raise ShapeError("scan", [op.shape for op in ops], "a scan without inputs needs its length= "
                                                                   "(the number of steps)")
            root = body.root.shape
            outputs = root.tuple_shapes[:len(root.tuple_shapes) - len(inits)] if root.is_tuple else ()
            declared = Shape.make_tuple([Shape.array(o.element_type, o.dimensions[:dimension] + (int(length),)
                                                     + o.dimensions[dimension:]) for o in outputs]
                                        + [op.shape for op in inits])
        return self._emit("scan", ops, attrs, name=name, declared_shape=declared)

    def conditional(self, predicate: XlaOp, true_operand: XlaOp, true_computation: HloComputation,
                    false_operand: XlaOp, false_computation: HloComputation, *, name: str | None = None) -> XlaOp:
        """Run ``true_computation(true_operand)`` if ``predicate`` else the false branch."""
        attrs = {"true_computation": self._check_computation(true_computation, "conditional", "true_computation"),
                 "false_computation": self._check_computation(false_computation, "conditional", "false_computation")}
        return self._emit("conditional", [predicate, true_operand, false_operand], attrs, name=name)

    def indexed_conditional(self, branch_index: XlaOp, branch_computations: Sequence[HloComputation],
                            branch_operands: Sequence[XlaOp], *, name: str | None = None) -> XlaOp:
        """Run ``branch_computations[i](branch_operands[i])`` for ``i = branch_index``
        (an s32 scalar; out-of-range runs the last branch)."""
        branches = tuple(self._check_computation(c, "conditional", "branch_computations")
                         for c in branch_computations)
        return self._emit("conditional", [branch_index, *branch_operands], {"branch_computations": branches},
                          name=name)

    def optimization_barrier(self, operand: XlaOp, *, name: str | None = None) -> XlaOp:
        return self._emit("opt-barrier", [operand], name=name)

    # ---- collectives (identity-like on one device) ----------------------------------
    def all_reduce(self, operand: XlaOp | Sequence[XlaOp], computation: HloComputation,
                   replica_groups: str = "{}", *, name: str | None = None) -> XlaOp:
        """``replica_groups`` is kept as text, e.g. ``"{{0,1},{2,3}}"`` (``"{}"``: all replicas)."""
        ops = [operand] if isinstance(operand, XlaOp) else list(operand)
        attrs = {"replica_groups": replica_groups,
                 "to_apply": self._check_computation(computation, "all-reduce", "to_apply")}
        return self._emit("all-reduce", ops, attrs, name=name)

    def all_gather(self, operand: XlaOp, all_gather_dimension: int, shard_count: int,
                   replica_groups: str = "{}", *, name: str | None = None) -> XlaOp:
        """Concatenate ``shard_count`` members' operands along ``all_gather_dimension``."""
        if not 0 <= all_gather_dimension < operand.rank:
            raise ShapeError("all-gather", [operand.shape], f"dimension {all_gather_dimension} is out of range")
        dims = list(operand.dimensions)
        dims[all_gather_dimension] *= shard_count
        attrs = {"dimensions": (int(all_gather_dimension),), "replica_groups": replica_groups}
        return self._emit("all-gather", [operand], attrs, name=name,
                          declared_shape=Shape.array(operand.element_type, dims))

    def reduce_scatter(self, operand: XlaOp, computation: HloComputation, scatter_dimension: int,
                       shard_count: int, replica_groups: str = "{}", *, name: str | None = None) -> XlaOp:
        """Reduce the members' operands with ``computation``, then keep this member's
        ``1/shard_count`` slice along ``scatter_dimension`` (XLA's ``ReduceScatter``)."""
        if not 0 <= scatter_dimension < operand.rank:
            raise ShapeError("reduce-scatter", [operand.shape], f"dimension {scatter_dimension} is out of range")
        dims = list(operand.dimensions)
        if shard_count < 1 or dims[scatter_dimension] % shard_count:
            raise ShapeError("reduce-scatter", [operand.shape], f"dimension {scatter_dimension} of size "
                             f"{dims[scatter_dimension]} does not split into {shard_count} shards")
        dims[scatter_dimension] //= shard_count
        attrs = {"dimensions": (int(scatter_dimension),), "replica_groups": replica_groups,
                 "to_apply": self._check_computation(computation, "reduce-scatter", "to_apply")}
        return self._emit("reduce-scatter", [operand], attrs, name=name,
                          declared_shape=Shape.array(operand.element_type, dims))

    def all_to_all(self, operand: XlaOp, split_dimension: int, replica_groups: str = "{}", *,
                   name: str | None = None) -> XlaOp:
        """Split the operand along ``split_dimension``, send piece i to member i, and concatenate
        what arrives along the same dimension (XLA's array-form ``AllToAll``)."""
        if not 0 <= split_dimension < operand.rank:
            raise ShapeError("all-to-all", [operand.shape], f"dimension {split_dimension} is out of range")
        return self._emit("all-to-all", [operand], {"dimensions": (int(split_dimension),),
                                                     "replica_groups": replica_groups}, name=name)

    def collective_permute(self, operand: XlaOp, source_target_pairs: Sequence[tuple[int, int]], *,
                           name: str | None = None) -> XlaOp:
        pairs = "{" + ",".join(f"{{{s},{t}}}" for s, t in source_target_pairs) + "}"
        return self._emit("collective-permute", [operand], {"source_target_pairs": pairs}, name=name)

    def collective_broadcast(self, operand: XlaOp, replica_groups: str = "{}", *, name: str | None = None) -> XlaOp:
        """The first member of each group sends its operand to the others (XLA's ``CollectiveBroadcast``)."""
        return self._emit("collective-broadcast", [operand], {"replica_groups": replica_groups}, name=name)

    def all_reduce_start(self, operand: XlaOp, computation: HloComputation, replica_groups: str = "{}", *,
                         name: str | None = None) -> XlaOp:
        """The asynchronous all-reduce's start; :meth:`async_done` gives its result."""
        attrs = {"replica_groups": replica_groups,
                 "to_apply": self._check_computation(computation, "all-reduce-start", "to_apply")}
        return self._emit("all-reduce-start", [operand], attrs, name=name)

    def all_gather_start(self, operand: XlaOp, all_gather_dimension: int, shard_count: int,
                         replica_groups: str = "{}", *, name: str | None = None) -> XlaOp:
        """The asynchronous all-gather's start: ``(operand, gathered)``."""
        if not 0 <= all_gather_dimension < operand.rank:
            raise ShapeError("all-gather-start", [operand.shape], f"dimension {all_gather_dimension} is out of range")
        dims = list(operand.dimensions)
        dims[all_gather_dimension] *= shard_count
        gathered = Shape.array(operand.element_type, dims)
        attrs = {"dimensions": (int(all_gather_dimension),), "replica_groups": replica_groups}
        return self._emit("all-gather-start", [operand], attrs, name=name,
                          declared_shape=Shape.make_tuple([operand.shape, gathered]))

    def collective_permute_start(self, operand: XlaOp, source_target_pairs: Sequence[tuple[int, int]], *,
                                 name: str | None = None) -> XlaOp:
        """The asynchronous collective-permute's start: ``(operand, received, u32[], u32[])``."""
        pairs = "{" + ",".join(f"{{{s},{t}}}" for s, t in source_target_pairs) + "}"
        context = Shape.array("u32", ())
        return self._emit("collective-permute-start", [operand], {"source_target_pairs": pairs}, name=name,
                          declared_shape=Shape.make_tuple([operand.shape, operand.shape, context, context]))

    def async_done(self, start: XlaOp, *, name: str | None = None) -> XlaOp:
        """The ``*-done`` of an asynchronous collective's start: its result."""
        opcode = start.instruction.opcode
        if not opcode.endswith("-start"):
            raise ShapeError("done", [start.shape], f"{start.name} is a {opcode}, not an asynchronous start")
        return self._emit(opcode.removesuffix("-start") + "-done", [start], name=name)

    def replica_id(self, *, name: str | None = None) -> XlaOp:
        return self._emit("replica-id", [], name=name)

    def partition_id(self, *, name: str | None = None) -> XlaOp:
        return self._emit("partition-id", [], name=name)

    def after_all(self, tokens: Sequence[XlaOp], *, name: str | None = None) -> XlaOp:
        """Join tokens (no tokens: a fresh one, XLA's ``CreateToken``)."""
        return self._emit("after-all", list(tokens), name=name)

    def create_token(self, *, name: str | None = None) -> XlaOp:
        return self.after_all([], name=name)

    # ---- random numbers -------------------------------------------------------------
    def rng_bit_generator(self, algorithm: str, initial_state: XlaOp, shape: Shape, *,
                          name: str | None = None) -> XlaOp:
        """``(new_state, bits)``; ``algorithm`` is rng_default, rng_three_fry or rng_philox;
        ``shape`` is the shape of the bits (an unsigned integer array)."""
        return self._emit("rng-bit-generator", [initial_state], {"algorithm": algorithm}, name=name,
                          result_element_type=shape.element_type, result_dims=shape.dimensions)

    def rng_uniform(self, a: XlaOp, b: XlaOp, shape: Shape, *, name: str | None = None) -> XlaOp:
        return self._emit("rng", [a, b], {"distribution": "rng_uniform"}, name=name, declared_shape=shape)

    def rng_normal(self, mu: XlaOp, sigma: XlaOp, shape: Shape, *, name: str | None = None) -> XlaOp:
        return self._emit("rng", [mu, sigma], {"distribution": "rng_normal"}, name=name, declared_shape=shape)

    def rng_get_and_update_state(self, delta: int, *, name: str | None = None) -> XlaOp:
        """The legacy rng's Philox state ``u64[2] {key, counter}``; then the counter advances
        by ``delta`` blocks (what ``rng-expander`` emits for each ``rng``)."""
        return self._emit("rng-get-and-update-state", [], {"delta": int(delta)}, name=name)

    # ---- custom calls ---------------------------------------------------------------
    def custom_call(self, call_target_name: str, operands: Sequence[XlaOp], shape: Shape,
                    has_side_effect: bool = False, *, name: str | None = None) -> XlaOp:
        """An opaque call; its result shape is declared, not inferred."""
        attrs = {"custom_call_target": call_target_name, "custom_call_has_side_effect": bool(has_side_effect)}
        return self._emit("custom-call", list(operands), attrs, name=name, declared_shape=shape)
