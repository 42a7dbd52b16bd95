"""A small HloCostAnalysis: the numbers ``Compiled.cost_analysis()`` reports.

XLA's cost analysis walks the optimized module and adds up, per instruction,

* ``flops``: one per output element of an elementwise op; ``2 * K`` per output
  element of a ``dot`` (K = product of the contracting dims: a multiply and an add);
  for ``convolution`` likewise with K = kernel window size x input features per group;
  one per combined element for ``reduce`` and ``reduce-window``;
* ``transcendentals``: one per output element of exp, log, tanh, logistic, power,
  sqrt, rsqrt, sin, cos, ... (they are costed separately because they are slow);
* ``bytes accessed``: the bytes of each top-level instruction's operands and result
  (for a fusion only its external operands and result -- the point of fusion).

Calls, loops and branches count their bodies once, as XLA does.
"""

from __future__ import annotations

import numpy as np

from xla_teach.hlo.ir import HloComputation, HloInstruction, HloModule
from xla_teach.hlo.opcodes import (
    BUFFER_NAMING_OPCODES,
    CONTROL_FLOW_OPCODES,
    INDEX_MAPPED_OPCODES,
    TRANSCENDENTAL_OPCODES,
)
from xla_teach.hlo.shape import Shape

TRANSCENDENTAL = TRANSCENDENTAL_OPCODES
# No flops: what names a buffer, what only moves elements, and copies, updates and conversions.
FREE = BUFFER_NAMING_OPCODES | INDEX_MAPPED_OPCODES | {"copy", "dynamic-update-slice", "scatter", "convert",
                                                         "bitcast-convert"}
_NO_BYTES = BUFFER_NAMING_OPCODES


def _elements(shape: Shape) -> int:
    if shape.is_tuple:
        return sum(_elements(s) for s in shape.tuple_shapes)
    return int(np.prod(shape.dimensions, dtype=np.int64)) if shape.element_type.is_array_type else 0


def _bytes(shape: Shape) -> int:
    if shape.is_tuple:
        return sum(_bytes(s) for s in shape.tuple_shapes)
    return _elements(shape) * shape.element_type.byte_size if shape.element_type.is_array_type else 0


def _flops(instr: HloInstruction) -> tuple[int, int]:
    """(flops, transcendentals) of one instruction, not counting called computations."""
    op, out = instr.opcode, _elements(instr.shape)
    if op in TRANSCENDENTAL:
        return 0, out
    if op == "dot":
        lhs = instr.operand(0).shape.dimensions
        k = int(np.prod([lhs[d] for d in instr.attr("lhs_contracting_dims")], dtype=np.int64))
        return 2 * k * out, 0
    if op == "convolution":
        dnums = instr.attr("dim_labels")
        kernel = instr.operand(1).shape.dimensions
        k = int(np.prod([kernel[d] for d in dnums.kernel_spatial_dimensions], dtype=np.int64))
        k *= kernel[dnums.kernel_input_feature_dimension]
        return 2 * k * out, 0
    if op in ("reduce", "reduce-window"):
        inputs = _elements(instr.operand(0).shape)
        if op == "reduce-window":
            inputs = out * int(np.prod([w.size for w in instr.attr("window").dimensions], dtype=np.int64))
        return max(inputs - (out if op == "reduce" else 0), 0), 0
    if op in FREE or instr.called_computations():
        return 0, 0
    return out, 0


def _walk(comp: HloComputation, totals: dict[str, float], count_bytes: bool) -> None:
    for instr in comp.instructions:
        flops, trans = _flops(instr)
        totals["flops"] += flops
        totals["transcendentals"] += trans
        if count_bytes and instr.opcode not in _NO_BYTES:
            totals["bytes accessed"] += _bytes(instr.shape) + sum(_bytes(o.shape) for o in instr.operands)
        if instr.opcode == "fusion" or instr.opcode in CONTROL_FLOW_OPCODES:
            for callee in instr.called_computations():
                _walk(callee, totals, count_bytes=instr.opcode != "fusion")


def cost_analysis(module: HloModule) -> dict[str, float]:
    totals = {"flops": 0.0, "transcendentals": 0.0, "bytes accessed": 0.0}
    _walk(module.entry, totals, count_bytes=True)
    return totals
