"""What the capstone's pipeline is built from besides the student's own passes.

The capstone (``xla-teach grade capstone``) asks for an optimization pipeline made of the
passes the earlier exercises built: dead code elimination, common subexpression elimination,
a rule of the algebraic simplifier and the fusion decision. The last two are not passes by
themselves; these two functions make them passes, with xla_teach's machinery around the
student's logic (as the ``algsimp_rule`` and ``fusion_decision`` exercises graded them):

* :func:`simplifier_with` -- an ``AlgebraicSimplifier`` whose only rule is ``rewrite``;
* :func:`fusion_with` -- an ``InstructionFusion`` that fuses exactly where ``should_fuse`` says.

While the capstone is graded, xla_teach's own dead code elimination, CSE, arithmetic rules and
fusion decision are withheld (``withheld.py``): the pipeline can only do what the student wrote.
"""

from __future__ import annotations

from collections.abc import Callable

from xla_teach.hlo.ir import HloInstruction
from xla_teach.passes.fusion.instruction_fusion import InstructionFusion
from xla_teach.passes.pass_base import HloPass
from xla_teach.passes.simplifiers.algebraic_simplifier import AlgebraicSimplifier
from xla_teach.passes.simplifiers.algsimp_rules_base import Rule


def simplifier_with(rewrite: Callable[[HloInstruction], HloInstruction | None]) -> HloPass:
    """The algebraic simplifier with ``rewrite`` (the ``algsimp_rule`` exercise's) as its only rule,
    tried on every elementwise instruction until none fires."""
    return AlgebraicSimplifier(rules=(Rule("your rewrite", ("*elementwise",), rewrite),))


class _DecidedFusion(InstructionFusion):
    """``InstructionFusion`` that fuses a producer into a consumer exactly when ``should_fuse`` says so."""

    def __init__(self, should_fuse: Callable[[HloInstruction, HloInstruction], bool]) -> None:
        super().__init__()
        self.should_fuse = should_fuse

    def decide(self, producer: HloInstruction, consumer: HloInstruction) -> str | None:
        return None if self.should_fuse(producer, consumer) else "should_fuse said no"


def fusion_with(should_fuse: Callable[[HloInstruction, HloInstruction], bool]) -> HloPass:
    """The fusion pass with ``should_fuse`` (the ``fusion_decision`` exercise's) deciding."""
    return _DecidedFusion(should_fuse)
