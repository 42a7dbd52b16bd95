"""Rewrite ``topk`` as a stable ``sort`` with an index ``iota``, then ``slice`` (``topk-decomposer``).

The GPU has no ``topk`` kernel, and the CPU's (``backends/cpu/kernels/topk.py``) takes only
row-major operands and k <= 128: the CPU pipeline passes ``should_decompose`` to leave it the
rest. As XLA's ``TopkDecomposer`` does, this pass sorts every row of the operand together with
its positions -- largest first for ``largest=true``, smallest first otherwise -- and keeps the
first ``k`` columns of both.
The sort is **stable**, so equal keys keep their input order: among ties the lower index
comes first, which is what the interpreter's ``topk`` defines. Floats compare with
``type=TOTALORDER`` (``-NaN < -inf < ... < -0 < +0 < ... < +inf < +NaN``), as ``topk``
orders them; integers and predicates with their ordinary comparison.

Before::

    ENTRY main {
      x = f32[2,5] parameter(0)
      ROOT t = (f32[2,2], s32[2,2]) topk(x), k=2, largest=true
    }

After::

    topk_compare_gt_f32 {
      lhs = f32[] parameter(0)
      rhs = f32[] parameter(1)
      lhs_index = s32[] parameter(2)
      rhs_index = s32[] parameter(3)
      ROOT gt = pred[] compare(lhs, rhs), direction=GT, type=TOTALORDER
    }

    ENTRY main {
      x = f32[2,5] parameter(0)
      iota = s32[2,5] iota(), iota_dimension=1
      sort = (f32[2,5], s32[2,5]) sort(x, iota), dimensions={1}, is_stable=true, to_apply=topk_compare_gt_f32
      get-tuple-element = f32[2,5] get-tuple-element(sort), index=0
      slice = f32[2,2] slice(get-tuple-element), slice={[0:2], [0:2]}
      get-tuple-element.1 = s32[2,5] get-tuple-element(sort), index=1
      slice.1 = s32[2,2] slice(get-tuple-element.1), slice={[0:2], [0:2]}
      ROOT t = (f32[2,2], s32[2,2]) tuple(slice, slice.1)
    }

One comparator computation is made per element type and direction and shared by every
``topk`` of the module that needs it.
"""

from __future__ import annotations

from collections.abc import Callable

from xla_teach.hlo.attributes import SliceDim
from xla_teach.hlo.ir import HloComputation, HloInstruction, HloModule
from xla_teach.hlo.shape import Shape
from xla_teach.hlo.types import PrimitiveType
from xla_teach.passes.pass_base import HloPass
from xla_teach.passes.rewrite_utils import add_instruction


class TopkDecomposer(HloPass):
    """``should_decompose(topk)`` (XLA's argument of the same name) leaves out the ``topk``
    instructions a backend has a kernel for; by default every one is decomposed."""

    name = "topk-decomposer"
    is_optimization = False  # code generation needs it where no kernel takes the topk

    def __init__(self, should_decompose: Callable[[HloInstruction], bool] | None = None) -> None:
        super().__init__()
        self.should_decompose = should_decompose

    def run(self, module: HloModule) -> bool:
        comparators: dict[tuple[PrimitiveType, bool], HloComputation] = {}
        changed = False
        for comp in list(module.computations):
            for instr in list(comp.instructions):
                if instr.opcode == "topk" and self.should_decompose is not None and not self.should_decompose(instr):
                    self.note(f"{instr.name}: kept; the backend's top-k kernel computes it")
                elif instr.opcode == "topk":
                    self._decompose(module, instr, comparators)
                    changed = True
        return changed

    def _decompose(self, module: HloModule, topk: HloInstruction,
                   comparators: dict[tuple[PrimitiveType, bool], HloComputation]) -> None:
        comp = topk.parent
        assert comp is not None
        operand = topk.operand(0)
        etype = operand.shape.element_type
        largest = bool(topk.attr("largest"))
        k = int(topk.attr("k"))
        last = operand.shape.rank - 1
        key = (etype, largest)
        if key not in comparators:
            comparators[key] = _add_comparator(module, etype, largest)
        indices_shape = Shape.array(PrimitiveType.S32, operand.shape.dimensions)
        iota = add_instruction(comp, "iota", [], {"iota_dimension": last}, shape=indices_shape)
        sort = add_instruction(comp, "sort", [operand, iota],
                               {"dimensions": (last,), "is_stable": True, "to_apply": comparators[key]})
        window = tuple(SliceDim(0, size) for size in operand.shape.dimensions[:-1]) + (SliceDim(0, k),)
        parts = []
        for index in range(2):
            sorted_part = add_instruction(comp, "get-tuple-element", [sort], {"index": index})
            parts.append(add_instruction(comp, "slice", [sorted_part], {"slice": window}))
        result = add_instruction(comp, "tuple", parts)
        for new in (iota, sort, *parts, result):
            new.metadata = topk.metadata
        self.note(f"{topk.name}: topk k={k} -> stable sort of {operand.shape.dimensions[last]} "
                  f"{'largest' if largest else 'smallest'} first, then slice [0:{k}]")
        name = topk.name
        comp.replace_instruction(topk, result).name = name  # users' text reads as before


def _add_comparator(module: HloModule, etype: PrimitiveType, largest: bool) -> HloComputation:
    """``compare(a, b)`` GT (largest first) or LT; TOTALORDER for floats. Parameters 2 and 3
    are the indices, which the comparator ignores: the stable sort breaks ties by position."""
    direction = "GT" if largest else "LT"
    comparator = HloComputation(f"topk_compare_{direction.lower()}_{etype.name.lower()}")
    scalar, index = Shape.scalar(etype), Shape.scalar(PrimitiveType.S32)
    lhs = comparator.add_parameter(scalar, "lhs")
    rhs = comparator.add_parameter(scalar, "rhs")
    comparator.add_parameter(index, "lhs_index")
    comparator.add_parameter(index, "rhs_index")
    attrs: dict[str, object] = {"direction": direction}
    if etype.is_float:
        attrs["type"] = "TOTALORDER"
    comparator.root_instruction = add_instruction(comparator, "compare", [lhs, rhs], attrs, name=direction.lower())
    module.add_computation(comparator)
    return comparator
