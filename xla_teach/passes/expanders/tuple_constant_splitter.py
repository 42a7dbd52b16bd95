"""Rewrite a tuple-shaped ``constant`` as a ``tuple`` of array constants (``tuple-constant-splitter``).

HLO text may hold a constant whose shape is a tuple, ``(f32[2], s32[]) constant(( {1, 2}, 3 ))``.
The optimizer's rewrites read *array* constants: ``algsimp`` looks for ``multiply(x, 1)``,
constant folding evaluates ops whose operands are constants, fusion copies small constants
into kernels. None of them looks inside a tuple literal. This pass -- xla_teach's own, XLA
has no pass of this name -- replaces each tuple constant by one constant per element,
gathered by a ``tuple`` instruction, recursing into nested tuples; ``tuple-simplifier`` then
turns ``get-tuple-element(tuple(a, b)), index=0`` into ``a``, so users read the element
constants directly. The ``tuple`` keeps the constant's name, so its users read as before.
A constant printed as ``{...}`` (elided) gives elided element constants. (Buffer assignment
and the runtimes would also place an unsplit tuple constant, one buffer per array leaf.)

Before::

    ENTRY main {
      x = f32[2] parameter(0)
      c = (f32[2], (s32[], pred[])) constant(( {1, 2}, ( 3, true ) ))
      gte = f32[2] get-tuple-element(c), index=0
      ROOT add = f32[2] add(x, gte)
    }

After::

    ENTRY main {
      x = f32[2] parameter(0)
      constant = f32[2] constant({1, 2})
      constant.1 = s32[] constant(3)
      constant.2 = pred[] constant(true)
      tuple = (s32[], pred[]) tuple(constant.1, constant.2)
      c = (f32[2], (s32[], pred[])) tuple(constant, tuple)
      gte = f32[2] get-tuple-element(c), index=0
      ROOT add = f32[2] add(x, gte)
    }
"""

from __future__ import annotations

from xla_teach.hlo.ir import HloComputation, HloInstruction
from xla_teach.hlo.literal import LiteralValue
from xla_teach.hlo.shape import Shape
from xla_teach.passes.pass_base import HloPass
from xla_teach.passes.rewrite_utils import add_instruction


class TupleConstantSplitter(HloPass):
    name = "tuple-constant-splitter"
    is_optimization = False  # runs even at optimization level 0, like the other expanders

    def run_on_computation(self, comp: HloComputation) -> bool:
        changed = False
        for instr in list(comp.instructions):
            if instr.opcode == "constant" and instr.shape.is_tuple:
                self._split(instr)
                changed = True
        return changed

    def _split(self, constant: HloInstruction) -> None:
        comp = constant.parent
        assert comp is not None
        elided = bool(constant.attrs.get("literal_elided"))
        made: list[HloInstruction] = []
        result = _build(comp, constant.literal, constant.shape, elided, made)
        for new in made:
            new.metadata = constant.metadata
        leaves = sum(1 for new in made if new.opcode == "constant")
        self.note(f"{constant.name}: tuple constant {constant.shape.to_text(print_layout=False)} -> "
                  f"{leaves} array constant(s) in {len(made) - leaves} tuple(s)")
        name = constant.name
        comp.replace_instruction(constant, result).name = name  # users' text reads as before


def _build(comp: HloComputation, value: LiteralValue, shape: Shape, elided: bool,
           made: list[HloInstruction]) -> HloInstruction:
    """``constant`` for an array element, ``tuple(...)`` of the elements for a tuple (post-order)."""
    if not shape.is_tuple:
        attrs: dict[str, object] = {"literal": value}
        if elided:
            attrs["literal_elided"] = True
        leaf = comp.add_instruction(HloInstruction("constant", shape, attrs=attrs), "constant")
        made.append(leaf)
        return leaf
    assert isinstance(value, tuple)
    elements = [_build(comp, v, s, elided, made) for v, s in zip(value, shape.tuple_shapes, strict=True)]
    tuple_instr = add_instruction(comp, "tuple", elements, shape=shape)
    made.append(tuple_instr)
    return tuple_instr
