"""Turn XLA's ``TopK`` custom call back into a ``topk`` instruction (``topk-custom-call-rewriter``).

XLA's CPU compiler recognises ``lax.top_k`` and calls its ``TopK`` runtime routine through a
custom call: the k largest elements of every row, largest first, with their indices. Its
optimized HLO, which people bring to replay, says so. The custom call means exactly
``topk(x), k=K, largest=true`` (its comparator is XLA's total order, greater first), which the
backends know how to compute -- the CPU with its top-k kernel, the others after the
``topk-decomposer`` -- instead of calling back into Python.

Before::

    HloModule m

    gt {
      lhs = f32[] parameter(0)
      rhs = f32[] parameter(1)
      lhs_index = s32[] parameter(2)
      rhs_index = s32[] parameter(3)
      ROOT gt = pred[] compare(lhs, rhs), direction=GT, type=TOTALORDER
    }

    ENTRY main {
      x = f32[4,100] parameter(0)
      ROOT top = (f32[4,10], s32[4,10]) custom-call(x), custom_call_target="TopK", called_computations={gt}
    }

After::

    HloModule m

    gt {
      lhs = f32[] parameter(0)
      rhs = f32[] parameter(1)
      lhs_index = s32[] parameter(2)
      rhs_index = s32[] parameter(3)
      ROOT gt = pred[] compare(lhs, rhs), direction=GT, type=TOTALORDER
    }

    ENTRY main {
      x = f32[4,100] parameter(0)
      ROOT top = (f32[4,10], s32[4,10]) topk(x), k=10, largest=true
    }

Only the form XLA writes is rewritten: one array operand, a result of (values, s32 indices)
whose rows have k elements.
"""

from __future__ import annotations

from xla_teach.hlo.ir import HloInstruction, HloModule
from xla_teach.hlo.types import PrimitiveType
from xla_teach.passes.pass_base import HloPass
from xla_teach.passes.rewrite_utils import add_instruction


def is_xla_topk(instr: HloInstruction) -> bool:
    """Is ``instr`` XLA's ``TopK`` custom call, in the form XLA writes it?"""
    if instr.opcode != "custom-call" or instr.attr("custom_call_target") != "TopK" or instr.operand_count != 1:
        return False
    shape, operand = instr.shape, instr.operand(0).shape
    if not shape.is_tuple or len(shape.tuple_shapes) != 2 or operand.is_tuple or operand.rank == 0:
        return False
    values, indices = shape.tuple_shapes
    return (values.element_type == operand.element_type and indices.element_type == PrimitiveType.S32
            and values.dimensions[:-1] == operand.dimensions[:-1] == indices.dimensions[:-1]
            and values.dimensions[-1] == indices.dimensions[-1] <= operand.dimensions[-1])


class TopkCustomCallRewriter(HloPass):
    name = "topk-custom-call-rewriter"
    is_optimization = False  # the custom call would otherwise run in Python on the host

    def run(self, module: HloModule) -> bool:
        changed = False
        for comp in list(module.computations):
            for instr in list(comp.instructions):
                if not is_xla_topk(instr):
                    continue
                k = instr.shape.tuple_shapes[0].dimensions[-1]
                topk = add_instruction(comp, "topk", [instr.operand(0)], {"k": k, "largest": True})
                topk.metadata = instr.metadata
                self.note(f"{instr.name}: custom-call TopK -> topk k={k}, largest=true")
                name = instr.name
                comp.replace_instruction(instr, topk).name = name
                changed = True
        return changed
