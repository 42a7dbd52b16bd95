"""Reshape mover (``reshape-mover``, XLA's ``ReshapeMover``).

When every operand of an elementwise op went through *the same* reshape (or the same
transpose), the op can run first and the reshape after it::

    add(reshape(a), reshape(b))  ==  reshape(add(a, b))

Sinking rearrangements toward the outputs lets equal ones meet and cancel or merge
(``reshape(reshape(x))`` is one reshape for ``algsimp``), and leaves one reshape where
there were several.

An elementwise op is moved across when (XLA's rule):

* at least one operand is a reshape/transpose of something that is not a constant (a
  *non-trivial rearrange*), and
* every other operand is either an *equivalent* rearrange (same opcode, same input
  dimensions, for transposes the same permutation) or *trivially rearrangeable*: a
  constant (it gets the inverse reshape/transpose, which ``constant_folding`` then
  folds) or a broadcast of a scalar (it is re-broadcast to the input dimensions).

Before::

    ENTRY main {
      a = f32[2,3] parameter(0)
      b = f32[2,3] parameter(1)
      ta = f32[3,2] transpose(a), dimensions={1,0}
      tb = f32[3,2] transpose(b), dimensions={1,0}
      ROOT m = f32[3,2] multiply(ta, tb)
    }

After::

    ENTRY main {
      a = f32[2,3] parameter(0)
      b = f32[2,3] parameter(1)
      multiply = f32[2,3] multiply(a, b)
      ROOT transpose = f32[3,2] transpose(multiply), dimensions={1,0}
    }
"""

from __future__ import annotations

from xla_teach.hlo.ir import HloComputation, HloInstruction, inherit_metadata
from xla_teach.hlo.opcodes import is_elementwise
from xla_teach.passes.pass_base import HloPass
from xla_teach.passes.rewrite_utils import (
    NOT_MOVED_ACROSS_REARRANGES,
    add_instruction,
    broadcast_scalar,
    inverse_permutation,
)

_REARRANGES = ("reshape", "transpose")


def _trivially_rearrangeable(instr: HloInstruction) -> bool:
    return instr.opcode == "constant" or (instr.opcode == "broadcast" and instr.operand(0).shape.rank == 0)


def _is_nontrivial_rearrange(instr: HloInstruction) -> bool:
    return instr.opcode in _REARRANGES and not _trivially_rearrangeable(instr.operand(0))


def _equivalent(a: HloInstruction, b: HloInstruction) -> bool:
    if a.opcode != b.opcode or a.operand(0).shape.dimensions != b.operand(0).shape.dimensions:
        return False
    return a.opcode == "reshape" or a.dimensions == b.dimensions


def move_candidate(instr: HloInstruction) -> HloInstruction | None:
    """The rearrange to sink below ``instr``, or None if ``instr`` is not a candidate."""
    if not is_elementwise(instr.opcode) or instr.opcode in NOT_MOVED_ACROSS_REARRANGES or not instr.operands:
        return None
    rearrange = next((o for o in instr.operands if _is_nontrivial_rearrange(o)), None)
    if rearrange is None:
        return None
    for operand in instr.operands:
        if not (_equivalent(operand, rearrange) or _trivially_rearrangeable(operand)):
            return None
    return rearrange


def _undo(comp: HloComputation, operand: HloInstruction, rearrange: HloInstruction) -> HloInstruction:
    """``operand`` brought to the shape ``rearrange`` reads (its "before" dimensions), with the
    operand's metadata."""
    undone = _undo_shape(comp, operand, rearrange)
    inherit_metadata(undone, operand)
    return undone


def _undo_shape(comp: HloComputation, operand: HloInstruction, rearrange: HloInstruction) -> HloInstruction:
    before_dims = rearrange.operand(0).shape.dimensions
    if operand.shape.rank == 0 and rearrange.shape.rank > 0:
        return operand  # a scalar bound of clamp (or predicate of select) fits any shape
    if operand.opcode in _REARRANGES and _equivalent(operand, rearrange):
        return operand.operand(0)
    if operand.opcode == "broadcast":
        return broadcast_scalar(comp, operand.operand(0), before_dims)
    if rearrange.opcode == "reshape":
        return add_instruction(comp, "reshape", [operand], result_dims=before_dims)
    return add_instruction(comp, "transpose", [operand], {"dimensions": inverse_permutation(rearrange.dimensions)})


class ReshapeMover(HloPass):
    """Sinks reshapes and transposes below elementwise ops (module docstring)."""

    name = "reshape-mover"

    def run_on_computation(self, comp: HloComputation) -> bool:
        changed = False
        for instr in comp.post_order():
            if instr.parent is not comp or (not instr.users and not instr.is_root()):
                continue
            rearrange = move_candidate(instr)
            if rearrange is None:
                continue
            operands = [_undo(comp, o, rearrange) for o in instr.operands]
            before_dims = rearrange.operand(0).shape.dimensions
            moved = instr.clone_with_new_operands(instr.shape.with_dimensions(before_dims), operands,
                                                  name=instr.opcode)
            comp.add_instruction(moved)
            if rearrange.opcode == "reshape":
                after = add_instruction(comp, "reshape", [moved], result_dims=instr.shape.dimensions)
            else:
                after = add_instruction(comp, "transpose", [moved], {"dimensions": rearrange.dimensions})
            # a sharding describes the value in its own dimensions: it stays with the result
            moved.sharding, after.sharding = None, instr.sharding
            self.note(f"{comp.name}: moved {rearrange.opcode} {rearrange.name} below {instr.name} "
                      f"(now {after.name} of {moved.name})")
            comp.replace_instruction(instr, after)
            changed = True
        return changed
