"""Exercise `read_dump`: read XLA's own optimized dump, and find its fusion decisions.

``XLA_FLAGS=--xla_dump_to=DIR`` makes XLA write every module it compiles; the one named
``*.after_optimizations.txt`` is what actually runs. The grader hands your functions modules
from real dumps (JAX programs compiled by XLA's CPU backend), parsed by xla_teach's parser
(``module.entry`` is the ENTRY computation, ``computation.instructions`` its instructions in
order, ``instr.opcode``, ``instr.name``, ``instr.metadata.fields`` a dict with ``op_name`` and
``stack_frame_id``, ``instr.fused_computation`` the computation a ``fusion`` calls).

1. ``kernels(module)``: the names of the ENTRY's instructions that run as kernels (or library
   calls), in order: every one but ``parameter``, ``constant``, ``tuple``,
   ``get-tuple-element`` and ``bitcast`` (those only name buffers).
2. ``holder(module, op_name, opcode)``: the name of the ENTRY instruction that computes an
   instruction the front end named ``op_name`` with this opcode: the instruction itself, or the
   ``fusion`` whose fused computation (or a fusion nested in it) holds it. The first in ENTRY
   order if several do; ``None`` if none does. This is how you find where a line of your program
   went.
3. ``source_line(module, frame_id)``: XLA's dumps no longer print source lines in the metadata:
   ``stack_frame_id=6`` points into tables at the top of the dump, kept here as
   ``module.stack_frame_tables`` (a list of ``(header, rows)``: ``"FileNames"``, then
   ``"FunctionNames"``, ``"FileLocations"`` and ``"StackFrames"``, each row a line of the dump
   as printed, its number first: ``'3 {file_location_id=3 parent_frame_id=2}'``). A
   ``StackFrames`` row ``{file_location_id=3
   parent_frame_id=2}`` names a ``FileLocations`` row ``{file_name_id=1 function_name_id=3
   line=109 ...}``, which names a ``FileNames`` row ``"path/to/file.py"``. Return
   ``(file name, line)`` of the frame itself (not its parents).
4. ``fused_lines(module, fusion)``: the decision, explained by the program: the sorted distinct
   source lines of the instructions XLA fused into ``fusion`` (those that carry a
   ``stack_frame_id``) -- which lines of your Python became this one kernel.

Grade it:  xla-teach grade read_dump path/to/read_dump.py
"""

from __future__ import annotations

import re

from xla_teach.hlo.ir import HloComputation, HloInstruction, HloModule

QUIET = ("parameter", "constant", "tuple", "get-tuple-element", "bitcast")


def kernels(module: HloModule) -> list[str]:
    # BEGIN SOLUTION: every ENTRY instruction that is not only a name for a buffer
    return [i.name for i in module.entry.instructions if i.opcode not in QUIET]
    # END SOLUTION


def _holds(comp: HloComputation, op_name: str, opcode: str) -> bool:
    for instr in comp.instructions:
        fields = instr.metadata.fields if instr.metadata else {}
        if instr.opcode == opcode and fields.get("op_name") == op_name:
            return True
        if instr.opcode == "fusion" and _holds(instr.fused_computation, op_name, opcode):
            return True
    return False


def holder(module: HloModule, op_name: str, opcode: str) -> str | None:
    # BEGIN SOLUTION: the instruction itself, or the fusion whose computation holds it
    for instr in module.entry.instructions:
        fields = instr.metadata.fields if instr.metadata else {}
        if instr.opcode == opcode and fields.get("op_name") == op_name:
            return instr.name
        if instr.opcode == "fusion" and _holds(instr.fused_computation, op_name, opcode):
            return instr.name
    return None
    # END SOLUTION


def _field(row: str, name: str) -> int:
    found = re.search(rf"\b{name}=(\d+)", row)
    if found is None:
        raise ValueError(f"no {name} in {row!r}")
    return int(found.group(1))


def source_line(module: HloModule, frame_id: int) -> tuple[str, int]:
    # BEGIN SOLUTION: StackFrames -> FileLocations -> FileNames, each row found by its number
    tables = {header: dict(row.split(None, 1) for row in rows) for header, rows in module.stack_frame_tables}
    frame = tables["StackFrames"][str(frame_id)]
    location = tables["FileLocations"][str(_field(frame, "file_location_id"))]
    file_name = tables["FileNames"][str(_field(location, "file_name_id"))].strip().strip('"')
    return file_name, _field(location, "line")
    # END SOLUTION


def _fused(instr: HloInstruction) -> list[HloInstruction]:
    found = []
    for inner in instr.fused_computation.instructions:
        found += _fused(inner) if inner.opcode == "fusion" else [inner]
    return found


def fused_lines(module: HloModule, fusion: str) -> list[int]:
    # BEGIN SOLUTION: the stack frame of every fused instruction, as a line
    lines = set()
    for instr in _fused(module.entry.instruction(fusion)):
        frame = (instr.metadata.fields if instr.metadata else {}).get("stack_frame_id")
        if frame:
            lines.add(source_line(module, int(frame))[1])
    return sorted(lines)
    # END SOLUTION
