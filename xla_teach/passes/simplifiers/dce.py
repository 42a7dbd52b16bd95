"""Dead code elimination (``dce``).

An instruction is *dead* when nothing reads it: it has no users, it is not the
root of its computation, and running it has no side effect (``rng``, a
``custom-call`` marked ``custom_call_has_side_effect=true``). Removing a dead
instruction can make its operands dead too, so the pass walks each computation
users-first. Parameters are never removed (that would change the signature).
Computations that no live instruction calls any more are removed as well.

Before::

    ENTRY main {
      x = f32[4] parameter(0)
      unused = f32[4] exponential(x)
      ROOT neg = f32[4] negate(x)
    }

After::

    ENTRY main {
      x = f32[4] parameter(0)
      ROOT neg = f32[4] negate(x)
    }
"""

from __future__ import annotations

from xla_teach.hlo.ir import HloComputation, HloInstruction, HloModule
from xla_teach.passes.pass_base import HloPass


def _is_dead(instr: HloInstruction, ordering: set[int]) -> bool:
    return (
        not instr.users
        and not instr.is_root()
        and instr.opcode != "parameter"
        and not instr.has_side_effect()
        and instr.unique_id not in ordering  # a control predecessor orders something: keep it
    )


def remove_dead_instructions(comp: HloComputation) -> int:
    """Remove every dead instruction of ``comp``; returns how many were removed."""
    ordering = {p.unique_id for i in comp.instructions for p in i.control_predecessors}
    removed = 0
    for instr in reversed(comp.post_order()):  # users before operands
        if _is_dead(instr, ordering):
            comp.remove_instruction(instr)
            removed += 1
    return removed


def remove_unreachable_computations(module: HloModule) -> list[str]:
    """Drop computations not reachable from the entry through called computations."""
    reachable: set[int] = set()
    stack = [module.entry]
    while stack:
        comp = stack.pop()
        if id(comp) in reachable:
            continue
        reachable.add(id(comp))
        stack.extend(comp.called_computations())
    dropped = [c for c in module.computations if id(c) not in reachable]
    for comp in dropped:
        module.remove_computation(comp)
    return [c.name for c in dropped]


class DeadCodeElimination(HloPass):
    name = "dce"

    def run(self, module: HloModule) -> bool:
        changed = False
        for comp in module.computation_post_order():
            removed = remove_dead_instructions(comp)
            if removed:
                self.note(f"{comp.name}: removed {removed} dead instruction(s)")
                changed = True
        dropped = remove_unreachable_computations(module)
        if dropped:
            self.note(f"removed unreachable computation(s): {', '.join(dropped)}")
            changed = True
        return changed
