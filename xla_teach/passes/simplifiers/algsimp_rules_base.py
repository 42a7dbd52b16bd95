"""What an ``algsimp`` rule is.

A rule looks at one instruction and either returns ``None`` (does not apply) or the
instruction that should replace it, created in the same computation (or an existing
instruction such as an operand). Rules must not create anything when they return
``None``, and must only return a value equal to the original for every input: each rule
says in its ``exactness`` how true that is for floats (NaN, -0.0).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from xla_teach.hlo.ir import HloInstruction

RuleFn = Callable[[HloInstruction], HloInstruction | None]


@dataclass(frozen=True)
class Rule:
    name: str  # short form shown in notes and in the rule table, e.g. "x + 0 -> x"
    opcodes: tuple[str, ...]  # instructions the rule looks at
    apply: RuleFn
    exactness: str = "exact"  # "exact", or what differs (and why XLA accepts it)


def rule(name: str, *opcodes: str, exactness: str = "exact") -> Callable[[RuleFn], Rule]:
    """Decorator: ``@rule("x * 1 -> x", "multiply")`` turns a function into a :class:`Rule`."""

    def wrap(fn: RuleFn) -> Rule:
        return Rule(name, tuple(opcodes), fn, exactness)

    return wrap
