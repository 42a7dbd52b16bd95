"""GPU dot: tiled matrix products through shared memory, with the epilogue fused.

Large f32 products at default precision go to the tensor cores in TF32
(:mod:`.dot_mma`), as XLA's do; the rest stay in f32 on the ordinary cores:

**Register tiling** (large products). A block of 256 threads computes a ``BM x BN`` tile of
``C = A @ B`` (128x128, or 64x64 when 128x128 tiles would leave the GPU's ~130 multiprocessors
short of blocks). It walks the contracting dimension ``BK = 8`` columns at a time: the block
copies an ``BM x BK`` slab of A and a ``BK x BN`` slab of B into shared memory (A transposed,
so both are read along rows), waits at a barrier, and each thread then multiplies its own
``TM x TN`` sub-tile (8x8 or 4x4) *in registers*::

    for k0 in range(0, K, BK):
        As[k][m] = A[m0 + m, k0 + k];  Bs[k][n] = B[k0 + k, n0 + n]     # zero past the edges
        barrier
        for k in range(BK):                                   # unrolled
            a[i] = As[k][ty + 16 i]  (i < TM);  b[j] = Bs[k][tx + 16 j]  (j < TN)
            acc[i][j] = fma(a[i], b[j], acc[i][j])             # TM*TN FMAs per TM+TN loads
        barrier
    C[m0 + ty + 16 i, n0 + tx + 16 j] = epilogue(acc[i][j])   # bias + relu ... of an output fusion

The point is arithmetic intensity: a thread that computes one element does one FMA per two
shared-memory loads; with an 8x8 sub-tile it does 64 FMAs per 16 loads, so the multiply units,
not shared memory, set the pace. Each thread's rows and columns are 16 apart (``ty + 16 i``),
so the 16 threads of a half-warp read 16 neighbouring words of ``Bs`` (no bank conflicts) and
write 16 neighbouring elements of C (coalesced).

**One element per thread** (small products): 16x16 threads, each one output element, tiles of
16 through shared memory -- each global element is read by a block once instead of 16 times.

Which form was chosen is the ``algorithm`` of the kernel's launch configuration in the optimized
HLO (``mma_tf32_128x128``, ``register_tiled_128x128_8x8``, ``tiled_16x16``). Batched products use
``blockIdx.z`` for the batch. Dots that do not fit either form (several
contracting dimensions, f16/bf16, layouts that are not row-major) run one inner product per
thread through the elemental emitter.
"""

from __future__ import annotations

from dataclasses import dataclass

from llvmlite import ir

from xla_teach.backends.gpu.kernel_builder import LaunchDimensions
from xla_teach.backends.gpu.kernels.dot_mma import emit_gpu_mma_dot_kernel, mma_fits, uses_tf32
from xla_teach.backends.gpu.kernels.loop import emit_gpu_loop_kernel
from xla_teach.backends.llvm import elemental_ops as ops
from xla_teach.backends.llvm.elemental_emitter import ElementalEmitter
from xla_teach.backends.llvm.elemental_windows import dot_index_maps, dot_operand_at
from xla_teach.backends.llvm.gemm import find_dot, gemm_shape
from xla_teach.backends.llvm.ir_array import IrIndex, i64, unflatten
from xla_teach.backends.llvm.ir_types import compute_type
from xla_teach.backends.llvm.kernel_context import KernelContext, operand_loader
from xla_teach.backends.llvm.loops import for_range, if_then, stack_slot
from xla_teach.hlo.types import PrimitiveType

TILE = 16
MAX_GRID_YZ = 65535  # CUDA's limit on gridDim.y and gridDim.z


def emit_gpu_dot_kernel(ctx: KernelContext, allow_tf32: bool = True) -> LaunchDimensions:
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
    if uses_tf32(dot, allow_tf32) and mma_fits(gemm.m, gemm.n, gemm.batch):
        sizes = [dot.operand(0).shape.dimensions[d] for d in dot_index_maps(dot)[0]]
        return emit_gpu_mma_dot_kernel(ctx, dot, gemm, lambda z: _unflatten_batch(b, z, sizes))
    config = _register_tiling(gemm.m, gemm.n, gemm.batch, etype)
    if config is not None:
        return _emit_register_tiled(ctx, dot, gemm, config)
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


    def clamp(v: ir.Value, size: int) -> tuple[ir.Value, ir.Value]:
        ok = b.icmp_unsigned("<", v, i64(size))
        return b.select(ok, v, i64(0)), ok

    tiles = -(-gemm.k // TILE)
    with for_range(b, i64(tiles), "ktile") as kt:
        k_a = b.add(b.mul(kt, i64(TILE)), tx)
        k_b = b.add(b.mul(kt, i64(TILE)), ty)
        safe_row, row_ok = clamp(row, gemm.m)
        safe_ka, ka_ok = clamp(k_a, gemm.k)
        a_val = dot_operand_at(em, lhs, lb, batch_dims, lc, lf, safe_ka, safe_row)
        b.store(b.select(b.and_(row_ok, ka_ok), a_val, zero), kb.shared_address(
            a_tile, b.add(b.mul(ty, i64(TILE)), tx), fty))
        safe_col, col_ok = clamp(col, gemm.n)
        safe_kb, kb_ok = clamp(k_b, gemm.k)
        b_val = dot_operand_at(em, rhs, rb, batch_dims, rc, rf, safe_kb, safe_col)
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
            gens = {p.unique_id: operand_loader(ctx, ctx.operand_arrays[p.parameter_number])
                    for p in ctx.instr.fused_computation.parameter_instructions}
            gens[dot.unique_id] = lambda _index, v=value: v
            value = ElementalEmitter(b, gens).value_at(ctx.hero(), index)
        out.store(b, value, index)
    grid = (-(-gemm.n // TILE), -(-gemm.m // TILE), gemm.batch)
    return LaunchDimensions(grid, (TILE, TILE, 1), 2 * TILE * TILE * (8 if etype is PrimitiveType.F64 else 4),
                            f"tiled_{TILE}x{TILE}")


def _unflatten_batch(b: ir.IRBuilder, batch: ir.Value, sizes: list[int]) -> list[ir.Value]:
    return unflatten(b, batch, sizes) if sizes else []


@dataclass(frozen=True)
class Tiling:
    bm: int  # rows of C per block
    bn: int  # columns of C per block
    bk: int  # contracting elements per shared-memory slab
    tm: int  # rows per thread
    tn: int  # columns per thread

    @property
    def threads(self) -> int:
        return (self.bm // self.tm) * (self.bn // self.tn)


TILINGS = [Tiling(128, 128, 8, 8, 8), Tiling(64, 64, 8, 4, 4)]
ENOUGH_BLOCKS = 128  # about one per multiprocessor of a large GPU (an H100 has 132)


def _register_tiling(m: int, n: int, batch: int, etype: PrimitiveType) -> Tiling | None:
    """The largest tiling that still gives enough blocks; None (one element per thread) for small
    products, where even 64x64 tiles would leave most of the GPU idle."""
    for tiling in TILINGS if etype is PrimitiveType.F32 else TILINGS[1:]:
        blocks = -(-m // tiling.bm) * -(-n // tiling.bn) * batch
        if blocks >= ENOUGH_BLOCKS and m >= tiling.bm // 2 and n >= tiling.bn // 2:
            return tiling
    return None


def _emit_register_tiled(ctx: KernelContext, dot, gemm, t: Tiling) -> LaunchDimensions:  # type: ignore[no-untyped-def]
    b, kb = ctx.b, ctx.kb
    etype = dot.shape.element_type
    fty = compute_type(etype)
    lhs, rhs = dot.operand(0), dot.operand(1)
    lb, lc, lf, rb, rc, rf = dot_index_maps(dot)
    em = ctx.emitter()
    threads = t.threads
    rows_per, cols_per = t.bm // t.tm, t.bn // t.tn  # thread grid inside the block (16 x 16 / 16 x 16)
    a_slab = kb.shared_array(fty, t.bk * t.bm, "a_slab")  # type: ignore[attr-defined]
    b_slab = kb.shared_array(fty, t.bk * t.bn, "b_slab")  # type: ignore[attr-defined]
    tid = kb.thread_x()  # type: ignore[attr-defined]
    ty, tx = b.udiv(tid, i64(cols_per)), b.urem(tid, i64(cols_per))
    m0 = b.mul(kb.block_y(), i64(t.bm))  # type: ignore[attr-defined]
    n0 = b.mul(kb.block_x(), i64(t.bn))  # type: ignore[attr-defined]
    batch_dims = _unflatten_batch(b, kb.block_z(), [lhs.shape.dimensions[d] for d in lb])  # type: ignore[attr-defined]
    zero = ir.Constant(fty, 0.0)
    fma = kb.module.declare_intrinsic("llvm.fma", [fty], ir.FunctionType(fty, [fty] * 3))  # type: ignore[attr-defined]
    acc = [[stack_slot(b, fty, f"acc{i}_{j}") for j in range(t.tn)] for i in range(t.tm)]
    for row in acc:
        for slot in row:
            b.store(zero, slot)


    def load_slab(k0: ir.Value) -> None:
        for r in range(t.bm * t.bk // threads):  # A: element e = tid + 256 r is (m, k) = (e / BK, e % BK)
            e = b.add(tid, i64(r * threads))
            m, k = b.add(m0, b.udiv(e, i64(t.bk))), b.add(k0, b.urem(e, i64(t.bk)))
            ok = b.and_(b.icmp_unsigned("<", m, i64(gemm.m)), b.icmp_unsigned("<", k, i64(gemm.k)))
            value = dot_operand_at(em, lhs, lb, batch_dims, lc, lf, b.select(ok, k, i64(0)), b.select(ok, m, i64(0)))
            slot = b.add(b.mul(b.urem(e, i64(t.bk)), i64(t.bm)), b.udiv(e, i64(t.bk)))
            b.store(b.select(ok, value, zero), kb.shared_address(a_slab, slot, fty))  # type: ignore[attr-defined]
        for r in range(t.bn * t.bk // threads):  # B: element e is (k, n) = (e / BN, e % BN)
            e = b.add(tid, i64(r * threads))
            k, n = b.add(k0, b.udiv(e, i64(t.bn))), b.add(n0, b.urem(e, i64(t.bn)))
            ok = b.and_(b.icmp_unsigned("<", n, i64(gemm.n)), b.icmp_unsigned("<", k, i64(gemm.k)))
            value = dot_operand_at(em, rhs, rb, batch_dims, rc, rf, b.select(ok, k, i64(0)), b.select(ok, n, i64(0)))
            b.store(b.select(ok, value, zero), kb.shared_address(b_slab, e, fty))  # type: ignore[attr-defined]

    with for_range(b, i64(-(-gemm.k // t.bk)), "kslab") as ks:
        load_slab(b.mul(ks, i64(t.bk)))
        kb.barrier()  # type: ignore[attr-defined]
        for k in range(t.bk):
            a = [b.load(kb.shared_address(a_slab, b.add(ty, i64(k * t.bm + rows_per * i)), fty), typ=fty)  # type: ignore[attr-defined]
                 for i in range(t.tm)]
            w = [b.load(kb.shared_address(b_slab, b.add(tx, i64(k * t.bn + cols_per * j)), fty), typ=fty)  # type: ignore[attr-defined]
                 for j in range(t.tn)]
            for i in range(t.tm):
                for j in range(t.tn):
                    b.store(b.call(fma, [a[i], w[j], b.load(acc[i][j])]), acc[i][j])
        kb.barrier()  # type: ignore[attr-defined]

    out = ctx.output_arrays[0]
    gens = None
    if ctx.hero() is not dot:
        gens = {p.unique_id: operand_loader(ctx, ctx.operand_arrays[p.parameter_number])
                for p in ctx.instr.fused_computation.parameter_instructions}
    for i in range(t.tm):
        row = b.add(m0, b.add(ty, i64(rows_per * i)))
        for j in range(t.tn):
            col = b.add(n0, b.add(tx, i64(cols_per * j)))
            inside = b.and_(b.icmp_unsigned("<", row, i64(gemm.m)), b.icmp_unsigned("<", col, i64(gemm.n)))
            with if_then(b, inside, "store"):
                dims = list(batch_dims) + ([row] if lf else []) + ([col] if rf else [])
                index = IrIndex(tuple(dims), out.shape)
                value = b.load(acc[i][j])
                if gens is not None:
                    gens[dot.unique_id] = lambda _index, v=value: v
                    value = ElementalEmitter(b, gens).value_at(ctx.hero(), index)
                out.store(b, value, index)
    grid = (-(-gemm.n // t.bn), -(-gemm.m // t.bm), gemm.batch)
    width = 8 if etype is PrimitiveType.F64 else 4
    return LaunchDimensions(grid, (threads, 1, 1), (t.bm + t.bn) * t.bk * width,
                            f"register_tiled_{t.bm}x{t.bn}_{t.tm}x{t.tn}")
