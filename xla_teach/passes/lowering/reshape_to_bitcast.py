"""Turn reshapes that move no data into bitcasts (``reshape-to-bitcast``).

With row-major layouts on both sides, a ``reshape`` keeps every element at the
same byte offset: it only renames the shape. XLA marks such reshapes as
``bitcast`` after layout assignment so no kernel copies the data; buffer
assignment then lets the result share its operand's buffer.

Before (layouts written out: ``{2,1,0}`` and ``{1,0}`` are row-major)::

    ENTRY main {
      x = f32[2,3,20]{2,1,0} parameter(0)
      r = f32[6,20]{1,0} reshape(x)
      ROOT n = f32[6,20]{1,0} negate(r)
    }

After (same name, same shape, no kernel)::

    ENTRY main {
      x = f32[2,3,20]{2,1,0} parameter(0)
      r = f32[6,20]{1,0} bitcast(x)
      ROOT n = f32[6,20]{1,0} negate(r)
    }

A reshape with a column-major side, say ``f32[6,20]{0,1}``, moves elements and stays a
``reshape``.

Reshapes inside fused computations are left alone: there they are index
arithmetic already.
"""

from __future__ import annotations

from xla_teach.hlo.ir import HloInstruction, HloModule
from xla_teach.passes.fusion.instruction_fusion import fusible_computations
from xla_teach.passes.pass_base import HloPass


class ReshapeToBitcast(HloPass):
    name = "reshape-to-bitcast"
    is_optimization = False

    def run(self, module: HloModule) -> bool:
        changed = False
        for comp in fusible_computations(module):
            for instr in list(comp.instructions):
                if instr.opcode != "reshape":
                    continue
                if not (instr.shape.has_default_layout() and instr.operand(0).shape.has_default_layout()):
                    continue
                name = instr.name
                bitcast = HloInstruction("bitcast", instr.shape, [instr.operand(0)])
                bitcast.copy_side_info_from(instr)
                index = comp.instructions.index(instr)
                comp.replace_instruction(instr, bitcast)
                bitcast.name = name  # the reshape is gone; the bitcast takes over its name
                comp.instructions.remove(bitcast)
                comp.instructions.insert(index, bitcast)
                changed = True
        return changed
