"""Common subexpression elimination (``cse``, XLA's ``HloCSE``).

Two instructions compute the same value when they have the same opcode, shape,
attributes and operands. CSE keeps the first one (in post-order) and makes the
users of the others read it instead. Walking operands before users means that once
``a1`` and ``a2`` are merged, ``exp(a1)`` and ``exp(a2)`` become identical too, so
one walk finds whole duplicated chains.

Details that matter:

* **constants** are compared by *value* (bitwise: ``-0.0`` and ``0.0`` differ, a NaN
  equals the same NaN), so equal literals written twice become one constant;
* **commutative** operands are canonicalised: ``add(x, y)`` and ``add(y, x)`` are the
  same expression (add, multiply, maximum, minimum, and, or, xor);
* **never merged**: parameters, side-effecting instructions (``rng``, a custom-call
  with ``custom_call_has_side_effect=true``, ...) and instructions calling computations
  that have one, and instructions with control dependencies (the ordering would be lost);
* called computations are compared by identity (two ``reduce``\\ s with the same
  ``to_apply`` can merge; XLA's CSE does the same).

Before::

    ENTRY main {
      x = f32[4] parameter(0)
      y = f32[4] parameter(1)
      a = f32[4] add(x, y)
      b = f32[4] add(y, x)
      ROOT m = f32[4] multiply(a, b)
    }

After::

    ENTRY main {
      x = f32[4] parameter(0)
      y = f32[4] parameter(1)
      a = f32[4] add(x, y)
      ROOT m = f32[4] multiply(a, a)
    }
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import numpy as np

from xla_teach.hlo.ir import HloComputation, HloInstruction, HloModule
from xla_teach.passes.pass_base import HloPass
from xla_teach.passes.rewrite_utils import COMMUTATIVE_OPCODES, has_side_effect_recursive


def _freeze(value: Any) -> Hashable:
    """A hashable stand-in for an attribute value (arrays by bytes, computations by identity)."""
    if isinstance(value, np.ndarray | np.generic):
        arr = np.asarray(value)
        return ("array", arr.dtype.str, arr.shape, arr.tobytes())
    if isinstance(value, list | tuple):
        return tuple(_freeze(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, _freeze(v)) for k, v in value.items()))
    if hasattr(value, "instructions") and hasattr(value, "root_instruction"):  # an HloComputation
        return ("computation", id(value))
    return value


def cse_key(instr: HloInstruction) -> Hashable:
    """Everything that decides the value ``instr`` computes (metadata and name excluded)."""
    operands = [op.unique_id for op in instr.operands]
    if instr.opcode in COMMUTATIVE_OPCODES:
        operands.sort()
    attrs = tuple(sorted((k, _freeze(v)) for k, v in instr.attrs.items()))
    return (instr.opcode, instr.shape.to_text(), tuple(operands), attrs,
            _freeze(instr.raw_attrs), instr.backend_config, instr.sharding)


def _may_merge(instr: HloInstruction, ordered: set[int]) -> bool:
    return (
        instr.opcode != "parameter"
        and not has_side_effect_recursive(instr)
        and not instr.control_predecessors
        and instr.unique_id not in ordered
    )


class CommonSubexpressionElimination(HloPass):
    """Merges instructions that compute the same value (see the module docstring)."""

    name = "cse"

    def run(self, module: HloModule) -> bool:
        changed = False
        for comp in module.computation_post_order():
            changed |= self.run_on_computation(comp)
        return changed

    def run_on_computation(self, comp: HloComputation) -> bool:
        ordered = {p.unique_id for i in comp.instructions for p in i.control_predecessors}
        seen: dict[Hashable, HloInstruction] = {}
        merged = 0
        for instr in comp.post_order():
            if instr.parent is not comp or not _may_merge(instr, ordered):
                continue
            key = cse_key(instr)
            first = seen.get(key)
            if first is None:
                seen[key] = instr
                continue
            self.note(f"{comp.name}: {instr.name} is the same as {first.name}")
            comp.replace_instruction(instr, first)
            merged += 1
        return merged > 0
