"""Donated parameters: may an ENTRY output live in a parameter's buffer?

The module's ``input_output_alias`` (:mod:`xla_teach.hlo.input_output_alias`) asks
for output ``{i}`` to be written into parameter ``p``'s buffer. Buffer assignment
grants it when that cannot change any result:

* the output *is* the parameter (passed through unchanged): nothing to do;
* the output is computed by an instruction ``X`` and the parameter is not read
  after ``X`` -- or ``X`` itself is its last reader and may write over it in place
  (an elementwise op or ``kLoop`` fusion, multi-output ones included, reading it only
  at the output's index and only once; the rule for in-place reuse of temporaries).

A ``while`` body is treated the same way when its loop state is donated (the CPU backend asks for
it): state element ``{i}`` of the result may be written into state element ``{i}`` of the
parameter, so a loop updates its state in place instead of writing a fresh buffer on every
iteration (XLA gets there with copy insertion, which leaves a loop's state in one buffer).

It refuses, with a reason, when the parameter is still read after ``X`` writes (or
is itself returned at another index), and when the output is a constant, another
parameter, a control-flow or host-call result (bound at run time) or already
aliased. XLA's copy insertion would then add a ``copy``; here a ``must-alias``
output is copied into the parameter's buffer after the last thunk, and a
``may-alias`` one simply gets its own output buffer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from xla_teach.hlo.input_output_alias import Alias, shape_index_text
from xla_teach.passes.scheduling.in_place import can_write_output_in_place, times_read

if TYPE_CHECKING:
    from xla_teach.passes.scheduling.buffer_assignment import BufferAssignment, HloValue

ShapeIndex = tuple[int, ...]


@dataclass(frozen=True)
class OutputAlias:
    """The fate of one ``input_output_alias`` entry in a buffer assignment."""

    output_index: ShapeIndex
    parameter_number: int
    parameter_index: ShapeIndex
    kind: str  # may-alias | must-alias
    shared: bool  # the output lives in the parameter's allocation
    reason: str = ""  # why not, when not shared

    def describe(self) -> str:
        head = (f"output {shape_index_text(self.output_index)} <- parameter {self.parameter_number} "
                f"{shape_index_text(self.parameter_index)} ({self.kind})")
        if self.shared:
            return f"{head}: shares the parameter's buffer"
        then = ("copied into the parameter's buffer after the last thunk" if self.kind == "must-alias"
                else "gets its own output buffer")
        return f"{head}: not shared, {self.reason}; {then}"


def loop_state_aliases(ba: BufferAssignment) -> dict[ShapeIndex, Alias]:
    """A ``while`` body's donated state: result ``{i}`` may live in parameter 0 ``{i}``, for every
    state element the body computes (one it passes through unchanged is already in place)."""
    comp = ba.computation
    param = comp.parameter(0)
    return {idx: Alias(0, idx, "may-alias") for idx in comp.root.shape.leaf_indices()
            if not comp.root.shape.subshape(idx).is_token and ba.value(comp.root, idx) is not ba.value(param, idx)}


def decide_output_aliases(ba: BufferAssignment, kind_of: dict[int, str],
                          live: dict[int, list[int]], loop_body: bool = False) -> dict[int, HloValue]:
    """Fill ``ba.output_aliases``; returns output value id -> the parameter value whose
    allocation it takes (only for outputs computed here, not passed-through parameters).
    ``loop_body``: ``ba`` is a while body whose loop state is donated (:func:`loop_state_aliases`)."""
    from xla_teach.hlo.verifier import input_output_alias_problems

    comp = ba.computation
    module = comp.parent
    if loop_body:
        aliases = loop_state_aliases(ba)
    else:
        if module is None or module.entry_computation is not comp or not module.input_output_alias:
            return {}
        problems = input_output_alias_problems(module)
        if problems:
            raise ValueError(f"buffer assignment of module '{module.name}': bad " + "; ".join(problems))
        aliases = dict(module.input_output_alias.items())
    root_leaves = comp.root.shape.leaf_indices()
    home_of: dict[int, HloValue] = {}
    for out_index, alias in aliases.items():
        param_value = ba.value(comp.parameter(alias.parameter_number), alias.parameter_index)
        out_value = ba.value(comp.root, out_index)
        reason = ""
        if out_value is not param_value:
            reason = _refusal(ba, out_value, param_value, kind_of, live, root_leaves, out_index)
        if out_value is not param_value and not reason:
            home_of[out_value.id] = param_value
            kind_of[out_value.id] = "aliased"
        ba.output_aliases.append(OutputAlias(out_index, alias.parameter_number, alias.parameter_index, alias.kind,
                                             shared=not reason, reason=reason))
    return home_of


def _refusal(ba: BufferAssignment, out: HloValue, param: HloValue, kind_of: dict[int, str],
             live: dict[int, list[int]], root_leaves: list[ShapeIndex], out_index: ShapeIndex) -> str:
    """Why ``out`` may not be written into ``param``'s buffer ("" when it may)."""

    kind = kind_of[out.id]
    if kind == "aliased":
        return "the same value is already aliased to another parameter"
    if kind != "output":
        return {"parameter": f"it is parameter {out.instruction.name}, not a computed value",
                "constant": f"it is the constant {out.instruction.name}",
                "external": f"{out.instruction.name} is a {out.instruction.opcode} result, bound at run time",
                }.get(kind, f"{out.label()} is not an output buffer")
    other_outputs = [idx for idx in root_leaves if idx != out_index and ba.value(ba.computation.root, idx) is param]
    if other_outputs:
        return f"the parameter is also returned as output {shape_index_text(other_outputs[0])}"
    writer = out.instruction
    written_at, last_read = live[out.id][0], live[param.id][1]
    if last_read < written_at:
        return ""
    if last_read > written_at:
        reader = ba.order[last_read]
        return (f"{reader.name} reads {param.label()} at step {last_read}, after {writer.name} writes the output "
                f"at step {written_at}")
    for i, op in enumerate(writer.operands):
        if (not op.shape.is_tuple and ba.value(op) is param and can_write_output_in_place(writer, i, out.index)
                and times_read(ba, writer, param) == 1):
            return ""
    return f"{writer.name} reads {param.label()} while writing the output and cannot do so in place"
