"""Small helpers the passes share: making instructions and constants, reading constants,
side effects, permutations, callers. Replacing an instruction is the computation's own
``comp.replace_instruction(old, new)`` (XLA's ``ReplaceInstruction``: it also removes the
operands that became unused and keeps the layout)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from xla_teach.hlo.ir import HloComputation, HloInstruction
from xla_teach.hlo.opcodes import COMMUTATIVE_OPCODES  # noqa: F401 - CSE and the rules look for it here
from xla_teach.hlo.shape import Shape
from xla_teach.hlo.shape_inference import infer_shape
from xla_teach.hlo.types import PrimitiveType

# Elementwise ops that a rewrite does not move past a broadcast or a reshape: a copy (moving it
# gains nothing), bitcast-convert (a change of element width changes the shape) and rng (it would
# draw a different number of values).
NOT_MOVED_ACROSS_REARRANGES = frozenset({"copy", "bitcast-convert", "rng"})


def add_instruction(
    comp: HloComputation,
    opcode: str,
    operands: Sequence[HloInstruction],
    attrs: dict[str, Any] | None = None,
    *,
    shape: Shape | None = None,
    result_dims: Sequence[int] | None = None,
    result_element_type: PrimitiveType | None = None,
    name: str | None = None,
) -> HloInstruction:
    """Create ``opcode(operands)`` in ``comp``; the shape is inferred unless given.

    ``result_dims`` (broadcast, reshape) and ``result_element_type`` (convert) supply the
    parts of the result that shape inference cannot know.
    """
    if shape is None:
        shape = infer_shape(opcode, [o.shape for o in operands], attrs or {}, result_dims=result_dims,
                            result_element_type=result_element_type)
    instr = HloInstruction(opcode, shape, operands, attrs or {})
    return comp.add_instruction(instr, name if name is not None else opcode)


def add_constant(comp: HloComputation, value: np.ndarray | float | int | bool, etype: PrimitiveType,
                 name: str = "constant") -> HloInstruction:
    """A ``constant`` instruction holding ``value`` (converted to ``etype``)."""
    literal = np.asarray(value, dtype=etype.dtype)
    shape = Shape.array(etype, literal.shape)
    return comp.add_instruction(HloInstruction("constant", shape, attrs={"literal": literal}), name)


def broadcast_scalar(comp: HloComputation, scalar: HloInstruction, dims: Sequence[int]) -> HloInstruction:
    """``broadcast(scalar), dimensions={}`` to ``dims`` (just ``scalar`` when ``dims`` is empty)."""
    if not dims:
        return scalar
    return add_instruction(comp, "broadcast", [scalar], {"dimensions": ()}, result_dims=dims)


def uniform_constant_value(instr: HloInstruction) -> np.generic | None:
    """The single value of a constant whose elements are all equal, or of a broadcast of a
    scalar constant; None for anything else.

    Equality is bitwise, so ``-0.0`` and ``+0.0`` are different values and NaN equals itself.
    """
    if instr.opcode == "broadcast" and instr.operand(0).shape.rank == 0:
        instr = instr.operand(0)
    if instr.opcode != "constant" or "literal" not in instr.attrs or not instr.shape.is_array:
        return None
    literal = np.asarray(instr.literal)
    if literal.size == 0:
        return None
    flat = literal.reshape(-1)
    if flat.tobytes() != flat[:1].tobytes() * flat.size:
        return None
    return flat[0]


def is_constant_equal(instr: HloInstruction, value: float) -> bool:
    """True if every element of ``instr`` is exactly ``value`` (``0.0`` means +0.0 only)."""
    v = uniform_constant_value(instr)
    if v is None:
        return False
    want = np.asarray(value, dtype=instr.shape.element_type.dtype)
    return bool(np.asarray(v).tobytes() == want.tobytes())


def has_side_effect_recursive(instr: HloInstruction, _seen: set[int] | None = None) -> bool:
    """True if ``instr`` has a side effect or calls (transitively) a computation with one:
    two ``while`` loops whose bodies draw random numbers are not the same value."""
    if instr.has_side_effect() or instr.opcode in ("rng", "rng-bit-generator"):
        return True
    seen = _seen if _seen is not None else set()
    for comp in instr.called_computations():
        if id(comp) not in seen:
            seen.add(id(comp))
            if any(has_side_effect_recursive(i, seen) for i in comp.instructions):
                return True
    return False


def inverse_permutation(perm: Sequence[int]) -> tuple[int, ...]:
    inv = [0] * len(perm)
    for i, p in enumerate(perm):
        inv[p] = i
    return tuple(inv)


def is_identity_permutation(perm: Sequence[int]) -> bool:
    return tuple(perm) == tuple(range(len(perm)))


def transposed(comp: HloComputation, instr: HloInstruction, order: Sequence[int]) -> HloInstruction:
    """``instr`` with its dimensions in ``order`` (a ``transpose`` added to ``comp``), or ``instr``
    itself when ``order`` is the identity."""
    if is_identity_permutation(order):
        return instr
    return add_instruction(comp, "transpose", [instr], {"dimensions": tuple(order)})


def add_callee(caller: HloComputation, callee: HloComputation) -> HloComputation:
    """Adopt ``callee`` into ``caller``'s module, placed just before ``caller``: the module keeps
    its computations callee-before-caller."""
    module = caller.parent
    assert module is not None, f"{caller.name} is in no module"
    module.add_computation(callee)
    module.computations.remove(callee)
    module.computations.insert(module.computations.index(caller), callee)
    return callee


def callers(comp: HloComputation) -> list[HloInstruction]:
    """Instructions (anywhere in the module) that call ``comp``."""
    module = comp.parent
    if module is None:
        return []
    return [i for i in module.instructions() if any(c is comp for c in i.called_computations())]
