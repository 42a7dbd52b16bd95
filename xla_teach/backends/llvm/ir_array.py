"""Arrays in memory as LLVM IR sees them: a base pointer plus an HLO shape.

An :class:`IrIndex` is a multi-dimensional index (one ``i64`` per dimension of
a shape). :class:`IrArray` turns an index into an address using the shape's
*layout*: the minor-most dimension (``minor_to_major[0]``) has stride 1, the
next one the size of the first, and so on. Layouts therefore only matter here,
when an element is finally loaded or stored -- everything above works on
logical indices, as XLA's ``IrArray`` does.

An index may also carry its *linear* (physical) position when it is already
known, so elementwise chains over same-shaped arrays address memory with one
``getelementptr`` and no index arithmetic.
"""

from __future__ import annotations

from dataclasses import dataclass

from llvmlite import ir

from xla_teach.backends.llvm.ir_types import I64, from_storage, storage_type, to_storage
from xla_teach.hlo.shape import Shape


def i64(value: int) -> ir.Constant:
    return ir.Constant(I64, value)


@dataclass(frozen=True, eq=False)
class IrIndex:
    """A logical index into ``shape``; ``linear`` is the physical offset when known."""

    dims: tuple[ir.Value, ...]
    shape: Shape
    linear: ir.Value | None = None

    @staticmethod
    def scalar(shape: Shape) -> IrIndex:
        return IrIndex((), shape, i64(0))


def strides(shape: Shape) -> list[int]:
    """Element strides of each logical dimension under the shape's layout."""
    result = [0] * shape.rank
    stride = 1
    for dim in shape.minor_to_major():
        result[dim] = stride
        stride *= shape.dimensions[dim]
    return result


def linearize(b: ir.IRBuilder, index: IrIndex) -> ir.Value:
    """Physical offset of a logical index (uses ``index.linear`` when present)."""
    if index.linear is not None:
        return index.linear
    offset: ir.Value = i64(0)
    for value, stride, size in zip(index.dims, strides(index.shape), index.shape.dimensions, strict=True):
        if size == 1:
            continue
        term = value if stride == 1 else b.mul(value, i64(stride), flags=["nuw", "nsw"])
        offset = term if isinstance(offset, ir.Constant) and offset.constant == 0 else b.add(
            offset, term, flags=["nuw", "nsw"])
    return offset


def delinearize(b: ir.IRBuilder, linear: ir.Value, shape: Shape) -> IrIndex:
    """The logical index whose *row-major* position is ``linear`` (reshape semantics)."""
    dims: list[ir.Value] = [i64(0)] * shape.rank
    remaining = linear
    for d in reversed(range(shape.rank)):
        size = shape.dimensions[d]
        if size == 1:
            dims[d] = i64(0)
            continue
        if d == 0:
            dims[d] = remaining
        else:
            dims[d] = b.urem(remaining, i64(size))
            remaining = b.udiv(remaining, i64(size))
    return IrIndex(tuple(dims), shape)


def unflatten(b: ir.IRBuilder, linear: ir.Value, sizes: list[int] | list[ir.Value]) -> list[ir.Value]:
    """Indices (major to minor) of row-major position ``linear`` over dimensions of ``sizes``
    (constants, or values known only at run time); the most major takes what is left (no bounds
    check: the caller knows ``linear`` is in range)."""
    values: list[ir.Value] = []
    remaining = linear
    for n, size in enumerate(reversed(sizes)):
        if n == len(sizes) - 1:
            values.append(remaining)
        else:
            divisor = size if isinstance(size, ir.Value) else i64(size)
            values.append(b.urem(remaining, divisor))
            remaining = b.udiv(remaining, divisor)
    return values[::-1]


def row_major_linear(b: ir.IRBuilder, index: IrIndex) -> ir.Value:
    """Row-major (logical) position of an index, independent of the layout."""
    if index.linear is not None and index.shape.has_default_layout():
        return index.linear
    offset: ir.Value = i64(0)
    for value, size in zip(index.dims, index.shape.dimensions, strict=True):
        offset = b.add(b.mul(offset, i64(size)), value)
    return offset


class IrArray:
    """A typed view of memory holding one HLO array."""

    def __init__(self, base: ir.Value, shape: Shape, name: str = "") -> None:
        assert shape.is_array, f"IrArray needs an array shape, got {shape}"
        self.base = base
        self.shape = shape
        self.name = name
        self.element_type = shape.element_type
        self.storage = storage_type(shape.element_type)

    def address(self, b: ir.IRBuilder, index: IrIndex) -> ir.Value:
        return b.gep(self.base, [linearize(b, index)], inbounds=True, source_etype=self.storage)

    def load(self, b: ir.IRBuilder, index: IrIndex) -> ir.Value:
        """Element at ``index`` in its compute type (see :mod:`ir_types`)."""
        raw = b.load(self.address(b, index), typ=self.storage)
        return from_storage(b, raw, self.element_type)

    def store(self, b: ir.IRBuilder, value: ir.Value, index: IrIndex) -> None:
        b.store(to_storage(b, value, self.element_type), self.address(b, index))


