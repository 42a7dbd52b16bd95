"""Exercise `dce`: write dead code elimination as an HloPass.

An instruction is *dead* when nothing reads its value: it has no users, it is not
the ROOT of its computation, and running it has no side effect. Removing a dead
instruction can make its operands dead too (``unused = negate(exp(x))``: once
``unused`` is gone, so is the ``exponential``).

Your pass must:

1. remove every dead instruction of every computation -- and only those;
2. never remove a ``parameter`` (that would change the computation's signature) or an
   instruction with a side effect (``instr.has_side_effect()``: ``rng``, a custom-call
   marked ``custom_call_has_side_effect=true``) -- nor, therefore, what such an
   instruction reads;
3. remove computations that nothing calls any more (a ``reduce`` calls its ``to_apply``
   computation; when the reduce is dead, the reducer may become unused);
4. return True if it changed anything, else False (the pass pipeline checks this).

Before::

    ENTRY main {
      x = f32[4] parameter(0)
      e = f32[4] exponential(x)
      unused = f32[4] negate(e)
      ROOT neg = f32[4] negate(x)
    }

After::

    ENTRY main {
      x = f32[4] parameter(0)
      ROOT neg = f32[4] negate(x)
    }

The IR you need (xla_teach/hlo/ir.py): ``module.computations``, ``module.entry``,
``module.remove_computation(comp)``; ``comp.instructions``, ``comp.post_order()``
(operands before users), ``comp.root_instruction``, ``comp.remove_instruction(instr)``
(refuses while the instruction still has users); ``instr.users``, ``instr.operands``,
``instr.opcode``, ``instr.is_root()``, ``instr.has_side_effect()``,
``instr.called_computations()``.

Grade it:  xla-teach grade dce path/to/dce.py
"""

from __future__ import annotations

from xla_teach.hlo.ir import HloComputation, HloInstruction, HloModule
from xla_teach.passes.pass_base import HloPass


# BEGIN SOLUTION: helpers you may want: "is this instruction dead?", "which computations are reachable?"
def _is_dead(instr: HloInstruction) -> bool:
    return (not instr.users and not instr.is_root() and instr.opcode != "parameter"
            and not instr.has_side_effect())


def _remove_dead(comp: HloComputation) -> int:
    removed = 0
    for instr in reversed(comp.post_order()):  # users first: their operands may die with them
        if _is_dead(instr):
            comp.remove_instruction(instr)
            removed += 1
    return removed


def _reachable(module: HloModule) -> set[int]:
    seen: set[int] = set()
    stack = [module.entry]
    while stack:
        comp = stack.pop()
        if id(comp) not in seen:
            seen.add(id(comp))
            stack.extend(comp.called_computations())
    return seen
# END SOLUTION


class DeadCodeElimination(HloPass):
    name = "dce"

    def run(self, module: HloModule) -> bool:
        # BEGIN SOLUTION: remove dead instructions, then computations nothing calls; return whether anything changed
        changed = False
        for comp in module.computations:
            changed |= _remove_dead(comp) > 0
        reachable = _reachable(module)
        for comp in list(module.computations):
            if id(comp) not in reachable:
                module.remove_computation(comp)
                changed = True
        return changed
        # END SOLUTION
