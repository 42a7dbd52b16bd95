"""Error types shared by shape inference, the builder and the verifier.

Both are ``ValueError`` subclasses, so code that only wants "something is wrong
with this HLO" can catch ``ValueError``.

* :class:`ShapeError` -- an operation cannot be applied to these operands
  (raised by :func:`~xla_teach.hlo.shape_inference.infer_shape` and therefore by
  every :class:`~xla_teach.hlo.builder.XlaBuilder` method). The message always
  starts with the opcode (and the instruction name when it is known) and shows
  the operand shapes::

      add: operand shapes f32[2,3] and f32[3] are incompatible (elementwise ops need identical dimensions)

* :class:`VerificationError` -- :func:`~xla_teach.hlo.verifier.verify_module`
  found problems in an existing module; ``problems`` holds one line per problem,
  the first problem first.
"""

from __future__ import annotations

from collections.abc import Sequence

from xla_teach.hlo.shape import Shape


def shape_text(shape: Shape) -> str:
    """A shape as messages show it: without layouts (``f32[2,3]``)."""
    return shape.to_text(print_layout=False)


def shapes_text(shapes: Sequence[Shape]) -> str:
    """``f32[4,8], f32[]`` (``no operands`` for an empty list)."""
    return ", ".join(shape_text(s) for s in shapes) if shapes else "no operands"


class ShapeError(ValueError):
    """An op cannot be built (or inferred) from the given operands and attributes.

    ``opcode``, ``operand_shapes`` and ``detail`` are kept separately so that a
    caller that learns the instruction's name later can re-raise the same error
    with :meth:`with_name`.
    """

    def __init__(self, opcode: str, operand_shapes: Sequence[Shape], detail: str, name: str | None = None) -> None:
        self.opcode = opcode
        self.operand_shapes = tuple(operand_shapes)
        self.detail = detail
        self.name = name
        super().__init__(self._message())

    @property
    def explanation(self) -> str:
        """The detail, followed by the operand shapes when the detail does not show them all."""
        missing = [s for s in self.operand_shapes if shape_text(s) not in self.detail]
        if missing:
            return f"{self.detail} (operand shapes: {shapes_text(self.operand_shapes)})"
        return self.detail

    def _message(self) -> str:
        head = self.opcode if not self.name else f"{self.opcode} %{self.name}"
        return f"{head}: {self.explanation}"

    def with_name(self, name: str) -> ShapeError:
        """The same error, now naming the instruction."""
        return ShapeError(self.opcode, self.operand_shapes, self.detail, name)


class VerificationError(ValueError):
    """The verifier found problems; ``problems`` lists them (first found first)."""

    def __init__(self, message: str, problems: Sequence[str] = ()) -> None:
        self.problems = tuple(problems) or (message,)
        super().__init__(message)


class MissingConstantsError(ValueError):
    """A module whose text printed constants as ``{...}`` (XLA elides every constant of more than
    10 elements unless asked not to) cannot run: their values are not in the text."""

    def __init__(self, module_name: str, constants: Sequence[str]) -> None:
        self.constants = tuple(constants)
        more = len(self.constants) - 5
        shown = ", ".join(self.constants[:5]) + (f" and {more} more" if more > 0 else "")
        super().__init__(
            f"module {module_name} cannot run: its constant(s) {shown} were printed as {{...}}, so their values are "
            "not in the text (XLA elides constants of more than 10 elements). Dump the module again with "
            "--xla_dump_large_constants, or replay a snapshot (--xla_dump_hlo_snapshots), which holds the full module")
