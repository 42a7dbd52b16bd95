"""Deep copies of computations and modules.

Passes and tools often need "the same module, but mine to change" (the pipeline
recorder keeps the text before each pass; bisect tries candidate modules). A
clone keeps every name, so it prints exactly like the original.

Copies are made with the classes of the originals (``type(module)(...)``), so this module needs
:mod:`xla_teach.hlo.ir` only for its type hints and ``HloModule.clone`` can call it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from xla_teach.hlo.opcodes import AttrKind

if TYPE_CHECKING:
    from xla_teach.hlo.ir import HloComputation, HloInstruction, HloModule


def _remap_attrs(instr: HloInstruction, comp_map: dict[int, HloComputation]) -> dict:
    attrs = dict(instr.attrs)
    for spec in instr.info.attrs:
        value = attrs.get(spec.name)
        if value is None:
            continue
        if spec.kind is AttrKind.COMPUTATION:
            attrs[spec.name] = comp_map.get(id(value), value)
        elif spec.kind is AttrKind.COMPUTATION_LIST:
            attrs[spec.name] = tuple(comp_map.get(id(c), c) for c in value)
    return attrs


def clone_computation_into(
    source: HloComputation, target: HloComputation, comp_map: dict[int, HloComputation]
) -> dict[int, HloInstruction]:
    """Copy every instruction of ``source`` into the empty ``target``, keeping names."""
    instr_map: dict[int, HloInstruction] = {}
    # Create in post-order (operands first), then keep the source's list order, which
    # may be a schedule.
    created: dict[int, HloInstruction] = {}
    for old in source.post_order():
        new = type(old)(
            old.opcode, old.shape, [created[o.unique_id] for o in old.operands],
            _remap_attrs(old, comp_map), old.name,
        )
        new.copy_side_info_from(old)
        created[old.unique_id] = new
    for old in source.instructions:
        new = created[old.unique_id]
        new.parent = target
        target.instructions.append(new)
        new.control_predecessors = [created[p.unique_id] for p in old.control_predecessors]
        instr_map[old.unique_id] = new
    if source.root_instruction is not None:
        target.root_instruction = created[source.root_instruction.unique_id]
    target.execution_thread = source.execution_thread
    return instr_map


def clone_module(module: HloModule, name: str | None = None) -> HloModule:
    clone = type(module)(name or module.name)
    clone.is_scheduled = module.is_scheduled
    clone.input_output_alias = module.input_output_alias
    clone.entry_computation_layout = module.entry_computation_layout
    clone.header_attributes = dict(module.header_attributes)
    clone.stack_frame_tables = [(h, list(rows)) for h, rows in module.stack_frame_tables]
    comp_map: dict[int, HloComputation] = {}
    for comp in module.computations:
        comp_map[id(comp)] = type(comp)(comp.name)
    for comp in module.computations:
        new_comp = comp_map[id(comp)]
        clone_computation_into(comp, new_comp, comp_map)
        clone.add_computation(new_comp, is_entry=comp is module.entry_computation, uniquify=False)
    for instr in clone.instructions():
        clone.uniquer.get_unique_name(instr.name)
    for comp in clone.computations:
        clone.computation_uniquer.get_unique_name(comp.name)
    return clone
