"""Run-time memory: binding buffer-assignment allocations to real bytes.

For one run of a computation every :class:`Allocation` gets an address:

* parameters point straight into the caller's NumPy arrays (no copy when the
  array already has the right dtype and memory order);
* constants and the temp arena are NumPy arrays made once, at compile time;
* outputs are fresh NumPy arrays per run, handed to the caller afterwards;
* *external* allocations are bound by the thunk that produces them (the result
  of a while loop, a conditional, a host call).

Layouts: an HLO array with a non-default layout is stored in *physical* order
(major-to-minor dimension order); :func:`logical_view` and :func:`to_physical`
convert between that and NumPy's logical (row-major) arrays.
"""

from __future__ import annotations

import numpy as np

from xla_teach.hlo.shape import Shape
from xla_teach.passes.scheduling.buffer_assignment import Allocation, BufferAssignment, BufferSlice

ALIGNMENT = 64


def aligned_empty(nbytes: int, alignment: int = ALIGNMENT) -> np.ndarray:
    """A uint8 array of ``nbytes`` whose data pointer is ``alignment``-aligned."""
    raw = np.empty(nbytes + alignment, dtype=np.uint8)
    offset = (-raw.ctypes.data) % alignment
    return raw[offset : offset + nbytes]


def physical_order(shape: Shape) -> list[int]:
    """Logical dimensions from major to minor in memory."""
    return list(reversed(shape.minor_to_major()))


def to_physical(array: np.ndarray, shape: Shape) -> np.ndarray:
    """A C-contiguous array holding ``array``'s elements in ``shape``'s physical order."""
    if shape.has_default_layout() or shape.rank < 2:
        return np.ascontiguousarray(array)
    return np.ascontiguousarray(np.transpose(array, physical_order(shape)))


def logical_view(physical: np.ndarray, shape: Shape) -> np.ndarray:
    """View a physical (C-contiguous, major-to-minor) array as the logical array."""
    if shape.has_default_layout() or shape.rank < 2:
        return physical.reshape(shape.dimensions)
    order = physical_order(shape)
    dims = [shape.dimensions[d] for d in order]
    inverse = np.argsort(order)
    return physical.reshape(dims).transpose(inverse)


def empty_physical(shape: Shape) -> np.ndarray:
    order = physical_order(shape)
    return np.empty([shape.dimensions[d] for d in order], dtype=shape.dtype)


class RunBuffers:
    """Addresses (and owning arrays) of every allocation during one run."""

    def __init__(self, assignment: BufferAssignment, constants: dict[int, np.ndarray],
                 temp_arena: np.ndarray | None) -> None:
        n = len(assignment.allocations)
        self.assignment = assignment
        self.arrays: list[np.ndarray | None] = [None] * n
        self.addresses: list[int] = [0] * n
        for index, array in constants.items():
            self.bind(index, array)
        temp = assignment.temp_allocation
        if temp is not None and temp_arena is not None:
            self.bind(temp.index, temp_arena)

    def bind(self, allocation_index: int, array: np.ndarray) -> None:
        self.arrays[allocation_index] = array
        self.addresses[allocation_index] = array.ctypes.data

    def address(self, slice_: BufferSlice) -> int:
        base = self.addresses[slice_.allocation.index]
        if not base and self.arrays[slice_.allocation.index] is None:
            raise RuntimeError(f"allocation {slice_.allocation.index} ({slice_.allocation.kind}) is not bound")
        return base + slice_.offset

    def array(self, slice_: BufferSlice, shape: Shape) -> np.ndarray:
        """The logical array stored at ``slice_`` (a view, no copy)."""
        owner = self.arrays[slice_.allocation.index]
        assert owner is not None, f"allocation {slice_.allocation.index} is not bound"
        flat = owner.reshape(-1).view(np.uint8)[slice_.offset : slice_.offset + slice_.size]
        physical = flat.view(shape.dtype)
        return logical_view(physical, shape)


def allocation_shape(alloc: Allocation) -> Shape:
    return alloc.values[0][0].shape
