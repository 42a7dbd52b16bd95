"""Loop emission helpers: counted loops, loop nests over a shape, stack slots.

``for_range`` builds the classic LLVM loop (preheader -> header with a phi ->
body -> latch -> exit) and yields the induction variable::

    with for_range(b, i64(n), "i") as i:
        ...body using i...

``for_each_index`` nests one such loop per dimension, outermost = most major
dimension of the layout, so the innermost loop walks contiguous memory and the
loop vectorizer can turn it into SIMD code.

The outer loops of a nest are marked *not to be unrolled* (``unroll=False``). At ``-O3`` LLVM
unrolls every loop whose trip count it knows and whose unrolled body looks small, nest level by
nest level: copying a ``[32,256]`` slice became 8,192 straight-line stores (300 KB of IR and
0.6 s of code generation for one kernel). Unrolling pays in a small window loop inside a
reduction, not around it -- nor in an elementwise kernel's innermost loop, which LLVM vectorizes
and would then unroll again for nothing but compile time (:func:`for_each_index` lets it unroll
only nests of at most ``SMALL_LOOP`` elements). llvmlite cannot build the self-referencing metadata node
LLVM wants for that (``!llvm.loop !5`` with ``!5 = distinct !{!5, !6}``), so the latch branch
carries a placeholder, ``!xla_teach.no_unroll``, that :func:`resolve_loop_hints` rewrites in
the module's text.

An innermost loop that accumulates can be asked not to be unrolled but to be interleaved
(``interleave=True``, placeholder ``!xla_teach.interleaved``): LLVM's vectorizer then works on
``INTERLEAVE`` vectors per step -- four independent partial sums or maxima, so the adds do not wait
on each other -- and no unroller copies the vector loop again afterwards
(``llvm.loop.unroll.disable`` alone would also stop the interleaving). A body of more than
``LIGHT_BODY`` instructions (an ``exp`` per element) has enough independent work to hide its
accumulator's latency, and is not interleaved: four copies of it mostly cost code generation.
The row kernels of softmax, layer norm and attention compile 20-25% faster so; a trade, since
softmax's ``exp`` loop runs about 5% slower with one vector of partial sums (the others run
as fast).

A loop whose body is already vector code (:func:`vector_loop`) is marked not to be vectorized
either (``vectorize=False``, placeholder ``!xla_teach.no_vectorize``): there is nothing left for
LLVM's loop vectorizer to do, and a small streaming loop it vectorizes (main loop, vector
epilogue, scalar remainder) costs a few milliseconds of compile time each.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from llvmlite import ir

from xla_teach.backends.llvm.ir_array import IrIndex, i64
from xla_teach.backends.llvm.ir_types import I64, PTR, SplatConstant
from xla_teach.hlo.shape import Shape

NO_UNROLL = "xla_teach.no_unroll"
NO_VECTORIZE = "xla_teach.no_vectorize"  # neither unrolled nor vectorized
INTERLEAVED = "xla_teach.interleaved"  # not unrolled, but vectorized with INTERLEAVE vectors per step
INTERLEAVE = 4
LIGHT_BODY = 24  # instructions: a longer loop body hides its accumulator's latency by itself
VECTOR_BYTES = 32  # one AVX register: what vector_loop processes per step
SMALL_NEST = 64  # a nest of at most this many iterations may still be unrolled whole (a 3x3 window)
SMALL_LOOP = 16  # an elementwise loop nest over at most this many elements may be unrolled whole


def unroll_level(sizes: list[int], level: int) -> bool:
    """May loop ``level`` of a nest over ``sizes`` (outermost first) be unrolled? The innermost
    may; an outer one only when everything inside it is a few dozen iterations."""
    inner = 1
    for size in sizes[level:]:
        inner *= size
    return level == len(sizes) - 1 or inner <= SMALL_NEST


@contextmanager
def for_range(b: ir.IRBuilder, stop: ir.Value, name: str, start: ir.Value | None = None,
              step: ir.Value | None = None, unroll: bool = True, vectorize: bool = True,
              interleave: bool = False) -> Iterator[ir.Value]:
    """``for (i = start; i < stop; i += step)`` (step 1 unless given, positive); the builder
    ends positioned after the loop. A GPU kernel's threads stride by the thread count.
    ``unroll=False`` asks LLVM not to unroll it (the outer loops of a nest); ``vectorize=False``
    asks it neither to vectorize nor to unroll it (a loop of vector code); ``interleave=True``
    (with ``unroll=False``) to vectorize it ``INTERLEAVE`` vectors at a time but not unroll it."""
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
    branch = b.branch(header)
    if not vectorize:
        branch.set_metadata(NO_VECTORIZE, b.module.add_metadata([]))
    elif not unroll and interleave and _body_size(b.function, body, exit_block, latch) <= LIGHT_BODY:
        branch.set_metadata(INTERLEAVED, b.module.add_metadata([]))
    elif not unroll:
        branch.set_metadata(NO_UNROLL, b.module.add_metadata([]))
    b.position_at_end(exit_block)


def _body_size(fn: ir.Function, body: ir.Block, exit_block: ir.Block, latch: ir.Block) -> int:
    """Instructions in a loop's body: its first block and the blocks made for it after ``exit_block``."""
    blocks = list(fn.blocks)
    inside = [body] + blocks[blocks.index(exit_block) + 1: blocks.index(latch) + 1] if latch is not body else [body]
    return sum(len(block.instructions) for block in inside)


def resolve_loop_hints(ir_text: str) -> str:
    """Write the loop hints into the module's text: each ``!xla_teach.no_unroll !N`` placeholder
    becomes LLVM's own loop metadata, ``!llvm.loop !L`` with ``!L = distinct !{!L, !U}`` and
    ``!U = !{!"llvm.loop.unroll.disable"}`` (a loop ID must name itself first, and every loop needs its own); each
    ``!xla_teach.no_vectorize !N`` the same with ``!V = !{!"llvm.loop.vectorize.enable", i1 false}``
    added, each ``!xla_teach.interleaved !N`` with ``!I = !{!"llvm.loop.interleave.count", i32 4}``."""
    if not any(name in ir_text for name in (NO_UNROLL, NO_VECTORIZE, INTERLEAVED)):
        return ir_text
    numbers = [int(n) for n in re.findall(r"^!(\d+) = ", ir_text, flags=re.M)]
    first = max(numbers, default=-1) + 1
    disable, no_vectorize, interleaved = first, first + 1, first + 2
    definitions = [f'!{disable} = !{{!"llvm.loop.unroll.disable"}}',
                   f'!{no_vectorize} = !{{!"llvm.loop.vectorize.enable", i1 false}}',
                   f'!{interleaved} = !{{!"llvm.loop.interleave.count", i32 {INTERLEAVE}}}']
    hints = {NO_UNROLL: f"!{disable}", NO_VECTORIZE: f"!{disable}, !{no_vectorize}",
             INTERLEAVED: f"!{disable}, !{interleaved}"}
    counter = [interleaved]

    def loop_id(match: re.Match[str]) -> str:
        counter[0] += 1
        definitions.append(f"!{counter[0]} = distinct !{{!{counter[0]}, {hints[match.group(1)]}}}")
        return f", !llvm.loop !{counter[0]}"

    names = "|".join(re.escape(n) for n in hints)
    text = re.sub(r', !"?(' + names + r')"? !\d+', loop_id, ir_text)
    return text.rstrip("\n") + "\n" + "\n".join(definitions) + "\n"


def element_bytes(element: ir.Type) -> int:
    if isinstance(element, ir.IntType):
        return max(1, element.width // 8)
    return {ir.HalfType: 2, ir.FloatType: 4, ir.DoubleType: 8}[type(element)]


def vector_loop(b: ir.IRBuilder, count: ir.Value, element: ir.Type, name: str,
                body: Callable[[ir.Value, int], None]) -> None:
    """Walk ``count`` elements of type ``element`` a vector register at a time: ``body(i, lanes)``
    for ``i = 0, lanes, 2 * lanes, ...`` while a whole vector fits, then ``body(i, 1)`` for each
    element left over. The body emits vector code itself (:func:`load_lanes`), so neither loop is
    given to LLVM's vectorizer -- what it would have made of a scalar loop, for far less
    compile time. A ``count`` known now gets no loop that would run no times."""
    interleaved_vector_loop(b, count, element, name, 1, lambda i, lanes, way: body(i, lanes))


def interleaved_vector_loop(b: ir.IRBuilder, count: ir.Value, element: ir.Type, name: str, ways: int,
                            body: Callable[[ir.Value, int, int], None]) -> None:
    """:func:`vector_loop` that first walks ``ways`` vectors per step, ``body(i, lanes, way)``
    telling them apart: a reduction keeps one vector of partial results per way, so that ``ways``
    additions (or maxima) are in flight at once instead of each waiting for the one before --
    what LLVM's loop *interleaving* does. Whole vectors left over then go one at a time, and the
    last elements one by one, as way 0."""

    def multiple(n: int) -> ir.Value:  # count rounded down to a multiple of n
        if isinstance(count, ir.Constant):
            return i64(count.constant // n * n)
        return b.mul(b.udiv(count, i64(n)), i64(n))

    def may_run(start: ir.Value, stop: ir.Value) -> bool:
        return not (isinstance(start, ir.Constant) and isinstance(stop, ir.Constant)) or stop.constant > start.constant

    lanes = max(1, VECTOR_BYTES // element_bytes(element))
    done: ir.Value = i64(0)
    if ways > 1:
        done = multiple(lanes * ways)
        if may_run(i64(0), done):
            with for_range(b, done, f"{name}.ways", step=i64(lanes * ways), vectorize=False) as i:
                for way in range(ways):
                    body(b.add(i, i64(way * lanes), flags=["nuw", "nsw"]) if way else i, lanes, way)
    whole = multiple(lanes)
    if may_run(done, whole):
        with for_range(b, whole, f"{name}.vec", start=done, step=i64(lanes), vectorize=False) as i:
            body(i, lanes, 0)
    if may_run(whole, count):
        with for_range(b, count, f"{name}.rest", start=whole, vectorize=False) as i:
            body(i, 1, 0)


def load_lanes(b: ir.IRBuilder, base: ir.Value, i: ir.Value, element: ir.Type, lanes: int) -> ir.Value:
    """``lanes`` consecutive elements from ``base[i]`` (one element when ``lanes`` is 1)."""
    address = b.gep(base, [i], inbounds=True, source_etype=element)
    if lanes == 1:
        return b.load(address, typ=element)
    vector = ir.VectorType(element, lanes)
    load = b.load(address, typ=vector)
    load.align = element_bytes(element)
    return load


def store_lanes(b: ir.IRBuilder, value: ir.Value, base: ir.Value, i: ir.Value, element: ir.Type) -> None:
    """Store what :func:`load_lanes` loaded (a vector or one element) at ``base[i]``."""
    store = b.store(value, b.gep(base, [i], inbounds=True, source_etype=element))
    store.align = element_bytes(element)


def splat(value: ir.Constant | ir.Value, lanes: int, b: ir.IRBuilder | None = None) -> ir.Value:
    """``value`` in every one of ``lanes`` lanes (itself when ``lanes`` is 1)."""
    if lanes == 1:
        return value
    if isinstance(value, ir.Constant):
        return SplatConstant(ir.VectorType(value.type, lanes), value)
    assert b is not None, "splatting a run-time value needs the builder"
    vector = b.insert_element(ir.Constant(ir.VectorType(value.type, lanes), None), value, i64(0))
    return b.shuffle_vector(vector, ir.Constant(ir.VectorType(value.type, lanes), None),
                            ir.Constant(ir.VectorType(ir.IntType(32), lanes), [0] * lanes))


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
        # Unrolled only within a nest of a few dozen elements: LLVM vectorizes the innermost loop
        # either way, and unrolling the vector loop again cost a quarter of the compile time of
        # an elementwise kernel without making it faster (max-pooling 20 -> 14 ms, same speed).
        inner = math.prod(shape.dimensions[o] for o in order[level:])
        with for_range(b, stop, f"{name}.d{d}", start, unroll=inner <= SMALL_LOOP) as i:
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
    None of these loops is unrolled: LLVM's unrolled and vectorized column loop gathers the
    transposed operand's elements in wide strided loads (``a.T + b`` of 4096²: 38 ms unrolled,
    23 ms as plain loops).
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
        with for_range(b, stop, f"{name}.tile{row_dim}", start, step, unroll=False) as i0:
            with for_range(b, cols, f"{name}.tile{col_dim}", i64(0), step, unroll=False) as j0:
                with for_range(b, tile_end(i0, stop), f"{name}.d{row_dim}", i0, unroll=False) as i:
                    with for_range(b, tile_end(j0, cols), f"{name}.d{col_dim}", j0, unroll=False) as j:
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
        with for_range(b, stop, f"{name}.d{d}", start, unroll=False) as i:
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


def memory_intrinsic(module: ir.Module, name: str, args: list[ir.Type]) -> ir.Function:
    """LLVM's ``llvm.memcpy``/``llvm.memset`` family, declared once per module."""
    existing = module.globals.get(name)
    if isinstance(existing, ir.Function):
        return existing
    return ir.Function(module, ir.FunctionType(ir.VoidType(), args), name)


def copy_bytes(b: ir.IRBuilder, dst: ir.Value, src: ir.Value, nbytes: ir.Value) -> None:
    """``memcpy(dst, src, nbytes)`` (the regions do not overlap)."""
    memcpy = memory_intrinsic(b.module, "llvm.memcpy.p0.p0.i64", [PTR, PTR, I64, ir.IntType(1)])
    b.call(memcpy, [dst, src, nbytes, ir.Constant(ir.IntType(1), 0)])
