"""Which ENTRY outputs may reuse the memory of which ENTRY parameters (XLA's
``HloInputOutputAliasConfig``).

A training step reads the weights and returns new weights of the same shape. If the
caller will not use the old weights again, it can *donate* them: the compiled program
then writes the new weights straight into the old weights' buffer, and no output buffer
is allocated for them. The module header records the promise::

    HloModule step, input_output_alias={ {0}: (0, {}, may-alias), {1}: (1, {}, must-alias) }

Each entry reads ``output_index: (parameter_number, parameter_index, kind)``: the
result leaf at ``output_index`` (a ShapeIndex into the ENTRY root's shape, ``{}`` for
a non-tuple result) lives in parameter ``parameter_number`` at ``parameter_index``.
``may-alias`` lets the backend alias when it can (JAX's ``donate_argnums``);
``must-alias`` demands it (the caller relies on the result being in that buffer).

Buffer assignment gives the aliased output the parameter's allocation
(:mod:`xla_teach.passes.scheduling.buffer_assignment`), the verifier checks that the
two shapes are equal and the indices valid (:mod:`xla_teach.hlo.verifier`), and the
CPU runtime writes the result into the caller's donated array.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from xla_teach.hlo.text.lexer import Cursor

ShapeIndex = tuple[int, ...]
ALIAS_KINDS = ("may-alias", "must-alias")


def shape_index_text(index: ShapeIndex) -> str:
    """XLA's ``ShapeIndex::ToString``: ``{}``, ``{1}``, ``{0,2}``."""
    return "{" + ",".join(str(i) for i in index) + "}"


@dataclass(frozen=True)
class Alias:
    """Where one aliased output lives: parameter ``parameter_number`` at ``parameter_index``."""

    parameter_number: int
    parameter_index: ShapeIndex = ()
    kind: str = "may-alias"  # "may-alias" | "must-alias"

    @property
    def must_alias(self) -> bool:
        return self.kind == "must-alias"

    def to_text(self) -> str:
        return f"({self.parameter_number}, {shape_index_text(self.parameter_index)}, {self.kind})"


class HloInputOutputAliasConfig:
    """Output ShapeIndex -> :class:`Alias`, printed in output-index order as XLA does."""

    def __init__(self) -> None:
        self._aliases: dict[ShapeIndex, Alias] = {}

    # ---- building -----------------------------------------------------------------
    def set_up_alias(self, output_index: ShapeIndex, parameter_number: int,
                     parameter_index: ShapeIndex = (), kind: str = "may-alias") -> None:
        """Declare that output ``output_index`` lives in parameter ``parameter_number``."""
        output_index, parameter_index = tuple(output_index), tuple(parameter_index)
        if kind not in ALIAS_KINDS:
            raise ValueError(f"input_output_alias: kind must be may-alias or must-alias, got {kind!r}")
        if parameter_number < 0:
            raise ValueError(f"input_output_alias: parameter number must be >= 0, got {parameter_number}")
        if output_index in self._aliases:
            raise ValueError(f"input_output_alias: output {shape_index_text(output_index)} is already aliased "
                             f"to {self._aliases[output_index].to_text()}")
        self._aliases[output_index] = Alias(parameter_number, parameter_index, kind)

    def remove_alias(self, output_index: ShapeIndex) -> None:
        self._aliases.pop(tuple(output_index), None)

    def copy(self) -> HloInputOutputAliasConfig:
        other = HloInputOutputAliasConfig()
        other._aliases = dict(self._aliases)
        return other

    # ---- queries ------------------------------------------------------------------
    def get_aliased_parameter(self, output_index: ShapeIndex) -> Alias | None:
        return self._aliases.get(tuple(output_index))

    def get_aliased_output(self, parameter_number: int, parameter_index: ShapeIndex = ()) -> ShapeIndex | None:
        for output_index, alias in self.items():
            if alias.parameter_number == parameter_number and alias.parameter_index == tuple(parameter_index):
                return output_index
        return None

    def items(self) -> Iterator[tuple[ShapeIndex, Alias]]:
        """(output index, alias) pairs in output-index order."""
        return iter(sorted(self._aliases.items()))

    def __len__(self) -> int:
        return len(self._aliases)

    def __bool__(self) -> bool:
        return bool(self._aliases)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, HloInputOutputAliasConfig) and self._aliases == other._aliases

    def __hash__(self) -> int:
        return hash(tuple(self.items()))

    # ---- text ---------------------------------------------------------------------
    def to_short_string(self) -> str:
        """``{0}: (0, {}, may-alias), {1}: (1, {}, must-alias)`` (XLA's ``ToShortString``)."""
        return ", ".join(f"{shape_index_text(out)}: {alias.to_text()}" for out, alias in self.items())

    def to_text(self) -> str:
        """The header attribute's value, as XLA prints it: ``{ ... }``."""
        return "{ " + self.to_short_string() + " }"

    def __repr__(self) -> str:
        return f"HloInputOutputAliasConfig({self.to_short_string()})"

    @staticmethod
    def parse(text: str) -> HloInputOutputAliasConfig:
        """Read the header value ``{ {0}: (0, {}, may-alias), ... }`` (the kind may be omitted:
        may-alias). Raises :class:`~xla_teach.hlo.text.lexer.HloParseError` pointing into ``text``."""
        c = Cursor(text)
        config = HloInputOutputAliasConfig()
        c.expect("{", "at the start of input_output_alias")
        while not c.accept("}"):
            if len(config):
                c.expect(",", "between input_output_alias entries")
            start = c.pos
            output_index = _shape_index(c)
            c.expect(":", "after the output shape index")
            c.expect("(", "before the aliased parameter")
            number = c.integer("a parameter number")
            c.expect(",", "after the parameter number")
            parameter_index = _shape_index(c)
            kind = "may-alias"
            if c.accept(","):
                kind_start = c.pos
                kind = c.name("may-alias or must-alias")
                if kind not in ALIAS_KINDS:
                    raise c.error(f"alias kind must be may-alias or must-alias, got '{kind}'", kind_start)
            c.expect(")", "after the alias")
            try:
                config.set_up_alias(output_index, number, parameter_index, kind)
            except ValueError as err:
                raise c.error(str(err), start) from None
        if not c.at_end():
            raise c.error(f"unexpected {c.describe_next()} after input_output_alias")
        return config


def _shape_index(c: Cursor) -> ShapeIndex:
    c.expect("{", "to open a shape index")
    index: list[int] = []
    while not c.accept("}"):
        if index:
            c.expect(",", "between shape index elements")
        index.append(c.integer("a shape index element"))
    return tuple(index)
