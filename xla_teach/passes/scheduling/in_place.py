"""When a kernel may write its result over an operand's buffer: in place, as XLA's
``CanShareOperandBufferWithUser`` decides. Used by buffer assignment and by the choice of which
outputs alias donated parameters (:mod:`.output_aliasing`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from xla_teach.hlo.backend_config import backend_config_field
from xla_teach.hlo.ir import HloInstruction
from xla_teach.hlo.opcodes import is_elementwise
from xla_teach.passes.fusion.row_fusion import ROW_FUSION_CONFIG, is_row_fusion

if TYPE_CHECKING:
    from xla_teach.passes.scheduling.buffer_assignment import BufferAssignment, HloValue

ShapeIndex = tuple[int, ...]


def dot_addend_parameter(fusion: HloInstruction) -> int | None:
    """The fusion parameter ``p`` of an output fusion ``add(p, dot(a, b))`` -- a gradient added
    to its accumulator, as a scan's transpose writes it -- when the CPU computes it as one BLAS
    call with ``beta = 1`` into the output: ``p``'s bytes copied there first, unless the output
    *is* ``p``'s buffer. Then the fusion may run in place over ``p``. (Same shape and layout
    throughout, a BLAS dot, and ``p`` not read by the dot.)"""
    if fusion.opcode != "fusion" or fusion.fusion_kind != "kOutput":
        return None
    root = fusion.fused_computation.root
    if root.opcode != "add" or root.shape.is_tuple:
        return None
    for addend, dot in (root.operands, reversed(root.operands)):
        if (addend.opcode == "parameter" and dot.opcode == "dot" and addend not in dot.operands
                and addend.shape == dot.shape == root.shape and len(addend.users) == 1
                and backend_config_field(dot, "dot_strategy") == "blas"):
            return int(addend.parameter_number)
    return None


def can_run_in_place(instr: HloInstruction, operand_index: int) -> bool:
    """May ``instr`` write its (array) result over operand ``operand_index``'s buffer?"""
    op = instr.operand(operand_index)
    if instr.shape.is_tuple or op.shape.is_tuple or instr.shape.byte_size() != op.shape.byte_size():
        return False
    if instr.shape.minor_to_major() != op.shape.minor_to_major():
        return False  # element i is elsewhere in the other layout: writing it would clobber one not yet read
    if dot_addend_parameter(instr) == operand_index:
        return True
    if instr.opcode in ("dynamic-update-slice", "scatter"):
        return operand_index == 0  # the rest of the operand is the result already
    if is_elementwise(instr.opcode) and instr.opcode != "bitcast-convert":
        return instr.shape.dimensions == op.shape.dimensions
    if instr.opcode == "fusion" and instr.fusion_kind == "kLoop":
        return _elementwise_up_to_root(instr, operand_index, instr.shape.dimensions)
    if is_row_fusion(instr) and instr.backend_config == ROW_FUSION_CONFIG:
        # The CPU row kernel finishes a row's reductions before it writes any of that row, so a
        # reduction may read the operand anywhere in the row; the rest must read it elementwise.
        return _elementwise_up_to_root(instr, operand_index, instr.shape.dimensions, reductions_first=True)
    return False


def can_write_output_in_place(instr: HloInstruction, operand_index: int, output_index: ShapeIndex) -> bool:
    """Like :func:`can_run_in_place` for output ``output_index`` of ``instr``: a multi-output
    ``kLoop`` fusion computes every output at an index before it stores any (``kernels/loop.py``),
    so one of its outputs may overwrite an operand read only elementwise at that same index."""
    if not instr.shape.is_tuple:
        return output_index == () and can_run_in_place(instr, operand_index)
    op, out = instr.operand(operand_index), instr.shape.subshape(output_index)
    if (instr.opcode != "fusion" or instr.fusion_kind != "kLoop" or len(output_index) != 1 or op.shape.is_tuple
            or instr.fused_computation.root.opcode != "tuple" or out.byte_size() != op.shape.byte_size()
            or out.minor_to_major() != op.shape.minor_to_major()):
        return False
    return _elementwise_up_to_root(instr, operand_index, out.dimensions)


def _elementwise_up_to_root(fusion: HloInstruction, operand_index: int, dims: tuple[int, ...],
                            reductions_first: bool = False) -> bool:
    """Is every instruction from the fused parameter up to the root elementwise over ``dims``? A
    reverse or a square transpose further on keeps the dims but reads other elements, which the
    loop may already have overwritten. A multi-output fusion's root ``tuple`` only gathers.
    ``reductions_first``: the kernel runs every ``reduce`` before it writes (a row fusion), so a
    path that ends in one has read what it needs in time."""
    root = fusion.fused_computation.root
    stack, seen = list(fusion.fused_computation.parameter(operand_index).users), set()
    while stack:
        user = stack.pop()
        if user.unique_id in seen or (user is root and user.opcode == "tuple"):
            continue
        seen.add(user.unique_id)
        if reductions_first and user.opcode == "reduce":
            continue
        if (not is_elementwise(user.opcode) or user.opcode == "bitcast-convert"
                or user.shape.dimensions != dims):
            return False
        stack.extend(user.users)
    return True


def times_read(ba: BufferAssignment, instr: HloInstruction, value: HloValue) -> int:
    """How many of ``instr``'s operand leaves hold ``value``. Counted through aliases, so that
    ``fusion(e, bitcast(e))`` reads ``e`` twice: writing the result over ``e`` would clobber
    elements the second operand still has to read at other indices."""
    return sum(ba.value(op, idx) is value for op in instr.operands for idx in op.shape.leaf_indices())
