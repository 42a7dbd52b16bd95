"""Leaves, tuples, calls and control flow, custom calls and single-device collectives.

(``parameter`` is handled by the driver itself: it is the call's argument.)

* ``call``/``fusion`` run the called computation; a fusion is *semantically* just a call.
* ``while`` loops ``state = body(state)`` while ``condition(state)``.
* ``scan`` runs ``to_apply`` once per position along its scan dimension, threading carries and
  stacking the outputs.
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
    """0 on one device; on simulated devices (``devices.py``) the device's index -- its partition
    in an SPMD program (``num_partitions`` > 1, where every replica id is 0), else its replica."""
    device = ev.device
    if device is None:
        return np.zeros((), np.uint32)
    module = instr.parent.parent if instr.parent is not None else None
    spmd = module is not None and int(module.header_attributes.get("num_partitions", "1")) > 1
    index = device.index if (instr.opcode == "partition-id") == spmd else 0
    return np.asarray(index, np.uint32)


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


@register("scan")
def handle_scan(ev: HloEvaluator, instr: HloInstruction, operands: list[Value]) -> Value:
    """``carries = inits``; for each step ``i`` along ``dimensions={d}`` (``L-1`` down to ``0`` when
    ``is_reverse``): ``outputs, carries = to_apply(x[..., i, ...] for each input x, *carries)``, and
    output ``i`` is stored at position ``i`` of dimension ``d``. Returns ``(outputs..., carries...)``.
    ``is_associative`` only allows a compiler to regroup the steps; the interpreter runs them in order."""
    d = int(instr.attr("dimensions")[0])
    split = len(operands) - int(instr.attr("num_carries"))
    inputs, carries = operands[:split], list(operands[split:])
    output_shapes = instr.shape.tuple_shapes[:len(instr.shape.tuple_shapes) - len(carries)]
    outputs = [np.zeros(s.dimensions, s.dtype) for s in output_shapes]
    length = inputs[0].shape[d] if inputs else output_shapes[0].dimensions[d]
    steps = range(length - 1, -1, -1) if instr.attr("is_reverse") else range(length)
    for i in steps:
        at = (slice(None),) * d + (i,)  # position i of dimension d
        results = ev.call_computation(instr.to_apply, [np.asarray(x[at]) for x in inputs] + carries)
        for out, value in zip(outputs, results[:len(outputs)], strict=True):
            out[at] = value
        carries = list(results[len(outputs):])
    return (*outputs, *carries)


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
    return _shape_problem(instr.name, instr.opcode, [o.shape for o in instr.operands], shapes)


def _shape_problem(name: str, opcode: str, operands: list[Shape], results: list[Shape]) -> str | None:
    for operand, result in zip(operands, results, strict=False):
        if result.dimensions != operand.dimensions:
            return (f"{name}: {opcode} of {operand.to_text(print_layout=False)} into "
                    f"{result.to_text(print_layout=False)} needs several replicas; xla_teach runs one, "
                    "so the result must have the operand's shape")
    return None


@register("all-reduce", "all-gather", "reduce-scatter", "all-to-all")
def handle_collective(ev: HloEvaluator, instr: HloInstruction, operands: list[Value]) -> Value:
    """On one device every member group holds only this one: the operand(s) come back unchanged.
    On simulated devices (``devices.py``) the group's operands meet and are combined in group
    order, so every member computes the same bits."""
    results = [instr.shape] if not instr.shape.is_tuple else list(instr.shape.tuple_shapes)
    return _collective(ev, instr, instr.opcode, operands, results)


def _collective(ev: HloEvaluator, instr: HloInstruction, opcode: str, operands: list[Value],
                results: list[Shape]) -> Value:
    device = ev.device
    if device is None:
        problem = _shape_problem(instr.name, opcode, [o.shape for o in instr.operands], results)
        if problem:
            raise NotImplementedError(problem)
        return operands[0] if len(operands) == 1 else tuple(operands)
    group = device.group_of(instr)
    dims = instr.attrs.get("dimensions") or (0,)
    axis = int(dims[0])
    if not (opcode == "all-to-all" and len(operands) > 1):  # a library takes arrays, not tuples of pieces
        native = device.run_collective(instr, opcode, operands, reducer=reducer_opcode(instr), axis=axis)
        if native is not None:
            return native[0] if len(native) == 1 else tuple(native)
    values = device.exchange(instr, group, list(operands))
    members = [values[d] for d in group]
    position = group.index(device.index)

    def reduced(k: int) -> np.ndarray:
        total = members[0][k]
        for member in members[1:]:
            (total,) = ev.apply_elementwise(instr.attr("to_apply"), [total, member[k]])
        return np.asarray(total, dtype=members[0][k].dtype)

    if opcode == "all-reduce":
        out = [reduced(k) for k in range(len(operands))]
        return out[0] if len(out) == 1 else tuple(out)
    if opcode == "all-gather":
        return np.concatenate([m[0] for m in members], axis=axis)
    if opcode == "reduce-scatter":
        return np.split(reduced(0), len(group), axis=axis)[position]
    if len(operands) > 1:  # all-to-all, tuple form: member j's operand i goes to member i, as result j
        if len(operands) != len(group):
            raise ValueError(f"{instr.name}: a tuple all-to-all needs one operand per group member "
                             f"({len(group)}), it has {len(operands)}")
        return tuple(np.array(member[position]) for member in members)
    pieces = [np.split(m[0], len(group), axis=axis) for m in members]  # all-to-all, array form
    return np.concatenate([piece[position] for piece in pieces], axis=axis)


def reducer_opcode(instr: HloInstruction) -> str | None:
    """The opcode of a collective's ``to_apply`` when it is one elementwise op of its two
    parameters (``add(p0, p1)``: what a communication library can reduce with), else None."""
    comp = instr.attrs.get("to_apply")
    if comp is None or len(comp.instructions) != 3:
        return None
    root = comp.root
    params = {id(p) for p in comp.parameter_instructions}
    if len(root.operands) == 2 and {id(o) for o in root.operands} == params:
        return root.opcode
    return None


@register("collective-permute")
def handle_collective_permute(ev: HloEvaluator, instr: HloInstruction, operands: list[Value]) -> Value:
    """Each device receives the operand of the device whose pair targets it, or zeros (on one
    device: its own operand if the pair ``{0,0}`` is there)."""
    pairs = source_target_pairs(instr.attr("source_target_pairs"))
    device = ev.device
    if device is None:
        return operands[0] if (0, 0) in pairs else np.zeros_like(operands[0])
    native = device.run_collective(instr, "collective-permute", operands[:1], groups=(tuple(range(device.count)),),
                                   pairs=tuple(pairs))
    if native is not None:
        return native[0]
    values = device.exchange(instr, list(range(device.count)), operands[0])
    sources = [s for s, t in pairs if t == device.index]
    return np.array(values[sources[0]]) if sources else np.zeros_like(operands[0])


@register("collective-broadcast")
def handle_collective_broadcast(ev: HloEvaluator, instr: HloInstruction, operands: list[Value]) -> Value:
    """The first device of each group sends its operand to the others (on one device: its own)."""
    device = ev.device
    if device is None:
        return operands[0]
    native = device.run_collective(instr, "collective-broadcast", operands[:1])
    if native is not None:
        return native[0]
    group = device.group_of(instr)
    values = device.exchange(instr, group, operands[0])
    return np.array(values[group[0]])


@register("all-reduce-start", "all-gather-start", "collective-permute-start")
def handle_async_start(ev: HloEvaluator, instr: HloInstruction, operands: list[Value]) -> Value:
    """The collective, done at once (the interpreter has nothing to overlap it with), packed as
    the start's value: all-reduce's result; all-gather's ``(operand, result)``; collective-permute's
    ``(operand, result[, 0, 0])``."""
    if instr.opcode == "all-reduce-start":
        results = [instr.shape] if not instr.shape.is_tuple else list(instr.shape.tuple_shapes)
        return _collective(ev, instr, "all-reduce", operands, results)
    if instr.opcode == "all-gather-start":
        return (operands[0], _collective(ev, instr, "all-gather", operands, [instr.shape.tuple_shapes[1]]))
    received = handle_collective_permute(ev, instr, operands)
    context = (np.zeros((), np.uint32),) * (len(instr.shape.tuple_shapes) - 2)
    return (operands[0], received, *context)


@register("all-reduce-done", "all-gather-done", "collective-permute-done")
def handle_async_done(ev: HloEvaluator, instr: HloInstruction, operands: list[Value]) -> Value:
    """The result its start computed."""
    started = operands[0]
    return started[1] if isinstance(started, tuple) else started
