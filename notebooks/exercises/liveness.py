"""Exercise `liveness`: when is each value alive, and how much memory does a schedule need?

Buffer assignment (``xla_teach/passes/scheduling/buffer_assignment.py``; XLA's
``BufferAssigner``) gives two values the same bytes only when their *live ranges* do not
overlap. The schedule -- the order in which instructions run -- decides those ranges, and so the
peak memory. Write both, for a computation and an order (a list of all its instructions,
operands before users):

``live_ranges(computation, order) -> {name: (start, end)}``, one entry per instruction:

* ``start`` is the instruction's position in ``order`` (0, 1, ...), except for a **parameter**:
  its buffer belongs to the caller and holds the value before the computation starts, so 0;
* ``end`` is the position of the last instruction in ``order`` that reads it (one of its
  ``users``); the **ROOT**'s value is handed to the caller, so it lives to the last position,
  ``len(order) - 1``; a value nobody reads ends where it starts.

``peak_bytes(computation, order) -> int``: the largest, over the positions ``p`` of ``order``,
sum of the sizes of the values live at ``p`` (``start <= p <= end``). A value's size is
``shape.element_count() * shape.element_type.byte_size`` bytes. (The computations have array
values only: no tuples.)

``instr.name``, ``instr.users``, ``instr.opcode``, ``instr.shape``; ``computation.root``.
Chapter 06 of the notebooks (buffer assignment) draws live ranges and the memory over time.

Grade it:  xla-teach grade liveness path/to/liveness.py
"""

from __future__ import annotations

from xla_teach.hlo.ir import HloComputation, HloInstruction


def live_ranges(computation: HloComputation, order: list[HloInstruction]) -> dict[str, tuple[int, int]]:
    # TODO: the position of each instruction, then its last reader (the ROOT: the end)
    raise NotImplementedError("TODO (liveness): the position of each instruction, then its last reader (the ROOT: the end)")


def peak_bytes(computation: HloComputation, order: list[HloInstruction]) -> int:
    # TODO: add up the sizes of the values live at each position, keep the largest sum
    raise NotImplementedError("TODO (liveness): add up the sizes of the values live at each position, keep the largest sum")
