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


def is_manual_computation(call: HloInstruction) -> bool:
    """A ``shard_map`` body as Shardy writes it: a ``call`` of the per-device body on operands that
    ``xla.sdy.GlobalToLocalShape`` made (the SPMD partitioner keeps it whole, as written)."""
    return any(o.opcode == "custom-call" and o.attrs.get("custom_call_target") == "xla.sdy.GlobalToLocalShape"
               for o in call.operands)


class CallInliner(HloPass):
    """Inlines every ``call`` (module docstring) but a ``shard_map`` body before partitioning.

    ``only_global_programs``: run only on a module the SPMD partitioner has yet to make per-device
    (XLA's CPU compiler inlines calls first in its ``spmd-partitioner`` pipeline, so that a call --
    JAX writes ``log_softmax`` as one -- is partitioned op by op, not gathered and run whole)."""

    name = "call-inliner"

    def __init__(self, only_global_programs: bool = False) -> None:
        super().__init__()
        self.only_global_programs = only_global_programs

    def run(self, module: HloModule) -> bool:
        if self.only_global_programs:
            from xla_teach.passes.spmd.spmd_partitioner import needs_partitioning

            if not needs_partitioning(module):
                return False
        inlined = 0
        for comp in module.computation_post_order():
            for instr in comp.post_order():
                if instr.opcode != "call" or instr.parent is not comp or instr.control_predecessors:
                    continue
                if is_manual_computation(instr):
                    continue
                root = inline_call(instr)
                self.note(f"{comp.name}: inlined {instr.name} (calls {instr.to_apply.name}), result {root.name}")
                inlined += 1
        if inlined:
            dropped = remove_unreachable_computations(module)
            if dropped:
                self.note(f"removed computation(s) no longer called: {', '.join(dropped)}")
        return inlined > 0
