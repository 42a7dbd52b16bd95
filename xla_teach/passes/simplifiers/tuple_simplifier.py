"""Tuple simplification (``tuple-simplifier``, XLA's ``TupleSimplifier``).

Tuples only bundle values, so two patterns are pure overhead:

* ``get-tuple-element(tuple(a, b), index=1)`` is just ``b``;
* ``tuple(get-tuple-element(t, 0), ..., get-tuple-element(t, n-1))`` that takes every
  element of ``t`` in order (and nothing else) is just ``t``.

They appear all the time after call inlining and while-loop rewrites, which unpack and
repack loop state.

Before::

    ENTRY main {
      x = f32[4] parameter(0)
      y = f32[4] parameter(1)
      t = (f32[4], f32[4]) tuple(x, y)
      ROOT g = f32[4] get-tuple-element(t), index=1
    }

After::

    ENTRY main {
      x = f32[4] parameter(0)
      ROOT y = f32[4] parameter(1)
    }
"""

from __future__ import annotations

from xla_teach.hlo.ir import HloComputation, HloInstruction, HloModule
from xla_teach.passes.pass_base import HloPass


def _repacked_tuple(tup: HloInstruction) -> HloInstruction | None:
    """``t`` if ``tup`` is ``tuple(gte(t, 0), ..., gte(t, n-1))``, else None."""
    if not tup.operands:
        return None
    source = None
    for i, operand in enumerate(tup.operands):
        if operand.opcode != "get-tuple-element" or operand.tuple_index != i:
            return None
        if source is None:
            source = operand.operand(0)
        elif operand.operand(0) is not source:
            return None
    assert source is not None
    if len(source.shape.tuple_shapes) != tup.operand_count or not source.shape.compatible(tup.shape):
        return None
    return source


class TupleSimplifier(HloPass):
    """Folds ``gte(tuple(...))`` and re-packed tuples (module docstring)."""

    name = "tuple-simplifier"

    def run(self, module: HloModule) -> bool:
        changed = False
        for comp in module.computation_post_order():
            changed |= self.run_on_computation(comp)
        return changed

    def run_on_computation(self, comp: HloComputation) -> bool:
        changed = False
        for instr in comp.post_order():
            if instr.parent is not comp:
                continue
            replacement = None
            if instr.opcode == "get-tuple-element" and instr.operand(0).opcode == "tuple":
                replacement = instr.operand(0).operand(instr.tuple_index)
            elif instr.opcode == "tuple":
                replacement = _repacked_tuple(instr)
            if replacement is None or (not instr.users and not instr.is_root()):
                continue
            self.note(f"{comp.name}: {instr.name} is just {replacement.name}")
            comp.replace_instruction(instr, replacement)
            changed = True
        return changed
