"""The machinery under :class:`~xla_teach.hlo.builder.XlaBuilder`: ``XlaOp`` handles,
emitting instructions with shape inference, and the implicit-broadcast rule.

The op methods themselves live in mixins (``builder_elementwise``, ``builder_ops``,
``builder_control``); they all end in :meth:`BuilderBase._emit`, which

1. checks that every operand was made by *this* builder,
2. infers the result shape (:func:`~xla_teach.hlo.shape_inference.infer_shape`,
   raising :class:`~xla_teach.hlo.errors.ShapeError` naming the op and operand shapes),
3. adds the instruction to the builder's computation, named after its opcode
   (``add``, ``add.1``, ...) unless a ``name=`` was given, with the current metadata.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from xla_teach.hlo.attributes import OpMetadata
from xla_teach.hlo.errors import ShapeError, shape_text
from xla_teach.hlo.ir import HloComputation, HloInstruction, HloModule
from xla_teach.hlo.shape import Shape
from xla_teach.hlo.shape_inference import infer_shape
from xla_teach.hlo.types import PrimitiveType

# What binary-op methods accept besides an XlaOp: a Python or NumPy scalar, turned
# into a constant of the other operand's element type.
Scalar = bool | int | float | np.generic



def exact_literal(value: object, dtype: np.dtype, opcode: str, shapes: Sequence[Shape] = ()) -> np.ndarray:
    """``value`` as an array of ``dtype``; a value an integer or pred type cannot hold exactly
    (``1.5`` or ``2**40`` as s32) is an error rather than silently truncated or wrapped.
    Floats round to the nearest float as usual."""
    target = np.dtype(dtype)
    try:
        with np.errstate(all="ignore"):
            literal = np.asarray(value, dtype=target)
    except (OverflowError, ValueError, TypeError):
        literal = None
    if literal is None or (target.kind in "biu" and not np.array_equal(literal, np.asarray(value))):
        ptype = PrimitiveType.from_dtype(target).name.lower()
        raise ShapeError(opcode, shapes, f"{value!r:.60} is not exactly representable as {ptype}")
    return literal

class XlaOp:
    """A handle to an instruction made by a builder (XLA's ``XlaOp``).

    Arithmetic operators build ops too: ``x * y + 1.0`` is ``add(multiply(x, y), 1.0)``
    (the Python number becomes a constant of ``x``'s element type, broadcast as needed).
    """

    __slots__ = ("builder", "instruction")

    def __init__(self, builder: BuilderBase, instruction: HloInstruction) -> None:
        self.builder = builder
        self.instruction = instruction

    @property
    def shape(self) -> Shape:
        return self.instruction.shape

    @property
    def name(self) -> str:
        return self.instruction.name

    @property
    def element_type(self) -> PrimitiveType:
        return self.instruction.shape.element_type

    @property
    def dimensions(self) -> tuple[int, ...]:
        return self.instruction.shape.dimensions

    @property
    def rank(self) -> int:
        return self.instruction.shape.rank

    # ---- operators ------------------------------------------------------------------
    def __add__(self, other: XlaOp | Scalar) -> XlaOp:
        return self.builder._binary("add", self, other)

    def __radd__(self, other: Scalar) -> XlaOp:
        return self.builder._binary("add", other, self)

    def __sub__(self, other: XlaOp | Scalar) -> XlaOp:
        return self.builder._binary("subtract", self, other)

    def __rsub__(self, other: Scalar) -> XlaOp:
        return self.builder._binary("subtract", other, self)

    def __mul__(self, other: XlaOp | Scalar) -> XlaOp:
        return self.builder._binary("multiply", self, other)

    def __rmul__(self, other: Scalar) -> XlaOp:
        return self.builder._binary("multiply", other, self)

    def __truediv__(self, other: XlaOp | Scalar) -> XlaOp:
        return self.builder._binary("divide", self, other)

    def __rtruediv__(self, other: Scalar) -> XlaOp:
        return self.builder._binary("divide", other, self)

    def __neg__(self) -> XlaOp:
        return self.builder._emit("negate", [self])

    def __repr__(self) -> str:
        return f"XlaOp(%{self.name} = {shape_text(self.shape)} {self.instruction.opcode})"


class BuilderBase:
    """State shared by all op methods: the module, this builder's computation, naming,
    metadata. See :class:`~xla_teach.hlo.builder.XlaBuilder` for the public API."""

    def __init__(self, name: str, module: HloModule, parent: BuilderBase | None,
                 computation_name: str | None = None) -> None:
        self.name = name
        self.module = module
        self.parent = parent
        # Added to the module right away so that instruction names are module-unique as they are made.
        self.computation = module.add_computation(HloComputation(computation_name or name))
        self._metadata: OpMetadata | None = None
        self._last: XlaOp | None = None
        self._finished = False

    # ---- metadata -------------------------------------------------------------------
    def set_op_metadata(self, metadata: OpMetadata | None) -> None:
        """Attach ``metadata`` to every op built from now on (``None`` stops it)."""
        self._metadata = metadata

    def clear_op_metadata(self) -> None:
        self._metadata = None

    @contextlib.contextmanager
    def op_metadata(self, **fields: str | int) -> Iterator[None]:
        """``with b.op_metadata(op_name="mlp/dense", source_line=7): ...`` -- metadata for
        the ops built inside the block (the previous metadata is restored after)."""
        saved = self._metadata
        self._metadata = OpMetadata(dict(fields))
        try:
            yield
        finally:
            self._metadata = saved

    # ---- emitting instructions ------------------------------------------------------
    def _check_open(self, opcode: str) -> None:
        if self._finished:
            raise ShapeError(opcode, [], f"builder '{self.name}' is already built; create a new builder")

    def _instruction_of(self, op: object, opcode: str, index: int) -> HloInstruction:
        if not isinstance(op, XlaOp):
            raise ShapeError(opcode, [], f"operand {index} is a {type(op).__name__}, not an XlaOp")
        if op.builder is not self:
            raise ShapeError(opcode, [op.shape], f"operand {index} %{op.name} was built by builder "
                             f"'{op.builder.name}', not by '{self.name}' (pass values into sub-computations "
                             "as parameters)")
        return op.instruction

    def _check_computation(self, comp: object, opcode: str, attr: str) -> HloComputation:
        """``comp`` must be a finished computation of this builder's module."""
        if not isinstance(comp, HloComputation):
            raise ShapeError(opcode, [], f"{attr} must be an HloComputation (from sub_builder.build_computation()), "
                             f"got {type(comp).__name__}")
        if comp.parent is not self.module or comp is self.computation:
            raise ShapeError(opcode, [], f"{attr}=%{comp.name} does not come from a sub-builder of this builder")
        if comp.root_instruction is None:
            raise ShapeError(opcode, [], f"{attr}=%{comp.name} is not built yet (call build_computation())")
        return comp

    def _emit(
        self,
        opcode: str,
        operands: Sequence[XlaOp],
        attrs: Mapping[str, Any] | None = None,
        *,
        name: str | None = None,
        result_element_type: PrimitiveType | None = None,
        result_dims: Sequence[int] | None = None,
        declared_shape: Shape | None = None,
    ) -> XlaOp:
        """Infer the shape, create the instruction, add it; the one place ops are made."""
        self._check_open(opcode)
        if declared_shape is not None and not isinstance(declared_shape, Shape):
            raise ShapeError(opcode, [], f"the shape must be a Shape (e.g. Shape.array('f32', (2, 3))), "
                             f"got {type(declared_shape).__name__} {declared_shape!r:.40}")
        instructions = [self._instruction_of(op, opcode, i) for i, op in enumerate(operands)]
        attrs = dict(attrs or {})
        try:
            shape = infer_shape(opcode, [i.shape for i in instructions], attrs,
                                result_element_type=result_element_type, result_dims=result_dims,
                                declared_shape=declared_shape)
        except ShapeError as err:
            raise (err.with_name(name) if name else err) from None
        instr = HloInstruction(opcode, shape, instructions, attrs)
        if self._metadata is not None:
            instr.metadata = OpMetadata(dict(self._metadata.fields))
        self.computation.add_instruction(instr, name or opcode)
        op = XlaOp(self, instr)
        self._last = op
        return op

    # ---- constants and implicit broadcasting ----------------------------------------
    def _constant(self, value: np.ndarray, name: str | None = None) -> XlaOp:
        shape = Shape.array(PrimitiveType.from_dtype(value.dtype), value.shape)
        return self._emit("constant", [], {"literal": value}, name=name, declared_shape=shape)

    def _as_op(self, value: XlaOp | Scalar, like: XlaOp | Scalar, opcode: str) -> XlaOp:
        """``value`` itself, or a Python/NumPy scalar as a constant of ``like``'s element type."""
        if isinstance(value, XlaOp):
            return value
        if not isinstance(like, XlaOp):
            raise ShapeError(opcode, [], "at least one operand must be an XlaOp")
        if not isinstance(value, (bool, int, float, np.generic)):
            raise ShapeError(opcode, [like.shape], f"cannot use a {type(value).__name__} as an operand")
        return self._constant(exact_literal(value, like.shape.dtype, opcode, [like.shape]))

    def _broadcast_to(self, op: XlaOp, out_dims: Sequence[int], mapping: Sequence[int], *,
                      name: str | None = None, always: bool = False) -> XlaOp:
        """Operand dim i goes to output dim ``mapping[i]``; size-1 dims may stretch
        (they are first dropped with a reshape, as XLA's BroadcastInDim does).
        Without ``always``, an op that already has ``out_dims`` is returned as is."""
        out_dims, mapping = tuple(out_dims), [int(d) for d in mapping]
        if not always and op.dimensions == out_dims and mapping == list(range(len(out_dims))):
            return op
        stretched = [i for i, d in enumerate(mapping)
                     if 0 <= d < len(out_dims) and op.dimensions[i] == 1 and out_dims[d] != 1]
        if stretched:
            kept = [i for i in range(op.rank) if i not in stretched]
            op = self._emit("reshape", [op], result_dims=[op.dimensions[i] for i in kept])
            mapping = [mapping[i] for i in kept]
        return self._emit("broadcast", [op], {"dimensions": tuple(mapping)}, name=name, result_dims=out_dims)

    def _implicit_broadcast(self, opcode: str, lhs: XlaOp, rhs: XlaOp,
                            broadcast_dimensions: Sequence[int] | None) -> tuple[XlaOp, XlaOp]:
        """The builder's (not HLO's) broadcasting rule for binary ops, as XLA's XlaBuilder:

        1. equal dimensions: nothing to do;
        2. a scalar meets an array: the scalar is broadcast (``broadcast(s), dimensions={}``);
        3. ``broadcast_dimensions`` given: the lower-rank operand's dim i becomes dim
           ``broadcast_dimensions[i]`` of the higher-rank one (``f32[3] + f32[2,3]`` with ``(1,)``);
        4. equal ranks whose dims differ only where one side is 1: both stretch.

        Anything else is left alone, so shape inference reports the mismatch.
        """
        if lhs.dimensions == rhs.dimensions and broadcast_dimensions is None:
            return lhs, rhs
        if broadcast_dimensions is not None and lhs.rank != rhs.rank:
            small, big = (lhs, rhs) if lhs.rank < rhs.rank else (rhs, lhs)
            if len(broadcast_dimensions) != small.rank:
                raise ShapeError(opcode, [lhs.shape, rhs.shape],
                                 f"broadcast_dimensions {list(broadcast_dimensions)} must have one entry per "
                                 f"dimension of the lower-rank operand {shape_text(small.shape)}")
            out = self._broadcast_result_dims(opcode, small, big, broadcast_dimensions)
            small = self._broadcast_to(small, out, broadcast_dimensions)
            big = self._broadcast_to(big, out, range(big.rank))
            return (small, big) if lhs.rank < rhs.rank else (big, small)
        if lhs.rank == 0 and rhs.rank > 0:
            return self._broadcast_to(lhs, rhs.dimensions, ()), rhs
        if rhs.rank == 0 and lhs.rank > 0:
            return lhs, self._broadcast_to(rhs, lhs.dimensions, ())
        if lhs.rank == rhs.rank and all(a == b or 1 in (a, b) for a, b in zip(lhs.dimensions, rhs.dimensions,
                                                                                strict=True)):
            out = tuple(max(a, b) for a, b in zip(lhs.dimensions, rhs.dimensions, strict=True))
            identity = range(lhs.rank)
            return self._broadcast_to(lhs, out, identity), self._broadcast_to(rhs, out, identity)
        return lhs, rhs

    def _broadcast_result_dims(self, opcode: str, small: XlaOp, big: XlaOp,
                               mapping: Sequence[int]) -> tuple[int, ...]:
        out = list(big.dimensions)
        for i, d in enumerate(mapping):
            if not 0 <= d < big.rank:
                raise ShapeError(opcode, [small.shape, big.shape], f"broadcast dimension {d} is out of range")
            a, b = small.dimensions[i], big.dimensions[d]
            if a != b and 1 not in (a, b):
                raise ShapeError(opcode, [small.shape, big.shape], f"dimension {i} (size {a}) cannot be broadcast "
                                 f"to dimension {d} (size {b})")
            out[d] = max(a, b)
        return tuple(out)

    def _binary(self, opcode: str, lhs: XlaOp | Scalar, rhs: XlaOp | Scalar,
                broadcast_dimensions: Sequence[int] | None = None, name: str | None = None,
                attrs: Mapping[str, Any] | None = None) -> XlaOp:
        """A binary elementwise op with scalar promotion and implicit broadcasting."""
        self._check_open(opcode)
        for i, value in enumerate((lhs, rhs)):
            if isinstance(value, XlaOp):
                self._instruction_of(value, opcode, i)
        lhs_op, rhs_op = self._as_op(lhs, rhs, opcode), self._as_op(rhs, lhs, opcode)
        lhs_op, rhs_op = self._implicit_broadcast(opcode, lhs_op, rhs_op, broadcast_dimensions)
        return self._emit(opcode, [lhs_op, rhs_op], attrs, name=name)
