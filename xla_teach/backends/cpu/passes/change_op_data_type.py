"""Compute half-precision and mixed-type products in f32 (``change-op-data-type``).

The CPU has no fast f16/bf16 arithmetic, and a ``dot`` whose operand types differ fits no
library call: such dots fell back to one inner product per output element, 30-40x slower than
the same product in f32.  Like XLA's CPU compiler (``ChangeOpDataType`` for f16 dots,
``FloatNormalization`` for bf16), this pass rewrites every ``dot`` and ``convolution`` with a
floating-point result that does not already work in its accumulation type: the operands are
converted to the accumulation type -- f32, or f64 when the result or an operand is f64 -- the
product is computed there, and the result is converted back.

Nothing changes numerically: the operational semantics already define these products as
"widen exactly, accumulate in f32, round once at the end" (``hlo/evaluator/contractions.py``),
which is what the rewritten HLO spells out.  The converts are ordinary elementwise ops, so
fusion merges them into the operands' producers and the result's consumers.

Before::

    ENTRY main {
      a = f16[2,3] parameter(0)
      b = f16[3,4] parameter(1)
      ROOT d = f16[2,4] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
    }

After::

    ENTRY main {
      a = f16[2,3] parameter(0)
      convert = f32[2,3] convert(a)
      b = f16[3,4] parameter(1)
      convert.1 = f32[3,4] convert(b)
      d.1 = f32[2,4] dot(convert, convert.1), lhs_contracting_dims={1}, rhs_contracting_dims={0}
      ROOT d = f16[2,4] convert(d.1)
    }
"""

from __future__ import annotations

from xla_teach.hlo.ir import HloInstruction, HloModule
from xla_teach.hlo.types import PrimitiveType
from xla_teach.passes.pass_base import HloPass
from xla_teach.passes.rewrite_utils import add_instruction

F32, F64 = PrimitiveType.F32, PrimitiveType.F64


def accumulation_type(instr: HloInstruction) -> PrimitiveType:
    """f64 if the result or an operand is f64, else f32 (for a float result)."""
    types = [instr.shape.element_type] + [o.shape.element_type for o in instr.operands]
    return F64 if F64 in types else F32


class ChangeOpDataType(HloPass):
    name = "change-op-data-type"

    def run(self, module: HloModule) -> bool:
        changed = False
        for comp in module.computations:  # runs before fusion: no fused computations yet
            for instr in list(comp.instructions):
                if instr.opcode not in ("dot", "convolution") or not instr.shape.element_type.is_float:
                    continue
                wide = accumulation_type(instr)
                types = {instr.shape.element_type} | {o.shape.element_type for o in instr.operands}
                if types == {wide}:
                    continue
                self._widen(instr, wide)
                changed = True
        return changed

    def _widen(self, instr: HloInstruction, wide: PrimitiveType) -> None:
        comp = instr.parent
        assert comp is not None
        operands = [o if o.shape.element_type is wide else
                    add_instruction(comp, "convert", [o], result_element_type=wide) for o in instr.operands]
        product = instr.clone_with_new_operands(instr.shape.with_element_type(wide), operands)
        product = comp.add_instruction(product, instr.name)
        result = product
        if instr.shape.element_type is not wide:
            result = add_instruction(comp, "convert", [product], result_element_type=instr.shape.element_type)
        for new in (*operands, product, result):
            if new not in instr.operands:
                new.metadata = instr.metadata
        self.note(f"{instr.name}: {instr.shape.element_type.name.lower()} "
                  f"{'/'.join(o.shape.element_type.name.lower() for o in instr.operands)} -> computed in "
                  f"{wide.name.lower()}")
        name = instr.name
        comp.replace_instruction(instr, result).name = name
