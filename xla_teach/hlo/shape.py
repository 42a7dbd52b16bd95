"""Shapes: arrays with a layout, tuples of shapes, and the ``token[]`` shape.

An array shape is an element type, a list of dimension sizes and a *layout*: the
order of the dimensions in memory, listed **minor-to-major** as XLA prints it.
``f32[2,3]{1,0}`` is row-major (dimension 1 is contiguous); ``f32[2,3]{0,1}`` is
column-major. Scalars are rank-0 arrays and print without a layout: ``f32[]``.

Shapes are immutable values; every helper returns a new shape.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from xla_teach.hlo.types import PrimitiveType


@dataclass(frozen=True)
class Layout:
    """Physical dimension order, minor-to-major. ``extras`` keeps ``:T(8,128)``-style
    tiling/memory-space annotations verbatim (they are printed back, never interpreted)."""

    minor_to_major: tuple[int, ...]
    extras: str = ""

    @staticmethod
    def default(rank: int) -> Layout:
        """The row-major layout ``{rank-1, ..., 0}`` the parser gives a shape without one."""
        return Layout(tuple(range(rank - 1, -1, -1)))

    def is_default(self) -> bool:
        return self.minor_to_major == tuple(range(len(self.minor_to_major) - 1, -1, -1))

    def __str__(self) -> str:
        body = ",".join(str(d) for d in self.minor_to_major)
        if self.extras:
            body += ":" + self.extras
        return "{" + body + "}"


@dataclass(frozen=True)
class Shape:
    """An HLO shape. Build arrays with :meth:`array`, tuples with :meth:`make_tuple`."""

    element_type: PrimitiveType
    dimensions: tuple[int, ...] = ()
    layout: Layout | None = None
    tuple_shapes: tuple[Shape, ...] = ()
    # Bounded-dynamic dimensions (``f32[<=10]``): the flag per dimension.
    dynamic_dimensions: tuple[bool, ...] = field(default=())

    # ---- constructors ---------------------------------------------------------------
    @staticmethod
    def array(
        element_type: PrimitiveType | str,
        dimensions: tuple[int, ...] | list[int] = (),
        layout: Layout | tuple[int, ...] | None = None,
    ) -> Shape:
        """An array shape; without ``layout`` it gets the default row-major layout."""
        etype = PrimitiveType.from_name(element_type) if isinstance(element_type, str) else element_type
        if not etype.is_array_type:
            raise ValueError(f"{etype.value} is not an array element type")
        if isinstance(dimensions, str) or not all(isinstance(d, (int, np.integer)) for d in dimensions):
            raise ValueError(f"dimensions of {etype.value}[...] must be a sequence of integers, got {dimensions!r}")
        dims = tuple(int(d) for d in dimensions)
        for d in dims:
            if d < 0:
                raise ValueError(f"negative dimension size {d} in {etype.value}{list(dims)}")
        if layout is None:
            lay = Layout.default(len(dims))
        elif isinstance(layout, Layout):
            lay = layout
        else:
            lay = Layout(tuple(layout))
        if sorted(lay.minor_to_major) != list(range(len(dims))):
            raise ValueError(f"layout {lay} is not a permutation of the {len(dims)} dimensions")
        return Shape(etype, dims, lay)

    @staticmethod
    def scalar(element_type: PrimitiveType | str) -> Shape:
        return Shape.array(element_type, ())

    @staticmethod
    def make_tuple(shapes: list[Shape] | tuple[Shape, ...]) -> Shape:
        return Shape(PrimitiveType.TUPLE, tuple_shapes=tuple(shapes))

    @staticmethod
    def token() -> Shape:
        return Shape(PrimitiveType.TOKEN)

    # ---- queries --------------------------------------------------------------------
    @property
    def is_tuple(self) -> bool:
        return self.element_type is PrimitiveType.TUPLE

    @property
    def is_token(self) -> bool:
        return self.element_type is PrimitiveType.TOKEN

    @property
    def is_array(self) -> bool:
        return self.element_type.is_array_type

    @property
    def rank(self) -> int:
        return len(self.dimensions)

    @property
    def is_scalar(self) -> bool:
        return self.is_array and not self.dimensions

    def element_count(self) -> int:
        return math.prod(self.dimensions)

    def byte_size(self) -> int:
        """Bytes of the top-level buffer (a tuple is a table of 8-byte pointers)."""
        if self.is_tuple:
            return 8 * len(self.tuple_shapes)
        if self.is_token:
            return 0
        return self.element_count() * self.element_type.byte_size

    @property
    def dtype(self) -> np.dtype:
        return self.element_type.dtype

    def minor_to_major(self) -> tuple[int, ...]:
        return self.layout.minor_to_major if self.layout is not None else Layout.default(self.rank).minor_to_major

    def has_default_layout(self) -> bool:
        return self.layout is None or self.layout.is_default()

    def subshape(self, index: tuple[int, ...]) -> Shape:
        """The shape at ``index`` inside a (nested) tuple (XLA's ``ShapeUtil::GetSubshape``)."""
        shape = self
        for i in index:
            shape = shape.tuple_shapes[i]
        return shape

    def leaf_indices(self, prefix: tuple[int, ...] = ()) -> list[tuple[int, ...]]:
        """The indices of the array leaves in depth-first order (``[()]`` for an array)."""
        if self.is_tuple:
            return [idx for i, s in enumerate(self.tuple_shapes) for idx in s.leaf_indices(prefix + (i,))]
        return [prefix]

    def leaf_shapes(self) -> list[Shape]:
        """Array shapes of a (possibly nested) tuple in depth-first order."""
        if self.is_tuple:
            return [leaf for s in self.tuple_shapes for leaf in s.leaf_shapes()]
        return [self]

    # ---- derived shapes -------------------------------------------------------------
    def with_element_type(self, element_type: PrimitiveType) -> Shape:
        return Shape(element_type, self.dimensions, self.layout, (), self.dynamic_dimensions)

    def with_dimensions(self, dimensions: tuple[int, ...]) -> Shape:
        """Same type, new dims, default layout."""
        return Shape.array(self.element_type, dimensions)

    def with_layout(self, layout: Layout | tuple[int, ...]) -> Shape:
        return Shape.array(self.element_type, self.dimensions, layout)

    def without_layout(self) -> Shape:
        if self.is_tuple:
            return Shape.make_tuple([s.without_layout() for s in self.tuple_shapes])
        if not self.is_array:
            return self
        return Shape(self.element_type, self.dimensions, Layout.default(self.rank), (), self.dynamic_dimensions)

    def compatible(self, other: Shape) -> bool:
        """Equal element types and dimensions, layouts ignored (recursively)."""
        if self.element_type is not other.element_type:
            return False
        if self.is_tuple:
            return len(self.tuple_shapes) == len(other.tuple_shapes) and all(
                a.compatible(b) for a, b in zip(self.tuple_shapes, other.tuple_shapes, strict=True)
            )
        return self.dimensions == other.dimensions

    # ---- text -----------------------------------------------------------------------
    def to_text(self, print_layout: bool = True) -> str:
        """XLA's spelling, e.g. ``f32[2,3]{1,0}`` or ``(f32[], s32[4]{0})``. (Remembered: a shape
        never changes, and every stage of a compile prints every instruction's shape.)"""
        key = "_text" if print_layout else "_text_no_layout"
        known = self.__dict__.get(key)
        if known is None:
            known = self._spell(print_layout)
            object.__setattr__(self, key, known)
        return known

    def _spell(self, print_layout: bool) -> str:
        if self.is_tuple:
            parts = []
            for i, s in enumerate(self.tuple_shapes):
                prefix = f"/*index={i}*/" if i > 0 and i % 5 == 0 else ""
                parts.append(prefix + s.to_text(print_layout))
            return "(" + ", ".join(parts) + ")"
        if self.is_token:
            return "token[]"
        dims = []
        for i, d in enumerate(self.dimensions):
            dynamic = i < len(self.dynamic_dimensions) and self.dynamic_dimensions[i]
            dims.append(f"<={d}" if dynamic else str(d))
        text = f"{self.element_type.value}[{','.join(dims)}]"
        if print_layout and self.dimensions and self.layout is not None:
            text += str(self.layout)
        return text

    def __str__(self) -> str:
        return self.to_text()

    def __repr__(self) -> str:
        return f"Shape({self.to_text()})"
