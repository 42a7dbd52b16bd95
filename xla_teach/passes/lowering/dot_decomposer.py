"""Rewrite each ``dot`` into the matrix-product form the GPU's dot kernels take (``dot_decomposer``).

A GPU dot kernel computes ``batch`` products ``C[m, n] = A[m, k] @ B[k, n]``: batch dimensions
first, one contracting dimension and at most one free dimension on each side
(:func:`~xla_teach.backends.llvm.gemm.gemm_shape`). The dots JAX writes for a transformer are
not all so: ``x @ W`` on activations ``f32[8,128,256]`` has two free dimensions on the left, and
its weight gradient contracts two. Such a dot would run as a loop kernel, each output element
summing its own 256 products, tens of times slower than a tiled one. As XLA's ``DotDecomposer``
does, this pass groups each operand's dimensions as (batch, free, contracting) -- or (batch,
contracting, free), whichever is already the order in memory -- with a ``transpose`` when no
grouping is, merges each group into one dimension with a ``reshape``, and reshapes the product
back to the dot's shape. Where the operand already lies in that order (``x @ W``) the reshapes
move no data (``reshape-to-bitcast`` makes them bitcasts).

Before::

    ENTRY main {
      x = f32[8,128,256] parameter(0)
      w = f32[256,1024] parameter(1)
      ROOT d = f32[8,128,1024] dot(x, w), lhs_contracting_dims={2}, rhs_contracting_dims={0}
    }

After::

    ENTRY main {
      x = f32[8,128,256] parameter(0)
      reshape = f32[1024,256] reshape(x)
      w = f32[256,1024] parameter(1)
      dot = f32[1024,1024] dot(reshape, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
      ROOT d = f32[8,128,1024] reshape(dot)
    }
"""

from __future__ import annotations

import math

from xla_teach.hlo.ir import HloComputation, HloInstruction, HloModule
from xla_teach.hlo.shape import Shape
from xla_teach.passes.fusion.instruction_fusion import fusible_computations
from xla_teach.passes.pass_base import HloPass
from xla_teach.passes.rewrite_utils import add_instruction, transposed


def _groups(dot: HloInstruction, side: int) -> tuple[list[int], list[int], list[int]]:
    """(batch, contracting, free) dimensions of operand ``side`` (0: lhs, 1: rhs); free in order."""
    prefix = "lhs" if side == 0 else "rhs"
    batch = list(dot.attr(f"{prefix}_batch_dims"))
    contracting = list(dot.attr(f"{prefix}_contracting_dims"))
    rank = dot.operand(side).shape.rank
    free = [d for d in range(rank) if d not in batch and d not in contracting]
    return batch, contracting, free


def is_matrix_product(dot: HloInstruction) -> bool:
    """Batch dimensions first, in order, on both sides; one contracting dimension; at most one free
    dimension on each side: the form the dot kernels index directly."""
    for side in (0, 1):
        batch, contracting, free = _groups(dot, side)
        if batch != list(range(len(batch))) or len(contracting) != 1 or len(free) > 1:
            return False
    return True


def _canonical_operand(comp: HloComputation, dot: HloInstruction, side: int) -> tuple[HloInstruction, bool]:
    """The operand as [batch..., (free), contracting] or [batch..., contracting, (free)] (the
    second only when that is the order in which it already lies), and whether the contracting
    dimension comes last."""
    operand = dot.operand(side)
    batch, contracting, free = _groups(dot, side)
    contracting_last = batch + free + contracting == list(range(operand.shape.rank)) or \
        batch + contracting + free != list(range(operand.shape.rank))
    order = batch + (free + contracting if contracting_last else contracting + free)
    if (moved := transposed(comp, operand, order)) is not operand:
        operand = moved
        operand.metadata = dot.metadata  # the dot's op_name and source line: the work is the dot's
    dims = operand.shape.dimensions
    sizes = [dims[i] for i in range(len(batch))]
    free_size = math.prod(dot.operand(side).shape.dimensions[d] for d in free)
    contracting_size = math.prod(dot.operand(side).shape.dimensions[d] for d in contracting)
    tail = [free_size] if free else []
    sizes += (tail + [contracting_size]) if contracting_last else ([contracting_size] + tail)
    if list(sizes) != list(operand.shape.dimensions):
        operand = add_instruction(comp, "reshape", [operand], result_dims=sizes)
        operand.metadata = dot.metadata
    return operand, contracting_last


class DotDecomposer(HloPass):
    name = "dot_decomposer"  # XLA's name for it (its GPU pipeline runs one)

    def run(self, module: HloModule) -> bool:
        changed = False
        for comp in fusible_computations(module):
            for dot in [i for i in comp.instructions if i.opcode == "dot"]:
                if is_matrix_product(dot) or dot.shape.is_tuple:
                    continue
                self._decompose(comp, dot)
                changed = True
        return changed

    def _decompose(self, comp: HloComputation, dot: HloInstruction) -> None:
        nb = len(dot.attr("lhs_batch_dims"))
        lhs, lhs_contracting_last = _canonical_operand(comp, dot, 0)
        rhs, rhs_contracting_last = _canonical_operand(comp, dot, 1)
        has_m = lhs.shape.rank == nb + 2
        has_n = rhs.shape.rank == nb + 2
        attrs = dict(dot.attrs)
        attrs.update({
            "lhs_batch_dims": tuple(range(nb)), "rhs_batch_dims": tuple(range(nb)),
            "lhs_contracting_dims": (nb + (1 if lhs_contracting_last and has_m else 0),),
            "rhs_contracting_dims": (nb + (1 if rhs_contracting_last and has_n else 0),),
        })
        dims = [*lhs.shape.dimensions[:nb], *([lhs.shape.dimensions[nb + (0 if lhs_contracting_last else 1)]]
                                               if has_m else []),
                *([rhs.shape.dimensions[nb + (0 if rhs_contracting_last else 1)]] if has_n else [])]
        product = add_instruction(comp, "dot", [lhs, rhs], attrs, shape=Shape.array(dot.shape.element_type, dims))
        product.metadata = dot.metadata
        result = product
        if list(product.shape.dimensions) != list(dot.shape.dimensions):
            result = add_instruction(comp, "reshape", [product], result_dims=list(dot.shape.dimensions))
            result.metadata = dot.metadata
        name = dot.name
        comp.replace_instruction(dot, result)
        result.name = name  # the dot's users read the same name (it was removed, so the name is free)
