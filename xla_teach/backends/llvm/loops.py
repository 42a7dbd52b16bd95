"""Loop emission helpers: counted loops, loop nests over a shape, stack slots.

``for_range`` builds the classic LLVM loop (preheader -> header with a phi ->
body -> latch -> exit) and yields the induction variable::

    with for_range(b, i64(n), "i") as i:
        ...body using i...

``for_each_index`` nests one such loop per dimension, outermost = most major
dimension of the layout, so the innermost loop walks contiguous memory and the
loop vectorizer can turn it into SIMD code.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from llvmlite import ir

from xla_teach.backends.llvm.ir_array import IrIndex, i64
from xla_teach.backends.llvm.ir_types import I64
from xla_teach.hlo.shape import Shape


@contextmanager
def for_range(b: ir.IRBuilder, stop: ir.Value, name: str, start: ir.Value | None = None,
              step: ir.Value | None = None) -> Iterator[ir.Value]:
    """``for (i = start; i < stop; i += step)`` (step 1 unless given, positive); the builder
    ends positioned after the loop. A GPU kernel's threads stride by the thread count."""
    start = start if start is not None else i64(0)
    preheader = b.block
    header = b.append_basic_block(f"{name}.header")
    body = b.append_basic_block(f"{name}.body")
    exit_block = b.append_basic_block(f"{name}.exit")
    b.branch(header)
    b.position_at_end(header)
    i = b.phi(I64, name=name)
    i.add_incoming(start, preheader)
    b.cbranch(b.icmp_signed("<", i, stop), body, exit_block)
    b.position_at_end(body)
    yield i
    latch = b.block
    i.add_incoming(b.add(i, step if step is not None else i64(1), name=f"{name}.next", flags=["nsw"]), latch)
    b.branch(header)
    b.position_at_end(exit_block)


def for_each_index(
    b: ir.IRBuilder,
    shape: Shape,
    body: Callable[[IrIndex], None],
    name: str = "idx",
    outer_range: tuple[ir.Value, ir.Value] | None = None,
) -> None:
    """Call ``body(index)`` for every index of ``shape`` (major-to-minor loop nest).

    ``outer_range=(begin, end)`` restricts the outermost loop (used to split work
    across threads).
    """
    order = list(reversed(shape.minor_to_major()))  # major ... minor
    dims: dict[int, ir.Value] = {}

    def nest(level: int) -> None:
        if level == len(order):
            body(IrIndex(tuple(dims[d] for d in range(shape.rank)), shape))
            return
        d = order[level]
        start, stop = i64(0), i64(shape.dimensions[d])
        if level == 0 and outer_range is not None:
            start, stop = outer_range
        with for_range(b, stop, f"{name}.d{d}", start) as i:
            dims[d] = i
            nest(level + 1)

    if shape.element_count() == 0:
        return
    nest(0)


def for_each_index_tiled(
    b: ir.IRBuilder,
    shape: Shape,
    body: Callable[[IrIndex], None],
    tile: int,
    name: str = "idx",
    outer_range: tuple[ir.Value, ir.Value] | None = None,
) -> None:
    """Like :func:`for_each_index`, but the two minor-most dimensions are walked in
    ``tile`` x ``tile`` blocks::

        for i0 in range(0, n1, tile):            # (the outermost loop honours outer_range)
          for j0 in range(0, n0, tile):
            for i in range(i0, min(i0 + tile, n1)):
              for j in range(j0, min(j0 + tile, n0)):
                body(..., i, j)

    A loop that reads one operand along its rows and another down its columns (``a.T + b``)
    then touches ``tile`` cache lines of each per block instead of a new line of the transposed
    operand for every element: the lines are still in the cache when the next rows need them.
    """
    order = list(reversed(shape.minor_to_major()))  # major ... minor
    if shape.rank < 2 or shape.element_count() == 0:
        for_each_index(b, shape, body, name, outer_range)
        return
    *outer_dims, row_dim, col_dim = order
    dims: dict[int, ir.Value] = {}
    step = i64(tile)

    def tile_end(start: ir.Value, stop: ir.Value) -> ir.Value:
        end = b.add(start, step)
        return b.select(b.icmp_signed("<", end, stop), end, stop)

    def blocks() -> None:
        rows = i64(shape.dimensions[row_dim])
        cols = i64(shape.dimensions[col_dim])
        start, stop = i64(0), rows
        if not outer_dims and outer_range is not None:
            start, stop = outer_range
        with for_range(b, stop, f"{name}.tile{row_dim}", start, step) as i0:
            with for_range(b, cols, f"{name}.tile{col_dim}", i64(0), step) as j0:
                with for_range(b, tile_end(i0, stop), f"{name}.d{row_dim}", i0) as i:
                    with for_range(b, tile_end(j0, cols), f"{name}.d{col_dim}", j0) as j:
                        dims[row_dim], dims[col_dim] = i, j
                        body(IrIndex(tuple(dims[d] for d in range(shape.rank)), shape))

    def nest(level: int) -> None:
        if level == len(outer_dims):
            blocks()
            return
        d = outer_dims[level]
        start, stop = i64(0), i64(shape.dimensions[d])
        if level == 0 and outer_range is not None:
            start, stop = outer_range
        with for_range(b, stop, f"{name}.d{d}", start) as i:
            dims[d] = i
            nest(level + 1)

    nest(0)


def stack_slot(b: ir.IRBuilder, ty: ir.Type, name: str) -> ir.AllocaInstr:
    """An ``alloca`` in the function's entry block (so mem2reg can promote it)."""
    entry = b.function.entry_basic_block
    saved = b.block
    if entry.instructions:
        b.position_before(entry.instructions[0])
    else:
        b.position_at_end(entry)
    slot = b.alloca(ty, name=name)
    b.position_at_end(saved)
    return slot


@contextmanager
def if_then(b: ir.IRBuilder, condition: ir.Value, name: str) -> Iterator[None]:
    """``if (condition) { body }``; the builder ends positioned after the if."""
    then_block = b.append_basic_block(f"{name}.then")
    after = b.append_basic_block(f"{name}.after")
    b.cbranch(condition, then_block, after)
    b.position_at_end(then_block)
    yield
    b.branch(after)
    b.position_at_end(after)


def while_loop(b: ir.IRBuilder, condition: Callable[[], ir.Value], body: Callable[[], None], name: str) -> None:
    """``while (condition()) { body() }`` -- state lives in stack slots."""
    header = b.append_basic_block(f"{name}.header")
    loop_body = b.append_basic_block(f"{name}.body")
    exit_block = b.append_basic_block(f"{name}.exit")
    b.branch(header)
    b.position_at_end(header)
    b.cbranch(condition(), loop_body, exit_block)
    b.position_at_end(loop_body)
    body()
    b.branch(header)
    b.position_at_end(exit_block)
