"""Capstone: your own optimization pipeline, graded on whole programs you have not seen.

Four earlier exercises each built one piece of an optimizer and were graded on modules made
for that piece. Here the pieces work together. Copy into this file what you wrote (and had
graded) for

* ``dce``              -- ``DeadCodeElimination``, an HloPass;
* ``cse``              -- ``CommonSubexpressionElimination``, an HloPass;
* ``algsimp_rule``     -- ``rewrite(instr)``, a rule of the algebraic simplifier;
* ``fusion_decision``  -- ``should_fuse(producer, consumer)``,

then write ``build_pipeline()``: the list of passes, in order, that optimizes a program. Two
helpers turn the last two pieces into passes: ``simplifier_with(rewrite)`` (the simplifier with
your rule as its only rule) and ``fusion_with(should_fuse)`` (the fusion pass, fusing where your
function says). While this file is graded, xla_teach's own DCE, CSE, arithmetic rules and fusion
decision are not available: the pipeline does what you wrote, nothing more.

The grader traces small models from Python (dense layers, activations, softmax, layer norm, a
loss) that you have not seen, with what traced programs usually carry -- values nobody reads, the
same product computed twice, constants written twice, multiplications by one -- and checks that
after your pipeline

1. every program computes what it did (on the interpreter, random inputs);
2. no instruction nothing reads is left, no two instructions compute the same value, and no
   multiplication by ones is left;
3. there are no more kernels than xla_teach's own CSE, DCE and fusion leave in a good order --
   think about which pass must come before which, and whether one must run twice;
4. the result compiles for the CPU and runs (xla_teach's own simplification and fusion switched
   off, so what runs is what your pipeline made).

Grade it:  xla-teach grade capstone path/to/capstone.py
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import numpy as np

from xla_teach.exercises.capstone_support import fusion_with, simplifier_with
from xla_teach.hlo.ir import HloComputation, HloInstruction, HloModule
from xla_teach.hlo.opcodes import is_elementwise
from xla_teach.passes.pass_base import HloPass
from xla_teach.passes.rewrite_utils import add_constant, broadcast_scalar, uniform_constant_value


# ---- dead code elimination (your dce.py) ---------------------------------------------------------------
# TODO: your dce.py's helpers ("is this instruction dead?", "which computations are reachable?")


class DeadCodeElimination(HloPass):
    name = "dce"

    def run(self, module: HloModule) -> bool:
        # TODO: your dce.py's run(): dead instructions, then computations nothing calls
        raise NotImplementedError("TODO (capstone): your dce.py's run(): dead instructions, then computations nothing calls")


# ---- common subexpression elimination (your cse.py) ---------------------------------------------------
COMMUTATIVE = {"add", "multiply", "maximum", "minimum", "and", "or", "xor"}


# TODO: from your cse.py -- a hashable key for "the value this instruction computes"


class CommonSubexpressionElimination(HloPass):
    name = "cse"

    def run(self, module: HloModule) -> bool:
        # TODO: your cse.py's run(): merge instructions with the same key, operands first
        raise NotImplementedError("TODO (capstone): your cse.py's run(): merge instructions with the same key, operands first")


# ---- a rule of the algebraic simplifier (your algsimp_rule.py) -------------------------------------------
# TODO: your algsimp_rule.py's helpers ("is this operand all ones?", "zeros shaped like instr")


def rewrite(instr: HloInstruction) -> HloInstruction | None:
    """The replacement of ``instr``, or None when neither rule applies."""
    # TODO: your algsimp_rule.py's rewrite(): multiply-by-ones, integer self-subtraction
    raise NotImplementedError("TODO (capstone): your algsimp_rule.py's rewrite(): multiply-by-ones, integer self-subtraction")


# ---- the fusion decision (your fusion_decision.py) -----------------------------------------------------
LOOP_FUSIBLE = {"broadcast", "reshape", "transpose", "slice", "pad", "concatenate", "reverse", "iota", "bitcast",
                "dynamic-slice", "gather"}


def is_loop_fusible(instr: HloInstruction) -> bool:
    """Can a fused loop compute this instruction element by element?"""
    return ((is_elementwise(instr.opcode) or instr.opcode in LOOP_FUSIBLE)
            and not instr.shape.is_tuple and instr.opcode != "rng")


# TODO: from your fusion_decision.py -- one helper per rule keeps should_fuse readable


def should_fuse(producer: HloInstruction, consumer: HloInstruction) -> bool:
    """True if ``producer`` should be fused into ``consumer`` (rules 1-3 of the module docstring)."""
    # TODO: from your fusion_decision.py -- apply rules 1 to 3; return False as soon as one says no
    raise NotImplementedError("TODO (capstone): from your fusion_decision.py -- apply rules 1 to 3; return False as soon as one says no")


# ---- the pipeline ----------------------------------------------------------------------------------------
def build_pipeline() -> list[HloPass]:
    """Your passes, in the order they run."""
    # TODO: your passes, in the order that leaves the fewest kernels
    raise NotImplementedError("TODO (capstone): your passes, in the order that leaves the fewest kernels")
