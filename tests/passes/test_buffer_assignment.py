"""Buffer assignment and the heap simulator: which bytes hold which value.

The central property -- no two values that are alive at the same time share bytes -- is checked
with live ranges computed here from the schedule (not taken from the assignment), over hand-written
modules and random ones after the full CPU pipeline. The other tests cover reuse of dead buffers,
in-place updates (and two cases where writing in place would be wrong, run on the CPU backend),
the rules for parameters, constants and outputs, and the report next to XLA's
``buffer-assignment.txt``."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from tests.hypothesis_modules import hlo_modules
from tests.passes.pass_test_utils import random_inputs
from xla_teach import flags
from xla_teach.api import compile_module
from xla_teach.backends.cpu.cpu_pipeline import cpu_pipeline
from xla_teach.backends.options import CompileOptions
from xla_teach.hlo.evaluator import evaluate_module
from xla_teach.hlo.ir import HloModule
from xla_teach.hlo.text.parser import parse_hlo
from xla_teach.passes.pass_base import PassOptions
from xla_teach.passes.scheduling.buffer_assignment import (
    ALIGNMENT,
    BufferAssignment,
    HloValue,
    ModuleBufferAssignment,
)
from xla_teach.passes.scheduling.heap_simulator import BufferBlock, pack_blocks
from xla_teach.passes.scheduling.hlo_memory_scheduler import HloMemoryScheduler

XLA_SEED_DUMP = Path(__file__).parents[2] / "tests" / "data" / "xla_samples" / "xla_cpu_dump_of_seed_example"
XLA_REPORT = XLA_SEED_DUMP / "module_0000.jit_f.cpu_after_optimizations-buffer-assignment.txt"
SEED_BEFORE = XLA_SEED_DUMP / "module_0000.jit_f.before_optimizations.txt"

ADD_F32 = """
add_f32 {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
"""


def schedule_and_assign(text_or_module: str | HloModule) -> tuple[HloModule, BufferAssignment]:
    module = parse_hlo(text_or_module) if isinstance(text_or_module, str) else text_or_module
    HloMemoryScheduler().run(module)
    return module, ModuleBufferAssignment(module).entry


def live_ranges(ba: BufferAssignment) -> dict[int, tuple[int, int]]:
    """Value id -> (first step, last step), from the schedule: a value is defined at its instruction
    and read by every instruction with an operand that holds it (through tuples and bitcasts; a
    get-tuple-element reads only the element it names);
    what the root holds is alive to the end."""
    step = {i.unique_id: n for n, i in enumerate(ba.order)}
    first = {v.id: step[v.instruction.unique_id] for v in ba.values}
    last = dict(first)
    for instr in ba.order:
        for op in instr.operands:
            for idx in op.shape.leaf_indices():
                if instr.opcode == "get-tuple-element" and idx[:1] != (instr.tuple_index,):
                    continue  # it names one element; the others are not read here
                v = ba.value(op, idx)
                last[v.id] = max(last[v.id], step[instr.unique_id])
    for idx in ba.computation.root.shape.leaf_indices():
        last[ba.value(ba.computation.root, idx).id] = len(ba.order)
    return {vid: (first[vid], last[vid]) for vid in first}


def _written_in_place(ba: BufferAssignment, early: HloValue, late: HloValue, ranges: dict) -> bool:
    """``late`` is the result of the instruction that last reads ``early``, recorded as in place."""
    instr = late.instruction
    return ranges[early.id][1] == ranges[late.id][0] and any(
        (instr.name, op.name) in ba.in_place and ba.value(op) is early
        for op in instr.operands if not op.shape.is_tuple)


def assert_no_live_overlap(ba: BufferAssignment) -> None:
    """Values whose bytes overlap are never alive at the same step, except an instruction writing its
    result over the operand it reads for the last time (in place)."""
    ranges = live_ranges(ba)
    for alloc in ba.allocations:
        assert alloc.values, f"allocation {alloc.index} holds nothing"
        for k, (v, offset) in enumerate(alloc.values):
            assert 0 <= offset and offset + v.size <= alloc.size, f"{v.label()} sticks out of allocation {alloc.index}"
            if alloc.kind == "temp":
                assert offset % ALIGNMENT == 0
            for w, other in alloc.values[k + 1:]:
                if offset >= other + w.size or other >= offset + v.size:
                    continue  # different bytes
                early, late = sorted((v, w), key=lambda u: ranges[u.id])
                if ranges[early.id][1] < ranges[late.id][0]:
                    continue  # different times
                assert _written_in_place(ba, early, late, ranges), (
                    f"{early.label()} {ranges[early.id]} and {late.label()} {ranges[late.id]} share bytes "
                    f"in allocation {alloc.index} while both are alive\n{ba.to_text()}")


def assert_every_value_has_one_slice(ba: BufferAssignment) -> None:
    placed = [v.id for alloc in ba.allocations for v, _ in alloc.values]
    assert sorted(placed) == sorted(v.id for v in ba.values)


# ---- the central property ---------------------------------------------------------------------------
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(module=hlo_modules())
def test_no_two_live_values_share_bytes_after_the_cpu_pipeline(module: HloModule) -> None:
    optimized = module.clone()
    cpu_pipeline().run(optimized, PassOptions(record=False))
    for ba in ModuleBufferAssignment(optimized).computations.values():
        assert_every_value_has_one_slice(ba)
        assert_no_live_overlap(ba)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(module=hlo_modules())
def test_no_two_live_values_share_bytes_in_unfused_modules(module: HloModule) -> None:
    """Unfused, the random modules have many temporaries: reuse and in-place updates happen often."""
    _, ba = schedule_and_assign(module.clone())
    assert_every_value_has_one_slice(ba)
    assert_no_live_overlap(ba)


# ---- reuse --------------------------------------------------------------------------------------------
def test_a_dead_buffer_is_reused_by_a_later_value() -> None:
    module, ba = schedule_and_assign("HloModule reuse\n" + ADD_F32 + """
ENTRY main {
  x = f32[1024] parameter(0)
  y = f32[1024] parameter(1)
  zero = f32[] constant(0)
  ea = f32[1024] exponential(x)
  s1 = f32[] reduce(ea, zero), dimensions={0}, to_apply=add_f32
  eb = f32[1024] exponential(y)
  s2 = f32[] reduce(eb, zero), dimensions={0}, to_apply=add_f32
  ROOT out = f32[] add(s1, s2)
}
""")
    entry = module.entry
    a, b = ba.slice(entry.instruction("ea")), ba.slice(entry.instruction("eb"))
    assert a.allocation is b.allocation and a.allocation.kind == "temp"
    ranges = live_ranges(ba)
    assert ranges[ba.value(entry.instruction("ea")).id][1] < ranges[ba.value(entry.instruction("eb")).id][0]
    assert a.offset == b.offset  # eb lives after ea died: same bytes
    assert ba.temp_bytes < ba.naive_temp_bytes()
    assert ba.naive_temp_bytes() == 2 * 4096 + 2 * 4  # ea, eb, s1, s2 each in its own buffer
    assert_no_live_overlap(ba)


def test_elementwise_chain_runs_in_place_but_not_over_a_value_still_needed() -> None:
    module, ba = schedule_and_assign("HloModule in_place\n" + ADD_F32 + """
ENTRY main {
  x = f32[1024] parameter(0)
  e = f32[1024] exponential(x)
  n = f32[1024] negate(e)
  t = f32[1024] tanh(n)
  m = f32[1024] multiply(t, e)
  zero = f32[] constant(0)
  ROOT r = f32[] reduce(m, zero), dimensions={0}, to_apply=add_f32
}
""")
    entry = module.entry
    slices = {name: ba.slice(entry.instruction(name)) for name in ("e", "n", "t", "m")}
    # n cannot overwrite e: m still reads e. t overwrites n (n dies at t), m overwrites t.
    assert ("t", "n") in ba.in_place and ("m", "t") in ba.in_place
    assert not any(instr == "n" for instr, _ in ba.in_place)
    assert slices["t"] == slices["n"] and slices["m"] == slices["n"]
    assert slices["e"].offset != slices["n"].offset
    assert ba.temp_bytes == 2 * 4096 and ba.naive_temp_bytes() == 4 * 4096
    assert_no_live_overlap(ba)


def test_dynamic_update_slice_writes_into_its_operand() -> None:
    module, ba = schedule_and_assign("""
HloModule dus
ENTRY main {
  x = f32[1024] parameter(0)
  u = f32[16] parameter(1)
  i = s32[] parameter(2)
  buf = f32[1024] exponential(x)
  upd = f32[1024] dynamic-update-slice(buf, u, i)
  ROOT r = f32[1024] negate(upd)
}
""")
    entry = module.entry
    assert ("upd", "buf") in ba.in_place
    assert ba.slice(entry.instruction("upd")) == ba.slice(entry.instruction("buf"))
    assert ba.temp_bytes == 4096
    assert_no_live_overlap(ba)


def test_parameters_constants_and_outputs_follow_their_rules() -> None:
    module, ba = schedule_and_assign("""
HloModule rules
ENTRY main {
  x = f32[256] parameter(0)
  c = f32[256] iota(), iota_dimension=0
  k = f32[256] constant({...})
  e = f32[256] exponential(x)
  n = f32[256] negate(e)
  a = f32[256] add(n, c)
  s = f32[256] subtract(a, k)
  b = f32[16,16] bitcast(s)
  ROOT r = (f32[256], f32[16,16], f32[256]) tuple(x, b, e)
}
""".replace("constant({...})", "constant({" + ", ".join(["1"] * 256) + "})"))
    entry = module.entry
    x, k, e, s = (entry.instruction(name) for name in ("x", "k", "e", "s"))
    # A parameter lives in the caller's memory, also when the result returns it (no copy).
    assert ba.slice(x).allocation.kind == "parameter" and ba.slice(x).allocation.parameter_number == 0
    assert ba.slice(entry.root, (0,)) == ba.slice(x)
    # Constants have allocations of their own and are never written over.
    assert ba.slice(k).allocation.kind == "constant"
    assert not any(op in ("x", "k") for _, op in ba.in_place)
    # What the caller receives sits in output allocations, not in the temp arena: a bitcast of ``s`` is
    # ``s`` itself; ``e`` is returned too, so ``n`` cannot overwrite it.
    assert ba.slice(entry.root, (1,)) == ba.slice(s) and ba.slice(s).allocation.kind == "output"
    assert ba.slice(s).allocation.output_index == (1,)
    assert ba.slice(entry.root, (2,)).allocation.kind == "output" and ba.slice(e).allocation.output_index == (2,)
    assert ("n", "e") not in ba.in_place
    # Outputs never reuse a temporary in place (the caller owns them after the call).
    assert ("s", "a") not in ba.in_place
    temp = ba.temp_allocation
    assert temp is not None and {v.instruction.name for v, _ in temp.values} == {"n", "a"}
    # ``c`` dies at ``a``, before ``s`` is written: it lives in s's output buffer until then.
    assert ba.slice(entry.instruction("c")).allocation is ba.slice(s).allocation
    assert_no_live_overlap(ba)


# ---- in place where it is not safe (regressions; wrong results on the CPU backend before the fix) ----
def _run_cpu(text: str, disabled: str = "") -> Any:
    module = parse_hlo(text)
    args = random_inputs(module, seed=1)
    with flags.override(xla_disable_hlo_passes=disabled):
        executable = compile_module(text, backend="cpu")
    for got, want in zip(executable.execute(args), evaluate_module(module, args), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    return executable


def test_a_loop_fusion_that_reverses_its_operand_does_not_run_in_place() -> None:
    """``exp(x)`` dies at the fusion, whose first op is elementwise -- but a ``reverse`` after it reads
    row 2 to write row 0: writing in place would overwrite rows before they are read."""
    text = "HloModule reverse_in_fusion\n" + ADD_F32 + """
ENTRY main {
  x = f32[3,3] parameter(0)
  y = f32[3,3] parameter(1)
  w = f32[3,3] parameter(2)
  e = f32[3,3] exponential(x)
  zero = f32[] constant(0)
  s = f32[] reduce(e, zero), dimensions={0,1}, to_apply=add_f32
  a = f32[3,3] add(e, y)
  t = f32[3,3] reverse(a), dimensions={0}
  bs = f32[3,3] broadcast(s), dimensions={}
  u = f32[3,3] multiply(t, bs)
  ROOT d = f32[3,3] dot(u, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}
"""
    executable = _run_cpu(text)
    fusion = next(i for i in executable.module.entry.instructions
                  if i.opcode == "fusion" and any(f.opcode == "reverse" for f in i.fused_computation.instructions))
    ba = ModuleBufferAssignment(executable.module).entry
    assert not any(instr == fusion.name for instr, _ in ba.in_place)


def test_an_elementwise_result_in_another_layout_does_not_run_in_place() -> None:
    """``add`` reads ``s`` row-major and writes its result column-major: element (i, j) of the
    result lands where ``s`` holds another element, not yet read. (What scan-expander writes for a
    column-major cumulative op whose init is combined in afterwards.)"""
    text = """
HloModule other_layout
lt {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = pred[] compare(a, b), direction=LT
}
ENTRY main {
  x = f32[6,13]{1,0} parameter(0)
  y = f32[6] parameter(1)
  s = f32[6,13]{1,0} sort(x), dimensions={1}, to_apply=lt
  b = f32[6,13]{1,0} broadcast(y), dimensions={0}
  ROOT r = f32[6,13]{0,1} add(b, s)
}
"""
    executable = _run_cpu(text)
    ba = ModuleBufferAssignment(executable.module).entry
    assert not any(op == "s" for _, op in ba.in_place)


def test_an_operand_read_twice_through_a_bitcast_is_not_overwritten() -> None:
    """The fusion reads ``e`` directly and through ``bitcast(e)`` (transposed): writing over ``e``
    would clobber elements the transposed read still needs."""
    text = """
HloModule read_twice
fused {
  p0 = f32[2,3] parameter(0)
  p1 = f32[3,2] parameter(1)
  t = f32[2,3] transpose(p1), dimensions={1,0}
  ROOT a = f32[2,3] add(p0, t)
}
ENTRY main {
  x = f32[2,3] parameter(0)
  e = f32[2,3] exponential(x)
  r = f32[3,2] bitcast(e)
  f = f32[2,3] fusion(e, r), kind=kLoop, calls=fused
  ROOT n = f32[2,3] negate(f)
}
"""
    _, ba = schedule_and_assign(text)
    assert ("f", "e") not in ba.in_place
    executable = _run_cpu(text, disabled="fusion,multi_output_fusion,algsimp,reshape-mover")
    assert executable.module.entry.instruction("f").opcode == "fusion"  # the module ran as written


# ---- the report ---------------------------------------------------------------------------------------
ALLOCATION_LINE = re.compile(r"allocation (\d+): size (\d+), (.+):")
VALUE_LINE = re.compile(r" value: <(\d+) (\S+) @0> \(size=(\d+),offset=(\d+)\): (\S+)")


def test_report_lists_every_allocation_and_value_in_xla_format() -> None:
    module, ba = schedule_and_assign("""
HloModule report
ENTRY main {
  x = f32[256] parameter(0)
  k = f32[] constant(2)
  bk = f32[256] broadcast(k), dimensions={}
  e = f32[256] exponential(x)
  n = f32[256] multiply(e, bk)
  ROOT r = (f32[256], f32[256]) tuple(n, x)
}
""")
    text = ba.to_text()
    lines = text.splitlines()
    assert lines[0] == "BufferAssignment of main:"
    listed: dict[int, tuple[int, str]] = {}
    values: dict[str, tuple[int, int, int]] = {}  # label -> (allocation, size, offset)
    current = -1
    for line in lines[1:]:
        if match := ALLOCATION_LINE.fullmatch(line):
            current = int(match[1])
            listed[current] = (int(match[2]), match[3])
        elif match := VALUE_LINE.fullmatch(line):
            values[match[2]] = (current, int(match[3]), int(match[4]))
    assert {a.index: a.size for a in ba.allocations} == {i: size for i, (size, _) in listed.items()}
    for alloc in ba.allocations:
        for value, offset in alloc.values:
            assert values[value.label()] == (alloc.index, value.size, offset)
    assert len(values) == len(ba.values)
    kinds = {desc.split(",")[0].split(" shape")[0] for _, desc in listed.values()}
    assert kinds == {"parameter 0", "constant", "output", "preallocated-temp"}
    assert f"Total temp arena: {ba.temp_bytes} bytes (one buffer per value would need {ba.naive_temp_bytes()} bytes)" \
        in lines


@pytest.mark.skipif(not XLA_REPORT.is_file(), reason=f"no XLA dump under {XLA_SEED_DUMP}")
def test_report_reads_like_xlas_and_agrees_on_the_seed_example() -> None:
    """The same line formats as XLA's ``buffer-assignment.txt``, and for the seed example the same
    parameter and output allocations (XLA adds thread-local reducer scalars and a reduce-window temp)."""
    xla_lines = XLA_REPORT.read_text().splitlines()
    xla_allocs = [ALLOCATION_LINE.fullmatch(line) for line in xla_lines if line.startswith("allocation")]
    xla_values = [VALUE_LINE.fullmatch(line) for line in xla_lines if line.startswith(" value")]
    assert all(xla_allocs) and all(xla_values)  # the patterns describe XLA's format
    module = parse_hlo(SEED_BEFORE.read_text())
    cpu_pipeline().run(module, PassOptions(record=False))
    text = ModuleBufferAssignment(module).to_text()
    ours = [ALLOCATION_LINE.fullmatch(line) for line in text.splitlines() if line.startswith("allocation")]
    assert all(ours) and all(VALUE_LINE.fullmatch(line) for line in text.splitlines() if line.startswith(" value"))

    def summary(matches: list[re.Match[str]]) -> set[tuple[str, int]]:
        kept = ("parameter", "output")
        return {(m[3].split(",")[0].split(" shape")[0], int(m[2])) for m in matches if m[3].startswith(kept)}

    assert summary(ours) == summary(xla_allocs) == {
        ("parameter 0", 4096), ("parameter 1", 4096), ("parameter 2", 4096), ("output", 4)}


# ---- the peak-memory figure ---------------------------------------------------------------------------
def test_temp_bytes_against_one_buffer_per_value() -> None:
    """An unfused two-layer chain: the naive figure is every temporary's size added up (computed here
    from the module), the arena is what the heap simulator packed."""
    text = """
HloModule mlp_like
ENTRY main {
  x = f32[64,64] parameter(0)
  w = f32[64,64] parameter(1)
  h = f32[64,64] dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  zero = f32[] constant(0)
  zeros = f32[64,64] broadcast(zero), dimensions={}
  r = f32[64,64] maximum(h, zeros)
  h2 = f32[64,64] dot(r, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  r2 = f32[64,64] maximum(h2, zeros)
  ROOT out = f32[64,64] dot(r2, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}
"""
    module, ba = schedule_and_assign(text)
    temporaries = [i for i in module.entry.instructions
                   if i.opcode not in ("parameter", "constant") and not i.is_root()]
    assert ba.naive_temp_bytes() == sum(i.shape.byte_size() for i in temporaries) == 5 * 64 * 64 * 4
    # r overwrites h and r2 overwrites h2 (in place); at h2 = dot(r, w) both pairs' buffers are alive,
    # and zeros lives until r2: three buffers at the widest moment -- but h and r die before ``out``
    # is written, so they live in its output buffer, and the arena holds two.
    assert ("r", "h") in ba.in_place and ("r2", "h2") in ba.in_place
    out = ba.slice(module.entry.root).allocation
    assert {v.instruction.name for v, _ in out.values} == {"h", "r", "out"}
    assert ba.temp_bytes == 2 * 64 * 64 * 4
    assert_no_live_overlap(ba)


# ---- the heap simulator -------------------------------------------------------------------------------
def test_heap_simulator_shares_bytes_only_between_blocks_that_do_not_meet() -> None:
    blocks = [BufferBlock(0, 100, 0, 2), BufferBlock(1, 64, 1, 3), BufferBlock(2, 128, 3, 5),
              BufferBlock(3, 10, 4, 4), BufferBlock(4, 200, 6, 7)]
    offsets, size = pack_blocks(blocks, alignment=64)
    assert all(offset % 64 == 0 for offset in offsets.values())
    for a in blocks:
        for b in blocks:
            if a.id < b.id and a.overlaps_in_time(b):
                lo_a, lo_b = offsets[a.id], offsets[b.id]
                assert lo_a + a.size <= lo_b or lo_b + b.size <= lo_a, (a, b)
    assert offsets[4] == 0 and offsets[2] == 0  # alone in its time: the start of the arena
    assert size == max(offsets[b.id] + -(-b.size // 64) * 64 for b in blocks) == 256


def test_heap_simulator_fills_the_smallest_gap_that_fits() -> None:
    """Best fit, not first fit: when block 4 arrives (steps 2-9), blocks 0 and 2 are dead and have left
    a 128-byte hole at 0 and a 64-byte hole at 192; the 64-byte block takes the smaller one."""
    blocks = [BufferBlock(0, 128, 0, 1), BufferBlock(1, 64, 0, 9), BufferBlock(2, 64, 0, 1),
              BufferBlock(3, 64, 0, 9), BufferBlock(4, 64, 2, 9)]
    offsets, size = pack_blocks(blocks, alignment=64)
    assert offsets == {0: 0, 1: 128, 2: 192, 3: 256, 4: 192}
    assert size == 320


SOFTMAX_OF_PRODUCT = """HloModule softmax_of_product
max_f32 {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT m = f32[] maximum(a, b)
}
""" + ADD_F32 + """
ENTRY main {
  x = f32[64,48] parameter(0)
  w = f32[48,80] parameter(1)
  logits = f32[64,80] dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ninf = f32[] constant(-inf)
  mx = f32[64] reduce(logits, ninf), dimensions={1}, to_apply=max_f32
  mxb = f32[64,80] broadcast(mx), dimensions={0}
  sh = f32[64,80] subtract(logits, mxb)
  e = f32[64,80] exponential(sh)
  zero = f32[] constant(0)
  s = f32[64] reduce(e, zero), dimensions={1}, to_apply=add_f32
  sb = f32[64,80] broadcast(s), dimensions={0}
  p = f32[64,80] divide(e, sb)
  ROOT y = f32[64,48] dot(p, w), lhs_contracting_dims={1}, rhs_contracting_dims={1}
}
"""


def _cpu_matches_evaluator(text: str, disabled: frozenset[str] = frozenset()) -> Any:
    options = CompileOptions(pass_options=PassOptions(disabled_passes=disabled))
    executable = compile_module(text, "cpu", options)
    args = random_inputs(parse_hlo(text), seed=3)
    want = evaluate_module(parse_hlo(text), args)
    got = executable.execute(args)
    np.testing.assert_allclose(got[0], want[0] if isinstance(want, (list, tuple)) else want, rtol=1e-4, atol=1e-5)
    return executable


def test_a_row_fusion_writes_over_the_operand_it_reduces() -> None:
    """The CPU row kernel finishes a row's reductions before it writes that row, so softmax's
    probabilities may overwrite the logits they are computed from. (With ``attention-fusion`` the
    logits would not reach memory at all.)"""
    executable = _cpu_matches_evaluator(SOFTMAX_OF_PRODUCT, frozenset({"attention-fusion"}))
    ba = executable.buffer_assignment.entry
    row = next(i for i in ba.order if i.opcode == "fusion" and "row_fusion" in (i.backend_config or ""))
    assert ba.slice(row) == ba.slice(row.operand(0)), ba.to_text()
    assert (row.name, row.operand(0).name) in ba.in_place


LATE_OUTPUT = """HloModule late_output
less_f32 {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT lt = pred[] compare(a, b), direction=LT
}
ENTRY main {
  x = f32[4,64] parameter(0)
  e = f32[4,64] exponential(x)
  s = f32[4,64] sort(e), dimensions={1}, to_apply=less_f32
  ROOT y = f32[64,4] transpose(s), dimensions={1,0}
}
"""


def test_temporaries_that_die_before_the_output_is_written_live_in_its_buffer() -> None:
    """As XLA's buffer assignment does: the output's bytes are free until the step that writes it."""
    executable = _cpu_matches_evaluator(LATE_OUTPUT)
    ba = executable.buffer_assignment.entry
    output = ba.slice(ba.computation.root).allocation
    assert output.kind == "output"
    guests = [v for v, _ in output.values if v.instruction is not ba.computation.root]
    assert guests, ba.to_text()
    first_write = ba.live_ranges[ba.value(ba.computation.root).id][0]
    assert all(ba.live_ranges[v.id][1] < first_write for v in guests)
    assert ba.temp_bytes < sum(v.size for v in ba.values if v.instruction.opcode != "parameter") - output.size


SEGMENT_SUM = """HloModule segment_sum
""" + ADD_F32 + """
ENTRY main {
  x = f32[4096] parameter(0)
  ids = s32[4096] parameter(1)
  zero = f32[] constant(0)
  zeros = f32[100] broadcast(zero), dimensions={}
  idx = s32[4096,1] reshape(ids)
  ROOT sums = f32[100] scatter(zeros, idx, x), update_window_dims={}, inserted_window_dims={0},
      scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add_f32
}
"""


def test_an_output_computed_in_place_takes_its_operand_into_the_output_buffer() -> None:
    """jax.ops.segment_sum: the zeros are written where the scatter's result goes, and the scatter
    adds into them there -- no temporary, no copy (XLA's buffer assignment does the same)."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal(4096).astype(np.float32)
    ids = rng.integers(0, 100, 4096).astype(np.int32)
    executable = compile_module(SEGMENT_SUM, "cpu")
    (got,) = executable.execute([x, ids])
    np.testing.assert_allclose(got, np.bincount(ids, weights=x, minlength=100), rtol=1e-4, atol=1e-4)
    ba = executable.buffer_assignment.entry
    root = ba.computation.root
    assert ba.slice(root.operand(0)) == ba.slice(root) and ba.slice(root).allocation.kind == "output"
    assert ba.temp_bytes == 0 and (root.name, root.operand(0).name) in ba.in_place
