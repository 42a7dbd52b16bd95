"""Buffer assignment: which bytes hold which value, over a sequential schedule.

Every array an instruction produces is a *logical buffer* (XLA's ``HloValue``).
Some instructions produce no new bytes -- ``tuple``, ``get-tuple-element``,
``bitcast`` and ``opt-barrier`` only *alias* their operands -- so values are
first grouped into **buffers** (alias classes). Then, following the schedule:

* parameters live in the caller's memory, constants in their own allocation,
  results the caller receives in *output* allocations -- or, when the module's
  ``input_output_alias`` donates a parameter for a result, in that parameter's
  allocation (see :mod:`~xla_teach.passes.scheduling.output_aliasing`);
* control-flow results (``while``, ``conditional``, ``call``) and host
  ``custom-call`` results are bound at run time (*external*), and so are the collectives of a
  module that runs on several devices (the other devices' values arrive at run time) -- except,
  when the backend asks for it (the CPU does), a ``while``'s results: the loop runs **in its
  own result buffers** (see :func:`while_state_homes`), as XLA's copy insertion arranges;
* an instruction may write its result **in place** into an operand buffer that
  dies at that instruction (elementwise fusions reading it at the same index,
  ``dynamic-update-slice`` into its first operand);
* all remaining buffers are *temporaries*, packed by a heap simulator into one
  ``preallocated-temp`` arena where buffers whose live ranges do not overlap
  share bytes.

The result prints in the spirit of XLA's ``buffer-assignment.txt``, with the
arena size and the **peak live bytes**: the most bytes alive at any step of the
schedule (parameters and constants for the whole run, outputs from the step that
writes them, temporaries over their live ranges), which no allocator can beat.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from xla_teach.hlo.ir import HloComputation, HloInstruction, HloModule
from xla_teach.hlo.opcodes import ALIASING_OPCODES, CROSS_DEVICE_OPCODES, HOST_STEP_OPCODES
from xla_teach.hlo.shape import Shape
from xla_teach.passes.scheduling.heap_simulator import BufferBlock, pack_blocks, peak_live_bytes
from xla_teach.passes.scheduling.in_place import can_run_in_place, times_read
from xla_teach.passes.scheduling.output_aliasing import OutputAlias, decide_output_aliases

ALIGNMENT = 64
ShapeIndex = tuple[int, ...]
_ALIASING = ALIASING_OPCODES
_EXTERNAL = HOST_STEP_OPCODES


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
            if self.output_index is not None:  # a donated parameter holding an output
                parts.append(f"maybe-live-out (output {{{','.join(map(str, self.output_index))}}})")
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
        self.in_outputs: list[tuple[HloValue, int]] = []  # temporaries placed in an output allocation
        self.live_ranges: dict[int, tuple[int, int]] = {}  # value id -> (start, end) in schedule
        self.output_aliases: list[OutputAlias] = []  # what became of the module's input_output_alias
        self.peak_bytes = 0  # most bytes alive at one step (see peak_live_bytes)
        self.peak_step = 0  # that step (an index into ``order``)
        # What the peak counts: (value ids sharing the bytes, size, first step, last step) each.
        self.live_buffers: list[LiveBuffer] = []

    # ---- queries used by backends -----------------------------------------------------
    def value(self, instr: HloInstruction, index: ShapeIndex = ()) -> HloValue:
        """The value stored at ``instr``'s output ``index`` (following aliases)."""
        return self._value_at[(instr.unique_id, index)]

    def slice(self, instr: HloInstruction, index: ShapeIndex = ()) -> BufferSlice:
        return self._slice_of[self.value(instr, index).id]

    def leaf_slices(self, instr: HloInstruction) -> list[BufferSlice]:
        return [self.slice(instr, idx) for idx in instr.shape.leaf_indices()]

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
        return (sum(v.size for v, _ in temp.values) if temp else 0) + sum(v.size for v, _ in self.in_outputs)

    def alias_bytes(self) -> int:
        """Bytes of outputs written into donated parameters (no output buffer of their own)."""
        return sum(self.computation.root.shape.subshape(a.output_index).byte_size()
                   for a in self.output_aliases if a.shared)

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
        peak_at = self.order[self.peak_step].name if self.order else "-"
        lines.append(f"Peak live bytes: {self.peak_bytes} (at step {self.peak_step}, {peak_at}; parameters, "
                     f"constants, outputs and live temporaries)")
        if self.in_place:
            lines.append("In place: " + ", ".join(f"{i} reuses {o}" for i, o in self.in_place))
        if self.in_outputs:
            lines.append("In output buffers before the output is written: "
                         + ", ".join(f"{v.label()} (allocation {a})" for v, a in self.in_outputs))
        for alias in self.output_aliases:
            lines.append("Aliased: " + alias.describe())
        return "\n".join(lines)


def assign_buffers(comp: HloComputation, loop_body: bool = False, loops_in_place: bool = False) -> BufferAssignment:
    """``loop_body``: ``comp`` is a while body whose loop state the caller donates, so results may
    be written into the state's buffers in place (see :mod:`output_aliasing`). ``loops_in_place``:
    a ``while``'s results get buffers here and the loop runs in them (:func:`while_state_homes`)."""
    order = list(comp.instructions) if comp.parent and comp.parent.is_scheduled else comp.post_order()
    ba = BufferAssignment(comp, order)
    position = {i.unique_id: n for n, i in enumerate(order)}

    # 1. Values, following aliases.
    for instr in order:
        for idx in instr.shape.leaf_indices():
            if instr.opcode == "tuple":
                source = ba.value(instr.operand(idx[0]), idx[1:])
            elif instr.opcode == "get-tuple-element":
                source = ba.value(instr.operand(0), (instr.tuple_index,) + idx)
            elif instr.opcode in ("bitcast", "opt-barrier"):
                source = ba.value(instr.operand(0), idx)
            else:
                source = HloValue(len(ba.values), instr, idx, instr.shape.subshape(idx))
                ba.values.append(source)
            ba._value_at[(instr.unique_id, idx)] = source

    # 2. Live ranges over the schedule; root values live to the end.
    end_of_time = len(order)
    live = {v.id: [position[v.instruction.unique_id], position[v.instruction.unique_id]] for v in ba.values}
    for instr in order:
        for op in instr.operands:
            leaves = op.shape.leaf_indices()
            if instr.opcode == "get-tuple-element":  # it names one element: the others are not read here
                leaves = [idx for idx in leaves if idx[:1] == (instr.tuple_index,)]
            for idx in leaves:
                live[ba.value(op, idx).id][1] = max(live[ba.value(op, idx).id][1], position[instr.unique_id])
    root_values = [ba.value(comp.root, idx) for idx in comp.root.shape.leaf_indices()]
    for v in root_values:
        live[v.id][1] = end_of_time

    # 3. Classify, and let instructions reuse dying operand buffers in place.
    kind_of: dict[int, str] = {}
    module = comp.parent
    external = _EXTERNAL | (CROSS_DEVICE_OPCODES if module is not None and module.device_count() > 1 else set())
    if loops_in_place:
        external = external - {"while"}
    for v in ba.values:
        op = v.instruction.opcode
        kind_of[v.id] = ("parameter" if op == "parameter" else "constant" if op == "constant"
                         else "external" if op in external else "temp")
    for v in root_values:
        if kind_of[v.id] == "temp":
            kind_of[v.id] = "output"
    share_with: dict[int, int] = {}  # value id -> value id whose bytes it reuses
    for instr in order:
        found = _overwritable_operand(ba, instr, "temp", kind_of, live, position[instr.unique_id])
        if found is not None:
            candidate, op = found
            share_with[ba.value(instr).id] = share_with.get(candidate.id, candidate.id)
            ba.in_place.append((instr.name, op.name))

    home_of = decide_output_aliases(ba, kind_of, live, loop_body)  # outputs written into donated parameters
    if loops_in_place:
        home_of.update(while_state_homes(ba, order, position, kind_of, live, share_with))
    home_of.update(_computed_in_output_buffers(ba, order, kind_of, live, share_with))

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
    for v in ba.values:
        if kind_of[v.id] == "aliased":
            alloc = ba._slice_of[home_of[v.id].id].allocation
            alloc.values.append((v, 0))
            ba._slice_of[v.id] = BufferSlice(alloc, 0, v.size)
            if alloc.kind == "output" and v not in root_values:  # a temporary computed in an output's bytes
                ba.in_outputs.append((v, alloc.index))
    for n, v in enumerate(root_values):
        alloc = ba._slice_of[v.id].allocation
        if alloc.kind == "output" and alloc.output_index is None:
            alloc.output_index = comp.root.shape.leaf_indices()[n]
    for alias in ba.output_aliases:
        if alias.shared:
            ba._slice_of[ba.value(comp.root, alias.output_index).id].allocation.output_index = alias.output_index

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
    by_id = {v.id: v for v in ba.values}
    in_outputs = _temporaries_in_output_buffers(ba, blocks, live)
    for base, alloc in in_outputs.items():
        for member in blocks[base].members:
            alloc.values.append((by_id[member], 0))
            ba._slice_of[member] = BufferSlice(alloc, 0, by_id[member].size)
            ba.in_outputs.append((by_id[member], alloc.index))
    arena_blocks = [block for base, block in blocks.items() if base not in in_outputs]
    offsets, arena_size = pack_blocks(arena_blocks, ALIGNMENT)
    if arena_blocks:
        temp = new_alloc(arena_size, "temp")
        for block in arena_blocks:
            for member in block.members:
                temp.values.append((by_id[member], offsets[block.id]))
                ba._slice_of[member] = BufferSlice(temp, offsets[block.id], by_id[member].size)
    ba.live_ranges = {vid: (r[0], r[1]) for vid, r in live.items()}
    ba.peak_bytes, ba.peak_step = _peak(ba, kind_of, blocks, end_of_time)
    return ba


def _computed_in_output_buffers(ba: BufferAssignment, order: list[HloInstruction], kind_of: dict[int, str],
                                 live: dict[int, list[int]], share_with: dict[int, int]) -> dict[int, HloValue]:
    """An output written in place over a temporary (a scatter into a fresh ``zeros``, a
    ``dynamic-update-slice``, an elementwise op on the last use of its operand): the temporary is
    computed straight into the output's buffer, as XLA does. Returns temporary id -> the output."""
    homes: dict[int, HloValue] = {}
    shared = set(share_with) | set(share_with.values())
    for step, instr in enumerate(order):
        found = _overwritable_operand(ba, instr, "output", kind_of, live, step, shared)
        if found is not None:
            candidate, op = found
            kind_of[candidate.id] = "aliased"
            homes[candidate.id] = ba.value(instr)
            ba.in_place.append((instr.name, op.name))
    return homes


def _overwritable_operand(ba: BufferAssignment, instr: HloInstruction, kind: str, kind_of: dict[int, str],
                          live: dict[int, list[int]], step: int,
                          excluded: set[int] | frozenset[int] = frozenset()) -> tuple[HloValue, HloInstruction] | None:
    """The operand (its value, the operand) whose temporary buffer ``instr`` -- an array of kind
    ``kind``, at ``step`` of the schedule -- may write its result over: the value dies here, is
    read once by ``instr``, and ``instr`` reads it in a way that allows it (:func:`can_run_in_place`)."""
    if instr.shape.is_tuple or instr.opcode in _ALIASING or kind_of.get(ba.value(instr).id) != kind:
        return None
    for i, op in enumerate(instr.operands):
        if op.shape.is_tuple:
            continue
        candidate = ba.value(op)
        if (kind_of[candidate.id] == "temp" and candidate.id not in excluded and live[candidate.id][1] == step
                and can_run_in_place(instr, i) and times_read(ba, instr, candidate) == 1):
            return candidate, op
    return None


def _temporaries_in_output_buffers(ba: BufferAssignment, blocks: dict[int, BufferBlock],
                                   live: dict[int, list[int]]) -> dict[int, Allocation]:
    """Temporaries that can live in an output buffer before the output is written there.

    An output allocation is the caller's memory only from the step that writes the output; before
    that its bytes are free, and XLA's buffer assignment puts temporaries there whose live ranges
    end before it -- an NCHW convolution's input, transposed to NHWC, dies at the convolution, long
    before the final transpose writes the output. Largest first, at offset 0, no two of them live
    at once. Returns block id -> the output allocation it moves to.
    """
    moved: dict[int, Allocation] = {}
    for alloc in ba.allocations:
        if alloc.kind != "output" or not alloc.values:
            continue
        first_write = min(live[v.id][0] for v, _ in alloc.values)
        placed: list[BufferBlock] = []
        for block in sorted(blocks.values(), key=lambda b: (-b.size, b.start, b.id)):
            if (block.id in moved or block.size > alloc.size or block.end >= first_write
                    or any(block.overlaps_in_time(other) for other in placed)):
                continue
            placed.append(block)
            moved[block.id] = alloc
    return moved


def loop_passes_through(body: HloComputation, index: ShapeIndex) -> bool:
    """Does ``body`` return state element ``index`` exactly as it received it?"""
    instr, idx = body.root, index
    while True:
        if instr.opcode == "tuple" and idx:
            instr, idx = instr.operand(idx[0]), idx[1:]
        elif instr.opcode == "get-tuple-element":
            instr, idx = instr.operand(0), (instr.tuple_index,) + idx
        else:
            return instr is body.parameter(0) and idx == index


def while_state_homes(ba: BufferAssignment, order: list[HloInstruction], position: dict[int, int],
                      kind_of: dict[int, str], live: dict[int, list[int]],
                      share_with: dict[int, int]) -> dict[int, HloValue]:
    """Where each ``while`` keeps its loop state: in the bytes of its initial values when it can.

    The loop updates its state in place (its body's buffer assignment treats the state as donated),
    so state element ``{i}`` needs bytes the loop may overwrite. Three cases, as XLA's copy
    insertion decides them:

    * the initial value is a temporary that dies at the ``while`` (read once by it): the loop runs
      **in the initial value's bytes** -- the result shares its block, or, when the result is an
      output, the initial value is computed straight into the output buffer;
    * the body passes the element through unchanged and the initial value is a parameter or a
      constant: nothing writes it, so the result *is* the initial value's buffer;
    * otherwise the result has buffers of its own and the ``while`` thunk copies the initial value
      in once, before the first iteration.

    Fills ``share_with``/``kind_of``; returns value id -> the value whose allocation it takes.
    """
    homes: dict[int, HloValue] = {}
    shared_bases = set(share_with.values()) | set(share_with)
    for instr in order:
        if instr.opcode != "while":
            continue
        init = instr.operand(0)
        init_values = [ba.value(init, idx) for idx in init.shape.leaf_indices()]
        for idx in instr.shape.leaf_indices():
            result, start = ba.value(instr, idx), ba.value(init, idx)
            if result.shape.is_token or result.instruction is not instr:
                continue
            dies_here = (live[start.id][1] == position[instr.unique_id]
                         and sum(v is start for v in init_values) == 1)
            if kind_of[start.id] == "temp" and dies_here and kind_of[result.id] == "temp":
                share_with[result.id] = share_with.get(start.id, start.id)
            elif (kind_of[start.id] == "temp" and dies_here and kind_of[result.id] == "output"
                  and start.id not in shared_bases):
                kind_of[start.id] = "aliased"  # computed straight into the loop's output buffer
                homes[start.id] = result
            elif (kind_of[start.id] in ("parameter", "constant") and kind_of[result.id] == "temp"
                  and loop_passes_through(instr.attrs["body"], idx)):
                kind_of[result.id] = "aliased"  # read-only for the whole loop
                homes[result.id] = start
    return homes


def _peak(ba: BufferAssignment, kind_of: dict[int, str], blocks: dict[int, BufferBlock],
          end_of_time: int) -> tuple[int, int]:
    """Peak live bytes over the schedule. Parameters and constants are live for the whole
    run (the caller owns the parameters; constants are baked in), outputs from the step
    that writes them to the end, each temp block over its live range; values sharing bytes
    (in place, aliases, donated outputs) count once."""
    last = max(end_of_time - 1, 0)
    buffers = [LiveBuffer(tuple(block.members), block.size, block.start, block.end, "temp")
               for block in blocks.values()]
    for v in ba.values:
        kind = kind_of[v.id]
        if kind in ("parameter", "constant"):
            buffers.append(LiveBuffer((v.id,), v.size, 0, last, kind))
        elif kind in ("output", "external"):
            buffers.append(LiveBuffer((v.id,), v.size, ba.live_ranges[v.id][0], min(ba.live_ranges[v.id][1], last),
                                      kind))
    ba.live_buffers = buffers
    return peak_live_bytes([(b.size, b.start, b.end) for b in buffers])


@dataclass(frozen=True)
class LiveBuffer:
    """Bytes the peak counts: values that share them (in place), how many, from and to which step."""

    values: tuple[int, ...]
    size: int
    start: int
    end: int
    kind: str  # parameter | constant | output | external | temp

    def live_at(self, step: int) -> bool:
        return self.start <= step <= self.end


class ModuleBufferAssignment:
    """Buffer assignments of every sequential computation of a scheduled module."""

    def __init__(self, module: HloModule, donate_loop_state: bool = False) -> None:
        """``donate_loop_state``: while bodies may update the loop state in place, in buffers this
        assignment gives each ``while``'s results (its thunk copies the initial state there when
        the loop cannot simply run in the initial values' bytes)."""
        from xla_teach.passes.scheduling.hlo_memory_scheduler import sequential_computations

        self.module = module
        self.computations: dict[str, BufferAssignment] = {}
        bodies = {id(i.attr("body")) for c in module.computations for i in c.instructions if i.opcode == "while"}
        for comp in sequential_computations(module):
            self.computations[comp.name] = assign_buffers(comp, donate_loop_state and id(comp) in bodies,
                                                          loops_in_place=donate_loop_state)

    def __getitem__(self, comp: HloComputation) -> BufferAssignment:
        return self.computations[comp.name]

    @property
    def entry(self) -> BufferAssignment:
        return self.computations[self.module.entry.name]

    def temp_bytes(self) -> int:
        return sum(ba.temp_bytes for ba in self.computations.values())

    def naive_temp_bytes(self) -> int:
        return sum(ba.naive_temp_bytes() for ba in self.computations.values())

    def peak_bytes(self) -> int:
        """The entry's peak live bytes (loop bodies and branches report their own)."""
        return self.entry.peak_bytes

    def to_text(self) -> str:
        return "\n\n".join(ba.to_text() for ba in self.computations.values()) + "\n"
