"""Denormals flushed to zero, as XLA's CPU runtime does (FTZ/DAZ), modelled per instruction.

XLA's CPU runtime runs with the processor's FTZ and DAZ bits set (see
:mod:`xla_teach.runtime.denormals`): every arithmetic instruction reads a denormal operand as
zero and writes a denormal result as zero, keeping the sign. The evaluator models that
instruction by instruction when ``HloEvaluator(flush_denormals=True)``:

* an instruction that *computes* (``add``, ``log``, ``compare``, ``convert``, ``dot``,
  ``reduce`` ...) sees its float operands with denormals replaced by ``±0`` and has its
  result flushed the same way; so ``log(1e-39)`` is ``-inf``, ``1e-39 > 0`` is false and
  ``maximum(1e-39, 0)`` is ``0``;
* an instruction that only *moves* bits (:data:`MOVES_BITS`: copies, reshapes, slices,
  ``select``, ``negate`` and ``abs``, a sort's or top-k's permutation, a scatter that stores
  its updates) keeps a denormal as it is, and so does ``tanh``, which returns ``x`` itself for
  ``|x| < 0.0004`` in XLA (``tanh(x)`` rounds to ``x`` there);
* ``power`` reads its operands as they are and flushes only its result: XLA decides its special
  cases (a zero base, an integral exponent) on the operands' bits, so ``power(-1, 1e-39)`` is NaN
  in XLA too. ``atan2`` keeps denormals on both sides (``atan2(1e-39, 1)`` is ``1e-39``) and
  recognises zeros by their bits (``atan2(1e-39, 0)`` is pi/2), except that two denormal operands
  give NaN: past its tests for zeros it divides the smaller magnitude by the larger, which DAZ
  reads as 0/0;
* only the formats whose denormals are f32's or f64's are flushed: f32, f64 and bf16. f16 is
  computed in f32, where all its values are normal, so their denormals survive, as in XLA.

Instructions that call computations (``fusion``, ``call``, ``while``, ``map`` ...) pass their
values through; the instructions inside flush their own.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from xla_teach.hlo.evaluator.registry import Value
from xla_teach.hlo.ir import HloInstruction
from xla_teach.hlo.opcodes import (
    BUFFER_NAMING_OPCODES,
    CONTROL_FLOW_OPCODES,
    CROSS_DEVICE_OPCODES,
    INDEX_MAPPED_OPCODES,
)

# What names a buffer, moves elements by index or runs other computations, and more: their results
# are their operands' bits (or new bits), so XLA's CPU flushes nothing there.
# (Of the collectives, all-reduce and reduce-scatter add; the others move bits between devices.)
MOVES_BITS = BUFFER_NAMING_OPCODES | INDEX_MAPPED_OPCODES | CONTROL_FLOW_OPCODES | (
    CROSS_DEVICE_OPCODES - {"all-reduce", "reduce-scatter"}) | frozenset({
        "copy", "bitcast-convert", "dynamic-update-slice", "select", "negate", "abs", "fusion", "map", "sort",
        "topk", "custom-call", "real", "imag", "complex", "rng", "rng-bit-generator", "rng-get-and-update-state",
        "tanh", "atan2",
    })

READS_DENORMALS = frozenset({"power"})  # operands as they are, results flushed

_TINY = {np.dtype(np.float32): np.float32(np.finfo(np.float32).tiny),
         np.dtype(np.float64): np.float64(np.finfo(np.float64).tiny),
         np.dtype(ml_dtypes.bfloat16): ml_dtypes.bfloat16(ml_dtypes.finfo(ml_dtypes.bfloat16).tiny)}


def reads_denormals(instr: HloInstruction) -> bool:
    """Does ``instr`` see denormal operands as they are (even while it flushes its result)?"""
    return instr.opcode in READS_DENORMALS


def computes(instr: HloInstruction) -> bool:
    """Does ``instr`` do floating-point arithmetic on its values (so that FTZ/DAZ apply)?"""
    if instr.opcode in MOVES_BITS:
        return False
    if instr.opcode == "scatter":  # a scatter that stores its updates moves them; one that adds computes
        return any(c.root.opcode != "parameter" for c in instr.called_computations())
    return True


def flush_array(x: np.ndarray) -> np.ndarray:
    """``x`` with every denormal replaced by zero of the same sign (``x`` itself when none is)."""
    dtype = x.dtype
    tiny = _TINY.get(dtype)
    if tiny is None:
        return x
    small = np.abs(x) < tiny  # zeros too: they stay what they are (x * 0 keeps the sign)
    if not small.any():
        return x
    return np.where(small, x * dtype.type(0), x).astype(dtype, copy=False)


def atan2_of_denormals(operands: list[Value], value: Value) -> Value:
    """XLA's ``atan2`` while denormals are flushed: NaN where both operands are denormal."""
    y, x = operands
    assert isinstance(y, np.ndarray) and isinstance(x, np.ndarray) and isinstance(value, np.ndarray)
    denormal_y, denormal_x = flush_array(y) != y, flush_array(x) != x  # NaN != NaN: masked below
    both = denormal_y & denormal_x & ~np.isnan(y) & ~np.isnan(x)
    if not both.any():
        return value
    return np.where(both, value.dtype.type(np.nan), value).astype(value.dtype)


def flush_value(value: Value) -> Value:
    """:func:`flush_array` over every float leaf of an array or tuple value."""
    if isinstance(value, tuple):
        return tuple(flush_value(v) for v in value)
    if isinstance(value, np.ndarray):
        return flush_array(value)
    return value
