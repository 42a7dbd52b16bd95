"""Where a ``scatter`` update element lands: shared by the CPU's loop and the GPU's threads.

For update element ``u`` (an index into the updates), XLA's scatter semantics give

* the *scatter* dimensions of ``u`` (those not in ``update_window_dims``) pick an index
  vector out of ``scatter_indices`` (along ``index_vector_dim``);
* that vector, through ``scatter_dims_to_operand_dims``, is the window's start in the
  operand (batching dimensions take the scatter position itself);
* the *window* dimensions of ``u`` are the offset inside the window.

A window whose start is out of bounds (``start < 0`` or ``start + window > dim``) is
skipped entirely, as in XLA: :func:`scatter_target` returns that flag with the target.
"""

from __future__ import annotations

from llvmlite import ir

from xla_teach.backends.llvm.elemental_emitter import widen_index
from xla_teach.backends.llvm.ir_array import IrArray, IrIndex, i64
from xla_teach.backends.llvm.ir_types import I1
from xla_teach.hlo.ir import HloInstruction
from xla_teach.hlo.shape import Shape


def scatter_target(b: ir.IRBuilder, instr: HloInstruction, indices: IrArray, updates_shape: Shape,
                   operand_shape: Shape, u: IrIndex) -> tuple[ir.Value, tuple[ir.Value, ...]]:
    """``(inside, target index)`` of update element ``u`` of ``scatter`` ``instr``."""
    window_dims = list(instr.attrs["update_window_dims"])
    inserted = set(instr.attrs["inserted_window_dims"])
    to_operand = list(instr.attrs["scatter_dims_to_operand_dims"])
    in_batching = list(instr.attr("input_batching_dims"))
    idx_batching = list(instr.attr("scatter_indices_batching_dims"))
    ivd = int(instr.attrs["index_vector_dim"])
    idx_shape = indices.shape
    scatter_dims = [d for d in range(updates_shape.rank) if d not in window_dims]
    idx_positions = [d for d in range(idx_shape.rank) if d != ivd]
    operand_window_dims = [d for d in range(operand_shape.rank) if d not in inserted and d not in in_batching]
    signed = idx_shape.element_type.is_signed_int

    scatter_values = [u.dims[d] for d in scatter_dims]
    position: list[ir.Value] = [i64(0)] * idx_shape.rank
    for d, v in zip(idx_positions, scatter_values, strict=True):
        position[d] = v
    start: list[ir.Value] = [i64(0)] * operand_shape.rank
    for k, od in enumerate(to_operand):
        if ivd < idx_shape.rank:
            position[ivd] = i64(k)
        start[od] = widen_index(b, indices.load(b, IrIndex(tuple(position), idx_shape)), signed)
    for od, idd in zip(in_batching, idx_batching, strict=True):
        start[od] = scatter_values[idx_positions.index(idd)]
    window_size = {od: updates_shape.dimensions[ud] for od, ud in zip(operand_window_dims, window_dims, strict=True)}
    offset = {od: u.dims[ud] for od, ud in zip(operand_window_dims, window_dims, strict=True)}
    inside: ir.Value = ir.Constant(I1, 1)
    target = []
    for d in range(operand_shape.rank):
        # start <= dim - size, not start + size <= dim: the sum wraps for a start near 2^63.
        last_start = operand_shape.dimensions[d] - window_size.get(d, 1)
        ok = b.and_(b.icmp_signed(">=", start[d], i64(0)), b.icmp_signed("<=", start[d], i64(last_start)))
        inside = b.and_(inside, ok)
        target.append(b.add(start[d], offset[d]) if d in offset else start[d])
    return inside, tuple(target)
