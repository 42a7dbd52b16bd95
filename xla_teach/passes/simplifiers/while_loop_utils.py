"""Helpers for passes that rewrite ``while`` loops (XLA's ``WhileUtil``).

A ``while`` carries one value, its *state*, almost always a tuple. The body maps state
to state; the condition maps state to ``pred[]``. Loop passes change that state: add
elements (loop-invariant code motion passes hoisted values in) or drop them (dead
elements). Both need the same bookkeeping, done here:

* the body's and condition's parameter shapes change with the state shape;
* ``get-tuple-element`` indices inside them, and in the users of the loop, are renumbered;
* a new ``while`` instruction replaces the old one.
"""

from __future__ import annotations

from collections.abc import Sequence

from xla_teach.hlo.ir import HloComputation, HloInstruction
from xla_teach.hlo.shape import Shape
from xla_teach.passes.rewrite_utils import add_instruction, callers


def simple_loop(loop: HloInstruction) -> bool:
    """True for loops these passes can rewrite: tuple state whose elements are only read through
    ``get-tuple-element`` (in body, condition and outside), a ``tuple`` body root, and body and
    condition called by this loop alone."""
    if loop.opcode != "while" or not loop.shape.is_tuple:
        return False
    body, cond = loop.attrs["body"], loop.attrs["condition"]
    if body.root.opcode != "tuple" or body is cond:
        return False
    for comp in (body, cond):
        if len(callers(comp)) != 1 or comp.num_parameters != 1:
            return False
        if any(u.opcode != "get-tuple-element" for u in comp.parameter(0).users):
            return False
    return True


def state_elements(comp: HloComputation, state: HloInstruction) -> list[HloInstruction]:
    """The elements of tuple ``state`` as instructions of ``comp`` (operands of a ``tuple``
    instruction, else new ``get-tuple-element``\\ s)."""
    if state.opcode == "tuple":
        return list(state.operands)
    count = len(state.shape.tuple_shapes)
    return [add_instruction(comp, "get-tuple-element", [state], {"index": i}) for i in range(count)]


def used_indices(comp: HloComputation) -> set[int]:
    """Indices of the state elements ``comp`` reads (through ``get-tuple-element`` of its parameter)."""
    return {u.tuple_index for u in comp.parameter(0).users if u.opcode == "get-tuple-element"}


def rebuild_loop(loop: HloInstruction, new_state: Sequence[HloInstruction],
                 index_map: dict[int, int]) -> HloInstruction:
    """Replace ``loop`` by a ``while`` over ``new_state`` (same body and condition, which the
    caller has already rewritten to the new state shape). ``index_map`` maps old element
    indices to new ones; users of the old loop read their elements at the new indices (a
    user reading a dropped element is an error)."""
    comp = loop.parent
    assert comp is not None
    init = add_instruction(comp, "tuple", list(new_state))
    new_loop = HloInstruction("while", init.shape, [init], dict(loop.attrs))
    new_loop.copy_side_info_from(loop)
    comp.add_instruction(new_loop, "while")
    old_count = len(loop.shape.tuple_shapes)
    for user in list(loop.users):
        if user.opcode == "get-tuple-element":
            user.attrs["index"] = index_map[user.tuple_index]
            user.replace_operands(loop, new_loop)
    if loop.users or loop.is_root():
        elements = [add_instruction(comp, "get-tuple-element", [new_loop], {"index": index_map[i]})
                    for i in range(old_count)]
        loop.replace_all_uses_with(add_instruction(comp, "tuple", elements))
    comp.remove_instruction_and_unused_operands(loop)
    return new_loop


def set_state_shape(comp: HloComputation, shape: Shape) -> None:
    comp.parameter(0).shape = shape


def renumber_state_reads(comp: HloComputation, index_map: dict[int, int]) -> None:
    for user in comp.parameter(0).users:
        user.attrs["index"] = index_map[user.tuple_index]
