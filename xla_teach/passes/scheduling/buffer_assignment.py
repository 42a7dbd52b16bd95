"""Buffer assignment: which bytes hold which value, over a sequential schedule.

Every array an instruction produces is a *logical buffer* (XLA's ``HloValue``).
Some instructions produce no new bytes -- ``tuple``, ``get-tuple-element``,
``bitcast`` and ``opt-barrier`` only *alias* their operands -- so values are
first grouped into **buffers** (alias classes). Then, following the schedule:

* parameters live in the caller's memory, constants in their own allocation,
  results the caller receives in *output* allocations;
* control-flow results (``while``, ``conditional``, ``call``) and host
  ``custom-call`` results are bound at run time (*external*);
* an instruction may write its result **in place** into an operand buffer that
  dies at that instruction (elementwise fusions reading it at the same index,
  ``dynamic-update-slice`` into its first operand);
* all remaining buffers are *temporaries*, packed by a heap simulator into one
  ``preallocated-temp`` arena where buffers whose live ranges do not overlap
  share bytes.

The result prints in the spirit of XLA's ``buffer-assignment.txt``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from xla_teach.hlo.ir import HloComputation, HloInstruction, HloModule
from xla_teach.hlo.opcodes import is_elementwise
from xla_teach.hlo.shape import Shape
from xla_teach.passes.scheduling.heap_simulator import BufferBlock, pack_blocks

ALIGNMENT = 64
ShapeIndex = tuple[int, ...]
_ALIASING = {"tuple", "get-tuple-element", "bitcast", "opt-barrier"}
_EXTERNAL = {"while", "conditional", "call", "custom-call"}


@dataclass(eq=False)
class HloValue:
    """One array produced by one instruction (at ``index`` inside a tuple result)."""

    id: int
    instruction: HloInstruction
    index: ShapeIndex
    shape: Shape

    @property
    def size(self) -> int:
        return self.shape.byte_size()

    def label(self) -> str:
        idx = "{" + ",".join(map(str, self.index)) + "}" if self.instruction.shape.is_tuple else ""
        return f"{self.instruction.name}{idx}"


@dataclass(eq=False)
class Allocation:
    index: int
    size: int
    kind: str  # parameter | constant | output | temp | external
    parameter_number: int | None = None
    parameter_index: ShapeIndex = ()
    output_index: ShapeIndex | None = None
    values: list[tuple[HloValue, int]] = field(default_factory=list)  # (value, offset)

    def header(self) -> str:
        parts = [f"allocation {self.index}: size {self.size}"]
        if self.kind == "parameter":
            parts.append(f"parameter {self.parameter_number}, shape |{self.values[0][0].shape.to_text()}| "
                         f"at ShapeIndex {{{','.join(map(str, self.parameter_index))}}}")
        elif self.kind == "output":
            parts.append(f"output shape is |{self.values[0][0].shape.to_text()}|, maybe-live-out")
        elif self.kind == "constant":
            parts.append("constant")
        elif self.kind == "temp":
            parts.append("preallocated-temp")
        elif self.kind == "external":
            parts.append("bound at run time (control-flow or host call result)")
        return ", ".join(parts) + ":"


@dataclass(frozen=True)
class BufferSlice:
    allocation: Allocation
    offset: int
    size: int


class BufferAssignment:
    """Buffer assignment of one sequential computation (entry, loop body, branch...)."""

    def __init__(self, comp: HloComputation, order: list[HloInstruction]) -> None:
        self.computation = comp
        self.order = order
        self.values: list[HloValue] = []
        self.allocations: list[Allocation] = []
        self._value_at: dict[tuple[int, ShapeIndex], HloValue] = {}
        self._slice_of: dict[int, BufferSlice] = {}
        self.in_place: list[tuple[str, str]] = []  # (instruction, operand whose buffer it reuses)
        self.live_ranges: dict[int, tuple[int, int]] = {}  # value id -> (start, end) in schedule

    # ---- queries used by backends -----------------------------------------------------
    def value(self, instr: HloInstruction, index: ShapeIndex = ()) -> HloValue:
        """The value stored at ``instr``'s output ``index`` (following aliases)."""
        return self._value_at[(instr.unique_id, index)]

    def slice(self, instr: HloInstruction, index: ShapeIndex = ()) -> BufferSlice:
        return self._slice_of[self.value(instr, index).id]

    def leaf_slices(self, instr: HloInstruction) -> list[BufferSlice]:
        return [self.slice(instr, idx) for idx in leaf_indices(instr.shape)]

    @property
    def temp_allocation(self) -> Allocation | None:
        return next((a for a in self.allocations if a.kind == "temp"), None)

    @property
    def temp_bytes(self) -> int:
        temp = self.temp_allocation
        return temp.size if temp else 0

    def naive_temp_bytes(self) -> int:
        """Bytes if every temporary value had a buffer of its own (no reuse, no sharing)."""
        temp = self.temp_allocation
        return sum(v.size for v, _ in temp.values) if temp else 0

    def to_text(self) -> str:
        lines = [f"BufferAssignment of {self.computation.name}:"]
        for alloc in self.allocations:
            lines.append(alloc.header())
            for value, offset in sorted(alloc.values, key=lambda vo: vo[0].id):
                lines.append(f" value: <{value.id} {value.label()} @0> (size={value.size},offset={offset}): "
                             f"{value.shape.to_text()}")
        lines.append("")
        lines.append(f"Total temp arena: {self.temp_bytes} bytes "
                     f"(one buffer per value would need {self.naive_temp_bytes()} bytes)")
        if self.in_place:
            lines.append("In place: " + ", ".join(f"{i} reuses {o}" for i, o in self.in_place))
        return "\n".join(lines)


def leaf_indices(shape: Shape, prefix: ShapeIndex = ()) -> list[ShapeIndex]:
    if shape.is_tuple:
        return [idx for i, s in enumerate(shape.tuple_shapes) for idx in leaf_indices(s, prefix + (i,))]
    return [prefix]


def _subshape(shape: Shape, index: ShapeIndex) -> Shape:
    for i in index:
        shape = shape.tuple_shapes[i]
    return shape


def can_run_in_place(instr: HloInstruction, operand_index: int) -> bool:
    """May ``instr`` write its (array) result over operand ``operand_index``'s buffer?"""
    op = instr.operand(operand_index)
    if instr.shape.is_tuple or op.shape.is_tuple or instr.shape.byte_size() != op.shape.byte_size():
        return False
    if instr.opcode == "dynamic-update-slice":
        return operand_index == 0
    if is_elementwise(instr.opcode) and instr.opcode != "bitcast-convert":
        return instr.shape.dimensions == op.shape.dimensions
    if instr.opcode == "fusion" and instr.fusion_kind == "kLoop":
        # Every instruction from the parameter up to the root must be elementwise over the output's
        # dims: a reverse or a square transpose further on keeps the dims but reads other elements,
        # which the loop may already have overwritten.
        stack, seen = list(instr.fused_computation.parameter(operand_index).users), set()
        while stack:
            user = stack.pop()
            if user.unique_id in seen:
                continue
            seen.add(user.unique_id)
            if (not is_elementwise(user.opcode) or user.opcode == "bitcast-convert"
                    or user.shape.dimensions != instr.shape.dimensions):
                return False
            stack.extend(user.users)
        return True
    return False


def _times_read(ba: BufferAssignment, instr: HloInstruction, value: HloValue) -> int:
    """How many of ``instr``'s operand leaves hold ``value``. Counted through aliases, so that
    ``fusion(e, bitcast(e))`` reads ``e`` twice: writing the result over ``e`` would clobber
    elements the second operand still has to read at other indices."""
    return sum(ba.value(op, idx) is value for op in instr.operands for idx in leaf_indices(op.shape))


def assign_buffers(comp: HloComputation, is_entry: bool) -> BufferAssignment:
    order = list(comp.instructions) if comp.parent and comp.parent.is_scheduled else comp.post_order()
    ba = BufferAssignment(comp, order)
    position = {i.unique_id: n for n, i in enumerate(order)}

    # 1. Values, following aliases.
    for instr in order:
        for idx in leaf_indices(instr.shape):
            if instr.opcode == "tuple":
                source = ba.value(instr.operand(idx[0]), idx[1:])
            elif instr.opcode == "get-tuple-element":
                source = ba.value(instr.operand(0), (instr.tuple_index,) + idx)
            elif instr.opcode in ("bitcast", "opt-barrier"):
                source = ba.value(instr.operand(0), idx)
            else:
                source = HloValue(len(ba.values), instr, idx, _subshape(instr.shape, idx))
                ba.values.append(source)
            ba._value_at[(instr.unique_id, idx)] = source

    # 2. Live ranges over the schedule; root values live to the end.
    end_of_time = len(order)
    live = {v.id: [position[v.instruction.unique_id], position[v.instruction.unique_id]] for v in ba.values}
    for instr in order:
        for op in instr.operands:
            for idx in leaf_indices(op.shape):
                live[ba.value(op, idx).id][1] = max(live[ba.value(op, idx).id][1], position[instr.unique_id])
    root_values = [ba.value(comp.root, idx) for idx in leaf_indices(comp.root.shape)]
    for v in root_values:
        live[v.id][1] = end_of_time

    # 3. Classify, and let instructions reuse dying operand buffers in place.
    kind_of: dict[int, str] = {}
    for v in ba.values:
        op = v.instruction.opcode
        kind_of[v.id] = ("parameter" if op == "parameter" else "constant" if op == "constant"
                         else "external" if op in _EXTERNAL else "temp")
    for v in root_values:
        if kind_of[v.id] == "temp":
            kind_of[v.id] = "output"
    share_with: dict[int, int] = {}  # value id -> value id whose bytes it reuses
    for instr in order:
        if instr.shape.is_tuple or instr.opcode in _ALIASING or kind_of.get(ba.value(instr).id) != "temp":
            continue
        me = ba.value(instr)
        for i, op in enumerate(instr.operands):
            if op.shape.is_tuple:
                continue
            candidate = ba.value(op)
            base = share_with.get(candidate.id, candidate.id)
            if (kind_of[candidate.id] == "temp" and live[candidate.id][1] == position[instr.unique_id]
                    and can_run_in_place(instr, i) and _times_read(ba, instr, candidate) == 1):
                share_with[me.id] = base
                ba.in_place.append((instr.name, op.name))
                break

    # 4. Allocations.
    def new_alloc(size: int, kind: str, **kw: object) -> Allocation:
        alloc = Allocation(len(ba.allocations), size, kind, **kw)  # type: ignore[arg-type]
        ba.allocations.append(alloc)
        return alloc

    for v in ba.values:
        kind = kind_of[v.id]
        if kind == "parameter":
            alloc = new_alloc(v.size, kind, parameter_number=v.instruction.parameter_number, parameter_index=v.index)
        elif kind in ("constant", "external", "output"):
            alloc = new_alloc(v.size, kind)
        else:
            continue
        alloc.values.append((v, 0))
        ba._slice_of[v.id] = BufferSlice(alloc, 0, v.size)
    for n, v in enumerate(root_values):
        alloc = ba._slice_of[v.id].allocation
        if alloc.kind == "output" and alloc.output_index is None:
            alloc.output_index = leaf_indices(comp.root.shape)[n]

    # 5. Temporaries: blocks (a value plus the values reusing it in place) packed in one arena.
    blocks: dict[int, BufferBlock] = {}
    for v in ba.values:
        if kind_of[v.id] != "temp":
            continue
        base = share_with.get(v.id, v.id)
        while base in share_with:
            base = share_with[base]
        start, end = live[v.id]
        block = blocks.setdefault(base, BufferBlock(base, v.size, start, end))
        block.start, block.end = min(block.start, start), max(block.end, end)
        block.size = max(block.size, v.size)
        block.members.append(v.id)
    offsets, arena_size = pack_blocks(list(blocks.values()), ALIGNMENT)
    if blocks:
        temp = new_alloc(arena_size, "temp")
        by_id = {v.id: v for v in ba.values}
        for base, block in blocks.items():
            for member in block.members:
                temp.values.append((by_id[member], offsets[base]))
                ba._slice_of[member] = BufferSlice(temp, offsets[base], by_id[member].size)
    ba.live_ranges = {vid: (r[0], r[1]) for vid, r in live.items()}
    return ba


class ModuleBufferAssignment:
    """Buffer assignments of every sequential computation of a scheduled module."""

    def __init__(self, module: HloModule) -> None:
        from xla_teach.passes.scheduling.hlo_memory_scheduler import sequential_computations

        self.module = module
        self.computations: dict[str, BufferAssignment] = {}
        for comp in sequential_computations(module):
            self.computations[comp.name] = assign_buffers(comp, comp is module.entry)

    def __getitem__(self, comp: HloComputation) -> BufferAssignment:
        return self.computations[comp.name]

    @property
    def entry(self) -> BufferAssignment:
        return self.computations[self.module.entry.name]

    def temp_bytes(self) -> int:
        return sum(ba.temp_bytes for ba in self.computations.values())

    def naive_temp_bytes(self) -> int:
        return sum(ba.naive_temp_bytes() for ba in self.computations.values())

    def to_text(self) -> str:
        return "\n\n".join(ba.to_text() for ba in self.computations.values()) + "\n"
