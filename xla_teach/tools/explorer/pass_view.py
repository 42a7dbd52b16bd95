"""What the explorer shows for one changed pass: the module before and after, side by side.

The page draws both sides with its own renderer (``static/module_graph.js``, the optimized
module's look), so this module only chooses *what* to draw: one connected piece of what the
pass touched (added, changed, fused; removed ones on the "before" side) -- the first touched
instruction, the touched ones near it, and their direct operands and users, at most
:data:`LIMIT` a side -- as small instruction tables of the same form as the page's main table.
A touched instruction inside a fused computation is drawn as its fusion.

It also keeps the names straight across passes: a fused instruction disappears into its fusion
and a later fusion may absorb that one, so :func:`final_names` maps every name a note may
mention to the instruction that holds it in the optimized module.

For a pass that changes only the order of the ENTRY computation (the scheduler), the sides look
alike; :func:`order_change` gives the order before and after instead, for a sequence view.
"""

from __future__ import annotations

from typing import Any

from xla_teach.hlo.ir import HloComputation, HloInstruction, HloModule
from xla_teach.tools.explorer.structural_diff import StructuralDiff, fusion_owners
from xla_teach.tools.render import style

LIMIT = 30  # boxes a side


def _owners(module: HloModule) -> tuple[dict[str, HloInstruction], dict[str, str]]:
    """name -> instruction (any computation), and fused computation -> its fusion's name."""
    found: dict[str, HloInstruction] = {}
    for comp in module.computations:
        for instr in comp.instructions:
            found.setdefault(instr.name, instr)
    return found, fusion_owners(module)


def _visible(instr: HloInstruction, fused_by: dict[str, str], found: dict[str, HloInstruction]) -> HloInstruction:
    """The instruction itself, or for one inside a fused computation the fusion that holds it."""
    seen = 0
    while instr.parent is not None and instr.parent.name in fused_by and seen < 8:
        instr = found[fused_by[instr.parent.name]]
        seen += 1
    return instr


def neighbourhood(module: HloModule, names: list[str], limit: int = LIMIT) -> dict[str, dict[str, Any]]:
    """A table of one connected piece of what a pass touched: the first named instruction (in its
    computation's order; as drawn -- a fused one as its fusion), the other named ones within two
    steps of it, and their direct operands and users, at most ``limit``. One piece reads as a
    picture; a pass's panel lists the rest."""
    found, fused_by = _owners(module)
    wanted = {_visible(found[n], fused_by, found).name for n in names if n in found}
    if not wanted:
        return {}
    position = {i.name: k for comp in module.computations for k, i in enumerate(comp.instructions)}
    first = found[min(wanted, key=lambda n: position.get(n, 0))]
    near: dict[str, HloInstruction] = {first.name: first}
    frontier = [first]
    for _ in range(2):  # the touched instructions within two steps of the first
        frontier = [o for i in frontier for o in list(i.operands) + list(i.users) if o.name not in near]
        near.update({o.name: o for o in frontier})
    centres = [first] + [i for n, i in near.items() if n in wanted and i is not first]
    chosen: dict[str, HloInstruction] = {}
    for instr in centres:
        for other in [instr, *instr.operands, *instr.users]:
            if len(chosen) >= limit:
                break
            if other.name not in chosen and not (other.opcode == "constant" and other.shape.rank == 0):
                chosen[other.name] = other
    return {name: _entry(instr, chosen) for name, instr in chosen.items()}


def _entry(instr: HloInstruction, chosen: dict[str, HloInstruction]) -> dict[str, Any]:
    fields = dict(instr.metadata.fields) if instr.metadata else {}
    entry: dict[str, Any] = {
        "opcode": instr.opcode, "shape": str(instr.shape), "computation": "side", "category": style.category(instr),
        "op_name": str(fields.get("op_name", "")), "line": instr.to_text(print_metadata=False).strip(),
        "operands": [o.name for o in instr.operands if o.name in chosen], "fusion": ""}
    if instr.opcode == "fusion":
        entry["fusion_kind"] = instr.fusion_kind
        entry["members"] = []  # a side draws a fusion as one box
    if instr.opcode == "parameter":
        entry["parameter_number"] = instr.parameter_number
    return entry


def pass_sides(before: HloModule, after: HloModule, diff: StructuralDiff) -> dict[str, Any]:
    """``{"before": table, "after": table, "touched": [names]}`` for one changed pass."""
    touched = sorted(diff.touched())
    return {"before": neighbourhood(before, touched + list(diff.removed)),
            "after": neighbourhood(after, touched), "touched": touched + list(diff.removed)}


def order_change(before: HloModule, after: HloModule) -> dict[str, list[str]] | None:
    """The ENTRY computation's order before and after, when a pass changed only that (or made
    the module scheduled): what the sequence view lists."""
    old, new = _order(before.entry), _order(after.entry)
    if sorted(old) != sorted(new) or (old == new and before.is_scheduled == after.is_scheduled):
        return None
    return {"before": old, "after": new}


def _order(comp: HloComputation) -> list[str]:
    return [i.name for i in comp.instructions]


def final_names(diffs: list[StructuralDiff], final: set[str]) -> dict[str, str]:
    """Every name a pass's diff mentions that is gone from the optimized module -> the optimized
    module's instruction that holds it now (the fusion it was fused into, followed through later
    fusions), when there is one."""
    moved: dict[str, str] = {}
    for diff in diffs:
        for fusion, members in diff.fused.items():
            for member in members:
                moved[member] = fusion
    result = {}
    for name in moved:
        target, hops = name, 0
        while target not in final and target in moved and hops < 64:
            target, hops = moved[target], hops + 1
        if target in final and target != name and name not in final:
            result[name] = target
    return result
