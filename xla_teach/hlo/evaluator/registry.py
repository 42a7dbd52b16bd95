"""Values the evaluator computes with, and its opcode -> handler dispatch table.

A **value** is what one HLO instruction produces:

* an array shape gives a ``np.ndarray`` with exactly the shape's dtype and dimensions
  (a scalar is a 0-d array, never a bare Python or NumPy scalar);
* a tuple shape gives a Python ``tuple`` of values (nesting allowed);
* ``token[]`` gives the :data:`TOKEN` singleton (it carries no data, only ordering).

Each opcode has one **handler**: ``handler(evaluator, instruction, operand_values) ->
value``. Handler modules register themselves with the :func:`register` decorator::

    @register("reverse")
    def handle_reverse(ev: HloEvaluator, instr: HloInstruction, operands: list[Value]) -> Value:
        return np.flip(operands[0], axis=instr.dimensions)

Handlers must never modify their operand arrays: the same array may be a constant's
literal, a caller's argument or another instruction's result.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, TypeAlias

import numpy as np

if TYPE_CHECKING:
    from xla_teach.hlo.evaluator.core import HloEvaluator
    from xla_teach.hlo.ir import HloInstruction


class Token:
    """The value of a ``token[]``: no data, it only orders side effects."""

    _instance: Token | None = None

    def __new__(cls) -> Token:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "TOKEN"


TOKEN = Token()

Value: TypeAlias = np.ndarray | Token | tuple["Value", ...]

Handler: TypeAlias = Callable[["HloEvaluator", "HloInstruction", list[Value]], Value]

HANDLERS: dict[str, Handler] = {}


class EvaluationError(RuntimeError):
    """Something went wrong while evaluating an instruction (the message names it)."""


def register(*opcodes: str) -> Callable[[Handler], Handler]:
    """Decorator: make the function the handler of each opcode in ``opcodes``."""

    def decorate(handler: Handler) -> Handler:
        for opcode in opcodes:
            if opcode in HANDLERS:
                raise ValueError(f"two evaluator handlers for opcode '{opcode}'")
            HANDLERS[opcode] = handler
        return handler

    return decorate


def flatten_value(value: Value) -> list[np.ndarray | Token]:
    """The leaves of a (nested) tuple value in depth-first order."""
    if isinstance(value, tuple):
        return [leaf for element in value for leaf in flatten_value(element)]
    return [value]
