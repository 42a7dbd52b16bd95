"""Exercise `shape_inference`: the shape of a ``dot``, or why there is none.

Every HLO instruction has a shape, and the builder, the parser and the verifier all compute it
from the operands' shapes and the attributes (``xla_teach/hlo/shape_inference/*.py``; XLA's
``ShapeInference``). Write the rule for ``dot``, the general matrix product::

    out = f32[B..., M..., N...] dot(f32[lhs] lhs, f32[rhs] rhs),
          lhs_batch_dims={...}, rhs_batch_dims={...},
          lhs_contracting_dims={...}, rhs_contracting_dims={...}

* The i-th lhs batch dimension pairs with the i-th rhs batch dimension, and the i-th lhs
  contracting dimension with the i-th rhs contracting dimension: paired dimensions must have
  the same size. Contracting dimensions are summed over and disappear.
* The result's dimensions are, in this order: the batch dimensions (in the order the lists
  give them, sizes from lhs), then the lhs dimensions that are neither batch nor contracting
  (in lhs order), then the rhs ones (in rhs order).
* The element type is the operands' (both must have the same one).

Raise ``ValueError`` (any message) when there is no valid shape: the two batch lists (or the
two contracting lists) have different lengths, a dimension number is out of range (``0 <= d <
rank``) or appears twice among one operand's batch and contracting dimensions, paired sizes
differ, or the element types differ.

``Shape`` (``xla_teach.hlo.shape``): ``shape.dimensions`` (a tuple), ``shape.rank``,
``shape.element_type``; build the result with ``Shape.array(element_type, dims)``.
Examples: ``f32[2,3] x f32[3,4]`` contracting {1} with {0} is ``f32[2,4]``; a batched
``f32[8,2,3] x f32[8,3,4]`` (batch {0}/{0}, contracting {2}/{1}) is ``f32[8,2,4]``.

Grade it:  xla-teach grade shape_inference path/to/shape_inference.py
"""

from __future__ import annotations

from collections.abc import Sequence

from xla_teach.hlo.shape import Shape


def infer_dot_shape(lhs: Shape, rhs: Shape, lhs_batch: Sequence[int], rhs_batch: Sequence[int],
                    lhs_contracting: Sequence[int], rhs_contracting: Sequence[int]) -> Shape:
    # BEGIN SOLUTION: check the dimension numbers and sizes, then list batch, lhs-free and rhs-free dimensions
    if len(lhs_batch) != len(rhs_batch) or len(lhs_contracting) != len(rhs_contracting):
        raise ValueError("lhs and rhs must have as many batch dimensions, and as many contracting ones")
    if lhs.element_type != rhs.element_type:
        raise ValueError(f"element types differ: {lhs.element_type} and {rhs.element_type}")
    for shape, dims in ((lhs, list(lhs_batch) + list(lhs_contracting)), (rhs, list(rhs_batch) + list(rhs_contracting))):
        if len(set(dims)) != len(dims) or any(not 0 <= d < shape.rank for d in dims):
            raise ValueError(f"bad dimension numbers {dims} for a rank-{shape.rank} operand")
    pairs = zip(list(lhs_batch) + list(lhs_contracting), list(rhs_batch) + list(rhs_contracting), strict=True)
    for left, right in pairs:
        if lhs.dimensions[left] != rhs.dimensions[right]:
            raise ValueError(f"lhs dimension {left} and rhs dimension {right} have different sizes")
    batch = [lhs.dimensions[d] for d in lhs_batch]
    lhs_free = [n for d, n in enumerate(lhs.dimensions) if d not in lhs_batch and d not in lhs_contracting]
    rhs_free = [n for d, n in enumerate(rhs.dimensions) if d not in rhs_batch and d not in rhs_contracting]
    return Shape.array(lhs.element_type, tuple(batch + lhs_free + rhs_free))
    # END SOLUTION
