"""Give the ENTRY's intermediate arrays the default, row-major layout (``layout-assignment``).

A layout says how an array lies in memory; only the ENTRY's parameters and results are fixed by
the caller (``entry_computation_layout``). Every other layout in a module is the compiler's to
choose: XLA's ``LayoutAssignment`` clears them and assigns its own. The HLO that JAX writes does
carry layouts on intermediate values -- a ``transpose`` comes out as ``{0,1}``, the same bytes as
its operand, and the elementwise ops after it inherit that order until one of them, writing the
row-major result, does the actual transposing. Kept, such layouts put the transposition where
nothing else can happen: the weight gradient of a matrix product is a ``[512,784]`` product, then
a transposing update. With row-major layouts the transpose is a real one, the simplifier turns
``transpose(dot(a, b))`` into ``dot(b, a)``, and the update runs in place on the product.

This pass does the first step, conservatively: an array of the ENTRY computation gets the
default layout unless it is a parameter, the result, or read by an instruction whose meaning or
shape involves its layout (``bitcast``, ``tuple`` and control flow, ``custom-call``). A module
holding a ``bitcast`` anywhere is left as it is (a bitcast's meaning depends on layouts).

Before::

    ENTRY main {
      a = f32[3,2] parameter(0)
      t = f32[2,3]{0,1} transpose(a), dimensions={1,0}
      n = f32[2,3]{0,1} negate(t)
      ROOT r = f32[2,3] exponential(n)
    }

After::

    ENTRY main {
      a = f32[3,2] parameter(0)
      t = f32[2,3] transpose(a), dimensions={1,0}
      n = f32[2,3] negate(t)
      ROOT r = f32[2,3] exponential(n)
    }
"""

from __future__ import annotations

from xla_teach.hlo.ir import HloModule
from xla_teach.hlo.opcodes import CONTROL_FLOW_OPCODES
from xla_teach.hlo.shape import Layout, Shape
from xla_teach.passes.pass_base import HloPass

_LAYOUT_BOUND_USERS = CONTROL_FLOW_OPCODES | {"bitcast", "tuple", "custom-call", "fusion", "async-start"}


class LayoutAssignment(HloPass):
    name = "layout-assignment"

    def run(self, module: HloModule) -> bool:
        if any(i.opcode == "bitcast" for i in module.instructions()):
            self.note("left as it is: the module holds a bitcast, whose meaning depends on the layouts")
            return False
        entry = module.entry
        changed = False
        for instr in entry.instructions:
            shape = instr.shape
            if (not shape.is_array or shape.rank < 2 or shape.has_default_layout() or instr is entry.root
                    or instr.opcode in ("parameter", "custom-call")
                    or any(u.opcode in _LAYOUT_BOUND_USERS or not u.shape.is_array for u in instr.users)):
                continue
            instr.shape = Shape(shape.element_type, shape.dimensions, Layout.default(shape.rank), (),
                                shape.dynamic_dimensions)
            self.note(f"{instr.name}: row-major")
            changed = True
        return changed
