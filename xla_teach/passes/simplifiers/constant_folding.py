"""Constant folding (``constant_folding``, XLA's ``HloConstantFolding``).

An instruction whose operands are all known at compile time is evaluated *now*, with
the reference interpreter (:mod:`xla_teach.hlo.evaluator`, as XLA uses its
``HloEvaluator``), and replaced by a ``constant`` holding the result.

Which instructions are folded (XLA's rules):

* at least one operand is a ``constant`` and every operand is a ``constant`` or a
  ``broadcast`` of one. Ops whose operands are *all* broadcasts are left to ``algsimp``,
  which rewrites ``op(broadcast(a), broadcast(b))`` to ``broadcast(op(a, b))`` so only the
  small op gets folded;
* never ``broadcast`` or ``iota`` themselves (a broadcast of a scalar is a far smaller
  program than the big literal it would become), never parameters or constants, nothing
  with a side effect (``rng``, side-effecting custom-calls) or calling a computation
  that has one, no ``while`` (it might not terminate), no ``call``/``conditional`` (their
  bodies may loop; ``call-inliner`` has inlined calls already), no ``custom-call``, no tuples;
* **denormals as XLA folds them**: elementwise ops keep IEEE denormals (XLA's evaluator does:
  ``3.4e38 * -1.47e-39`` folds to ``-0.5``), but a ``dot`` or ``convolution`` folds as if denormals
  were flushed -- XLA's evaluator computes them with Eigen, and a folded ``dot`` of the same two
  numbers gives XLA's ``4`` for ``3.4e38 * -1.47e-39 + 1 * 4``, as the CPU runtime would (found
  by the differential fuzzer: a convolution of constants, ``fuzz_20163``);
* **size cap**: nothing whose result, or whose operands together, have more than
  ``max_elements`` elements. XLA's cap is 45 million elements
  (``kMaximumConstantSizeElements``); xla_teach folds through a NumPy interpreter and
  prints every constant in its dumps, so the default here is a much smaller
  :data:`DEFAULT_MAX_ELEMENTS` (pass ``max_elements=45_000_000`` to mirror XLA).

Before::

    ENTRY main {
      x = f32[3] parameter(0)
      a = f32[3] constant({1, 2, 3})
      b = f32[3] constant({10, 20, 30})
      s = f32[3] add(a, b)
      ROOT r = f32[3] multiply(x, s)
    }

After::

    ENTRY main {
      x = f32[3] parameter(0)
      constant = f32[3] constant({11, 22, 33})
      ROOT r = f32[3] multiply(x, constant)
    }
"""

from __future__ import annotations

import numpy as np

from xla_teach.hlo.evaluator import EvaluationError, evaluate_instruction
from xla_teach.hlo.ir import HloComputation, HloInstruction
from xla_teach.hlo.opcodes import CONTROL_FLOW_OPCODES, NOT_PURE_OPCODES
from xla_teach.passes.pass_base import HloPass
from xla_teach.passes.rewrite_utils import has_side_effect_recursive

# Folded with denormals flushed, as XLA's evaluator (Eigen) computes them (see the docstring).
FLUSHED_WHEN_FOLDED = frozenset({"dot", "convolution"})

DEFAULT_MAX_ELEMENTS = 1 << 20  # about a million elements (4 MiB of f32)
XLA_MAX_ELEMENTS = 45 * 1000 * 1000  # XLA's kMaximumConstantSizeElements

# Opcodes never folded even when their operands are constants: what is not a function of its
# operands, control flow, and what folding would only make bigger (a broadcast or an iota stays
# cheaper than its constant; a tuple or fusion is folded through its parts).
NEVER_FOLDED = NOT_PURE_OPCODES | CONTROL_FLOW_OPCODES | {"parameter", "constant", "broadcast", "iota", "tuple",
                                                          "fusion"}


def _is_constant_or_broadcast_of_constant(instr: HloInstruction) -> bool:
    return instr.opcode == "constant" or (instr.opcode == "broadcast" and instr.operand(0).opcode == "constant")


class ConstantFolding(HloPass):
    """Evaluates instructions with constant operands at compile time (module docstring)."""

    name = "constant_folding"

    def __init__(self, max_elements: int = DEFAULT_MAX_ELEMENTS) -> None:
        super().__init__()
        self.max_elements = max_elements

    def why_not(self, instr: HloInstruction) -> str | None:
        """None if ``instr`` can be folded, else the reason it is not."""
        if instr.opcode in NEVER_FOLDED:
            return f"{instr.opcode} is never folded"
        if not instr.shape.is_array:
            return "result is not an array"
        operands = instr.operands
        if not any(o.opcode == "constant" for o in operands):
            return "no constant operand"
        if not all(_is_constant_or_broadcast_of_constant(o) for o in operands):
            return "an operand is not a constant"
        if any("literal" not in (o if o.opcode == "constant" else o.operand(0)).attrs for o in operands):
            return "a constant operand has an elided literal"
        operand_elements = sum(o.shape.element_count() for o in operands if o.shape.is_array)
        if max(instr.shape.element_count(), operand_elements) > self.max_elements:
            return f"larger than the size cap of {self.max_elements} elements"
        if has_side_effect_recursive(instr):
            return "has (or calls something with) a side effect"
        return None

    def run_on_computation(self, comp: HloComputation) -> bool:
        changed = False
        for instr in comp.post_order():
            if instr.parent is not comp or (not instr.users and not instr.is_root()):
                continue  # removed already, or dead (dce's job)
            reason = self.why_not(instr)
            if reason is not None:
                if instr.operands and reason.startswith("larger"):
                    self.note(f"{comp.name}: not folding {instr.name}: {reason}")
                continue
            try:
                values = [evaluate_instruction(o, [evaluate_instruction(o.operand(0), [])])
                          if o.opcode == "broadcast" else o.literal for o in instr.operands]
                result = evaluate_instruction(instr, values, flush_denormals=instr.opcode in FLUSHED_WHEN_FOLDED)
            except (EvaluationError, ValueError, TypeError, NotImplementedError) as err:
                self.note(f"{comp.name}: not folding {instr.name}: the interpreter failed ({err})")
                continue
            literal = np.asarray(result, dtype=instr.shape.element_type.dtype).reshape(instr.shape.dimensions)
            folded = HloInstruction("constant", instr.shape, attrs={"literal": literal})
            comp.add_instruction(folded, "constant")
            self.note(f"{comp.name}: folded {instr.name} ({instr.opcode}) into {folded.name}")
            comp.replace_instruction(instr, folded)
            changed = True
        return changed
