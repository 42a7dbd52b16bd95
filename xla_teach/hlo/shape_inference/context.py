"""Shared machinery of the shape inference rules.

Every rule in ``shape_inference_*.py`` is a small function ``rule(ctx) -> Shape``.
:class:`OpContext` bundles what it may look at -- the opcode, the operand shapes,
the attributes and the optional "declared" hints -- and offers helpers that
raise :class:`~xla_teach.hlo.errors.ShapeError` with a message naming the op and
its operand shapes. The helpers below the class check things several rules
share: lists of dimension numbers, windows, and the signatures of called
computations (reducers, comparators, loop bodies...).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from xla_teach.hlo.attributes import Window, WindowDimension
from xla_teach.hlo.errors import ShapeError, shape_text, shapes_text
from xla_teach.hlo.ir import HloComputation
from xla_teach.hlo.opcodes import OPCODES, REQUIRED
from xla_teach.hlo.shape import Shape
from xla_teach.hlo.types import PrimitiveType


@dataclass(frozen=True)
class OpContext:
    """One shape-inference question: "what does ``opcode`` give for these operands?"

    ``result_element_type`` / ``result_dims`` / ``declared_shape`` carry the parts
    of the answer that cannot be inferred (see :func:`~xla_teach.hlo.shape_inference.infer_shape`).
    """

    opcode: str
    operands: tuple[Shape, ...]
    attrs: Mapping[str, Any]
    result_element_type: PrimitiveType | None = None
    result_dims: tuple[int, ...] | None = None
    declared_shape: Shape | None = None

    # ---- errors -------------------------------------------------------------------------
    def fail(self, detail: str) -> ShapeError:
        """The error to ``raise`` (a method returning it keeps ``raise`` visible in the rules)."""
        return ShapeError(self.opcode, self.operands, detail)

    # ---- attributes ---------------------------------------------------------------------
    def attr(self, name: str) -> Any:
        """An attribute's value, the opcode table's default, or an error if it is required."""
        if name in self.attrs and self.attrs[name] is not None:
            return self.attrs[name]
        spec = OPCODES[self.opcode].attr(name)
        if spec is None or spec.default is REQUIRED:
            raise self.fail(f"the attribute '{name}' is required")
        return spec.default

    def int_attr(self, name: str) -> int:
        value = self.attr(name)
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(f"attribute '{name}' must be an int, got {value!r}")
        return value

    def int_list(self, name: str) -> tuple[int, ...]:
        value = self.attr(name)
        if not isinstance(value, (tuple, list)) or not all(
            isinstance(v, int) and not isinstance(v, bool) for v in value
        ):
            raise self.fail(f"attribute '{name}' must be a list of ints, got {value!r}")
        return tuple(value)

    def computation(self, name: str) -> HloComputation:
        value = self.attr(name)
        if not isinstance(value, HloComputation):
            raise self.fail(f"attribute '{name}' must be a computation, got {value!r}")
        return value

    def window(self) -> Window:
        value = self.attr("window")
        if not isinstance(value, Window):
            raise self.fail(f"attribute 'window' must be a Window, got {value!r}")
        return value

    # ---- operands -----------------------------------------------------------------------
    def expect_operand_count(self, count: int) -> None:
        if len(self.operands) != count:
            raise self.fail(f"takes {count} operand(s) but got {len(self.operands)}")

    def array_operand(self, index: int, what: str = "operand") -> Shape:
        """Operand ``index``, which must be an array (not a tuple or token)."""
        if index >= len(self.operands):
            raise self.fail(f"{what} {index} is missing ({len(self.operands)} operand(s) given)")
        shape = self.operands[index]
        if not shape.is_array:
            raise self.fail(f"{what} {index} must be an array, got {shape_text(shape)}")
        return shape

    # ---- the declared parts of the result -----------------------------------------------
    def wanted_element_type(self, required: bool) -> PrimitiveType | None:
        """``result_element_type``, else the declared shape's element type."""
        if self.result_element_type is not None:
            return self.result_element_type
        if self.declared_shape is not None and self.declared_shape.is_array:
            return self.declared_shape.element_type
        if required:
            raise self.fail("the result element type cannot be inferred; pass result_element_type= "
                            "(or declared_shape=)")
        return None

    def wanted_dims(self) -> tuple[int, ...]:
        """``result_dims``, else the declared shape's dimensions."""
        if self.result_dims is not None:
            return tuple(self.result_dims)
        if self.declared_shape is not None and self.declared_shape.is_array:
            return self.declared_shape.dimensions
        raise self.fail("the result dimensions cannot be inferred; pass result_dims= (or declared_shape=)")

    def declared(self) -> Shape:
        """The whole declared shape, for ops whose shape is written, not inferred."""
        if self.declared_shape is None:
            raise self.fail("the result shape is declared, not inferred; pass declared_shape=")
        return self.declared_shape


# ---------------------------------------------------------------------------------------
# Dimension lists
# ---------------------------------------------------------------------------------------
def check_dimension_list(ctx: OpContext, dims: Sequence[int], rank: int, what: str,
                         sorted_: bool = False) -> None:
    """``dims`` are distinct dimension numbers of a rank-``rank`` array (and sorted if asked)."""
    for d in dims:
        if not 0 <= d < rank:
            raise ctx.fail(f"{what} {list(dims)} has dimension {d}, out of range for rank {rank}")
    if len(set(dims)) != len(dims):
        raise ctx.fail(f"{what} {list(dims)} repeats a dimension")
    if sorted_ and list(dims) != sorted(dims):
        raise ctx.fail(f"{what} {list(dims)} must be sorted")


def same_dims(shapes: Sequence[Shape]) -> bool:
    return all(s.dimensions == shapes[0].dimensions for s in shapes)


# ---------------------------------------------------------------------------------------
# Windows (reduce-window, select-and-scatter, convolution)
# ---------------------------------------------------------------------------------------
def dilated_bound(size: int, dilation: int) -> int:
    """Size after putting ``dilation - 1`` holes between neighbours: ``(n-1)*d + 1`` (0 stays 0)."""
    return 0 if size == 0 else (size - 1) * dilation + 1


def window_output_size(ctx: OpContext, base: int, dim: WindowDimension, index: int) -> int:
    """Number of window positions along one dimension.

    padded base = ``lo + (n-1)*base_dilation + 1 + hi``; effective window =
    ``(size-1)*window_dilation + 1``; output = ``floor((padded - window) / stride) + 1``
    (0 when the window does not fit at all).
    """
    if dim.size < 1 or dim.stride < 1 or dim.base_dilation < 1 or dim.window_dilation < 1:
        raise ctx.fail(f"window dimension {index} has a non-positive size, stride or dilation: {dim}")
    padded = dim.padding_low + dilated_bound(base, dim.base_dilation) + dim.padding_high
    if padded < 0:
        raise ctx.fail(f"window dimension {index}: padding {dim.padding_low}_{dim.padding_high} "
                       f"removes more than the {base} elements of the base")
    effective = dilated_bound(dim.size, dim.window_dilation)
    if effective > padded:
        return 0
    return (padded - effective) // dim.stride + 1


def window_output_dims(ctx: OpContext, base_dims: Sequence[int], window: Window) -> tuple[int, ...]:
    if len(window.dimensions) != len(base_dims):
        raise ctx.fail(f"window has {len(window.dimensions)} dimensions but the operand has rank {len(base_dims)}")
    return tuple(window_output_size(ctx, n, d, i) for i, (n, d) in enumerate(zip(base_dims, window.dimensions,
                                                                                  strict=True)))


# ---------------------------------------------------------------------------------------
# Called computations
# ---------------------------------------------------------------------------------------
def signature_text(comp: HloComputation) -> str:
    """``%add (f32[], f32[]) -> f32[]``."""
    params = shapes_text([p.shape for p in comp.parameter_instructions]) if comp.num_parameters else ""
    result = shape_text(comp.root.shape) if comp.root_instruction is not None else "?"
    return f"%{comp.name} ({params}) -> {result}"


def parameter_shapes(comp: HloComputation) -> list[Shape]:
    return [p.shape for p in comp.parameter_instructions]


def root_shape(ctx: OpContext, comp: HloComputation) -> Shape:
    if comp.root_instruction is None:
        raise ctx.fail(f"called computation %{comp.name} has no root")
    return comp.root_instruction.shape


def check_arguments(ctx: OpContext, comp: HloComputation, args: Sequence[Shape], attr: str) -> None:
    """The computation takes exactly ``args`` (compatible shapes, layouts ignored)."""
    params = parameter_shapes(comp)
    if len(params) != len(args):
        raise ctx.fail(f"{attr}={signature_text(comp)} takes {len(params)} parameter(s) "
                       f"but is given {len(args)}: {shapes_text(args)}")
    for i, (param, arg) in enumerate(zip(params, args, strict=True)):
        if not param.compatible(arg):
            raise ctx.fail(f"{attr}={signature_text(comp)}: parameter {i} is {shape_text(param)} "
                           f"but the argument is {shape_text(arg)}")


def scalars(types: Sequence[PrimitiveType]) -> list[Shape]:
    return [Shape.scalar(t) for t in types]


def check_reducer(ctx: OpContext, comp: HloComputation, accumulator_types: Sequence[PrimitiveType],
                  input_types: Sequence[PrimitiveType], attr: str = "to_apply") -> None:
    """A reducer of N values takes 2N scalars (N accumulators, then N inputs) and returns
    the N new accumulators: a scalar when N == 1, else a tuple of N scalars."""
    expected = scalars(accumulator_types) + scalars(input_types)
    check_arguments(ctx, comp, expected, attr)
    results = scalars(accumulator_types)
    want = results[0] if len(results) == 1 else Shape.make_tuple(results)
    got = root_shape(ctx, comp)
    if not got.compatible(want):
        raise ctx.fail(f"{attr}={signature_text(comp)} must return {shape_text(want)}")


def check_predicate_computation(ctx: OpContext, comp: HloComputation, args: Sequence[Shape], attr: str) -> None:
    """A comparator / loop condition: takes ``args`` and returns ``pred[]``."""
    check_arguments(ctx, comp, args, attr)
    if not root_shape(ctx, comp).compatible(Shape.scalar(PrimitiveType.PRED)):
        raise ctx.fail(f"{attr}={signature_text(comp)} must return pred[]")
