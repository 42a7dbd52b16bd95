"""Small random HLO modules for the graders, written as HLO text.

The graders test a solution on modules it has never seen, so a solution that only
handles the examples in the starter file fails. Text (rather than a builder) keeps the
feedback readable: the module a student's pass got wrong is printed exactly as it was
generated, and it can be pasted into a notebook with ``parse_hlo``.

:class:`ModuleWriter` writes one ENTRY computation (plus reducer computations) one
instruction at a time; :func:`random_expression` adds a random elementwise expression
over given values. Every generator takes a :class:`random.Random`, so a seed gives the
same module every time (and the same feedback on every run).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field

FLOAT_UNARY_CHEAP = ("negate", "abs")
FLOAT_UNARY_EXPENSIVE = ("tanh", "sine", "exponential")
FLOAT_BINARY = ("add", "subtract", "multiply", "maximum", "minimum")
INT_UNARY = ("negate", "abs")
INT_BINARY = ("add", "subtract", "multiply", "maximum", "minimum")


@dataclass
class Line:
    name: str
    opcode: str
    text: str  # the instruction without "ROOT"
    operands: tuple[str, ...]


@dataclass
class ModuleWriter:
    """Builds ``HloModule <name>`` with one ENTRY computation, line by line."""

    name: str
    lines: list[Line] = field(default_factory=list)
    shapes: dict[str, str] = field(default_factory=dict)  # value name -> shape text
    reducers: dict[str, str] = field(default_factory=dict)  # computation name -> text
    _counts: dict[str, int] = field(default_factory=dict)
    _params: int = 0

    def fresh(self, base: str) -> str:
        n = self._counts.get(base, 0)
        self._counts[base] = n + 1
        return base if n == 0 else f"{base}.{n}"

    def add(self, opcode: str, shape: str, operands: Sequence[str] = (), attrs: str = "", name: str = "",
            at: int | None = None, inner: str | None = None) -> str:
        """Append ``name = shape opcode(operands), attrs`` (at line ``at`` if given); returns the name.

        ``inner`` replaces the operand list inside the parentheses (``parameter(0)``, ``constant(1)``).
        """
        name = self.fresh(name or opcode.replace("-", "_"))
        attr_text = f", {attrs}" if attrs else ""
        inside = ", ".join(operands) if inner is None else inner
        line = Line(name, opcode, f"{name} = {shape} {opcode}({inside}){attr_text}", tuple(operands))
        if at is None:
            self.lines.append(line)
        else:
            self.lines.insert(at, line)
        self.shapes[name] = shape
        return name

    def parameter(self, shape: str, name: str = "") -> str:
        number = self._params
        self._params += 1
        return self.add("parameter", shape, name=name or f"p{number}", inner=str(number))

    def constant(self, value: str, shape: str, name: str = "") -> str:
        """``value`` as HLO writes literals: ``1``, ``{1, 2}``, ``{{1, 2}, {3, 4}}``."""
        return self.add("constant", shape, name=name or "c", inner=value)

    def broadcast_scalar(self, scalar: str, shape: str, name: str = "") -> str:
        return self.add("broadcast", shape, [scalar], "dimensions={}", name=name or "bcast")

    def reducer(self, opcode: str, etype: str) -> str:
        """A scalar computation ``(a, b) -> opcode(a, b)`` (added once); returns its name."""
        comp = f"{opcode}_{etype}"
        if comp not in self.reducers:
            self.reducers[comp] = (f"{comp} {{\n  lhs = {etype}[] parameter(0)\n  rhs = {etype}[] parameter(1)\n"
                                   f"  ROOT r = {etype}[] {opcode}(lhs, rhs)\n}}")
        return comp

    def position_after(self, names: Sequence[str]) -> int:
        """The first line index after every definition of ``names``."""
        indices = [i for i, line in enumerate(self.lines) if line.name in names]
        return max(indices, default=-1) + 1

    def text(self, root: str | Sequence[str]) -> str:
        """The module; ``root`` is one value, or several (a tuple becomes the ROOT)."""
        if not isinstance(root, str):
            shapes = ", ".join(self.shapes[r] for r in root)
            root = self.add("tuple", f"({shapes})", list(root), name="result")
        body = []
        for line in self.lines:
            prefix = "ROOT " if line.name == root else ""
            body.append(f"  {prefix}{line.text}")
        if not any(line.name == root for line in self.lines):
            raise ValueError(f"no value named {root}")
        entry = "ENTRY main {\n" + "\n".join(body) + "\n}"
        parts = [f"HloModule {self.name}", *self.reducers.values(), entry]
        return "\n\n".join(parts) + "\n"


def random_expression(w: ModuleWriter, rng: random.Random, inputs: Sequence[str], n_ops: int, shape: str,
                      unary: Sequence[str], binary: Sequence[str], prefix: str = "") -> list[str]:
    """Add ``n_ops`` elementwise ops over ``inputs`` (all of ``shape``); returns the new names.

    Operands are drawn mostly from the most recent values, so the result is a connected
    expression rather than a forest of one-op trees.
    """
    values = list(inputs)
    created: list[str] = []
    for _ in range(n_ops):
        recent = values[-3:]
        if unary and rng.random() < 0.35:
            op = rng.choice(unary)
            operands = [rng.choice(recent)]
        else:
            op = rng.choice(binary)
            operands = [rng.choice(recent), rng.choice(values)]
            if operands[0] == operands[1] and len(values) > 1:  # x op x is a special case; avoid it here
                operands[1] = rng.choice([v for v in values if v != operands[0]])
        name = w.add(op, shape, operands, name=f"{prefix}{op}" if prefix else "")
        values.append(name)
        created.append(name)
    return created


def random_shape(rng: random.Random, etype: str = "f32") -> str:
    return f"{etype}{rng.choice(['[4]', '[2,3]', '[3]', '[2,2]'])}"
