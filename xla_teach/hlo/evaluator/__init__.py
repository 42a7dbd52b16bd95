"""The reference interpreter (backend name ``"interpreter"``): runs HLO op by op with NumPy.

It is the oracle every other backend is checked against, and constant folding uses it to
evaluate single instructions::

    from xla_teach.hlo.evaluator import evaluate_module
    outputs = evaluate_module(module, [x, y])   # list of the ENTRY result's leaves

Layout of the package -- one family of opcodes per module, one handler per opcode,
registered in :data:`registry.HANDLERS`:

=====================  ==================================================================
``core``               the driver (:class:`HloEvaluator`)
``control``            constants, iota, tuples, call/fusion/map/while/conditional,
                       custom-call, collectives (one replica), replica-id/partition-id
``elementwise_unary``  abs ... erf, popcnt, count-leading-zeros
``elementwise_binary`` add ... shifts
``elementwise_other``  compare, select, clamp, convert, bitcast-convert, reduce-precision
``data_movement``      broadcast, reshape, transpose, slice, pad, bitcast ...
``reductions``         reduce, reduce-window, select-and-scatter
``contractions``       dot, convolution
``indexing``           gather, scatter
``sorting``            sort, topk
``random``             rng-bit-generator (Philox-4x32-10), rng
``numeric``            f16/bf16 rule, conversions, reduce-precision, total order
``fast_paths``         whole-array versions of single-op scalar computations
=====================  ==================================================================
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

# Importing the handler modules registers their handlers.
from xla_teach.hlo.evaluator import (  # noqa: F401
    contractions,
    control,
    data_movement,
    elementwise_binary,
    elementwise_other,
    elementwise_unary,
    indexing,
    random,
    reductions,
    sorting,
)
from xla_teach.hlo.evaluator.core import HloEvaluator
from xla_teach.hlo.evaluator.registry import HANDLERS, TOKEN, EvaluationError, Token, Value
from xla_teach.hlo.ir import HloComputation, HloInstruction, HloModule

__all__ = [
    "HANDLERS",
    "TOKEN",
    "EvaluationError",
    "HloEvaluator",
    "Token",
    "Value",
    "evaluate_computation",
    "evaluate_instruction",
    "evaluate_module",
]


def evaluate_module(module: HloModule, args: Sequence[Any]) -> list[np.ndarray]:
    """Run ``module``'s ENTRY on ``args``; the leaves of the result, depth-first."""
    return HloEvaluator().evaluate_module(module, args)


def evaluate_computation(comp: HloComputation, args: Sequence[Any]) -> Value:
    """Run one computation; an array, or a (nested) tuple of arrays (IEEE denormals: this is
    what passes call at compile time, as XLA's own evaluator does)."""
    return HloEvaluator(flush_denormals=False).evaluate_computation(comp, args)


def evaluate_instruction(instr: HloInstruction, operand_values: Sequence[Value],
                         flush_denormals: bool = False) -> Value:
    """Evaluate a single instruction on given operand values (for constant folding: IEEE
    denormals by default, as XLA's compile-time evaluator keeps them for elementwise ops)."""
    return HloEvaluator(flush_denormals=flush_denormals).evaluate_instruction(instr, operand_values)
