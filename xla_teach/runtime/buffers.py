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

import threading
import weakref

import numpy as np

from xla_teach.hlo.shape import Shape
from xla_teach.passes.scheduling.buffer_assignment import BufferAssignment, BufferSlice

ALIGNMENT = 64
SMALL_BYTES = 4096  # outputs below this are not worth aligning to a cache line


def aligned_empty(nbytes: int, alignment: int = ALIGNMENT) -> np.ndarray:
    """A uint8 array of ``nbytes`` whose data pointer is ``alignment``-aligned."""
    raw = np.empty(nbytes + alignment, dtype=np.uint8)
    offset = (-raw.ctypes.data) % alignment
    return raw[offset : offset + nbytes]


class _Lease:
    """Hands a pooled block to NumPy (``__array_interface__``) and gives it back to the pool
    when the last array viewing it is garbage-collected."""

    def __init__(self, block: np.ndarray, pool: OutputPool) -> None:
        self.block = block
        self.__array_interface__ = block.__array_interface__
        weakref.finalize(self, pool.give_back, block)


class OutputPool:
    """Recycles the memory of large output buffers, as XLA's allocators do.

    A fresh multi-megabyte ``np.empty`` is fresh pages: the kernel that writes it first pays a
    page fault and the zeroing of every 4 KiB page (about 1 ms for 16 MiB), often more than the
    kernel itself. The arrays an executable returns are the caller's, so the pool cannot reuse
    them at will -- but once the caller drops one, its block comes back here and the next run
    of any executable that needs that many bytes writes into warm memory.
    """

    MIN_BYTES = 1 << 20  # below this, malloc's own free lists do the same job
    MAX_CACHED_BYTES = 512 << 20

    def __init__(self) -> None:
        self._free: dict[int, list[np.ndarray]] = {}
        self._cached = 0
        self._lock = threading.Lock()

    def take(self, nbytes: int) -> np.ndarray:
        """A writable uint8 array of ``nbytes`` (recycled when possible)."""
        if nbytes < SMALL_BYTES:  # NumPy's own 16-byte alignment is enough here, and cheaper
            return np.empty(nbytes, np.uint8)
        if nbytes < self.MIN_BYTES:
            return aligned_empty(nbytes)
        with self._lock:
            blocks = self._free.get(nbytes)
            block = blocks.pop() if blocks else None
            if block is not None:
                self._cached -= nbytes
        if block is None:
            block = aligned_empty(nbytes)
        return np.asarray(_Lease(block, self))

    def give_back(self, block: np.ndarray) -> None:
        with self._lock:
            if self._cached + block.nbytes <= self.MAX_CACHED_BYTES:
                self._free.setdefault(block.nbytes, []).append(block)
                self._cached += block.nbytes


OUTPUT_POOL = OutputPool()


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

    # ---- the buffer interface the shared thunks use (runtime/thunks.py's RunValues) ----------
    value = array  # on the host, a value is the array itself

    def host_array(self, slice_: BufferSlice, shape: Shape) -> np.ndarray:
        return np.array(self.array(slice_, shape))

    def to_host(self, value: np.ndarray) -> np.ndarray:
        return value

    def bind_value(self, allocation_index: int, value: np.ndarray, shape: Shape, inputs: list[np.ndarray]) -> None:
        """Bind a nested sequence's result; one that *is* one of its inputs (passed straight
        through) is copied, since the input's bytes may be reused afterwards."""
        if any(np.may_share_memory(value, given) for given in inputs):
            value = np.array(value, copy=True)
        self.bind(allocation_index, to_physical(value, shape))

    def bind_host(self, allocation_index: int, array: np.ndarray, shape: Shape) -> None:
        self.bind(allocation_index, to_physical(array, shape))

    def store(self, target: np.ndarray, value: np.ndarray) -> None:
        """Copy ``value`` into ``target`` (a view of an assigned buffer, e.g. a loop's state)."""
        mine, theirs = target.__array_interface__, value.__array_interface__
        if (mine["data"][0], mine["strides"], mine["shape"]) != (theirs["data"][0], theirs["strides"], theirs["shape"]):
            np.copyto(target, value)  # NumPy copies overlapping bytes correctly


