"""The reference interpreter's driver: :class:`HloEvaluator`.

It runs a computation the simplest possible way: visit the instructions in post-order
(operands before users), call the opcode's handler on the operands' values, remember the
result. Handlers live in the sibling modules, one family per file, and register
themselves in :data:`registry.HANDLERS`. Every result is checked against the shape the
instruction declares, so a handler bug shows up at the instruction that caused it.

The evaluator is the **oracle** every backend is tested against, so it favours obvious
correctness over speed; still, each op works on whole NumPy arrays, and scalar
computations that are a single known op (``add``, ``maximum``, ``compare`` ...) are applied
to whole arrays instead of per element (see :mod:`fast_paths`). ``use_fast_paths=False``
turns that off, which tests use to check both paths agree.

Instrumentation: pass ``trace=callback`` to see every ``(instruction, value)`` as it is
computed; :attr:`HloEvaluator.stats` counts instructions and computation calls.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from xla_teach.hlo.evaluator.arguments import check_arguments
from xla_teach.hlo.evaluator.denormals import atan2_of_denormals, computes, flush_value, reads_denormals
from xla_teach.hlo.evaluator.device_context import current_device
from xla_teach.hlo.evaluator.fast_paths import ScalarOpPattern, SortKey, match_scalar_computation, match_sort_comparator
from xla_teach.hlo.evaluator.registry import HANDLERS, EvaluationError, Token, Value, flatten_value
from xla_teach.hlo.ir import HloComputation, HloInstruction, HloModule
from xla_teach.hlo.shape import Shape

TraceFn = Callable[[HloInstruction, Value], None]


class HloEvaluator:
    """Evaluates HLO modules, computations and single instructions with NumPy.

    Args:
        use_fast_paths: apply single-op scalar computations to whole arrays (same results).
        rng_seed: key of the stream the legacy ``rng`` op draws from.
        trace: called as ``trace(instruction, value)`` after each instruction.
        flush_denormals: flush denormal floats to zero around every arithmetic instruction,
            as XLA's CPU runtime does (see :mod:`denormals`); False: IEEE denormals, as XLA's
            constant folding and its GPU backend keep them.
    """

    def __init__(self, *, use_fast_paths: bool = True, rng_seed: int = 0, trace: TraceFn | None = None,
                 flush_denormals: bool = True) -> None:
        self.use_fast_paths = use_fast_paths
        self.flush_denormals = flush_denormals
        # a devices.DeviceContext when running one of several devices: the thread's, if it runs one
        self.device: Any = current_device()
        self.trace = trace
        self.rng_key = rng_seed  # Philox key and counter of the legacy `rng` op (see random.py)
        self.rng_counter = 0
        self.stats: Counter[str] = Counter()
        # Per-evaluation caches, keyed by id(computation); cleared by every public entry point
        # so a computation edited between two evaluations is never run from a stale plan.
        self._plans: dict[int, list[HloInstruction]] = {}
        self._patterns: dict[int, ScalarOpPattern | None] = {}
        self._sort_keys: dict[int, SortKey | None] = {}

    # ---- public entry points --------------------------------------------------------
    def evaluate_module(self, module: HloModule, args: Sequence[Any]) -> list[np.ndarray]:
        """Run the ENTRY computation; returns the leaves of its result, depth-first."""
        return flatten_value(self.evaluate_computation(module.entry, args))

    def evaluate_computation(self, comp: HloComputation, args: Sequence[Any]) -> Value:
        """Run ``comp`` on ``args`` (checked and converted, see :mod:`arguments`)."""
        values = check_arguments(comp, args)
        self._clear_caches()
        with np.errstate(all="ignore"):
            return copy_value(self.call_computation(comp, values))

    def evaluate_instruction(self, instr: HloInstruction, operand_values: Sequence[Value]) -> Value:
        """Evaluate one instruction given its operands' values (used by constant folding)."""
        if instr.opcode == "parameter":
            raise EvaluationError(f"{instr.name}: a parameter has no value outside a call")
        if len(operand_values) != instr.operand_count:
            raise EvaluationError(
                f"{instr.name}: {instr.opcode} has {instr.operand_count} operand(s), got {len(operand_values)} value(s)"
            )
        self._clear_caches()
        with np.errstate(all="ignore"):
            return copy_value(self.execute(instr, list(operand_values)))

    # ---- used by handlers -----------------------------------------------------------
    def call_computation(self, comp: HloComputation, args: Sequence[Value]) -> Value:
        """Run ``comp`` on already-checked values (no argument conversion)."""
        self.stats["computation calls"] += 1
        values: dict[HloInstruction, Value] = {}
        for instr in self._plan(comp):
            if instr.opcode == "parameter":
                value = args[instr.parameter_number]
                if self.trace is not None:
                    self.trace(instr, value)
            else:
                value = self.execute(instr, [values[op] for op in instr.operands])
            values[instr] = value
        return values[comp.root]

    def execute(self, instr: HloInstruction, operands: list[Value]) -> Value:
        """Dispatch one instruction to its handler and check the result's shape."""
        handler = HANDLERS.get(instr.opcode)
        if handler is None:
            raise EvaluationError(f"{instr.name}: the evaluator has no handler for opcode '{instr.opcode}'")
        flushing = self.flush_denormals and computes(instr)
        if flushing and not reads_denormals(instr):
            operands = [flush_value(v) for v in operands]  # DAZ
        try:
            value = handler(self, instr, operands)
        except EvaluationError:
            raise
        except Exception as error:
            where = f" in {instr.parent.name}" if instr.parent is not None else ""
            raise EvaluationError(
                f"evaluating {instr.name} = {instr.shape.to_text(print_layout=False)} {instr.opcode}{where}: "
                f"{type(error).__name__}: {error}"
            ) from error
        value = conform(value, instr.shape, instr)
        if flushing:
            value = flush_value(value)  # FTZ
        elif self.flush_denormals and instr.opcode == "atan2":
            value = atan2_of_denormals(operands, value)
        self.stats["instructions"] += 1
        if self.trace is not None:
            self.trace(instr, value)
        return value

    def scalar_pattern(self, comp: HloComputation) -> ScalarOpPattern | None:
        """The single-op pattern of ``comp`` (None if there is none or fast paths are off)."""
        if not self.use_fast_paths:
            return None
        key = id(comp)
        if key not in self._patterns:
            self._patterns[key] = match_scalar_computation(comp)
        return self._patterns[key]

    def sort_key(self, comp: HloComputation) -> SortKey | None:
        """The key-based form of a sort comparator (None: use the general path)."""
        if not self.use_fast_paths:
            return None
        key = id(comp)
        if key not in self._sort_keys:
            self._sort_keys[key] = match_sort_comparator(comp)
        return self._sort_keys[key]

    def apply_elementwise(self, comp: HloComputation, arrays: Sequence[np.ndarray]) -> list[np.ndarray]:
        """Apply the scalar computation ``comp`` at every index of the equally shaped
        ``arrays`` (parameter i takes its element from ``arrays[i]``); returns one array per
        leaf of ``comp``'s result. The general path calls ``comp`` once per element."""
        pattern = self.scalar_pattern(comp)
        if pattern is not None:
            return [np.asarray(r) for r in pattern.apply(list(arrays))]
        self.stats["elementwise calls (general path)"] += 1
        shape = np.broadcast_shapes(*(a.shape for a in arrays))
        arrays = [np.broadcast_to(a, shape) for a in arrays]
        result_shapes = comp.root.shape.leaf_shapes()
        results = [np.empty(shape, s.dtype) for s in result_shapes]
        for index in np.ndindex(*shape):
            element = index + (Ellipsis,)  # indexing with a trailing ... gives a 0-d array
            value = self.call_computation(comp, [a[element] for a in arrays])
            for result, leaf in zip(results, flatten_value(value), strict=True):
                result[index] = leaf
        return results

    # ---- internals ------------------------------------------------------------------
    def _clear_caches(self) -> None:
        self._plans.clear()
        self._patterns.clear()
        self._sort_keys.clear()

    def _plan(self, comp: HloComputation) -> list[HloInstruction]:
        plan = self._plans.get(id(comp))
        if plan is None:
            plan = self._plans[id(comp)] = execution_order(comp)
        return plan


def execution_order(comp: HloComputation) -> list[HloInstruction]:
    """Instructions needed for the root, plus side-effecting ones, operands first.

    Dead instructions without side effects are skipped (they cannot change the result).
    """
    order: list[HloInstruction] = []
    visited: set[int] = set()
    starts = [comp.root] + [i for i in comp.instructions if i.has_side_effect() and i is not comp.root]
    for start in starts:
        stack: list[tuple[HloInstruction, bool]] = [(start, False)]
        while stack:
            instr, operands_done = stack.pop()
            if operands_done:
                order.append(instr)
                continue
            if instr.unique_id in visited:
                continue
            visited.add(instr.unique_id)
            stack.append((instr, True))
            for pred in reversed(list(instr.operands) + list(instr.control_predecessors)):
                if pred.unique_id not in visited:
                    stack.append((pred, False))
    return order


def conform(value: Value, shape: Shape, instr: HloInstruction) -> Value:
    """Check ``value`` against ``shape``: 0-d NumPy scalars become 0-d arrays; a wrong
    dtype or dimensions is an evaluator bug and raises."""
    if shape.is_tuple:
        if not isinstance(value, tuple) or len(value) != len(shape.tuple_shapes):
            raise EvaluationError(f"{instr.name}: handler produced {_describe(value)} for {shape.to_text()}")
        return tuple(conform(v, s, instr) for v, s in zip(value, shape.tuple_shapes, strict=True))
    if shape.is_token:
        if not isinstance(value, Token):
            raise EvaluationError(f"{instr.name}: handler produced {_describe(value)} for token[]")
        return value
    if not isinstance(value, np.ndarray):
        value = np.asarray(value)
    if value.dtype != shape.dtype or value.shape != shape.dimensions:
        raise EvaluationError(
            f"{instr.name} ({instr.opcode}): internal error: handler produced {_describe(value)} "
            f"but the instruction declares {shape.to_text(print_layout=False)}"
        )
    return value


def _describe(value: Any) -> str:
    if isinstance(value, np.ndarray):
        return f"{value.dtype}{list(value.shape)}"
    if isinstance(value, tuple):
        return "(" + ", ".join(_describe(v) for v in value) + ")"
    return type(value).__name__


def copy_value(value: Value) -> Value:
    """A copy sharing no arrays with constants or arguments, so that callers of the public
    entry points may modify results freely."""
    if isinstance(value, tuple):
        return tuple(copy_value(v) for v in value)
    return value.copy() if isinstance(value, np.ndarray) else value
