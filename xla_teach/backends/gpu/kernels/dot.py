"""GPU dot: a tiled matrix product through shared memory, with the epilogue fused.

Each block computes a ``TILE x TILE`` tile of ``C = A @ B`` (one element per
thread). It walks the contracting dimension tile by tile: the block loads a
tile of A and a tile of B into shared memory (each thread one element, loads
coalesced), waits at a barrier, and every thread accumulates ``TILE`` products
from shared memory -- each global element is read by the block once instead of
``TILE`` times::

    for k0 in range(0, K, TILE):
        As[ty][tx] = A[row, k0 + tx];  Bs[ty][tx] = B[k0 + ty, col]      # zero past the edges
        barrier
        for kk in range(TILE):  acc += As[ty][kk] * Bs[kk][tx]
        barrier
    C[row, col] = epilogue(acc)        # bias + relu ... of an output fusion

Batched products use ``blockIdx.z`` for the batch. Dots that do not fit this
form (several contracting dimensions, f16/bf16) run one inner product per thread
through the elemental emitter.
"""

from __future__ import annotations

from llvmlite import ir

from xla_teach.backends.cpu.kernels.context import KernelContext, _loader
from xla_teach.backends.cpu.kernels.dot import find_dot, gemm_shape
from xla_teach.backends.gpu.kernel_builder import LaunchDimensions
from xla_teach.backends.gpu.kernels.loop import emit_gpu_loop_kernel
from xla_teach.backends.llvm import elemental_ops as ops
from xla_teach.backends.llvm.elemental_emitter import ElementalEmitter
from xla_teach.backends.llvm.elemental_windows import dot_index_maps
from xla_teach.backends.llvm.ir_array import IrIndex, i64
from xla_teach.backends.llvm.ir_types import compute_type
from xla_teach.backends.llvm.loops import for_range, if_then, stack_slot
from xla_teach.hlo.types import PrimitiveType

TILE = 16
MAX_GRID_YZ = 65535  # CUDA's limit on gridDim.y and gridDim.z


def emit_gpu_dot_kernel(ctx: KernelContext) -> LaunchDimensions:
    dot = find_dot(ctx)
    assert dot is not None
    gemm = gemm_shape(dot)
    etype = dot.shape.element_type
    if gemm is None or etype not in (PrimitiveType.F32, PrimitiveType.F64) or any(
            op.shape.element_type is not etype for op in dot.operands):
        return emit_gpu_loop_kernel(ctx)
    if dot.shape.element_count() == 0 or -(-gemm.m // TILE) > MAX_GRID_YZ or gemm.batch > MAX_GRID_YZ:
        # An empty product would launch a zero-sized grid (a launch error); a huge one would exceed the
        # grid limits. The loop kernel handles both (it emits nothing for an empty output).
        return emit_gpu_loop_kernel(ctx)
    b, kb = ctx.b, ctx.kb
    fty = compute_type(etype)
    lhs, rhs = dot.operand(0), dot.operand(1)
    lb, lc, lf, rb, rc, rf = dot_index_maps(dot)
    em = ctx.emitter()
    a_tile = kb.shared_array(fty, TILE * TILE, "a_tile")
    b_tile = kb.shared_array(fty, TILE * TILE, "b_tile")
    tx, ty = kb.thread_x(), kb.thread_y()
    col = b.add(b.mul(kb.block_x(), i64(TILE)), tx)
    row = b.add(b.mul(kb.block_y(), i64(TILE)), ty)
    batch = kb.block_z()
    batch_dims = _unflatten_batch(b, batch, [lhs.shape.dimensions[d] for d in lb])
    acc = stack_slot(b, fty, "acc")
    b.store(ir.Constant(fty, 0.0), acc)
    zero = ir.Constant(fty, 0.0)

    def operand_at(op, batch_map, contracting, free, k, m) -> ir.Value:  # type: ignore[no-untyped-def]
        index = [i64(0)] * op.shape.rank
        for d, v in zip(batch_map, batch_dims, strict=True):
            index[d] = v
        index[contracting[0]] = k
        if free:
            index[free[0]] = m
        return em.value_at(op, IrIndex(tuple(index), op.shape))

    def clamp(v: ir.Value, size: int) -> tuple[ir.Value, ir.Value]:
        ok = b.icmp_unsigned("<", v, i64(size))
        return b.select(ok, v, i64(0)), ok

    tiles = -(-gemm.k // TILE)
    with for_range(b, i64(tiles), "ktile") as kt:
        k_a = b.add(b.mul(kt, i64(TILE)), tx)
        k_b = b.add(b.mul(kt, i64(TILE)), ty)
        safe_row, row_ok = clamp(row, gemm.m)
        safe_ka, ka_ok = clamp(k_a, gemm.k)
        a_val = operand_at(lhs, lb, lc, lf, safe_ka, safe_row)
        b.store(b.select(b.and_(row_ok, ka_ok), a_val, zero), kb.shared_address(
            a_tile, b.add(b.mul(ty, i64(TILE)), tx), fty))
        safe_col, col_ok = clamp(col, gemm.n)
        safe_kb, kb_ok = clamp(k_b, gemm.k)
        b_val = operand_at(rhs, rb, rc, rf, safe_kb, safe_col)
        b.store(b.select(b.and_(col_ok, kb_ok), b_val, zero), kb.shared_address(
            b_tile, b.add(b.mul(ty, i64(TILE)), tx), fty))
        kb.barrier()
        with for_range(b, i64(TILE), "kk") as kk:
            x = b.load(kb.shared_address(a_tile, b.add(b.mul(ty, i64(TILE)), kk), fty), typ=fty)
            y = b.load(kb.shared_address(b_tile, b.add(b.mul(kk, i64(TILE)), tx), fty), typ=fty)
            b.store(ops.emit_binary(b, "add", b.load(acc), b.fmul(x, y), etype), acc)
        kb.barrier()
    inside = b.and_(b.icmp_unsigned("<", row, i64(gemm.m)), b.icmp_unsigned("<", col, i64(gemm.n)))
    with if_then(b, inside, "store"):
        out = ctx.output_arrays[0]
        dims = list(batch_dims) + ([row] if lf else []) + ([col] if rf else [])
        index = IrIndex(tuple(dims), out.shape)
        value = b.load(acc)
        if ctx.hero() is not dot:
            gens = {p.unique_id: _loader(ctx, ctx.operand_arrays[p.parameter_number])
                    for p in ctx.instr.fused_computation.parameter_instructions}
            gens[dot.unique_id] = lambda _index, v=value: v
            value = ElementalEmitter(b, gens).value_at(ctx.hero(), index)
        out.store(b, value, index)
    grid = (-(-gemm.n // TILE), -(-gemm.m // TILE), gemm.batch)
    return LaunchDimensions(grid, (TILE, TILE, 1), 2 * TILE * TILE * (8 if etype is PrimitiveType.F64 else 4))


def _unflatten_batch(b: ir.IRBuilder, batch: ir.Value, sizes: list[int]) -> list[ir.Value]:
    values: list[ir.Value] = []
    remaining = batch
    for n, size in enumerate(reversed(sizes)):
        if n == len(sizes) - 1:
            values.append(remaining)
        else:
            values.append(b.urem(remaining, i64(size)))
            remaining = b.udiv(remaining, i64(size))
    return list(reversed(values))
