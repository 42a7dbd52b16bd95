"""Exercise `algsimp_rule`: add a rule to the algebraic simplifier.

xla_teach's simplifier (``algsimp``, xla_teach/passes/simplifiers/algebraic_simplifier.py)
is a table of small rules. A rule looks at one instruction and returns either ``None``
("does not apply") or the instruction that should replace it. The simplifier does the
rest: it redirects the users, removes what became unused, and repeats until no rule
fires. The grader runs the simplifier with *your* ``rewrite`` as its only rule, called
on every elementwise instruction.

Write ``rewrite(instr)`` so that it does both of these:

1. ``x * 1 -> x``: a ``multiply`` where one operand is all ones -- a scalar
   ``constant(1)``, a ``broadcast`` of a scalar ``constant(1)``, or an array constant
   full of ones, on either side, for any element type -- is replaced by the other operand.
   Look-alikes stay: ``x * 2``, ``x * {1, 2, 1, 1}``, ``x * y``.
2. ``i - i -> 0`` for integers: a ``subtract`` whose two operands are the *same
   instruction* is replaced by zeros of its shape -- but only for integer types. For
   floats ``x - x`` is not always 0: ``inf - inf`` and ``NaN - NaN`` are NaN, so the rule
   must not fire.

Return ``None`` for everything else, and create no instruction when you return ``None``.

Useful: ``instr.opcode``, ``instr.operands``, ``instr.shape`` (``.element_type``,
``.dimensions``), ``instr.parent`` (the computation, for adding instructions),
``instr.literal`` (a constant's NumPy array), ``PrimitiveType.is_integral``. The
simplifier's own helpers (xla_teach/passes/rewrite_utils.py) are yours too:
``uniform_constant_value(instr)`` (the value of a constant, or of a broadcast of a scalar
constant, whose elements are all equal, else None), ``add_constant(comp, value, etype)``
and ``broadcast_scalar(comp, scalar, dims)``.

Before::

    one = f32[] constant(1)
    ones = f32[4] broadcast(one), dimensions={}
    ROOT y = f32[4] multiply(x, ones)

After::

    ROOT x = f32[4] parameter(0)

Grade it:  xla-teach grade algsimp_rule path/to/algsimp_rule.py
"""

from __future__ import annotations

from xla_teach.hlo.ir import HloInstruction
from xla_teach.passes.rewrite_utils import add_constant, broadcast_scalar, uniform_constant_value


# BEGIN SOLUTION: helpers you may want: "is this operand all ones?", "zeros shaped like instr"
def _is_all_ones(instr: HloInstruction) -> bool:
    value = uniform_constant_value(instr)
    return value is not None and value == 1


def _zeros_like(instr: HloInstruction) -> HloInstruction:
    comp = instr.parent
    assert comp is not None
    zero = add_constant(comp, 0, instr.shape.element_type)
    return broadcast_scalar(comp, zero, instr.shape.dimensions)
# END SOLUTION


def rewrite(instr: HloInstruction) -> HloInstruction | None:
    """The replacement of ``instr``, or None when neither rule applies."""
    # BEGIN SOLUTION: match multiply-by-ones and integer self-subtraction; return the replacement or None
    if instr.opcode == "multiply":
        lhs, rhs = instr.operands
        if _is_all_ones(rhs):
            return lhs
        if _is_all_ones(lhs):
            return rhs
        return None
    if instr.opcode == "subtract":
        lhs, rhs = instr.operands
        if lhs is rhs and instr.shape.element_type.is_integral:
            return _zeros_like(instr)
    return None
    # END SOLUTION
