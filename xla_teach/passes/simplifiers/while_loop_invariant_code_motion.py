"""While-loop invariant code motion (``while-loop-invariant-code-motion``, XLA's
``WhileLoopInvariantCodeMotion``).

A value computed in a loop body from things that do not change between iterations is
the same every iteration, so it can be computed once, before the loop. Inside the
body, a state element ``i`` is *invariant* when the body passes it through unchanged
(root operand ``i`` is ``get-tuple-element(param), index=i``); constants are invariant;
an instruction without side effects whose operands are all invariant is invariant.

Hoisting: the invariant instructions are copied in front of the loop (reading the
loop's initial state), and the ones the rest of the body still needs become new state
elements that the body passes through unchanged. Like XLA, instructions that are not
worth hoisting on their own (constants, broadcasts, reshapes, transposes, slices,
tuples, ...) are only copied as operands of a hoisted instruction; everything else is
hoisted even if the loop might run zero times (the ops here cannot trap).

Before (``e`` depends only on ``w``, which the body passes through unchanged)::

    cond {
      s = (s32[], f32[4], f32[4]) parameter(0)
      i = s32[] get-tuple-element(s), index=0
      ten = s32[] constant(10)
      ROOT lt = pred[] compare(i, ten), direction=LT
    }

    body {
      s = (s32[], f32[4], f32[4]) parameter(0)
      i = s32[] get-tuple-element(s), index=0
      x = f32[4] get-tuple-element(s), index=1
      w = f32[4] get-tuple-element(s), index=2
      one = s32[] constant(1)
      next = s32[] add(i, one)
      e = f32[4] exponential(w)
      y = f32[4] add(x, e)
      ROOT t = (s32[], f32[4], f32[4]) tuple(next, y, w)
    }

    ENTRY main {
      x0 = f32[4] parameter(0)
      w0 = f32[4] parameter(1)
      zero = s32[] constant(0)
      init = (s32[], f32[4], f32[4]) tuple(zero, x0, w0)
      loop = (s32[], f32[4], f32[4]) while(init), condition=cond, body=body
      ROOT r = f32[4] get-tuple-element(loop), index=1
    }

After (``e`` is computed once, before the loop, and carried as state element 3)::

    cond {
      s = (s32[], f32[4], f32[4], f32[4]) parameter(0)
      i = s32[] get-tuple-element(s), index=0
      ten = s32[] constant(10)
      ROOT lt = pred[] compare(i, ten), direction=LT
    }

    body {
      s = (s32[], f32[4], f32[4], f32[4]) parameter(0)
      i = s32[] get-tuple-element(s), index=0
      one = s32[] constant(1)
      next = s32[] add(i, one)
      x = f32[4] get-tuple-element(s), index=1
      e.2 = f32[4] get-tuple-element(s), index=3
      y = f32[4] add(x, e.2)
      w = f32[4] get-tuple-element(s), index=2
      ROOT tuple = (s32[], f32[4], f32[4], f32[4]) tuple(next, y, w, e.2)
    }

    ENTRY main {
      zero = s32[] constant(0)
      x0 = f32[4] parameter(0)
      w0 = f32[4] parameter(1)
      e.1 = f32[4] exponential(w0)
      tuple.1 = (s32[], f32[4], f32[4], f32[4]) tuple(zero, x0, w0, e.1)
      while = (s32[], f32[4], f32[4], f32[4]) while(tuple.1), condition=cond, body=body
      ROOT r = f32[4] get-tuple-element(while), index=1
    }

The condition only gains the new element in its parameter's shape. Element 2 (``w``)
is still passed through: this pass never removes state; ``simplify-while-loops``
drops it later if nothing else reads it.
"""

from __future__ import annotations

from xla_teach.hlo.ir import HloComputation, HloInstruction, HloModule
from xla_teach.hlo.opcodes import CONTROL_FLOW_OPCODES, NOT_PURE_OPCODES
from xla_teach.hlo.shape import Shape
from xla_teach.passes.pass_base import HloPass
from xla_teach.passes.rewrite_utils import add_instruction
from xla_teach.passes.simplifiers.while_loop_utils import (
    rebuild_loop,
    set_state_shape,
    simple_loop,
    state_elements,
)

# Hoisted only as operands of something worth hoisting (XLA's NotWorthHoistingIndividually).
NOT_WORTH_HOISTING_ALONE = frozenset({
    "constant", "get-tuple-element", "broadcast", "reshape", "transpose", "bitcast", "iota", "reverse", "slice",
    "tuple", "copy",
})
# Never hoisted: the loop's state, control flow, and what is not a function of its operands.
NEVER_HOISTED = NOT_PURE_OPCODES | CONTROL_FLOW_OPCODES | {"parameter"}


def invariant_instructions(body: HloComputation) -> list[HloInstruction]:
    """Instructions of ``body`` whose value is the same in every iteration, operands first."""
    param, root = body.parameter(0), body.root
    passed_through = {i for i, op in enumerate(root.operands)
                      if op.opcode == "get-tuple-element" and op.operand(0) is param and op.tuple_index == i}
    invariant: list[HloInstruction] = []
    ids: set[int] = set()
    for instr in body.post_order():
        if instr.opcode == "get-tuple-element" and instr.operand(0) is param:
            ok = instr.tuple_index in passed_through
        elif instr.opcode in NEVER_HOISTED or instr.has_side_effect() or instr.control_predecessors:
            ok = False
        elif instr is root or not instr.shape.is_array:
            ok = False
        else:
            ok = all(o.unique_id in ids for o in instr.operands)
        if ok:
            invariant.append(instr)
            ids.add(instr.unique_id)
    return invariant


class WhileLoopInvariantCodeMotion(HloPass):
    """Hoists loop-invariant computations out of ``while`` bodies (module docstring)."""

    name = "while-loop-invariant-code-motion"

    def run(self, module: HloModule) -> bool:
        changed = False
        for comp in module.computation_post_order():
            for instr in comp.post_order():
                if instr.parent is comp and simple_loop(instr):
                    changed |= self.hoist(instr)
        return changed

    def hoist(self, loop: HloInstruction) -> bool:
        body: HloComputation = loop.attrs["body"]
        invariant = invariant_instructions(body)
        worth = [i for i in invariant if i.opcode not in NOT_WORTH_HOISTING_ALONE]
        if not worth:
            return False
        comp = loop.parent
        assert comp is not None
        # Copy what is hoisted (and the invariant operands it needs) in front of the loop.
        state = state_elements(comp, loop.operand(0))
        outside: dict[int, HloInstruction] = {}

        def copy_out(instr: HloInstruction) -> HloInstruction:
            if instr.unique_id not in outside:
                if instr.opcode == "get-tuple-element" and instr.operand(0) is body.parameter(0):
                    outside[instr.unique_id] = state[instr.tuple_index]
                else:
                    operands = [copy_out(o) for o in instr.operands]
                    clone = instr.clone_with_new_operands(instr.shape, operands)
                    outside[instr.unique_id] = comp.add_instruction(clone, instr.name)
            return outside[instr.unique_id]

        hoisted_ids = {i.unique_id for i in worth}
        # Values the body still reads: hoisted instructions with a user that stays in the body.
        live_in = [h for h in worth if any(u.unique_id not in hoisted_ids for u in h.users)]
        for h in worth:
            copy_out(h)
        old_count = len(loop.shape.tuple_shapes)
        new_shape = Shape.make_tuple(list(loop.shape.tuple_shapes) + [h.shape for h in live_in])
        set_state_shape(body, new_shape)
        set_state_shape(loop.attrs["condition"], new_shape)
        param = body.parameter(0)
        carried = []
        for k, h in enumerate(live_in):
            read = add_instruction(body, "get-tuple-element", [param], {"index": old_count + k}, name=h.name)
            h.replace_all_uses_with(read)
            carried.append(read)
        old_root = body.root
        body.root_instruction = add_instruction(body, "tuple", list(old_root.operands) + carried)
        body.remove_instruction_and_unused_operands(old_root)
        for h in reversed(worth):
            body.remove_instruction_and_unused_operands(h)
        identity = {i: i for i in range(old_count)}
        rebuild_loop(loop, state + [outside[h.unique_id] for h in live_in], identity)
        names = ", ".join(h.name for h in worth)
        self.note(f"{body.name}: hoisted {names} out of {loop.name}")
        return True
