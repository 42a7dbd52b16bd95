"""Call inlining (``call-inliner``, XLA's ``CallInliner``).

A ``call`` runs another computation on its operands. Replacing it with a copy of the
callee's instructions (parameters wired to the call's operands) lets every other pass
see across the call boundary: ``cse`` can merge work done twice, ``algsimp`` can
simplify ``callee(x) + 0``, fusion can fuse the callee's ops with the caller's. JAX emits
many calls (``jit`` of ``jit``, ``custom_jvp``...), so this runs once, first.

Computations are processed callees first, so a callee is call-free before it is
copied into its callers. Callees that nothing calls any more are removed. Copied
instructions keep their names where free, else get the next ``.N`` suffix.

Before::

    square {
      p = f32[4] parameter(0)
      ROOT m = f32[4] multiply(p, p)
    }
    ENTRY main {
      x = f32[4] parameter(0)
      c = f32[4] call(x), to_apply=square
      ROOT n = f32[4] negate(c)
    }

After::

    ENTRY main {
      x = f32[4] parameter(0)
      m.1 = f32[4] multiply(x, x)
      ROOT n = f32[4] negate(m.1)
    }
"""

from __future__ import annotations

from xla_teach.hlo.ir import HloInstruction, HloModule
from xla_teach.passes.pass_base import HloPass
from xla_teach.passes.simplifiers.dce import remove_unreachable_computations


def inline_call(call: HloInstruction) -> HloInstruction:
    """Copy ``call``'s callee into the caller in place of ``call``; returns the copy of the root."""
    comp = call.parent
    assert comp is not None and call.opcode == "call"
    callee = call.to_apply
    mapping: dict[int, HloInstruction] = {}
    for instr in callee.post_order():
        if instr.opcode == "parameter":
            mapping[instr.unique_id] = call.operand(instr.parameter_number)
            continue
        clone = instr.clone_with_new_operands(instr.shape, [mapping[o.unique_id] for o in instr.operands])
        comp.add_instruction(clone, instr.name)
        clone.control_predecessors = [mapping[p.unique_id] for p in instr.control_predecessors]
        mapping[instr.unique_id] = clone
    root = mapping[callee.root.unique_id]
    comp.replace_instruction(call, root)
    return root


class CallInliner(HloPass):
    """Inlines every ``call`` (module docstring)."""

    name = "call-inliner"

    def run(self, module: HloModule) -> bool:
        inlined = 0
        for comp in module.computation_post_order():
            for instr in comp.post_order():
                if instr.opcode != "call" or instr.parent is not comp or instr.control_predecessors:
                    continue
                root = inline_call(instr)
                self.note(f"{comp.name}: inlined {instr.name} (calls {instr.to_apply.name}), result {root.name}")
                inlined += 1
        if inlined:
            dropped = remove_unreachable_computations(module)
            if dropped:
                self.note(f"removed computation(s) no longer called: {', '.join(dropped)}")
        return inlined > 0
