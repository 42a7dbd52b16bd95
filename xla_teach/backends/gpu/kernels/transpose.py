"""GPU transposes through shared memory: coalesced reads *and* coalesced writes.

A transpose that moves the minor-most (contiguous) dimension cannot be coalesced
on both sides by a one-thread-per-element loop: if neighbouring threads write
neighbouring output addresses, they read input addresses a whole row apart.
The classic fix, which XLA's transpose emitter uses too, goes through a tile in
shared memory::

    # block = 32 x 8 threads, one 32 x 32 tile; a = output's minor dim, b = input's minor dim
    for j in 0, 8, 16, 24:  tile[ty + j][tx] = operand[..., a = a0 + ty + j, b = b0 + tx]   # reads along b
    barrier
    for j in 0, 8, 16, 24:  out[..., a = a0 + tx, b = b0 + ty + j] = tile[tx][ty + j]         # writes along a

The tile has 33 columns, not 32, so the column reads of the second phase hit 32
different shared-memory banks. The value read in the first phase is whatever
the fusion computes *before* the transpose (the transpose's operand, emitted
elementally), so ``transpose(exp(x))`` stays one kernel.
"""

from __future__ import annotations

import math

from llvmlite import ir

from xla_teach.backends.gpu.kernel_builder import LaunchDimensions
from xla_teach.backends.llvm.ir_array import IrIndex, i64
from xla_teach.backends.llvm.ir_types import compute_type
from xla_teach.backends.llvm.kernel_context import KernelContext
from xla_teach.backends.llvm.loops import if_then
from xla_teach.hlo.ir import HloInstruction

TILE = 32
ROWS = 8  # threads in y; each handles TILE / ROWS rows
MIN_EXTENT = 16  # below this along either tiled dimension the plain loop kernel is as good
MAX_GRID_Z = 65535


def _hero(instr: HloInstruction) -> HloInstruction:
    return instr.fused_computation.root if instr.opcode == "fusion" else instr


def _tiled_dims(hero: HloInstruction) -> tuple[int, int]:
    """(a, b): output dims that are the output's and the operand's minor-most dimension."""
    out_minor = hero.shape.minor_to_major()[0]
    in_minor = hero.operand(0).shape.minor_to_major()[0]
    perm = list(hero.attrs["dimensions"])
    return out_minor, perm.index(in_minor)


def is_tiled_transpose(instr: HloInstruction) -> bool:
    """Does ``instr`` (unfused or a fusion's root) transpose the contiguous dimension?"""
    hero = _hero(instr)
    if hero.opcode != "transpose" or instr.shape.is_tuple or hero.shape.rank < 2:
        return False
    a, b = _tiled_dims(hero)
    dims = hero.shape.dimensions
    if a == b or dims[a] < MIN_EXTENT or dims[b] < MIN_EXTENT:
        return False
    rest = math.prod(d for i, d in enumerate(dims) if i not in (a, b))
    # rest == 0 (an empty output) would launch a zero-sized grid; tiles along b fill gridDim.y.
    return 1 <= rest <= MAX_GRID_Z and -(-dims[b] // TILE) <= MAX_GRID_Z


def emit_gpu_transpose_kernel(ctx: KernelContext) -> LaunchDimensions:
    hero = ctx.hero()
    out = ctx.output_arrays[0]
    shape = hero.shape
    a, b_dim = _tiled_dims(hero)
    dims = shape.dimensions
    rest_dims = [i for i in range(shape.rank) if i not in (a, b_dim)]
    tiles_a, tiles_b = -(-dims[a] // TILE), -(-dims[b_dim] // TILE)
    rest = math.prod(dims[i] for i in rest_dims)
    launch = LaunchDimensions((tiles_a, tiles_b, rest), (TILE, ROWS, 1), 0)
    kb, b = ctx.kb, ctx.b
    em = ctx.emitter()
    operand = hero.operand(0)
    perm = list(hero.attrs["dimensions"])
    fty = compute_type(shape.element_type)
    tile = kb.shared_array(fty, TILE * (TILE + 1), "tile")  # type: ignore[attr-defined]
    tx, ty = kb.thread_x(), kb.thread_y()  # type: ignore[attr-defined]
    a0 = b.mul(kb.block_x(), i64(TILE))  # type: ignore[attr-defined]
    b0 = b.mul(kb.block_y(), i64(TILE))  # type: ignore[attr-defined]
    # The other output dimensions, from blockIdx.z (row-major over rest_dims).
    remaining = kb.block_z()  # type: ignore[attr-defined]
    rest_index: dict[int, ir.Value] = {}
    for d in reversed(rest_dims):
        rest_index[d] = b.urem(remaining, i64(dims[d]))
        remaining = b.udiv(remaining, i64(dims[d]))

    def output_index(a_value: ir.Value, b_value: ir.Value) -> list[ir.Value]:
        index = [i64(0)] * shape.rank
        for d, v in rest_index.items():
            index[d] = v
        index[a], index[b_dim] = a_value, b_value
        return index

    def slot(row: ir.Value, col: ir.Value) -> ir.Value:
        return kb.shared_address(tile, b.add(b.mul(row, i64(TILE + 1)), col), fty)  # type: ignore[attr-defined]

    # Phase 1: read the operand along its contiguous dimension (b), write tile[a_local][b_local].
    b_read = b.add(b0, tx)
    for j in range(0, TILE, ROWS):
        a_local = b.add(ty, i64(j))
        a_read = b.add(a0, a_local)
        in_range = b.and_(b.icmp_unsigned("<", a_read, i64(dims[a])), b.icmp_unsigned("<", b_read, i64(dims[b_dim])))
        with if_then(b, in_range, f"read{j}"):
            out_idx = output_index(a_read, b_read)
            op_idx = [i64(0)] * shape.rank
            for k, d in enumerate(perm):
                op_idx[d] = out_idx[k]
            value = em.value_at(operand, IrIndex(tuple(op_idx), operand.shape))
            b.store(value, slot(a_local, tx))
    kb.barrier()  # type: ignore[attr-defined]
    # Phase 2: write the output along its contiguous dimension (a), reading the tile transposed.
    a_write = b.add(a0, tx)
    for j in range(0, TILE, ROWS):
        b_local = b.add(ty, i64(j))
        b_write = b.add(b0, b_local)
        in_range = b.and_(b.icmp_unsigned("<", a_write, i64(dims[a])), b.icmp_unsigned("<", b_write, i64(dims[b_dim])))
        with if_then(b, in_range, f"write{j}"):
            value = b.load(slot(tx, b_local), typ=fty)
            out.store(b, value, IrIndex(tuple(output_index(a_write, b_write)), out.shape))
    return launch
