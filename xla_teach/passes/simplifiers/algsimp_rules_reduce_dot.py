"""``algsimp`` rules for ``reduce`` and ``dot`` whose reductions are degenerate.

A reduction over dimensions of size 1 combines every output element with exactly one
input element, so ``reduce(x, init)`` is the reducer applied once:
``f(init, reshape(x))``. We write that out (with the reducer's own op) instead of
assuming ``init`` is the reducer's identity, so the rewrite is exact even for an odd
``init``; ``x + 0 -> x`` then removes an identity ``init`` in the next round.

When only some of the reduced dimensions have size 1, a ``reshape`` drops them and the
reduction goes on over the others.

A ``dot`` whose contracting dimensions all have size 1 sums a single product: it is an
outer product, ``multiply(broadcast(lhs), broadcast(rhs))`` (XLA makes the same rewrite;
the only difference is the sign of a zero product, which the dot's sum, starting from
+0.0, turns into +0.0).
"""

from __future__ import annotations

import math

from xla_teach.hlo.evaluator.elementwise_binary import BINARY_FUNCTIONS
from xla_teach.hlo.evaluator.fast_paths import match_scalar_computation
from xla_teach.hlo.ir import HloComputation, HloInstruction
from xla_teach.passes.rewrite_utils import add_instruction, broadcast_scalar
from xla_teach.passes.simplifiers.algsimp_rules_base import Rule, rule


@rule("reduce over size-1 dims -> f(init, reshape(x)) (f = the reducer's single op)", "reduce")
def reduce_degenerate(instr: HloInstruction) -> HloInstruction | None:
    if instr.operand_count != 2 or not instr.shape.is_array:
        return None
    operand, init = instr.operands
    if operand.shape.element_count() != instr.shape.element_count() or operand.shape.element_count() == 0:
        return None
    pattern = match_scalar_computation(instr.to_apply)
    if pattern is None or pattern.opcode not in BINARY_FUNCTIONS or sorted(pattern.parameters) != [0, 1]:
        return None
    comp = instr.parent
    assert comp is not None
    dims = instr.shape.dimensions
    reshaped = operand if operand.shape.dimensions == dims else add_instruction(
        comp, "reshape", [operand], result_dims=dims)
    accumulator = broadcast_scalar(comp, init, dims)
    # The reducer is op(param[i], param[j]); param 0 is the accumulator, param 1 the element.
    by_param = {0: accumulator, 1: reshaped}
    return add_instruction(comp, pattern.opcode, [by_param[p] for p in pattern.parameters])


@rule("reduce over some size-1 dims -> reduce(reshape(x)) without them", "reduce")
def reduce_drop_size1_dims(instr: HloInstruction) -> HloInstruction | None:
    """Reducing a size-1 dimension combines nothing, so a reshape can drop it first: the
    remaining reduction adds the same elements in the same order (variadic reduces too)."""
    n = instr.operand_count // 2
    inputs, inits = instr.operands[:n], instr.operands[n:]
    dims = inputs[0].shape.dimensions
    reduced = sorted(instr.dimensions)
    size1 = [d for d in reduced if dims[d] == 1]
    if not size1 or len(size1) == len(reduced):
        return None  # nothing to drop, or all of them: reduce_degenerate's case
    comp = instr.parent
    assert comp is not None
    kept = [d for d in range(len(dims)) if d not in size1]
    new_dims = tuple(dims[d] for d in kept)
    reshaped = [add_instruction(comp, "reshape", [x], result_dims=new_dims) for x in inputs]
    new_reduced = tuple(kept.index(d) for d in reduced if d not in size1)
    return add_instruction(comp, "reduce", reshaped + list(inits),
                           {"dimensions": new_reduced, "to_apply": instr.to_apply}, shape=instr.shape)


@rule("reduce of an empty array -> broadcast(init)", "reduce")
def reduce_empty(instr: HloInstruction) -> HloInstruction | None:
    if instr.operand_count != 2 or not instr.shape.is_array or instr.operand(0).shape.element_count() != 0:
        return None
    comp = instr.parent
    assert comp is not None
    return broadcast_scalar(comp, instr.operand(1), instr.shape.dimensions)


def _as_broadcast_operand(comp: HloComputation, operand: HloInstruction, batch: tuple[int, ...],
                          contracting: tuple[int, ...]) -> HloInstruction:
    """``operand`` transposed to (batch..., free...) with its size-1 contracting dims dropped."""
    free = tuple(d for d in range(operand.shape.rank) if d not in batch and d not in contracting)
    perm = batch + free + contracting
    value = operand
    if list(batch + free) != sorted(batch + free):  # else a reshape alone drops the size-1 dims
        value = add_instruction(comp, "transpose", [value], {"dimensions": perm})
    kept = tuple(operand.shape.dimensions[d] for d in batch + free)
    if value.shape.dimensions != kept:
        value = add_instruction(comp, "reshape", [value], result_dims=kept)
    return value


@rule("dot with size-1 contracting dims -> multiply(broadcast(lhs), broadcast(rhs))", "dot",
      exactness="a dot sums from +0.0, so a single product -0.0 comes out +0.0; the multiply keeps -0.0")
def dot_degenerate(instr: HloInstruction) -> HloInstruction | None:
    lhs, rhs = instr.operands
    etype = instr.shape.element_type
    if lhs.shape.element_type is not etype or rhs.shape.element_type is not etype:
        return None  # a mixed-precision dot: the multiply would round differently
    lhs_c, rhs_c = tuple(instr.attr("lhs_contracting_dims")), tuple(instr.attr("rhs_contracting_dims"))
    if math.prod(lhs.shape.dimensions[d] for d in lhs_c) != 1:
        return None
    lhs_b, rhs_b = tuple(instr.attr("lhs_batch_dims")), tuple(instr.attr("rhs_batch_dims"))
    comp = instr.parent
    assert comp is not None
    n_batch = len(lhs_b)
    n_lhs_free = lhs.shape.rank - n_batch - len(lhs_c)
    n_rhs_free = rhs.shape.rank - n_batch - len(rhs_c)
    out = instr.shape.dimensions
    left = _as_broadcast_operand(comp, lhs, lhs_b, lhs_c)
    right = _as_broadcast_operand(comp, rhs, rhs_b, rhs_c)
    left_dims = tuple(range(n_batch + n_lhs_free))
    right_dims = tuple(range(n_batch)) + tuple(range(n_batch + n_lhs_free, n_batch + n_lhs_free + n_rhs_free))
    if left.shape.dimensions != out:
        left = add_instruction(comp, "broadcast", [left], {"dimensions": left_dims}, result_dims=out)
    if right.shape.dimensions != out:
        right = add_instruction(comp, "broadcast", [right], {"dimensions": right_dims}, result_dims=out)
    return add_instruction(comp, "multiply", [left, right])


@rule("transpose(dot(a, b)) -> dot(b, a) for a matrix product", "transpose")
def transpose_of_dot(instr: HloInstruction) -> HloInstruction | None:
    """``(a @ b)^T = b^T @ a^T``: swapping the operands (and their contracting dims) writes the
    product already transposed. JAX's weight gradients end in such transposes; without the rule
    the product needs a temporary buffer and a transposing copy."""
    dot = instr.operand(0)
    if (dot.opcode != "dot" or len(dot.users) != 1 or tuple(instr.dimensions) != (1, 0)
            or dot.attr("lhs_batch_dims") or dot.attr("rhs_batch_dims") or dot.shape.rank != 2
            or not dot.shape.has_default_layout()):
        return None
    if not instr.shape.has_default_layout() and (instr.is_root() or any(
            u.opcode == "bitcast" for u in instr.users)):
        return None  # a transpose into another layout that something reads as bytes: nothing to save
    # JAX writes weight gradients as ``add(acc, transpose(dot))`` with the transpose in the {0,1}
    # layout: a bitcast of the product for the transpose, but then the add reads it across
    # layouts -- the transposing copy happens there. The swapped dot, in the default layout,
    # gives the add an operand laid out as it is.
    lhs, rhs = dot.operands
    attrs = {k: v for k, v in dot.attrs.items() if k not in ("backend_config",)}
    attrs["lhs_contracting_dims"], attrs["rhs_contracting_dims"] = (dot.attr("rhs_contracting_dims"),
                                                                    dot.attr("lhs_contracting_dims"))
    if len(attrs.get("operand_precision", ())) == 2:
        attrs["operand_precision"] = tuple(reversed(attrs["operand_precision"]))
    comp = instr.parent
    assert comp is not None
    instr.shape = instr.shape.without_layout()  # what replaces it keeps its layout: the default one
    swapped = add_instruction(comp, "dot", [rhs, lhs], attrs, shape=instr.shape)
    swapped.metadata = dot.metadata  # the product's source line, which the explorer shows
    swapped.sharding = instr.sharding
    return swapped


REDUCE_DOT_RULES: tuple[Rule, ...] = (reduce_degenerate, reduce_drop_size1_dims, reduce_empty, dot_degenerate,
                                      transpose_of_dot)
