"""What a pass did to a module, instruction by instruction rather than line by line.

A text diff of two HLO dumps is hard to read: fusion moves forty lines into new
computations, renumbers nothing, and the diff shows a wall of ``-`` and ``+``. Here the two
modules are parsed and their instructions matched **by name** (passes keep names; a fused
instruction keeps the name it had outside), which sorts every change into one of:

* ``fused`` -- an instruction of a sequential computation now lives inside a fusion's
  computation (``multiply.3 -> fusion.2``). Fusion clones an instruction into the fused
  computation under a new name (``multiply.3`` becomes ``multiply.9``), so a clone is matched to
  the instruction it came from by what a clone keeps: opcode, shape and metadata;
* ``added`` / ``removed`` -- a name only after / only before (a new ``fusion``, an
  instruction that algsimp or DCE deleted);
* ``changed`` -- the same name with another shape, operands or attributes (its HLO line,
  without metadata, differs).

Fused computations themselves are not listed as added: their instructions are reported as
``fused`` into the fusion that calls them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from xla_teach.hlo.ir import HloInstruction, HloModule
from xla_teach.hlo.text.parser import parse_hlo


@dataclass
class StructuralDiff:
    added: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    changed: list[tuple[str, str, str]] = field(default_factory=list)  # (name, line before, line after)
    fused: dict[str, list[str]] = field(default_factory=dict)  # fusion -> instructions moved into it
    clones: dict[str, str] = field(default_factory=dict)  # name inside a fusion -> the instruction it copies

    @property
    def empty(self) -> bool:
        return not (self.added or self.removed or self.changed or self.fused)

    def touched(self) -> set[str]:
        """Every instruction name the pass added, changed or moved (what a graph should show)."""
        names = set(self.added) | {c[0] for c in self.changed} | set(self.fused)
        for members in self.fused.values():
            names.update(members)
        return names

    def as_json(self) -> dict[str, object]:
        return {"added": self.added, "removed": self.removed,
                "changed": [{"name": n, "before": b, "after": a} for n, b, a in self.changed],
                "fused": self.fused, "clones": self.clones}


def _line(instr: HloInstruction) -> str:
    return instr.to_text(print_metadata=False).strip()


def fusion_owners(module: HloModule) -> dict[str, str]:
    """Fused computation name -> the name of the fusion instruction that calls it."""
    return {instr.fused_computation.name: instr.name for comp in module.computations
            for instr in comp.instructions if instr.opcode == "fusion"}


def _index(module: HloModule) -> dict[str, tuple[HloInstruction, str | None]]:
    """name -> (instruction, the fusion whose computation holds it, or None)."""
    fused_by = fusion_owners(module)
    found: dict[str, tuple[HloInstruction, str | None]] = {}
    for comp in module.computations:
        owner = fused_by.get(comp.name)
        for instr in comp.instructions:
            if owner is not None and instr.opcode == "parameter":
                continue  # a fused computation's parameters are the fusion's operands
            found.setdefault(instr.name, (instr, owner))
    return found


def _signature(instr: HloInstruction) -> tuple[str, str, str]:
    metadata = instr.metadata.to_text() if instr.metadata else ""
    return instr.opcode, str(instr.shape), metadata


def structural_diff(before: HloModule | str, after: HloModule | str) -> StructuralDiff:
    old = _index(parse_hlo(before) if isinstance(before, str) else before)
    new = _index(parse_hlo(after) if isinstance(after, str) else after)
    diff = StructuralDiff()
    gone = {name: instr for name, (instr, _) in old.items() if name not in new}
    by_signature: dict[tuple[str, str, str], list[str]] = {}
    for name, instr in gone.items():
        by_signature.setdefault(_signature(instr), []).append(name)
    for name, (instr, owner) in new.items():
        previous = old.get(name)
        if previous is None:
            if owner is None:
                diff.added.append(name)
                continue
            originals = by_signature.get(_signature(instr))
            if originals:  # a clone of an instruction that left its computation
                original = originals.pop(0)
                del gone[original]
                diff.fused.setdefault(owner, []).append(original)
                diff.clones[name] = original
            continue  # otherwise made inside the fusion (a parameter, a new constant)
        before_instr, before_owner = previous
        if owner is not None and owner != before_owner:
            diff.fused.setdefault(owner, []).append(name)
        elif _line(before_instr) != _line(instr):
            diff.changed.append((name, _line(before_instr), _line(instr)))
    diff.removed = list(gone)
    return diff
