"""GPU dot on tensor cores: TF32 ``mma.sync`` tiles, as XLA does for f32 at default precision.

Since Ampere, each warp can multiply small matrices in one instruction on the *tensor cores*:
``mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32`` computes ``D = A @ B + C`` for a 16x8
tile of f32 accumulators ``C``/``D``, a 16x8 tile of A and an 8x8 tile of B whose elements are
**TF32** -- f32 rounded to 10 mantissa bits (``cvt.rna.tf32.f32``), the same 8-bit exponent.
Each of the warp's 32 lanes holds a fixed piece of every tile in registers (``g = lane / 4``,
``t = lane % 4``)::

    A (16x8, 4 registers):  a0 = A[g][t]   a1 = A[g+8][t]   a2 = A[g][t+4]   a3 = A[g+8][t+4]
    B (8x8,  2 registers):  b0 = B[t][g]   b1 = B[t+4][g]
    C (16x8, 4 registers):  c0 = C[g][2t]  c1 = C[g][2t+1]  c2 = C[g+8][2t]  c3 = C[g+8][2t+1]

A block of 8 warps computes a 128x128 tile of the output, each warp a 64x32 piece of it (4 x 4
tiles of 16x8, 64 accumulators per lane). It walks the contracting dimension 32 at a time::

    for k0 in range(0, K, 32):
        As[m][k] = tf32(A[m0 + m, k0 + k]);  Bs[k][n] = tf32(B[k0 + k, n0 + n])   # zero past edges
        barrier
        for k in (0, 8, 16, 24):                       # 4 steps of 8
            a[i] = fragment of As rows  warp_m + 16 i  (i < 4)
            b[j] = fragment of Bs columns warp_n + 8 j (j < 4)
            acc[i][j] = mma(a[i], b[j], acc[i][j])     # 16 tensor-core instructions
        barrier
    C = epilogue(acc)                                   # bias + relu ... of an output fusion

The shared-memory rows are padded (36 and 136 words) so that the 32 lanes reading a fragment hit
32 different banks. TF32 keeps f32's range but rounds each product's inputs to about 3 decimal
digits (sums stay f32): ``operand_precision={highest,highest}`` or ``--xla_teach_gpu_tf32=false``
keep full f32 (the register-tiled kernel in :mod:`.dot`).
"""

from __future__ import annotations

from llvmlite import ir

from xla_teach.backends.gpu.kernel_builder import WARP_SIZE, LaunchDimensions
from xla_teach.backends.llvm.elemental_emitter import ElementalEmitter
from xla_teach.backends.llvm.elemental_windows import dot_index_maps, dot_operand_at
from xla_teach.backends.llvm.ir_array import IrIndex, i64
from xla_teach.backends.llvm.ir_types import F32, I32
from xla_teach.backends.llvm.kernel_context import KernelContext, operand_loader
from xla_teach.backends.llvm.loops import for_range, if_then, stack_slot
from xla_teach.hlo.ir import HloInstruction
from xla_teach.hlo.types import PrimitiveType

BM, BN, BK = 128, 128, 32  # block tile and contracting slab
WARPS_M, WARPS_N = 2, 4  # 8 warps; each computes (BM / WARPS_M) x (BN / WARPS_N) = 64 x 32
MT, NT = 4, 4  # 16x8 mma tiles per warp
A_STRIDE, B_STRIDE = BK + 4, BN + 8  # padded rows: conflict-free fragment loads
THREADS = WARPS_M * WARPS_N * WARP_SIZE
ENOUGH_BLOCKS = 64


def uses_tf32(dot: HloInstruction, allow: bool) -> bool:
    """f32 x f32 at default precision, when TF32 is allowed (XLA's GPU default)."""
    precision = tuple(dot.attr("operand_precision") or ())
    return (allow and dot.shape.element_type is PrimitiveType.F32
            and all(op.shape.element_type is PrimitiveType.F32 for op in dot.operands)
            and all(p.lower() == "default" for p in precision))


def mma_fits(m: int, n: int, batch: int) -> bool:
    """Enough 128x128 tiles to fill the GPU, and no tile mostly past the edges."""
    return -(-m // BM) * -(-n // BN) * batch >= ENOUGH_BLOCKS and m >= BM // 2 and n >= BN // 2


def emit_gpu_mma_dot_kernel(ctx: KernelContext, dot: HloInstruction, gemm, batch_dims_of) -> LaunchDimensions:  # type: ignore[no-untyped-def]
    b, kb = ctx.b, ctx.kb
    module = kb.module  # type: ignore[attr-defined]
    lhs, rhs = dot.operand(0), dot.operand(1)
    lb, lc, lf, rb, rc, rf = dot_index_maps(dot)
    em = ctx.emitter()
    f4 = ir.LiteralStructType([F32] * 4)
    mma = module.declare_intrinsic("llvm.nvvm.mma.m16n8k8.row.col.tf32", (),
                                   ir.FunctionType(f4, [I32] * 6 + [F32] * 4))
    to_tf32 = module.declare_intrinsic("llvm.nvvm.f2tf32.rna", (), ir.FunctionType(I32, [F32]))
    a_slab = kb.shared_array(I32, BM * A_STRIDE, "a_tf32")  # type: ignore[attr-defined]
    b_slab = kb.shared_array(I32, BK * B_STRIDE, "b_tf32")  # type: ignore[attr-defined]
    kb.launch_bounds(THREADS, 2)  # type: ignore[attr-defined]  # <= 128 registers: two blocks per multiprocessor
    tid = kb.thread_x()  # type: ignore[attr-defined]
    warp, lane = b.udiv(tid, i64(WARP_SIZE)), b.urem(tid, i64(WARP_SIZE))
    g, t = b.udiv(lane, i64(4)), b.urem(lane, i64(4))
    warp_m = b.mul(b.udiv(warp, i64(WARPS_N)), i64(BM // WARPS_M))
    warp_n = b.mul(b.urem(warp, i64(WARPS_N)), i64(BN // WARPS_N))
    m0 = b.mul(kb.block_y(), i64(BM))  # type: ignore[attr-defined]
    n0 = b.mul(kb.block_x(), i64(BN))  # type: ignore[attr-defined]
    batch_dims = batch_dims_of(kb.block_z())  # type: ignore[attr-defined]
    zero = ir.Constant(F32, 0.0)
    acc = [[[stack_slot(b, F32, f"acc{i}_{j}_{r}") for r in range(4)] for j in range(NT)] for i in range(MT)]
    for row in acc:
        for tile in row:
            for slot in tile:
                b.store(zero, slot)


    def shared(var: ir.GlobalVariable, position: ir.Value) -> ir.Value:
        return kb.shared_address(var, position, I32)  # type: ignore[attr-defined]

    # Who loads what: thread tid copies 4 runs of 4 neighbouring elements of each slab (A: rows
    # tid/8 + 32r, columns 4*(tid%8) + j; B: rows tid/32 + 8r, columns 4*(tid%32) + j), so the
    # addresses differ by constants and few registers stay live across the loop.
    a_row, a_col = b.udiv(tid, i64(BK // 4)), b.mul(b.urem(tid, i64(BK // 4)), i64(4))
    b_row, b_col = b.udiv(tid, i64(BN // 4)), b.mul(b.urem(tid, i64(BN // 4)), i64(4))

    def load_slab(k0: ir.Value) -> None:
        for r in range(BM * BK // THREADS // 4):
            mm = b.add(a_row, i64(r * THREADS * 4 // BK))
            m = b.add(m0, mm)
            for j in range(4):
                kk = b.add(a_col, i64(j))
                k = b.add(k0, kk)
                ok = b.and_(b.icmp_unsigned("<", m, i64(gemm.m)), b.icmp_unsigned("<", k, i64(gemm.k)))
                k_safe, m_safe = b.select(ok, k, i64(0)), b.select(ok, m, i64(0))
                value = dot_operand_at(em, lhs, lb, batch_dims, lc, lf, k_safe, m_safe)
                b.store(b.call(to_tf32, [b.select(ok, value, zero)]),
                        shared(a_slab, b.add(b.mul(mm, i64(A_STRIDE)), kk)))
        for r in range(BK * BN // THREADS // 4):
            kk = b.add(b_row, i64(r * THREADS * 4 // BN))
            k = b.add(k0, kk)
            for j in range(4):
                nn = b.add(b_col, i64(j))
                n = b.add(n0, nn)
                ok = b.and_(b.icmp_unsigned("<", n, i64(gemm.n)), b.icmp_unsigned("<", k, i64(gemm.k)))
                k_safe, n_safe = b.select(ok, k, i64(0)), b.select(ok, n, i64(0))
                value = dot_operand_at(em, rhs, rb, batch_dims, rc, rf, k_safe, n_safe)
                b.store(b.call(to_tf32, [b.select(ok, value, zero)]),
                        shared(b_slab, b.add(b.mul(kk, i64(B_STRIDE)), nn)))

    with for_range(b, i64(-(-gemm.k // BK)), "kslab") as ks:
        load_slab(b.mul(ks, i64(BK)))
        kb.barrier()  # type: ignore[attr-defined]
        for k8 in range(0, BK, 8):
            a_frag = []
            for i in range(MT):
                row = b.add(warp_m, b.add(g, i64(16 * i)))
                regs = []
                for dm, dk in ((0, 0), (8, 0), (0, 4), (8, 4)):
                    position = b.add(b.mul(b.add(row, i64(dm)), i64(A_STRIDE)), b.add(t, i64(k8 + dk)))
                    regs.append(b.load(shared(a_slab, position), typ=I32))
                a_frag.append(regs)
            b_frag = []
            for j in range(NT):
                col = b.add(warp_n, b.add(g, i64(8 * j)))
                regs = []
                for dk in (0, 4):
                    position = b.add(b.mul(b.add(t, i64(k8 + dk)), i64(B_STRIDE)), col)
                    regs.append(b.load(shared(b_slab, position), typ=I32))
                b_frag.append(regs)
            for i in range(MT):
                for j in range(NT):
                    c = [b.load(slot) for slot in acc[i][j]]
                    d = b.call(mma, a_frag[i] + b_frag[j] + c)
                    for r in range(4):
                        b.store(b.extract_value(d, r), acc[i][j][r])
        kb.barrier()  # type: ignore[attr-defined]

    out = ctx.output_arrays[0]
    gens = None
    if ctx.hero() is not dot:
        gens = {p.unique_id: operand_loader(ctx, ctx.operand_arrays[p.parameter_number])
                for p in ctx.instr.fused_computation.parameter_instructions}
    for i in range(MT):
        for j in range(NT):
            for r, (dm, dn) in enumerate(((0, 0), (0, 1), (8, 0), (8, 1))):
                row = b.add(m0, b.add(warp_m, b.add(g, i64(16 * i + dm))))
                col = b.add(n0, b.add(warp_n, b.add(b.mul(t, i64(2)), i64(8 * j + dn))))
                inside = b.and_(b.icmp_unsigned("<", row, i64(gemm.m)), b.icmp_unsigned("<", col, i64(gemm.n)))
                with if_then(b, inside, "store"):
                    dims = list(batch_dims) + ([row] if lf else []) + ([col] if rf else [])
                    index = IrIndex(tuple(dims), out.shape)
                    value = b.load(acc[i][j][r])
                    if gens is not None:
                        gens[dot.unique_id] = lambda _index, v=value: v
                        value = ElementalEmitter(b, gens).value_at(ctx.hero(), index)
                    out.store(b, value, index)
    grid = (-(-gemm.n // BN), -(-gemm.m // BM), gemm.batch)
    return LaunchDimensions(grid, (THREADS, 1, 1), (BM * A_STRIDE + BK * B_STRIDE) * 4, "mma_tf32_128x128")
