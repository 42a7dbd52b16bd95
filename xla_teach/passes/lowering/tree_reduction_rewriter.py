"""Split huge reductions in two so threads can share them (``tree_reduction_rewriter``).

A reduction with a few outputs but millions of inputs per output runs on one
core: its outer (parallel) loop has only a few iterations. Like XLA's pass of
the same name, this rewrites it as a reduction to ``P`` partial results followed
by a small reduction of those, which lets the first kernel run its ``P`` rows on
all cores (the input is padded with the init value when ``P`` does not divide it).

With the defaults, a reduction is rewritten when it has at most 16 outputs and at least
65536 (2^16) inputs per output, and ``P`` is 64. The example below runs with those
defaults, so its input is a ``f32[256,256]`` parameter: a constant that large would not
be tiny to print.

Before (one output, 65536 inputs: a single core adds them all)::

    add {
      a = f32[] parameter(0)
      b = f32[] parameter(1)
      ROOT s = f32[] add(a, b)
    }

    ENTRY main {
      x = f32[256,256] parameter(0)
      zero = f32[] constant(0)
      ROOT r = f32[] reduce(x, zero), dimensions={0,1}, to_apply=add
    }

After (64 partial sums of 1024 elements each, then one sum of the 64)::

    add {
      a = f32[] parameter(0)
      b = f32[] parameter(1)
      ROOT s = f32[] add(a, b)
    }

    ENTRY main {
      x = f32[256,256] parameter(0)
      reshape = f32[65536] reshape(x)
      reshape.1 = f32[64,1024] reshape(reshape)
      zero = f32[] constant(0)
      reduce = f32[64] reduce(reshape.1, zero), dimensions={1}, to_apply=add
      reduce.1 = f32[] reduce(reduce, zero), dimensions={0}, to_apply=add
      ROOT reshape.2 = f32[] reshape(reduce.1)
    }

The first reshape flattens the reduced dimensions (and the kept ones, if any, into one
leading dimension), the second splits them into ``P`` rows, and the last one restores
the output's shape. None of them copies data in the end: fusion puts the first two into
the partial-sum kernel as index arithmetic, and the last one (a no-op here) becomes a
``bitcast``. When ``P`` does not divide the count, a ``pad`` with the init value comes
between the first two reshapes.

Only reductions of minor-most dimensions (row-major layouts) are rewritten for speed.

**Narrow floats.** The same rewrite also serves accuracy. An ``f16``/``bf16`` reducer rounds
its running sum to 8 (bf16) or 11 (f16) significant bits after every step, so a long
sequential sum stops growing: adding 0.3 to a bf16 128 gives 128 again, and 1001 additions
of 0.3 end at 128 instead of 300. XLA's CPU compiler splits such reductions into windows of
32 and reduces the partial results again, a tree with fan-in 32; so does this pass, for any
``f16``/``bf16`` reduction with more than 32 inputs per output. The reduced dimensions are
first transposed to the minor end when they are not there already, and the outer reduction
is split again until it, too, has at most 32 inputs::

    x = bf16[1001] parameter(0)                        reshape = bf16[1024] pad(x, zero), padding=0_23
    r = bf16[] reduce(x, zero), dimensions={0}   ->    split = bf16[32,32] reshape(reshape)
                                                       partial = bf16[32] reduce(split, zero), dimensions={1}
                                                       r = bf16[] reduce(partial, zero), dimensions={0}
"""

from __future__ import annotations

import math

from xla_teach.hlo.attributes import PaddingDim
from xla_teach.hlo.ir import HloInstruction, HloModule
from xla_teach.hlo.shape import Shape
from xla_teach.hlo.types import PrimitiveType
from xla_teach.passes.fusion.instruction_fusion import fusible_computations
from xla_teach.passes.pass_base import HloPass

MIN_REDUCED_ELEMENTS = 1 << 16  # below this one core is fast enough
TARGET_PARTS = 64
MAX_KEPT_ELEMENTS = 16  # with more outputs than this the outer loop already parallelizes
NARROW_WINDOW = 32  # f16/bf16 reductions are summed in windows of this many elements (as XLA's CPU)
NARROW_FLOATS = (PrimitiveType.F16, PrimitiveType.BF16)


class TreeReductionRewriter(HloPass):
    name = "tree_reduction_rewriter"

    def __init__(self, parts: int = TARGET_PARTS, max_kept: int = MAX_KEPT_ELEMENTS,
                 min_reduced: int = MIN_REDUCED_ELEMENTS) -> None:
        super().__init__()
        self.parts, self.max_kept, self.min_reduced = parts, max_kept, min_reduced

    def run(self, module: HloModule) -> bool:
        changed = False
        for comp in fusible_computations(module):
            work = list(comp.instructions)
            while work:
                instr = work.pop()
                plan = self._plan(instr)
                if plan is not None:
                    total = self._rewrite(instr, *plan)
                    if plan[2]:  # a narrow-float sum of the partials may need splitting again
                        work.append(total)
                    changed = True
        return changed

    def _plan(self, instr: HloInstruction) -> tuple[int, int, bool] | None:
        """(parts, elements per part, narrow float?) when ``instr`` should be split, else None."""
        if instr.opcode != "reduce" or instr.operand_count != 2 or not instr.dimensions:
            return None
        shape = instr.operand(0).shape
        if not shape.has_default_layout():
            return None
        reduced = math.prod(shape.dimensions[d] for d in instr.dimensions)
        if shape.element_type in NARROW_FLOATS and reduced > NARROW_WINDOW:
            parts = math.ceil(reduced / NARROW_WINDOW)
            return parts, NARROW_WINDOW, True
        dims = sorted(instr.dimensions)
        if dims != list(range(shape.rank - len(dims), shape.rank)):
            return None
        kept = shape.element_count() // max(reduced, 1)
        if reduced >= self.min_reduced and kept <= self.max_kept:
            return self.parts, math.ceil(reduced / self.parts), False
        return None

    def _rewrite(self, reduce: HloInstruction, parts: int, per_part: int, narrow: bool) -> HloInstruction:
        """Replace ``reduce`` by partial reductions and a reduction of those; the latter."""
        comp = reduce.parent
        assert comp is not None
        operand, init = reduce.operand(0), reduce.operand(1)
        shape = operand.shape
        reduced_dims = sorted(reduce.dimensions)
        kept_dims = [d for d in range(shape.rank) if d not in reduced_dims]
        reduced = math.prod(shape.dimensions[d] for d in reduced_dims)
        kept = math.prod(shape.dimensions[d] for d in kept_dims)
        etype = shape.element_type
        if kept_dims + reduced_dims != list(range(shape.rank)):  # move the reduced dims to the minor end
            order = tuple(kept_dims + reduced_dims)
            moved = Shape.array(etype, tuple(shape.dimensions[d] for d in order))
            operand = self._add(comp, "transpose", moved, [operand], {"dimensions": order}, reduce)
        lead = (kept,) if kept > 1 else ()  # a single output needs no kept dimension
        flat = self._add(comp, "reshape", Shape.array(etype, lead + (reduced,)), [operand], {}, reduce)
        if per_part * parts != reduced:
            padded = Shape.array(etype, lead + (per_part * parts,))
            pads = (PaddingDim(0, 0),) * len(lead) + (PaddingDim(0, per_part * parts - reduced),)
            flat = self._add(comp, "pad", padded, [flat, init], {"padding": pads}, reduce)
        split = self._add(comp, "reshape", Shape.array(etype, lead + (parts, per_part)), [flat], {}, reduce)
        partial = self._add(comp, "reduce", Shape.array(etype, lead + (parts,)), [split, init],
                            {"dimensions": (len(lead) + 1,), "to_apply": reduce.to_apply}, reduce)
        total = self._add(comp, "reduce", Shape.array(etype, lead), [partial, init],
                          {"dimensions": (len(lead),), "to_apply": reduce.to_apply}, reduce)
        result = self._add(comp, "reshape", reduce.shape, [total], {}, reduce)
        why = f"{etype.value} sums round every step" if narrow else "partial sums run on all cores"
        self.note(f"{reduce.name}: {reduced} elements -> {parts} partial sums of {per_part} ({why})")
        comp.replace_instruction(reduce, result)
        return total

    @staticmethod
    def _add(comp, opcode: str, shape: Shape, operands: list, attrs: dict, like: HloInstruction):  # type: ignore[no-untyped-def]
        instr = HloInstruction(opcode, shape, operands, attrs)
        instr.metadata = like.metadata
        return comp.add_instruction(instr)
