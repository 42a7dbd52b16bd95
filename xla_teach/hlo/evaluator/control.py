"""Leaves, tuples, calls and control flow, custom calls and single-device collectives.

(``parameter`` is handled by the driver itself: it is the call's argument.)

* ``call``/``fusion`` run the called computation; a fusion is *semantically* just a call.
* ``while`` loops ``state = body(state)`` while ``condition(state)``.
* ``conditional`` runs one branch; an out-of-range branch index runs the **last** branch.
* ``map`` applies a scalar computation elementwise.
* Collectives have their one-replica meaning: every group has a single member, so
  all-reduce / all-gather / reduce-scatter / all-to-all return their operand, and
  ``collective-permute`` returns it only if some pair sends replica 0 to itself (else
  zeros). ``replica-id`` and ``partition-id`` are ``u32 0``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from xla_teach.hlo.attributes import source_target_pairs
from xla_teach.hlo.custom_calls import get_custom_call_target
from xla_teach.hlo.evaluator.numeric import convert_array
from xla_teach.hlo.evaluator.registry import TOKEN, Value, register

if TYPE_CHECKING:
    from xla_teach.hlo.evaluator.core import HloEvaluator
    from xla_teach.hlo.ir import HloInstruction
    from xla_teach.hlo.shape import Shape


# ---- leaves ---------------------------------------------------------------------------
@register("constant")
def handle_constant(ev: HloEvaluator, instr: HloInstruction, operands: list[Value]) -> Value:
    """The literal itself: an array, or for a tuple constant a tuple of them -- the same value
    a ``tuple`` instruction makes (handlers never modify values, so no copy is needed)."""
    return instr.literal


@register("iota")
def handle_iota(ev: HloEvaluator, instr: HloInstruction, operands: list[Value]) -> Value:
    """``out[i...] = i[iota_dimension]``, computed as s64 and converted (small ints wrap)."""
    dims = instr.shape.dimensions
    axis = int(instr.attr("iota_dimension"))
    counting = np.arange(dims[axis], dtype=np.int64).reshape([-1 if d == axis else 1 for d in range(len(dims))])
    return convert_array(np.broadcast_to(counting, dims), instr.shape.dtype)


@register("replica-id", "partition-id")
def handle_device_id(ev: HloEvaluator, instr: HloInstruction, operands: list[Value]) -> Value:
    return np.zeros((), np.uint32)  # the interpreter is a single device


@register("after-all")
def handle_after_all(ev: HloEvaluator, instr: HloInstruction, operands: list[Value]) -> Value:
    return TOKEN


# ---- tuples ---------------------------------------------------------------------------
@register("tuple")
def handle_tuple(ev: HloEvaluator, instr: HloInstruction, operands: list[Value]) -> Value:
    return tuple(operands)


@register("get-tuple-element")
def handle_get_tuple_element(ev: HloEvaluator, instr: HloInstruction, operands: list[Value]) -> Value:
    return operands[0][instr.tuple_index]


@register("opt-barrier")
def handle_opt_barrier(ev: HloEvaluator, instr: HloInstruction, operands: list[Value]) -> Value:
    """Identity: the barrier only constrains optimisations, never values."""
    return operands[0]


# ---- calls and control flow -----------------------------------------------------------
@register("call")
def handle_call(ev: HloEvaluator, instr: HloInstruction, operands: list[Value]) -> Value:
    return ev.call_computation(instr.to_apply, operands)


@register("fusion")
def handle_fusion(ev: HloEvaluator, instr: HloInstruction, operands: list[Value]) -> Value:
    """Whatever its kind, a fusion computes exactly what its fused computation computes."""
    return ev.call_computation(instr.fused_computation, operands)


@register("while")
def handle_while(ev: HloEvaluator, instr: HloInstruction, operands: list[Value]) -> Value:
    condition, body = instr.attr("condition"), instr.attr("body")
    state = operands[0]
    while bool(ev.call_computation(condition, [state])):
        state = ev.call_computation(body, [state])
    return state


@register("conditional")
def handle_conditional(ev: HloEvaluator, instr: HloInstruction, operands: list[Value]) -> Value:
    """Pred form: true runs branch 0 (``true_computation``), false branch 1. Index form:
    ``branch_computations[i]``, where ``i < 0`` or ``i >= N`` runs branch N-1."""
    branches = instr.branch_computations()
    selector = operands[0]
    if selector.dtype == np.bool_:
        index = 0 if bool(selector) else 1
    else:
        index = int(selector)
        if index < 0 or index >= len(branches):
            index = len(branches) - 1
    return ev.call_computation(branches[index], [operands[1 + index]])


@register("map")
def handle_map(ev: HloEvaluator, instr: HloInstruction, operands: list[Value]) -> Value:
    """Apply the scalar computation ``to_apply`` at every index of the operands."""
    (result,) = ev.apply_elementwise(instr.to_apply, operands)
    return result


# ---- custom calls ---------------------------------------------------------------------
@register("custom-call")
def handle_custom_call(ev: HloEvaluator, instr: HloInstruction, operands: list[Value]) -> Value:
    """Call the Python function registered for ``custom_call_target`` (see
    :mod:`xla_teach.hlo.custom_calls`) and convert its result to the declared shape."""
    target = get_custom_call_target(str(instr.attr("custom_call_target")), instr.shape)
    return _coerce(target(*operands), instr.shape, f"custom-call target '{instr.attr('custom_call_target')}'")


def _coerce(value: object, shape: Shape, what: str) -> Value:
    if shape.is_tuple:
        if not isinstance(value, tuple | list) or len(value) != len(shape.tuple_shapes):
            raise ValueError(f"{what} must return a tuple of {len(shape.tuple_shapes)} values for {shape.to_text()}")
        return tuple(_coerce(v, s, what) for v, s in zip(value, shape.tuple_shapes, strict=True))
    if shape.is_token:
        return TOKEN
    array = np.asarray(value)
    if array.shape != shape.dimensions:
        raise ValueError(f"{what} returned shape {list(array.shape)}, expected {shape.to_text(print_layout=False)}")
    return array.astype(shape.dtype, copy=False)


# ---- collectives on one device --------------------------------------------------------
def single_replica_problem(instr: HloInstruction) -> str | None:
    """Why a collective cannot run on one replica: a result shaped unlike its operands (an
    ``all-gather`` that grows, a ``reduce-scatter`` that shrinks) needs several. None if it can."""
    shapes = [instr.shape] if not instr.shape.is_tuple else list(instr.shape.tuple_shapes)
    for operand, result in zip(instr.operands, shapes, strict=False):
        if result.dimensions != operand.shape.dimensions:
            return (f"{instr.name}: {instr.opcode} of {operand.shape.to_text(print_layout=False)} into "
                    f"{result.to_text(print_layout=False)} needs several replicas; xla_teach runs one, "
                    "so the result must have the operand's shape")
    return None


@register("all-reduce", "all-gather", "reduce-scatter", "all-to-all")
def handle_single_replica_collective(ev: HloEvaluator, instr: HloInstruction, operands: list[Value]) -> Value:
    """With one member per group, every one of these returns its operand(s) unchanged."""
    problem = single_replica_problem(instr)
    if problem:
        raise NotImplementedError(problem)
    return operands[0] if len(operands) == 1 else tuple(operands)


@register("collective-permute")
def handle_collective_permute(ev: HloEvaluator, instr: HloInstruction, operands: list[Value]) -> Value:
    """Replica 0 receives from the pair ``{0,0}`` if present, otherwise zeros."""
    if (0, 0) in source_target_pairs(instr.attr("source_target_pairs")):
        return operands[0]
    return np.zeros_like(operands[0])
