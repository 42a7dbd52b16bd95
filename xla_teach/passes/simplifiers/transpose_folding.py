"""Transpose folding (``transpose-folding``, XLA's ``TransposeFolding``).

A ``dot`` says which dimensions of each operand are batch and contracting
dimensions, so a ``transpose`` feeding it can be absorbed by renumbering them: the
dot reads the transpose's dimension ``d``, which is dimension ``perm[d]`` of the
transpose's operand. No data has to move any more; the dot emitter just walks the
operand with different strides.

The result of a dot lists the batch dimensions, then the lhs free (non-batch,
non-contracting) dimensions *in increasing order*, then the rhs free ones. So a
transpose is folded only if it keeps the free dimensions in the same relative order
(it may permute batch and contracting dimensions freely); otherwise the output would
come out transposed. Convolutions are left alone here.

Before::

    ENTRY main {
      a = f32[8,4] parameter(0)
      b = f32[8,6] parameter(1)
      at = f32[4,8] transpose(a), dimensions={1,0}
      ROOT d = f32[4,6] dot(at, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
    }

After::

    ENTRY main {
      a = f32[8,4] parameter(0)
      b = f32[8,6] parameter(1)
      ROOT dot = f32[4,6] dot(a, b), lhs_contracting_dims={0}, rhs_contracting_dims={0}
    }
"""

from __future__ import annotations

from xla_teach.hlo.ir import HloComputation, HloInstruction
from xla_teach.passes.pass_base import HloPass

_SIDES = (("lhs_batch_dims", "lhs_contracting_dims"), ("rhs_batch_dims", "rhs_contracting_dims"))


def foldable(dot: HloInstruction, operand_index: int) -> bool:
    """True if operand ``operand_index`` of ``dot`` is a transpose that can be folded."""
    transpose = dot.operand(operand_index)
    if transpose.opcode != "transpose":
        return False
    batch_attr, contracting_attr = _SIDES[operand_index]
    used = set(dot.attr(batch_attr)) | set(dot.attr(contracting_attr))
    perm = transpose.dimensions
    free_sources = [perm[d] for d in range(len(perm)) if d not in used]
    return free_sources == sorted(free_sources)


class TransposeFolding(HloPass):
    """Absorbs transposes into the dimension numbers of the dots they feed."""

    name = "transpose-folding"

    def run_on_computation(self, comp: HloComputation) -> bool:
        changed = False
        for instr in comp.post_order():
            if instr.parent is not comp or instr.opcode != "dot":
                continue
            sides = [i for i in (0, 1) if foldable(instr, i)]
            if not sides:
                continue
            operands = list(instr.operands)
            attrs = dict(instr.attrs)
            for i in sides:
                perm = operands[i].dimensions
                for attr in _SIDES[i]:
                    attrs[attr] = tuple(perm[d] for d in instr.attr(attr))
                operands[i] = operands[i].operand(0)
            folded = instr.clone_with_new_operands(instr.shape, operands, name="dot")
            folded.attrs = attrs
            comp.add_instruction(folded)
            names = " and ".join(instr.operand(i).name for i in sides)
            self.note(f"{comp.name}: folded {names} into {folded.name}")
            comp.replace_instruction(instr, folded)
            changed = True
        return changed
