"""Sequential scheduling that keeps peak memory low (``hlo-memory-scheduler``).

A computation is a graph; running it needs a total order. Any topological order
computes the same values, but orders differ in how many intermediate buffers
are alive at once. Like XLA's ``HloMemoryScheduler``, this pass tries several
heuristics and keeps the order with the smallest simulated peak:

* **post-order**: the DFS order the printer uses;
* **list scheduling**: repeatedly run the ready instruction that frees the most
  bytes (its operands' last use) minus the bytes it allocates;
* **DFS by size**: a post-order that visits the operand subtrees needing the most
  memory first (a Sethi–Ullman-style heuristic).

The chosen order becomes the computations' instruction order and the module is
marked ``is_scheduled=true``: from then on, the text order *is* the schedule.
Only computations that run as kernel sequences are scheduled; scalar reducers
and fused computations keep post-order.

Before (``big`` is computed first and must then wait, 4 KiB, until ``out`` reads it)::

    HloModule m

    add {
      lhs = f32[] parameter(0)
      rhs = f32[] parameter(1)
      ROOT sum = f32[] add(lhs, rhs)
    }

    ENTRY main {
      x = f32[1024] parameter(0)
      y = f32[1024] parameter(1)
      big = f32[1024] exponential(y)
      tmp = f32[1024] exponential(x)
      zero = f32[] constant(0)
      total = f32[] reduce(tmp, zero), dimensions={0}, to_apply=add
      index = s32[] convert(total)
      ROOT out = f32[1] dynamic-slice(big, index), dynamic_slice_sizes={1}
    }

After (the note reads ``main: peak post-order 8200 B, list 8200 B, dfs-by-size 4104 B
-> dfs-by-size``: ``tmp`` is dead before ``big`` is born, so one 4 KiB array at a time)::

    HloModule m, is_scheduled=true

    add {
      lhs = f32[] parameter(0)
      rhs = f32[] parameter(1)
      ROOT sum = f32[] add(lhs, rhs)
    }

    ENTRY main {
      x = f32[1024] parameter(0)
      tmp = f32[1024] exponential(x)
      zero = f32[] constant(0)
      total = f32[] reduce(tmp, zero), dimensions={0}, to_apply=add
      index = s32[] convert(total)
      y = f32[1024] parameter(1)
      big = f32[1024] exponential(y)
      ROOT out = f32[1] dynamic-slice(big, index), dynamic_slice_sizes={1}
    }
"""

from __future__ import annotations

from collections.abc import Callable

from xla_teach.hlo.ir import HloComputation, HloInstruction, HloModule
from xla_teach.hlo.opcodes import ALIASING_OPCODES
from xla_teach.passes.pass_base import HloPass

# Instructions whose result shares storage with an operand (no new bytes).
ALIASING_OPS = ALIASING_OPCODES


def defined_bytes(instr: HloInstruction) -> int:
    """Bytes of new storage ``instr`` needs for its result."""
    if instr.opcode in ALIASING_OPS or instr.opcode == "parameter":
        return 0
    return sum(leaf.byte_size() for leaf in instr.shape.leaf_shapes())


def simulate_peak(order: list[HloInstruction]) -> int:
    """Peak bytes alive when running ``order``: a value lives from its definition to
    its last use (values reachable from the root live to the end)."""
    position = {i.unique_id: n for n, i in enumerate(order)}
    last_use: dict[int, int] = {}
    for instr in order:
        for op in instr.operands:
            last_use[op.unique_id] = max(last_use.get(op.unique_id, -1), position[instr.unique_id])
    root = order[-1].parent.root if order and order[-1].parent else None
    forever = len(order)
    stack = [root] if root is not None else []
    while stack:  # values the root aliases stay alive to the end
        node = stack.pop()
        last_use[node.unique_id] = forever
        if node.opcode in ALIASING_OPS:
            stack.extend(node.operands)
    live = peak = 0
    frees: dict[int, int] = {}
    for n, instr in enumerate(order):
        size = defined_bytes(instr)
        live += size
        peak = max(peak, live)
        end = last_use.get(instr.unique_id, n)
        frees[end] = frees.get(end, 0) + size
        live -= frees.pop(n, 0)
    return peak


def list_schedule(comp: HloComputation) -> list[HloInstruction]:
    """Greedy: among ready instructions run the one with the best bytes-freed balance."""
    instrs = comp.post_order()
    remaining_users = {i.unique_id: len(set(i.users)) for i in instrs}
    pending_operands = {i.unique_id: len(set(i.operands) | set(i.control_predecessors)) for i in instrs}
    successors: dict[int, list[HloInstruction]] = {i.unique_id: [] for i in instrs}
    for i in instrs:
        for pred in set(i.operands) | set(i.control_predecessors):
            successors[pred.unique_id].append(i)
    order_index = {i.unique_id: n for n, i in enumerate(instrs)}
    ready = [i for i in instrs if pending_operands[i.unique_id] == 0]
    schedule: list[HloInstruction] = []

    def score(instr: HloInstruction) -> tuple[int, int]:
        freed = sum(defined_bytes(op) for op in set(instr.operands) if remaining_users[op.unique_id] == 1)
        return (freed - defined_bytes(instr), -order_index[instr.unique_id])

    while ready:
        best = max(ready, key=score)
        ready.remove(best)
        schedule.append(best)
        for op in set(best.operands):
            remaining_users[op.unique_id] -= 1
        for succ in successors[best.unique_id]:
            pending_operands[succ.unique_id] -= 1
            if pending_operands[succ.unique_id] == 0:
                ready.append(succ)
    return schedule


def dfs_by_size_schedule(comp: HloComputation) -> list[HloInstruction]:
    """Post-order visiting the operand with the largest subtree footprint first."""
    footprint: dict[int, int] = {}
    for instr in comp.post_order():
        footprint[instr.unique_id] = defined_bytes(instr) + sum(
            footprint[op.unique_id] for op in set(instr.operands))
    order: list[HloInstruction] = []
    visited: set[int] = set()

    def visit(start: HloInstruction) -> None:
        # depth first with a stack of its own (a deep model's chains run thousands of operands
        # deep, past Python's recursion limit): each entry is an instruction and the operands
        # still to visit before it, largest footprint first
        if start.unique_id in visited:
            return
        visited.add(start.unique_id)
        stack = [(start, _by_footprint(start, footprint))]
        while stack:
            instr, todo = stack[-1]
            while todo and todo[-1].unique_id in visited:
                todo.pop()
            if not todo:
                stack.pop()
                order.append(instr)
                continue
            pred = todo.pop()
            visited.add(pred.unique_id)
            stack.append((pred, _by_footprint(pred, footprint)))

    for instr in comp.instructions:
        if not instr.users:
            visit(instr)
    return order


def _by_footprint(instr: HloInstruction, footprint: dict[int, int]) -> list[HloInstruction]:
    """``instr``'s operands and control predecessors, the largest footprint *last* (popped first)."""
    preds = list(dict.fromkeys(list(instr.operands) + instr.control_predecessors))
    return list(reversed(sorted(preds, key=lambda p: -footprint.get(p.unique_id, 0))))


HEURISTICS: dict[str, Callable[[HloComputation], list[HloInstruction]]] = {
    "post-order": lambda comp: comp.post_order(),
    "list": list_schedule,
    "dfs-by-size": dfs_by_size_schedule,
}


def sequential_computations(module: HloModule) -> list[HloComputation]:
    from xla_teach.passes.fusion.instruction_fusion import fusible_computations

    return fusible_computations(module)


class HloMemoryScheduler(HloPass):
    name = "hlo-memory-scheduler"
    is_optimization = False  # backends need a schedule

    def run(self, module: HloModule) -> bool:
        before = {c.name: [i.unique_id for i in c.instructions] for c in module.computations}
        sequential = sequential_computations(module)
        for comp in sequential:
            results = {name: make(comp) for name, make in HEURISTICS.items()}
            peaks = {name: simulate_peak(order) for name, order in results.items()}
            best = min(peaks, key=lambda name: (peaks[name], list(HEURISTICS).index(name)))
            self.note(f"{comp.name}: peak " + ", ".join(f"{n} {p} B" for n, p in peaks.items()) + f" -> {best}")
            comp.instructions = results[best]
        for comp in module.computations:
            if all(comp is not seq for seq in sequential):
                comp.instructions = comp.post_order()
        changed = not module.is_scheduled or any(
            [i.unique_id for i in c.instructions] != before.get(c.name) for c in module.computations)
        module.is_scheduled = True
        return changed
