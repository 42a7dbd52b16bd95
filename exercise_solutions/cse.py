"""Exercise `cse`: write common subexpression elimination as an HloPass.

Two instructions compute the same value when they have the same opcode, the same
shape, the same operands and the same attributes. CSE keeps one of them and makes the
users of the other read it instead (``replace_all_uses_with``), then removes the copy.

Your pass must:

1. merge instructions that compute the same value, in every computation. Walk operands
   before users (``comp.post_order()``): once ``a1`` and ``a2`` are merged, ``exp(a1)``
   and ``exp(a2)`` have the same operand and merge too -- one walk merges whole chains;
2. compare **constants by value** (``instr.literal`` is a NumPy array: compare dtype,
   shape and bytes), so ``constant(2)`` written twice becomes one constant;
3. treat the operands of **commutative** ops (add, multiply, maximum, minimum, and, or,
   xor) as unordered: ``add(x, y)`` and ``add(y, x)`` are the same;
4. compare **every attribute** (``instr.attrs``: ``dimensions``, ``direction``,
   ``slice``...): ``broadcast(v), dimensions={0}`` and ``dimensions={1}`` differ;
5. never merge parameters (two inputs are not the same input just because their shapes
   are) or instructions with side effects (``instr.has_side_effect()``);
6. return True if it changed anything.

Before::

    a = f32[4] add(x, y)
    b = f32[4] add(y, x)
    ROOT m = f32[4] multiply(a, b)

After::

    a = f32[4] add(x, y)
    ROOT m = f32[4] multiply(a, a)

A hint for the key: attribute values are numbers, strings, tuples, lists, NumPy arrays
and computations (for ``to_apply``); turn each into something hashable (arrays by
``(dtype.str, shape, tobytes())``, lists to tuples, computations by ``id``). The shape's
text ``instr.shape.to_text()`` is hashable.

Grade it:  xla-teach grade cse path/to/cse.py
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import numpy as np

from xla_teach.hlo.ir import HloComputation, HloInstruction, HloModule
from xla_teach.passes.pass_base import HloPass

COMMUTATIVE = {"add", "multiply", "maximum", "minimum", "and", "or", "xor"}


# BEGIN SOLUTION: a hashable key for "the value this instruction computes"
def _hashable(value: Any) -> Hashable:
    if isinstance(value, np.ndarray | np.generic):
        array = np.asarray(value)
        return ("array", array.dtype.str, array.shape, array.tobytes())
    if isinstance(value, list | tuple):
        return tuple(_hashable(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, _hashable(v)) for k, v in value.items()))
    if isinstance(value, HloComputation):
        return ("computation", id(value))
    return value


def _key(instr: HloInstruction) -> Hashable:
    operands = [id(op) for op in instr.operands]
    if instr.opcode in COMMUTATIVE:
        operands.sort()
    attrs = tuple(sorted((name, _hashable(v)) for name, v in instr.attrs.items()))
    return (instr.opcode, instr.shape.to_text(), tuple(operands), attrs)
# END SOLUTION


class CommonSubexpressionElimination(HloPass):
    name = "cse"

    def run(self, module: HloModule) -> bool:
        # BEGIN SOLUTION: walk each computation operands-first and merge instructions with the same key
        changed = False
        for comp in module.computations:
            first: dict[Hashable, HloInstruction] = {}
            for instr in comp.post_order():
                if instr.opcode == "parameter" or instr.has_side_effect() or instr.control_predecessors:
                    continue
                key = _key(instr)
                if key not in first:
                    first[key] = instr
                    continue
                instr.replace_all_uses_with(first[key])
                comp.remove_instruction(instr)
                changed = True
        return changed
        # END SOLUTION
