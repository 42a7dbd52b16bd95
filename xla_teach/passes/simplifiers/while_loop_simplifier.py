"""While-loop simplification (``simplify-while-loops``, XLA's ``WhileLoopSimplifier``).

XLA's pass is called ``simplify-while-loops`` in its dumps (that is the name used here;
the C++ class is ``WhileLoopSimplifier``). Two rewrites:

1. **Loops that never run.** If the condition is false for the initial state, the loop
   is its initial state. The condition is evaluated (with the interpreter) when the
   state elements it reads are constants in the loop's ``tuple`` operand.
2. **Dead state elements.** An element is *live* if the condition reads it, if the loop's
   users read it, or if the body uses it to compute a live element. The others only
   feed themselves (a counter nobody looks at, a value carried along unused) and are
   dropped from the state, the body, the condition and the loop's users.

Not done (XLA does more): loops with a trip count of exactly one are not inlined, loops
are not unrolled, and nested tuples in the state are not flattened.

Before (element 1 is updated every iteration, but only to compute itself)::

    cond {
      s = (s32[], f32[4]) parameter(0)
      i = s32[] get-tuple-element(s), index=0
      ten = s32[] constant(10)
      ROOT lt = pred[] compare(i, ten), direction=LT
    }

    body {
      s = (s32[], f32[4]) parameter(0)
      i = s32[] get-tuple-element(s), index=0
      one = s32[] constant(1)
      next = s32[] add(i, one)
      x = f32[4] get-tuple-element(s), index=1
      y = f32[4] exponential(x)
      ROOT t = (s32[], f32[4]) tuple(next, y)
    }

    ENTRY main {
      x0 = f32[4] parameter(0)
      zero = s32[] constant(0)
      init = (s32[], f32[4]) tuple(zero, x0)
      loop = (s32[], f32[4]) while(init), condition=cond, body=body
      ROOT n = s32[] get-tuple-element(loop), index=0
    }

After (the state is the counter alone, in the body, the condition and the loop's operand)::

    cond {
      s = (s32[]) parameter(0)
      i = s32[] get-tuple-element(s), index=0
      ten = s32[] constant(10)
      ROOT lt = pred[] compare(i, ten), direction=LT
    }

    body {
      s = (s32[]) parameter(0)
      i = s32[] get-tuple-element(s), index=0
      one = s32[] constant(1)
      next = s32[] add(i, one)
      ROOT tuple = (s32[]) tuple(next)
    }

    ENTRY main {
      x0 = f32[4] parameter(0)
      zero = s32[] constant(0)
      tuple.1 = (s32[]) tuple(zero)
      while = (s32[]) while(tuple.1), condition=cond, body=body
      ROOT n = s32[] get-tuple-element(while), index=0
    }

(``x0`` stays: an entry parameter is part of the module's signature, dead or not.)
"""

from __future__ import annotations

import numpy as np

from xla_teach.hlo.evaluator import TOKEN, EvaluationError, evaluate_computation
from xla_teach.hlo.ir import HloComputation, HloInstruction, HloModule
from xla_teach.hlo.shape import Shape
from xla_teach.passes.pass_base import HloPass
from xla_teach.passes.rewrite_utils import add_instruction
from xla_teach.passes.simplifiers.dce import remove_dead_instructions
from xla_teach.passes.simplifiers.while_loop_utils import (
    rebuild_loop,
    renumber_state_reads,
    set_state_shape,
    simple_loop,
    state_elements,
    used_indices,
)


def _zeros(shape: Shape) -> object:
    if shape.is_tuple:
        return tuple(_zeros(s) for s in shape.tuple_shapes)
    if shape.is_token:
        return TOKEN
    return np.zeros(shape.dimensions, dtype=shape.dtype)


def _reads(value: HloInstruction, param: HloInstruction) -> set[int]:
    """State indices that ``value`` depends on (through ``get-tuple-element`` of ``param``)."""
    found: set[int] = set()
    stack, seen = [value], set()
    while stack:
        cur = stack.pop()
        if cur.unique_id in seen:
            continue
        seen.add(cur.unique_id)
        if cur.opcode == "get-tuple-element" and cur.operand(0) is param:
            found.add(cur.tuple_index)
            continue
        stack.extend(cur.operands)
        stack.extend(cur.control_predecessors)
    return found


def never_runs(loop: HloInstruction) -> bool:
    """True if the condition is provably false for the loop's initial state."""
    init, cond = loop.operand(0), loop.attrs["condition"]
    if init.opcode != "tuple" or any(i.has_side_effect() for i in cond.instructions):
        return False
    needed = used_indices(cond)
    if any(init.operand(i).opcode != "constant" or "literal" not in init.operand(i).attrs for i in needed):
        return False
    state = tuple(init.operand(i).literal if i in needed else _zeros(s)
                  for i, s in enumerate(loop.shape.tuple_shapes))
    try:
        result = evaluate_computation(cond, [state])
    except (EvaluationError, ValueError, TypeError):
        return False
    return not bool(np.asarray(result))


def live_elements(loop: HloInstruction) -> set[int]:
    body: HloComputation = loop.attrs["body"]
    param, root = body.parameter(0), body.root
    live = used_indices(loop.attrs["condition"]) | {u.tuple_index for u in loop.users}
    work = list(live)
    while work:
        j = work.pop()
        for i in _reads(root.operand(j), param):
            if i not in live:
                live.add(i)
                work.append(i)
    return live


class WhileLoopSimplifier(HloPass):
    """Removes loops that never run and dead loop state (module docstring)."""

    name = "simplify-while-loops"

    def run(self, module: HloModule) -> bool:
        changed = False
        for comp in module.computation_post_order():
            for instr in comp.post_order():
                if instr.parent is not comp or instr.opcode != "while":
                    continue
                if (not instr.users and not instr.is_root()):
                    continue
                if instr.shape.is_tuple and never_runs(instr):
                    self.note(f"{comp.name}: {instr.name} never runs; replaced by its initial state")
                    comp.replace_instruction(instr, instr.operand(0))
                    changed = True
                elif simple_loop(instr) and not instr.is_root():
                    changed |= self.remove_dead_elements(instr)
        return changed

    def remove_dead_elements(self, loop: HloInstruction) -> bool:
        body: HloComputation = loop.attrs["body"]
        if any(i.has_side_effect() for i in body.instructions) or any(
                u.opcode != "get-tuple-element" for u in loop.users):
            return False
        count = len(loop.shape.tuple_shapes)
        live = live_elements(loop)
        keep = sorted(live)
        if len(keep) == count or not keep:
            return False
        index_map = {old: new for new, old in enumerate(keep)}
        new_shape = Shape.make_tuple([loop.shape.tuple_shapes[i] for i in keep])
        # Body: the root keeps the live elements; what computed the dead ones becomes dead code.
        old_root = body.root
        body.root_instruction = add_instruction(body, "tuple", [old_root.operand(i) for i in keep])
        body.remove_instruction_and_unused_operands(old_root)
        remove_dead_instructions(body)
        for comp in (body, loop.attrs["condition"]):
            set_state_shape(comp, new_shape)
            renumber_state_reads(comp, index_map)
        comp = loop.parent
        assert comp is not None
        state = state_elements(comp, loop.operand(0))
        rebuild_loop(loop, [state[i] for i in keep], index_map)
        for i in sorted(set(range(count)) - live):
            comp.remove_instruction_and_unused_operands(state[i])
        dead = sorted(set(range(count)) - live)
        self.note(f"{body.name}: removed dead loop state element(s) {dead} of {loop.name}")
        return True
