"""Attention without its scores in memory: the kernel of an ``attention-fusion``.

``softmax(q @ k^T) @ v`` is two matrix products around a row-wise softmax. Computed one step
at a time, the scores ``[batch, queries, keys]`` go to memory, come back for the softmax, go out
again as probabilities and come back for the second product -- for 4 x 8 heads of 256 x 256 that
is an 8 MiB temporary, written and read twice. But each query's row of scores is needed only by
that query's softmax and that query's row of the output. So the kernel takes a block of queries
at a time and keeps their rows in a *tile* on the stack, small enough for the core's cache::

    for each block of R queries of one batch element    # the CPU's threads take blocks in turn
      tile[R, keys] = q[block] @ k^T                   # cblas_sgemm into the tile
      tile = softmax(tile), row by row, in place       # the softmax's own row-fusion kernel
      out[block]    = tile @ v                         # cblas_sgemm straight into the output

Both products still run at BLAS speed (``R`` is up to 128 rows), and no temporary buffer is
needed: XLA's CPU backend gets the same from YNNPACK, which fuses the whole attention.

A row must fit in the tile: every key of one query is there at once, which is what an exact
softmax needs (its maximum and its sum run over the whole row). FlashAttention also splits the
keys, keeping a running maximum and rescaling the partial sums as each block of keys arrives
(the *online softmax*), so that rows of any length fit in on-chip memory; here ``R`` simply
shrinks as rows grow (to 1 row for 32k f32 keys).

``q``, ``k`` and ``v`` may each come transposed (``[..., depth, queries]`` and so on): ``gemm``
reads them that way with its transpose flags, as JAX's einsums often ask.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

from llvmlite import ir

from xla_teach.backends.cpu.kernels.dot import call_gemm, flush_denormals
from xla_teach.backends.cpu.kernels.partitions import choose_gemm_partitions
from xla_teach.backends.cpu.kernels.row_fusion import emit_row_fusion_kernel
from xla_teach.backends.llvm.ir_array import IrArray, i64
from xla_teach.backends.llvm.ir_types import F32, F64
from xla_teach.backends.llvm.kernel_context import KernelContext, LoopRange
from xla_teach.backends.llvm.loops import for_range, stack_slot
from xla_teach.hlo.ir import HloInstruction
from xla_teach.hlo.types import PrimitiveType

ATTENTION_CONFIG = json.dumps({"fusion_backend_config": {"kind": "__cpu_attention"}}, separators=(",", ":"))
MAX_TILE_BYTES = 128 * 1024  # the scores of one block: on the stack, in the core's L2 cache
MAX_BLOCK_ROWS = 128


def is_attention_fusion(instr: HloInstruction) -> bool:
    return instr.opcode == "fusion" and instr.backend_config == ATTENTION_CONFIG


@dataclass(frozen=True)
class AttentionGeometry:
    batch: int  # all batch dimensions together
    queries: int
    keys: int
    depth: int  # what q and k contract
    values: int  # v's features: the output's last dimension
    q_transposed: bool  # q is [..., depth, queries]
    k_transposed: bool  # k is [..., depth, keys]
    v_transposed: bool  # v is [..., values, keys]
    is_double: bool

    @property
    def block_rows(self) -> int:
        row_bytes = self.keys * (8 if self.is_double else 4)
        return max(1, min(MAX_BLOCK_ROWS, MAX_TILE_BYTES // row_bytes, self.queries))


def attention_parts(fusion: HloInstruction) -> tuple[AttentionGeometry, HloInstruction] | None:
    """The geometry and the softmax (the nested row fusion) of an attention fusion."""
    if not is_attention_fusion(fusion):
        return None
    out = fusion.fused_computation.root
    softmax = out.operand(0).operand(0)
    scores = softmax.operand(0).operand(0)
    rank = out.shape.rank
    (q_contracting,), (k_contracting,) = scores.attr("lhs_contracting_dims"), scores.attr("rhs_contracting_dims")
    (v_contracting,) = out.attr("rhs_contracting_dims")
    geometry = AttentionGeometry(
        batch=math.prod(out.shape.dimensions[:-2]), queries=scores.shape.dimensions[-2],
        keys=scores.shape.dimensions[-1], depth=scores.operand(0).shape.dimensions[q_contracting],
        values=out.shape.dimensions[-1], q_transposed=q_contracting == rank - 2,
        k_transposed=k_contracting == rank - 2, v_transposed=v_contracting == rank - 1,
        is_double=out.shape.element_type is PrimitiveType.F64)
    return geometry, softmax


def emit_attention_kernel(ctx: KernelContext) -> tuple[int, int]:
    """One loop step per block of queries (module docstring)."""
    parts = attention_parts(ctx.instr)
    assert parts is not None, f"{ctx.instr.name} is not an attention fusion"
    g, softmax = parts
    b = ctx.b
    fty = F64 if g.is_double else F32
    rows = g.block_rows
    per_batch = -(-g.queries // rows)
    blocks = g.batch * per_batch
    q, k, v = (ctx.operand_arrays[i].base for i in range(3))
    out = ctx.output_arrays[0].base
    tile_slot = stack_slot(b, ir.ArrayType(fty, rows * g.keys), "scores_tile")
    tile = b.gep(tile_slot, [i64(0), i64(0)], inbounds=True)  # its first element: a plain pointer

    def at(base: ir.Value, offset: ir.Value) -> ir.Value:
        return b.gep(base, [offset], inbounds=True, source_etype=fty)

    with for_range(b, ctx.kb.end, "block", ctx.kb.begin) as blk:
        batch = b.udiv(blk, i64(per_batch))
        r0 = b.mul(b.urem(blk, i64(per_batch)), i64(rows))
        r1 = b.add(r0, i64(rows))
        r1 = b.select(b.icmp_signed("<", r1, i64(g.queries)), r1, i64(g.queries))
        m = b.sub(r1, r0)
        first = b.add(b.mul(batch, i64(g.queries)), r0)  # the block's first query, over all batches
        # tile = q[block] @ k^T
        if g.q_transposed:  # q[batch] is [depth, queries]: columns r0.. of it, transposed
            a, lda = at(q, b.add(b.mul(batch, i64(g.depth * g.queries)), r0)), g.queries
        else:
            a, lda = at(q, b.mul(first, i64(g.depth))), g.depth
        k_batch = at(k, b.mul(batch, i64(g.keys * g.depth)))
        call_gemm(b, g.is_double, m, i64(g.keys), i64(g.depth), a, i64(lda), k_batch,
                  i64(g.keys if g.k_transposed else g.depth), tile, i64(g.keys),
                  trans_a=g.q_transposed, trans_b=not g.k_transposed)
        # the softmax of the tile's m rows, in place (it reads nothing row-dependent but the scores)
        tile_rows = IrArray(tile, softmax.shape, "scores_tile")
        scalars = [ctx.operand_arrays[op.parameter_number] for op in softmax.operands[1:]]
        rows_ctx = KernelContext(LoopRange(b, b.module, i64(0), m), softmax, [tile_rows, *scalars], [tile_rows])
        emit_row_fusion_kernel(rows_ctx)
        ctx.vector_code = rows_ctx.vector_code  # the rest is calls
        # out[block] = tile @ v
        v_batch = at(v, b.mul(batch, i64(g.keys * g.values)))
        out_block = at(out, b.mul(first, i64(g.values)))
        call_gemm(b, g.is_double, m, i64(g.values), i64(g.keys), tile, i64(g.keys), v_batch,
                  i64(g.keys if g.v_transposed else g.values), out_block, i64(g.values), trans_b=g.v_transposed)
        flush_denormals(b, out_block, b.mul(m, i64(g.values)), fty)
    return blocks, choose_gemm_partitions(blocks, g.batch * g.queries * g.keys * (g.depth + g.values))
