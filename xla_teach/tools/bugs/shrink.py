"""Shrinking a failing module, as XLA's ``hlo_bisect`` does: the smallest module that still fails.

Given a predicate ``still_fails(module, args)``, :func:`shrink_module` greedily tries
smaller candidates and keeps the first one that still fails, until none does:

* **drop an output** of a ROOT tuple;
* **move the ROOT** to an inner instruction, dropping everything it does not need;
* **cut** an instruction off its inputs: it becomes a new parameter, whose argument is
  the value the interpreter computes for it (so the failing values are kept exactly).

Unused parameters are removed and renumbered together with their arguments. Only the
ENTRY computation is shrunk; called computations go when nothing calls them any more.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from xla_teach.hlo.ir import HloComputation, HloInstruction, HloModule
from xla_teach.tools.tool_support import reference_outputs

Progress = Callable[[str], None]


def _reachable_computations(entry: HloComputation) -> list[HloComputation]:
    found: dict[int, HloComputation] = {}
    stack = [entry]
    while stack:
        comp = stack.pop()
        if id(comp) not in found:
            found[id(comp)] = comp
            stack.extend(comp.called_computations())
    return list(found.values())


def _cleanup(module: HloModule, args: list[Any]) -> list[Any]:
    """Remove what the ENTRY root does not need (parameters too, renumbered); returns the args left."""
    entry = module.entry
    live: set[int] = set()
    stack = [entry.root]
    while stack:
        instr = stack.pop()
        if instr.unique_id not in live:
            live.add(instr.unique_id)
            stack.extend(instr.operands)
            stack.extend(instr.control_predecessors)
    for instr in reversed(entry.post_order()):
        if instr.unique_id not in live:
            entry.remove_instruction(instr)
    kept = []
    for new_number, param in enumerate(sorted(entry.parameter_instructions, key=lambda p: p.parameter_number)):
        kept.append(args[param.parameter_number])
        param.attrs["parameter_number"] = new_number
    reachable = {id(c) for c in _reachable_computations(entry)}
    module.computations = [c for c in module.computations if id(c) in reachable]
    module.entry_computation_layout = None
    module.input_output_alias = ""
    for key in ("allow_spmd_sharding_propagation_to_parameters", "allow_spmd_sharding_propagation_to_output"):
        module.header_attributes.pop(key, None)  # they list one flag per original parameter/output
    module.is_scheduled = False
    return kept


def with_root(module: HloModule, args: list[Any], name: str) -> tuple[HloModule, list[Any]]:
    """A copy whose ENTRY root is instruction ``name``, with everything else it does not need removed."""
    candidate = module.clone()
    candidate.entry.root_instruction = candidate.entry.instruction(name)
    return candidate, _cleanup(candidate, list(args))


def as_parameter(module: HloModule, args: list[Any], name: str) -> tuple[HloModule, list[Any]]:
    """A copy where instruction ``name`` becomes a new parameter holding the value it computes."""
    value = reference_outputs(*with_root(module, args, name))[0]
    candidate = module.clone()
    entry = candidate.entry
    old = entry.instruction(name)
    param = HloInstruction("parameter", old.shape, attrs={"parameter_number": entry.num_parameters},
                           name=f"{old.name}.cut")
    entry.add_instruction(param)
    old.replace_all_uses_with(param)
    return candidate, _cleanup(candidate, [*args, value])


def without_output(module: HloModule, args: list[Any], index: int) -> tuple[HloModule, list[Any]]:
    """A copy whose ROOT tuple lacks element ``index`` (``hlo_bisect`` drops outputs the same way)."""
    from xla_teach.hlo.shape import Shape

    candidate = module.clone()
    entry = candidate.entry
    old = entry.root
    kept = [op for i, op in enumerate(old.operands) if i != index]
    smaller = HloInstruction("tuple", Shape.make_tuple([op.shape for op in kept]), kept, name=old.name)
    entry.add_instruction(smaller)
    entry.root_instruction = smaller
    return candidate, _cleanup(candidate, list(args))


def _cone_size(instr: HloInstruction) -> int:
    seen: set[int] = set()
    stack = [instr]
    while stack:
        node = stack.pop()
        if node.unique_id not in seen:
            seen.add(node.unique_id)
            stack.extend(node.operands)
    return len(seen)


@dataclass
class ShrinkResult:
    module: HloModule
    args: list[Any]
    steps: list[str] = field(default_factory=list)  # what each accepted reduction did
    checks: int = 0


def shrink_module(module: HloModule, args: list[Any], still_fails: Callable[[HloModule, list[Any]], bool],
                  max_checks: int = 300, progress: Progress | None = None) -> ShrinkResult:
    """Greedily shrink ``module`` while ``still_fails(candidate, candidate_args)`` holds."""
    from xla_teach.hlo.verifier import verify_module

    result = ShrinkResult(module, list(args))

    def candidates() -> list[tuple[str, Callable[[], tuple[HloModule, list[Any]]]]]:
        entry = result.module.entry
        inner = [i for i in entry.instructions if i.opcode != "parameter" and i.shape.is_array]
        # Smallest new roots first (the biggest cut), then cutting the biggest input cones off.
        roots = sorted((i for i in inner if i is not entry.root), key=_cone_size)
        cuts = sorted((i for i in inner if _cone_size(i) > 1 and i is not entry.root), key=lambda i: -_cone_size(i))
        found: list[tuple[str, Callable[[], tuple[HloModule, list[Any]]]]] = []
        if entry.root.opcode == "tuple" and entry.root.operand_count > 1:
            found += [(f"drop output {k}", lambda k=k: without_output(result.module, result.args, k))
                      for k in range(entry.root.operand_count)]
        found += [(f"ROOT := {i.name}", lambda n=i.name: with_root(result.module, result.args, n)) for i in roots]
        found += [(f"{i.name} := parameter", lambda n=i.name: as_parameter(result.module, result.args, n))
                  for i in cuts]
        return found

    progressed = True
    while progressed and result.checks < max_checks:
        progressed = False
        for label, make in candidates():
            if result.checks >= max_checks:
                break
            try:
                candidate, candidate_args = make()
                verify_module(candidate)
            except Exception:  # a candidate that is not a valid module is simply not taken
                continue
            if candidate.instruction_count() >= result.module.instruction_count():
                continue
            result.checks += 1
            if still_fails(candidate, candidate_args):
                result.module, result.args = candidate, candidate_args
                result.steps.append(label)
                if progress is not None:
                    progress(f"shrink: {label} -> {candidate.instruction_count()} instructions still fails")
                progressed = True
                break
    return result
