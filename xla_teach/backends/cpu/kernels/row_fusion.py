"""The kernel of a ``row-fusion`` (see ``passes/fusion/row_fusion.py``): a whole row-wise
computation, one row at a time, so the row is read from memory once and then from cache::

    for kept index k in [begin, end):          # rows, split across threads
      for each reduction r (in dependency order):
        acc_r = init_r
        for j in row:  acc_r = reducer(acc_r, operand_r(k, j))   # may use earlier acc's
      for j in row:    out(k, j) = root(k, j)                    # uses every acc

A value that a reduction reads and the rest of the row reads again -- softmax's
``e = exp(x - max)``, summed and then divided -- is computed once: while its reduction walks
the row, each element is also stored into a small per-row scratch array on the stack (the
*row cache*), and later uses load it from there instead of computing ``exp`` a second time.

**Vector code.** When the row is the minor-most dimension and everything computed along it has
a vector emitter (:mod:`~xla_teach.backends.llvm.vector_emitter`), each loop over the row is
written with vectors directly, as XLA's CPU reduction emitter does: vectors of partial results
per reduction (``<8 x float>`` with AVX; two of them when the reduced value is cheap, so that
two maxima are in flight at once), joined across the lanes after the row; the elements left
over (a row length not a multiple of the lanes) in scalar code::

    v0, v1 = splat(identity)                      # -inf for max, -0 for add, ...
    for j in 0, 16, 32, ...:  v0 = max(v0, x[r, j:j+8]); v1 = max(v1, x[r, j+8:j+16])
    for j in the rest:        acc = max(acc, x[r, j])      # acc starts at init
    v = max(v0, v1)
    v = max(v, rotate(v, 4)); v = max(v, rotate(v, 2)); v = max(v, rotate(v, 1))
    acc = max(acc, v[0])                          # every lane of v holds the row's max

Values the same in every lane -- the row's max in ``exp(x - max)``, a scalar parameter -- are
splatted once per row, ahead of the loops that read them (:meth:`VectorEmitter.hoist`).
LLVM's loop vectorizer would make much the same code from scalar loops, but finding it is most of
LLVM's work on the kernel; a kernel written this way is compiled with a short pipeline instead
(``KernelContext.vector_code``, ``backends/llvm/kernel_support.py``). Reassociating the
reduction this way is what XLA allows (and what the vectorizer does too).
"""

from __future__ import annotations

from collections.abc import Callable

from llvmlite import ir

from xla_teach.backends.cpu.kernels.partitions import choose_partitions
from xla_teach.backends.llvm import elemental_ops as ops
from xla_teach.backends.llvm.elemental_windows import loop_nest
from xla_teach.backends.llvm.ir_array import IrArray, IrIndex, i64
from xla_teach.backends.llvm.ir_types import compute_type, constant_like
from xla_teach.backends.llvm.kernel_context import KernelContext
from xla_teach.backends.llvm.loops import (
    VECTOR_BYTES,
    element_bytes,
    for_each_index,
    interleaved_vector_loop,
    splat,
    stack_slot,
)
from xla_teach.backends.llvm.scalar_computation import emit_scalar_computation
from xla_teach.backends.llvm.vector_emitter import VECTOR_UNARY, VectorEmitter, lane_dimension, vector_problem
from xla_teach.hlo.ir import HloComputation, HloInstruction
from xla_teach.hlo.opcodes import TRANSCENDENTAL_OPCODES
from xla_teach.hlo.shape import Shape
from xla_teach.hlo.types import PrimitiveType
from xla_teach.passes.fusion.fusion_rules import CHEAP_FUSED_OPS

ROW_CACHE_MAX_BYTES = 64 * 1024  # per cached value and thread: small enough for the stack and L2
_CHEAP_OPCODES = CHEAP_FUSED_OPS | {"copy"}
# A reducer that is one of these ops of its two parameters has an identity to start each lane from.
_IDENTITY = {"add": -0.0, "multiply": 1.0, "maximum": float("-inf"), "minimum": float("inf")}
# Vectors of partial results for a reduction of a cheap value. A max waits on the one before it
# (4-8 cycles); two in flight hide most of that: four were 5% faster on softmax's 1024-wide rows
# and cost attention 2 ms more compile time (its code twice as long); one was 10-20% slower.
INTERLEAVED_WAYS = 2
_MATH_FUNCTIONS = VECTOR_UNARY & TRANSCENDENTAL_OPCODES


def cached_row_values(reduces: list[HloInstruction], row_elements: int) -> list[HloInstruction]:
    """The reductions' operands worth keeping per row: computed (not a plain parameter or
    broadcast), read again after their reduction, and small enough for a stack array."""
    chosen = []
    for r in reduces:
        value = r.operand(0)
        reused = any(user is not r for user in value.users)
        if value.opcode in _CHEAP_OPCODES or not reused or value in chosen:
            continue
        if row_elements * value.shape.element_type.byte_size > ROW_CACHE_MAX_BYTES:
            continue
        chosen.append(value)
    return chosen


def reducer_opcode(reducer: HloComputation) -> str | None:
    """``add`` / ``multiply`` / ``maximum`` / ``minimum`` when ``reducer`` is just that op of its
    two parameters (in either order), else None."""
    root = reducer.root
    params = reducer.parameter_instructions
    if root.opcode not in _IDENTITY or len(params) != 2 or {id(op) for op in root.operands} != {id(p) for p in params}:
        return None
    return root.opcode


def vector_lanes(fused: HloComputation, reduces: list[HloInstruction], row: list[int],
                 arrays: list[IrArray]) -> int:
    """How many lanes the row loops can be written with (0: scalar loops, for LLVM's vectorizer):
    the row must be the root's one minor-most dimension and at least a vector long, every
    reduction a plain add / multiply / max / min of a float, everything along the row
    vectorizable, and each array the kernel reads (``arrays``, by parameter number) laid out
    as its parameter says, so that the lanes are consecutive in memory."""
    root = fused.root
    for p in fused.parameter_instructions:
        array = arrays[p.parameter_number]
        if p.shape.rank and array.shape.minor_to_major()[0] != lane_dimension(p):
            return 0
    if len(row) != 1 or root.shape.element_type not in (PrimitiveType.F32, PrimitiveType.F64):
        return 0
    lanes = VECTOR_BYTES // element_bytes(compute_type(root.shape.element_type))
    if row[0] != lane_dimension(root) or root.shape.dimensions[row[0]] < lanes:
        return 0
    for r in reduces:
        value = r.operand(0)
        if (r.shape.is_tuple or reducer_opcode(r.to_apply) is None or value.shape.dimensions != root.shape.dimensions
                or lane_dimension(value) != row[0] or vector_problem(value) is not None):
            return 0
    return lanes if vector_problem(root) is None else 0


def is_cheap(value: HloInstruction) -> bool:
    """No math function on the way to ``value`` (within its row fusion, short of a reduction):
    a loop reducing it is a chain of short dependent steps, worth several accumulators."""
    seen: set[int] = set()
    stack = [value]
    while stack:
        instr = stack.pop()
        if instr.unique_id in seen or instr.opcode == "reduce":
            continue
        seen.add(instr.unique_id)
        if instr.opcode in _MATH_FUNCTIONS:
            return False
        stack.extend(instr.operands)
    return True


def emit_row_fusion_kernel(ctx: KernelContext) -> tuple[int, int]:
    fused = ctx.instr.fused_computation
    root = fused.root
    reduces = [i for i in fused.post_order() if i.opcode == "reduce"]
    row = sorted(reduces[0].attrs["dimensions"])
    shape = root.shape
    kept = [d for d in range(shape.rank) if d not in row]
    kept_shape = reduces[0].shape
    row_order = [d for d in reversed(shape.minor_to_major()) if d in row]  # major to minor
    em = ctx.emitter(reassociate=True)
    b = ctx.b
    out = ctx.output_arrays[0]

    row_sizes = [shape.dimensions[d] for d in row_order]
    row_elements = 1
    for size in row_sizes:
        row_elements *= size
    cached = cached_row_values(reduces, row_elements)
    scratch: dict[int, ir.AllocaInstr] = {}
    filled: set[int] = set()  # cached values whose row is in scratch (later uses load it)
    lanes = vector_lanes(fused, reduces, row, ctx.operand_arrays)
    vem: VectorEmitter | None = None
    if lanes:
        vem = VectorEmitter(b, em, ctx.operand_arrays, lanes, reassociate=True)
    ctx.vector_code = vem is not None  # else scalar loops, for LLVM's loop vectorizer

    def row_offset(row_values: list[ir.Value]) -> ir.Value:
        """The position of one element within its row (row-major over the row dimensions)."""
        offset: ir.Value = ir.Constant(ir.IntType(64), 0)
        for size, v in zip(row_sizes, row_values, strict=True):
            offset = b.add(b.mul(offset, ir.Constant(ir.IntType(64), size)), v)
        return offset

    def scratch_slot(value: HloInstruction, element: ir.Type, row_values: list[ir.Value]) -> ir.Value:
        if value.unique_id not in scratch:
            scratch[value.unique_id] = stack_slot(b, ir.ArrayType(element, row_elements), f"row_cache.{value.name}")
        zero = ir.Constant(ir.IntType(64), 0)
        return b.gep(scratch[value.unique_id], [zero, row_offset(row_values)], inbounds=True)

    def full_index(kept_index: IrIndex, row_values: list[ir.Value]) -> IrIndex:
        dims: list[ir.Value] = [None] * shape.rank  # type: ignore[list-item]
        for d, v in zip(kept, kept_index.dims, strict=True):
            dims[d] = v
        for d, v in zip(row_order, row_values, strict=True):
            dims[d] = v
        return IrIndex(tuple(dims), shape)

    def row_loop(name: str, body: Callable[[list[ir.Value], int, int], None], accumulates: bool = False,
                 ways: int = 1) -> None:
        """``body(row_values, lanes, way)`` over the row: vector code when the kernel has it
        (``lanes`` > 1 for whole vectors, ``ways`` of them a step; 1 for the rest), else scalar
        loops (``lanes`` 1) for LLVM to vectorize."""
        if vem is None:
            loop_nest(b, row_sizes, name, lambda values: body(values, 1, 0), unroll=False, accumulates=accumulates)
        else:
            interleaved_vector_loop(b, i64(row_sizes[0]), compute_type(shape.element_type), name, ways,
                                    lambda j, n, way: body([j], n, way))

    def reduce_row(r: HloInstruction, kept_index: IrIndex) -> None:
        """Reduce one row into a scalar slot; afterwards ``r`` reads that slot."""
        init = em.value_at(r.operand(1), IrIndex.scalar(r.operand(1).shape))
        slot = stack_slot(b, init.type, f"acc.{r.name}")
        b.store(init, slot)
        opcode = reducer_opcode(r.to_apply)
        partials: list[ir.AllocaInstr] = []  # vectors of partial results, one per way
        if vem is not None and opcode is not None:
            for way in range(INTERLEAVED_WAYS if is_cheap(r.operand(0)) else 1):
                partials.append(stack_slot(b, ir.VectorType(init.type, lanes), f"lanes{way}.{r.name}"))
                b.store(splat(constant_like(init.type, _IDENTITY[opcode]), lanes), partials[-1])
        value_instr = r.operand(0)
        element = compute_type(value_instr.shape.element_type)  # of the row cache, when it has one
        keep = value_instr in cached and value_instr.unique_id not in filled
        if vem is not None:
            vem.hoist(value_instr, full_index(kept_index, [i64(0)]))

        def accumulate(values: list[ir.Value], n: int, way: int) -> None:
            index = full_index(kept_index, values)
            if n == 1:
                value = em.value_at(value_instr, index)
                if keep:
                    b.store(value, scratch_slot(value_instr, element, values))
                b.store(emit_scalar_computation(b, r.to_apply, [b.load(slot), value], reassociate=True)[0], slot)
                return
            assert vem is not None and opcode is not None
            value = vem.value_at(value_instr, index)
            if keep:
                vem.store(value, scratch_slot(value_instr, element, values))
            vector = partials[way]
            b.store(ops.emit_binary(b, opcode, b.load(vector), value, r.shape.element_type, reassociate=True), vector)

        row_loop(f"{r.name}.row", accumulate, accumulates=True, ways=len(partials))
        if partials:  # the ways' and then the lanes' partial results join the scalar one
            assert opcode is not None
            partial = b.load(partials[0])
            for vector in partials[1:]:
                partial = ops.emit_binary(b, opcode, partial, b.load(vector), r.shape.element_type, reassociate=True)
            # Across the lanes in log2(lanes) steps: combine the vector with itself rotated by
            # half, a quarter, ... of its lanes; then every lane holds the whole reduction.
            step = lanes // 2
            while step:
                rotation = ir.Constant(ir.VectorType(ir.IntType(32), lanes), [(i + step) % lanes for i in range(lanes)])
                rotated = b.shuffle_vector(partial, ir.Constant(partial.type, None), rotation)
                partial = ops.emit_binary(b, opcode, partial, rotated, r.shape.element_type, reassociate=True)
                step //= 2
            lane0 = b.extract_element(partial, ir.Constant(ir.IntType(32), 0))
            b.store(ops.emit_binary(b, opcode, b.load(slot), lane0, r.shape.element_type, reassociate=True), slot)
        em.set_generator(r, lambda index: b.load(slot))
        if keep:
            filled.add(value_instr.unique_id)
            em.set_generator(value_instr, lambda index: b.load(
                scratch_slot(value_instr, element, [index.dims[d] for d in row_order])))
            if vem is not None:
                vem.set_generator(value_instr, lambda index: vem.load(
                    scratch_slot(value_instr, element, [index.dims[d] for d in row_order]), element))

    def per_row(kept_index: IrIndex) -> None:
        if vem is not None:
            vem.forget_uniform()
        for r in reduces:
            reduce_row(r, kept_index)
        if vem is not None:
            vem.hoist(root, full_index(kept_index, [i64(0)]))

        def write(values: list[ir.Value], n: int, way: int) -> None:
            index = full_index(kept_index, values)
            if n == 1:
                out.store(b, em.value_at(root, index), IrIndex(index.dims, out.shape))
            else:
                assert vem is not None
                vem.store(vem.value_at(root, index), out.address(b, IrIndex(index.dims, out.shape)))

        row_loop("out.row", write)

    if not kept:
        per_row(IrIndex.scalar(Shape.scalar(shape.element_type)))
        return 1, 1
    for_each_index(b, kept_shape, per_row, "rows", outer_range=(ctx.kb.begin, ctx.kb.end))
    outer = kept_shape.dimensions[list(reversed(kept_shape.minor_to_major()))[0]]
    return outer, choose_partitions(outer, shape.element_count() * 4)
