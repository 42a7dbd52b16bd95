"""Recognising small computations the evaluator can apply to whole arrays at once.

``reduce``, ``reduce-window``, ``scatter``, ``select-and-scatter``, ``map`` and ``sort``
call a *scalar computation* (reducer, combiner, selector, comparator) once per element.
The general path does exactly that, which is obviously right but slow in Python. Most
real computations are a single op of their parameters::

    %add (a: f32[], b: f32[]) -> f32[] { ... ROOT %r = f32[] add(%a, %b) }

For those we can call the op's whole-array function from ``elementwise_*`` once instead of
running the computation per element. Because it is *the same function* the general path
ends up calling on each 0-d array, the results are identical element for element.

A pattern is a :class:`ScalarOpPattern`; :func:`match_scalar_computation` finds one (or
returns None, and the caller takes the general path).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from xla_teach.hlo.evaluator.elementwise_binary import BINARY_FUNCTIONS
from xla_teach.hlo.evaluator.elementwise_other import compare_arrays, comparison_keys
from xla_teach.hlo.evaluator.elementwise_unary import UNARY_FUNCTIONS
from xla_teach.hlo.evaluator.numeric import is_float
from xla_teach.hlo.ir import HloComputation, HloInstruction
from xla_teach.hlo.opcodes import opcodes_with

# A whole-array version of a scalar computation: parameter arrays in, result arrays out.
ArrayFn = Callable[[list[np.ndarray]], list[np.ndarray]]

# Ops whose reductions may be regrouped (reduce's fast path folds pairwise, as a tree).
ASSOCIATIVE_OPCODES = opcodes_with("associative")


@dataclass(frozen=True)
class ScalarOpPattern:
    """``ROOT = opcode(param[i], param[j], ...)`` (or ``ROOT = param[i]``, opcode "parameter")."""

    opcode: str
    parameters: tuple[int, ...]  # which parameter feeds each operand of the root
    apply: ArrayFn

    def is_associative_fold(self) -> bool:
        """True for ``op(acc, x)`` / ``op(x, acc)`` with an associative, commutative op."""
        return self.opcode in ASSOCIATIVE_OPCODES and sorted(self.parameters) == [0, 1]


def _is_scalar_array(instr: HloInstruction) -> bool:
    return instr.shape.is_array and instr.shape.rank == 0


def match_scalar_computation(comp: HloComputation) -> ScalarOpPattern | None:
    """The pattern of ``comp`` if its root is one known elementwise op applied directly to
    parameters (all scalars of the same element type as the root), else None."""
    params = comp.parameter_instructions
    root = comp.root
    if not params or not all(_is_scalar_array(p) for p in params) or not _is_scalar_array(root):
        return None
    if root.opcode == "parameter":
        index = root.parameter_number
        return ScalarOpPattern("parameter", (index,), lambda arrays: [arrays[index].copy()])
    if not root.operands or any(op.opcode != "parameter" for op in root.operands):
        return None
    indices = tuple(op.parameter_number for op in root.operands)
    operand_type = root.operands[0].shape.element_type
    if any(op.shape.element_type is not operand_type for op in root.operands):
        return None
    if root.opcode == "compare":
        direction, comparison_type = root.attr("direction"), root.attrs.get("type")
        i, j = indices
        return ScalarOpPattern(
            "compare", indices, lambda arrays: [compare_arrays(arrays[i], arrays[j], direction, comparison_type)]
        )
    if root.shape.element_type is not operand_type:
        return None
    if root.opcode in BINARY_FUNCTIONS and len(indices) == 2:
        binary = BINARY_FUNCTIONS[root.opcode]
        i, j = indices
        return ScalarOpPattern(root.opcode, indices, lambda arrays: [binary(arrays[i], arrays[j])])
    if root.opcode in UNARY_FUNCTIONS and len(indices) == 1:
        unary = UNARY_FUNCTIONS[root.opcode]
        (i,) = indices
        return ScalarOpPattern(root.opcode, indices, lambda arrays: [unary(arrays[i])])
    return None


# ---------------------------------------------------------------------------------------
# sort comparators
# ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class SortKey:
    """A comparator ``compare(p[2k], p[2k+1]), direction=LT|GT`` (or with swapped operands):
    sort by operand ``operand``'s comparison keys, ascending or descending."""

    operand: int
    descending: bool
    comparison_type: str | None

    def keys(self, values: np.ndarray) -> np.ndarray | None:
        """Keys to argsort, or None when the comparator is not a strict weak order on these
        values (NaN under the default FLOAT comparison) and the general path must run."""
        keys = comparison_keys(values, self.comparison_type)
        if is_float(keys.dtype) and np.isnan(keys).any():
            return None
        return keys


def match_sort_comparator(comp: HloComputation) -> SortKey | None:
    pattern = match_scalar_computation(comp)
    if pattern is None or pattern.opcode != "compare":
        return None
    root = comp.root
    direction = root.attr("direction")
    first, second = pattern.parameters
    if direction not in ("LT", "GT") or first // 2 != second // 2 or first == second:
        return None
    descending = direction == "GT"
    if first > second:  # compare(rhs_k, lhs_k): the order flips
        descending = not descending
    return SortKey(first // 2, descending, root.attrs.get("type"))


# ---------------------------------------------------------------------------------------
# Tree reduction for reduce's fast path
# ---------------------------------------------------------------------------------------
def tree_reduce_last_axis(binary: Callable[[np.ndarray, np.ndarray], np.ndarray], x: np.ndarray) -> np.ndarray:
    """Combine the elements along the last axis pairwise (a balanced tree), vectorised over
    the other axes; the last axis must be non-empty. XLA allows a reduce to regroup its
    operations, and pairwise float sums are also more accurate."""
    while x.shape[-1] > 1:
        half = x.shape[-1] // 2
        combined = binary(x[..., :half], x[..., half : 2 * half])
        if x.shape[-1] % 2:
            combined = np.concatenate([combined, x[..., 2 * half :]], axis=-1)
        x = combined
    return x[..., 0]
