"""``sort`` and ``topk`` (§10 of the semantics).

**sort** sorts every 1-D slice along ``dimensions[0]``; all N operands move together. The
comparator receives ``(op0[i], op0[j], op1[i], op1[j], ...)`` and says whether element i
goes before element j.

* General path: Python's ``sorted`` over the positions, asking the comparator computation
  about pairs. Python's sort is a stable merge sort, so the result is the stable order
  even when ``is_stable=false`` (any order of "equal" elements is allowed then).
* Fast path: a comparator that is just ``compare(p[2k], p[2k+1]), direction=LT|GT`` sorts
  by operand k's comparison keys with a stable ``np.argsort`` -- the same stable order.
  (Not when a default FLOAT comparison meets a NaN: that is no strict weak order, and the
  general path decides.)

**topk** returns the k largest (or smallest) elements along the last dimension and their
s32 indices; ties keep the lower index first. Floats are ordered by TOTALORDER (NaN above
+inf), so the result is always well defined.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

import numpy as np

from xla_teach.hlo.evaluator.numeric import is_float, total_order_key, widen
from xla_teach.hlo.evaluator.registry import Value, register

if TYPE_CHECKING:
    from xla_teach.hlo.evaluator.core import HloEvaluator
    from xla_teach.hlo.ir import HloComputation, HloInstruction


def stable_argsort(keys: np.ndarray, descending: bool) -> np.ndarray:
    """Stable order along the last axis; descending keeps equal keys in input order too."""
    if not descending:
        return np.argsort(keys, axis=-1, kind="stable")
    # Sorting the reversed row ascending and reversing the answer gives a descending order
    # in which equal keys keep their original order.
    n = keys.shape[-1]
    return (n - 1) - np.flip(np.argsort(np.flip(keys, axis=-1), axis=-1, kind="stable"), axis=-1)


def _general_order(ev: HloEvaluator, comparator: HloComputation, rows: list[np.ndarray]) -> np.ndarray:
    """Per row, the positions in sorted order, asking ``comparator`` about pairs."""
    count, n = rows[0].shape

    def orders_for(row: int) -> list[int]:
        def compare(i: int, j: int) -> int:
            def less(a: int, b: int) -> bool:
                args = [values[row, index, ...] for values in rows for index in (a, b)]
                return bool(ev.call_computation(comparator, args))

            if less(i, j):
                return -1
            return 1 if less(j, i) else 0

        return sorted(range(n), key=functools.cmp_to_key(compare))

    return np.array([orders_for(row) for row in range(count)], dtype=np.int64).reshape(count, n)


@register("sort")
def handle_sort(ev: HloEvaluator, instr: HloInstruction, operands: list[Value]) -> Value:
    axis = instr.dimensions[0]
    moved = [np.moveaxis(x, axis, -1) for x in operands]
    slice_shape = moved[0].shape
    n = slice_shape[-1] if slice_shape else 1
    rows = [m.reshape(-1, n) if m.size else m.reshape(0, n) for m in moved]

    order = None
    sort_key = ev.sort_key(instr.to_apply)
    if sort_key is not None:
        keys = sort_key.keys(rows[sort_key.operand])
        if keys is not None:
            order = stable_argsort(keys, sort_key.descending)
    if order is None:
        order = _general_order(ev, instr.to_apply, rows)

    results = []
    for row_values in rows:
        ordered = np.take_along_axis(row_values, order, axis=-1).reshape(slice_shape)
        results.append(np.moveaxis(ordered, -1, axis).copy())
    return results[0] if len(results) == 1 else tuple(results)


@register("topk")
def handle_topk(ev: HloEvaluator, instr: HloInstruction, operands: list[Value]) -> Value:
    x = operands[0]
    k = int(instr.attr("k"))
    largest = bool(instr.attr("largest"))
    keys = total_order_key(x) if is_float(x.dtype) else widen(x)
    order = stable_argsort(keys, descending=largest)[..., :k]
    values = np.take_along_axis(x, order, axis=-1)
    return values, order.astype(np.int32)
