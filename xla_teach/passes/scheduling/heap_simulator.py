"""Packing buffers with known live ranges into one arena (XLA's heap simulator).

Each :class:`BufferBlock` needs ``size`` bytes from schedule step ``start`` to
``end`` (inclusive). Two blocks may share bytes when their live ranges do not
overlap. Like XLA's *global decreasing-size best-fit* heap, blocks are placed
largest first, each at the offset of the smallest gap between already-placed,
time-overlapping blocks that fits it (or at the end).

:func:`peak_live_bytes` gives the lower bound any packing must respect: the most
bytes alive at one step.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class BufferBlock:
    id: int
    size: int
    start: int
    end: int
    members: list[int] = field(default_factory=list)  # value ids stored in this block

    def overlaps_in_time(self, other: BufferBlock) -> bool:
        return self.start <= other.end and other.start <= self.end


def _align(n: int, alignment: int) -> int:
    return (n + alignment - 1) // alignment * alignment


def pack_blocks(blocks: list[BufferBlock], alignment: int = 64) -> tuple[dict[int, int], int]:
    """Offsets per block id and the arena size."""
    placed: list[tuple[BufferBlock, int]] = []
    offsets: dict[int, int] = {}
    arena = 0
    for block in sorted(blocks, key=lambda b: (-b.size, b.start, b.id)):
        size = _align(max(block.size, 1), alignment)
        busy = sorted((off, off + _align(max(b.size, 1), alignment)) for b, off in placed if b.overlaps_in_time(block))
        best_offset, best_gap = None, None
        cursor = 0
        for lo, hi in busy:
            gap = lo - cursor
            if gap >= size and (best_gap is None or gap < best_gap):
                best_offset, best_gap = cursor, gap
            cursor = max(cursor, hi)
        if best_offset is None:
            best_offset = cursor
        offsets[block.id] = best_offset
        placed.append((block, best_offset))
        arena = max(arena, best_offset + size)
    return offsets, arena


def peak_live_bytes(intervals: list[tuple[int, int, int]]) -> tuple[int, int]:
    """The most bytes alive at one step, and the first step where that happens.

    ``intervals`` are ``(size, start, end)`` with inclusive steps. Sizes are not aligned:
    this counts what the program needs, not how an allocator rounds it."""
    changes: dict[int, int] = {}
    for size, start, end in intervals:
        changes[start] = changes.get(start, 0) + size
        changes[end + 1] = changes.get(end + 1, 0) - size
    live = peak = peak_step = 0
    for step in sorted(changes):
        live += changes[step]
        if live > peak:
            peak, peak_step = live, step
    return peak, peak_step
