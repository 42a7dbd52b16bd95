"""The memory scheduler (``hlo-memory-scheduler``): its sequential order must be a valid topological
order of every computation that runs as a kernel sequence, and where the order matters it must
keep fewer bytes alive than a naive order. Peak memory is computed here independently (a value
lives from its definition to its last use) and through buffer assignment's temp arena."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

from tests.hypothesis_modules import hlo_modules
from tests.passes.pass_test_utils import assert_same_results
from xla_teach.backends.cpu.cpu_pipeline import cpu_pipeline
from xla_teach.hlo.ir import HloComputation, HloInstruction, HloModule
from xla_teach.hlo.text.parser import parse_hlo
from xla_teach.passes.pass_base import HloPassPipeline, PassOptions, PassRecorder
from xla_teach.passes.scheduling.buffer_assignment import ModuleBufferAssignment
from xla_teach.passes.scheduling.hlo_memory_scheduler import (
    HEURISTICS,
    HloMemoryScheduler,
    sequential_computations,
)

SAMPLES = Path(__file__).parents[2] / "tests" / "data" / "xla_samples"

# ``big`` is needed only at the very end, ``tmp`` only to compute ``index``. The text order (and the
# printer's post-order, which visits ``big`` first) keeps both 4 KiB arrays alive at once; computing
# ``index`` first needs only one of them at a time.
ORDER_MATTERS = """
HloModule order_matters
add_f32 {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY main {
  x = f32[1024] parameter(0)
  y = f32[1024] parameter(1)
  big = f32[1024] exponential(y)
  tmp = f32[1024] exponential(x)
  zero = f32[] constant(0)
  total = f32[] reduce(tmp, zero), dimensions={0}, to_apply=add_f32
  index = s32[] convert(total)
  ROOT out = f32[1] dynamic-slice(big, index), dynamic_slice_sizes={1}
}
"""

_ALIASES = {"tuple", "get-tuple-element", "bitcast", "opt-barrier"}


def peak_live_bytes(comp: HloComputation, order: list[HloInstruction]) -> int:
    """The most bytes of instruction results alive at any step of ``order`` (parameters are the
    caller's). A result lives from its step to the last step that reads it, the root to the end;
    aliasing ops (tuple, get-tuple-element, bitcast) hold no bytes of their own."""
    step = {i.unique_id: n for n, i in enumerate(order)}
    last = {i.unique_id: max([step[u.unique_id] for u in i.users] + [step[i.unique_id]]) for i in order}
    pending = [comp.root]
    while pending:  # what the root is made of stays alive to the end
        node = pending.pop()
        last[node.unique_id] = len(order)
        if node.opcode in _ALIASES:
            pending.extend(node.operands)
    sizes = {i.unique_id: 0 if i.opcode in _ALIASES | {"parameter"} else
             sum(s.byte_size() for s in i.shape.leaf_shapes()) for i in order}
    return max(sum(sizes[i.unique_id] for i in order if step[i.unique_id] <= t <= last[i.unique_id])
               for t in range(len(order)))


def assert_topological(comp: HloComputation) -> None:
    order = comp.instructions
    assert len({i.unique_id for i in order}) == len(order), f"{comp.name}: an instruction is scheduled twice"
    assert {i.unique_id for i in order} == {i.unique_id for i in comp.post_order()}, f"{comp.name}: not all scheduled"
    seen: set[int] = set()
    for instr in order:
        for pred in list(instr.operands) + list(instr.control_predecessors):
            assert pred.unique_id in seen, f"{comp.name}: {instr.name} is scheduled before {pred.name}"
        seen.add(instr.unique_id)


def assert_valid_schedule(module: HloModule) -> None:
    assert module.is_scheduled
    for comp in module.computations:
        assert_topological(comp)
    # The schedule is the text order: printing and parsing it back keeps it.
    reparsed = parse_hlo(module.to_text())
    assert reparsed.is_scheduled
    for comp in sequential_computations(module):
        assert [i.name for i in reparsed.computation(comp.name).instructions] == [i.name for i in comp.instructions]


def test_schedule_is_a_topological_order_that_survives_printing() -> None:
    module = parse_hlo(ORDER_MATTERS)
    assert not module.is_scheduled
    assert HloMemoryScheduler().run(module)
    assert_valid_schedule(module)
    assert "is_scheduled=true" in module.to_text().splitlines()[0]


@pytest.mark.parametrize("heuristic", sorted(HEURISTICS))
def test_every_heuristic_gives_a_topological_order(heuristic: str) -> None:
    module = parse_hlo(ORDER_MATTERS)
    module.entry.instructions = HEURISTICS[heuristic](module.entry)
    assert_topological(module.entry)


def test_the_scheduler_picks_an_order_with_a_lower_peak_than_the_naive_one() -> None:
    naive = parse_hlo(ORDER_MATTERS)
    naive_peak = peak_live_bytes(naive.entry, naive.entry.instructions)
    assert naive_peak == 2 * 4096 + 8  # big and tmp at once (plus the scalars zero and total)
    assert peak_live_bytes(naive.entry, naive.entry.post_order()) == naive_peak  # DFS order is no better

    module = parse_hlo(ORDER_MATTERS)
    recorder = PassRecorder()
    HloPassPipeline("scheduling", [HloMemoryScheduler()]).run(module, PassOptions(), recorder)
    scheduled_peak = peak_live_bytes(module.entry, module.entry.instructions)
    assert scheduled_peak == 4096 + 8
    assert [i.name for i in module.entry.instructions].index("index") < [
        i.name for i in module.entry.instructions].index("big")
    # The note compares the heuristics and names the winner.
    assert recorder.records[0].notes == [
        "main: peak post-order 8200 B, list 8200 B, dfs-by-size 4104 B -> dfs-by-size"]

    # Buffer assignment over the naive order cannot share bytes between big and tmp; over the
    # schedule it can: the temp arena shrinks by one 4 KiB buffer.
    naive.is_scheduled = True  # take the text order as the schedule
    naive_temp = ModuleBufferAssignment(naive).temp_bytes()
    scheduled_temp = ModuleBufferAssignment(module).temp_bytes()
    assert naive_temp >= 2 * 4096 and scheduled_temp < naive_temp - 4000
    assert_same_results(parse_hlo(ORDER_MATTERS), module)


def test_scheduling_a_scheduled_module_changes_nothing() -> None:
    module = parse_hlo(ORDER_MATTERS)
    HloMemoryScheduler().run(module)
    text = module.to_text()
    assert not HloMemoryScheduler().run(module)
    assert module.to_text() == text


def test_fused_and_reducer_computations_keep_post_order() -> None:
    module = parse_hlo(ORDER_MATTERS)
    cpu_pipeline().run(module, PassOptions(record=False))
    sequential = {c.name for c in sequential_computations(module)}
    assert sequential == {module.entry.name}
    for comp in module.computations:
        if comp.name not in sequential:
            assert [i.name for i in comp.instructions] == [i.name for i in comp.post_order()]


@pytest.mark.skipif(not (SAMPLES / "fori_loop" / "meta.json").is_file(), reason=f"no fori_loop sample under {SAMPLES}")
def test_loop_bodies_are_scheduled_too() -> None:
    module = parse_hlo((SAMPLES / "fori_loop" / "before_optimizations.txt").read_text())
    cpu_pipeline().run(module, PassOptions(record=False))
    assert len(sequential_computations(module)) >= 3  # entry, while body, while condition
    assert_valid_schedule(module)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(module=hlo_modules())
def test_random_modules_get_valid_schedules_no_worse_than_post_order(module: HloModule) -> None:
    unfused = module.clone()
    HloMemoryScheduler().run(unfused)
    assert_valid_schedule(unfused)
    entry = module.clone().entry
    assert peak_live_bytes(unfused.entry, unfused.entry.instructions) <= peak_live_bytes(entry, entry.post_order())
    optimized = module.clone()
    cpu_pipeline().run(optimized, PassOptions(record=False))
    assert_valid_schedule(optimized)


def test_a_chain_thousands_deep_is_scheduled_without_recursion() -> None:
    """A 32-block model's operand chains run thousands deep: the depth-first heuristic keeps its
    own stack (it recursed, and a 32-block GPT step failed with RecursionError)."""
    from xla_teach.passes.scheduling.hlo_memory_scheduler import dfs_by_size_schedule

    lines = ["HloModule deep", "ENTRY main {", "  v0 = f32[4] parameter(0)"]
    lines += [f"  v{i} = f32[4] negate(v{i - 1})" for i in range(1, 5000)]
    lines += ["  ROOT r = f32[4] negate(v4999)", "}"]
    comp = parse_hlo("\n".join(lines)).entry
    order = dfs_by_size_schedule(comp)
    assert [i.name for i in order] == [f"v{i}" for i in range(5000)] + ["r"]
