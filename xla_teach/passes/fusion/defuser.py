"""Undoing fusion (``defuser``, XLA's ``Defuser``).

Each ``fusion`` instruction is replaced by a copy of its fused computation's instructions, the
fused parameters wired to the fusion's operands, exactly as ``call-inliner`` inlines a ``call``.
The module computes the same values, one kernel per instruction instead of one per fusion.

The compile explorer uses it to time instructions *inside* a fusion: the defused module runs with
a profiler, and each fused instruction's share of its fusion's measured time is estimated from
its own time when it ran alone (:func:`defuse_module` says which copy stands for which fused
instruction, since a copy's name may take a ``.N`` suffix).

Before::

    fused_add_exp {
      p0 = f32[4] parameter(0)
      p1 = f32[4] parameter(1)
      a = f32[4] add(p0, p1)
      ROOT e = f32[4] exponential(a)
    }
    ENTRY main {
      x = f32[4] parameter(0)
      y = f32[4] parameter(1)
      ROOT f = f32[4] fusion(x, y), kind=kLoop, calls=fused_add_exp
    }

After::

    ENTRY main {
      x = f32[4] parameter(0)
      y = f32[4] parameter(1)
      a.1 = f32[4] add(x, y)
      ROOT e.1 = f32[4] exponential(a.1)
    }
"""

from __future__ import annotations

from xla_teach.hlo.ir import HloInstruction, HloModule
from xla_teach.passes.pass_base import HloPass
from xla_teach.passes.simplifiers.dce import remove_unreachable_computations


def defuse(fusion: HloInstruction) -> dict[str, str]:
    """Replace ``fusion`` by copies of its fused instructions; returns fused name -> copy's name."""
    comp = fusion.parent
    assert comp is not None and fusion.opcode == "fusion"
    copies: dict[int, HloInstruction] = {}
    names: dict[str, str] = {}
    for instr in fusion.fused_computation.post_order():
        if instr.opcode == "parameter":
            copies[instr.unique_id] = fusion.operand(instr.parameter_number)
            continue
        copy = instr.clone_with_new_operands(instr.shape, [copies[o.unique_id] for o in instr.operands])
        copy.metadata = instr.metadata
        comp.add_instruction(copy, instr.name)
        copies[instr.unique_id] = copy
        names[instr.name] = copy.name
    comp.replace_instruction(fusion, copies[fusion.fused_computation.root.unique_id])
    return names


def defuse_module(module: HloModule) -> dict[str, str]:
    """Defuse every fusion of ``module``; returns fused name -> copy's name. A fusion inside a
    fusion is copied out with its caller's other instructions, then defused in the next round."""
    names: dict[str, str] = {}
    while True:
        fused = {id(i.fused_computation) for i in module.instructions() if i.opcode == "fusion"}
        fusions = [i for comp in module.computations if id(comp) not in fused
                   for i in comp.instructions if i.opcode == "fusion"]
        if not fusions:
            break
        for fusion in fusions:
            names.update(defuse(fusion))
        remove_unreachable_computations(module)
    return names


class Defuser(HloPass):
    """Inlines every fusion's computation in place of the fusion (module docstring)."""

    name = "defuser"

    def run(self, module: HloModule) -> bool:
        names = defuse_module(module)
        if names:
            self.note(f"defused {len(names)} fused instructions back into their callers")
        return bool(names)
