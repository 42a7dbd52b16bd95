"""timeline: valid Chrome trace-event JSON, one event per thunk per run, nested loop bodies, the
parts of a kernel split over the thread pool on lanes, eager (op-by-op) traces side by side, and a
summary consistent with the events."""

from __future__ import annotations

import contextlib
import json
import os

import numpy as np
import pytest

from xla_teach.hlo.evaluator import evaluate_module
from xla_teach.hlo.text.parser import parse_hlo
from xla_teach.tools.bugs.fake_data import fake_arguments
from xla_teach.tools.timeline import EagerProgram, Timeline, one_op_module, trace_eager, trace_runs
from xla_teach.tools.tool_support import compile_on

SOFTMAX = """
HloModule softmax_like

%max_f32 (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %m = f32[] maximum(%a, %b)
}

%add_f32 (c: f32[], d: f32[]) -> f32[] {
  %c = f32[] parameter(0)
  %d = f32[] parameter(1)
  ROOT %s = f32[] add(%c, %d)
}

ENTRY %main (x: f32[4,64]) -> f32[4,64] {
  %x = f32[4,64]{1,0} parameter(0)
  %ninf = f32[] constant(-inf)
  %mx = f32[4]{0} reduce(%x, %ninf), dimensions={1}, to_apply=%max_f32
  %mxb = f32[4,64]{1,0} broadcast(%mx), dimensions={0}
  %sub = f32[4,64]{1,0} subtract(%x, %mxb)
  %e = f32[4,64]{1,0} exponential(%sub)
  %zero = f32[] constant(0)
  %sum = f32[4]{0} reduce(%e, %zero), dimensions={1}, to_apply=%add_f32
  %sumb = f32[4,64]{1,0} broadcast(%sum), dimensions={0}
  ROOT %out = f32[4,64]{1,0} divide(%e, %sumb)
}
"""

LOOP = """
HloModule counted_loop

%cond (s: (s32[], f32[8])) -> pred[] {
  %s = (s32[], f32[8]{0}) parameter(0)
  %i = s32[] get-tuple-element(%s), index=0
  %n = s32[] constant(5)
  ROOT %lt = pred[] compare(%i, %n), direction=LT
}

%body (t: (s32[], f32[8])) -> (s32[], f32[8]) {
  %t = (s32[], f32[8]{0}) parameter(0)
  %i = s32[] get-tuple-element(%t), index=0
  %v = f32[8]{0} get-tuple-element(%t), index=1
  %one = s32[] constant(1)
  %i1 = s32[] add(%i, %one)
  %v2 = f32[8]{0} add(%v, %v)
  ROOT %r = (s32[], f32[8]{0}) tuple(%i1, %v2)
}

ENTRY %main (x: f32[8]) -> f32[8] {
  %x = f32[8]{0} parameter(0)
  %zero = s32[] constant(0)
  %init = (s32[], f32[8]{0}) tuple(%zero, %x)
  %w = (s32[], f32[8]{0}) while(%init), condition=%cond, body=%body
  ROOT %res = f32[8]{0} get-tuple-element(%w), index=1
}
"""


def _complete_events(trace, pid=None):
    return [e for e in trace["traceEvents"] if e["ph"] == "X" and e["cat"] not in ("run", "part") and pid in (None, e["pid"])]


def test_trace_is_valid_trace_event_json_with_one_event_per_thunk_per_run(tmp_path):
    module = parse_hlo(SOFTMAX)
    executable = compile_on(module, "cpu")
    thunks = executable.entry.thunks
    timeline = trace_runs(executable, fake_arguments(module), num_runs=3)
    path = timeline.write_chrome_trace(tmp_path / "t.json")
    trace = json.loads(path.read_text())  # valid JSON
    assert trace["displayTimeUnit"] == "ms"
    for event in trace["traceEvents"]:
        assert {"name", "ph", "pid", "tid"} <= set(event)
        if event["ph"] == "X":
            assert isinstance(event["ts"], float | int) and event["dur"] >= 0 and event["ts"] >= 0
    events = _complete_events(trace)
    assert len(events) == 3 * len(thunks)
    for run in range(3):
        names = [e["name"] for e in events if e["args"]["run"] == run]
        assert names == [t.name for t in thunks]  # schedule order, every run
    runs = [e for e in trace["traceEvents"] if e.get("cat") == "run"]
    assert len(runs) == 3
    for span in runs:  # every thunk event lies inside its run's span
        inside = [e for e in events if e["args"]["run"] == span["args"]["run"]]
        assert all(span["ts"] <= e["ts"] and e["ts"] + e["dur"] <= span["ts"] + span["dur"] + 1e-3 for e in inside)
    assert any(e["ph"] == "M" and e["args"]["name"] == "compiled (cpu)" for e in trace["traceEvents"])


def test_loop_body_thunks_are_recorded_per_iteration():
    module = parse_hlo(LOOP)
    executable = compile_on(module, "cpu")
    timeline = trace_runs(executable, fake_arguments(module), num_runs=1)
    whiles = [e for e in timeline.thunk_events() if e.kind == "while"]
    assert len(whiles) == 1
    inner = [e for e in timeline.thunk_events() if whiles[0].start <= e.start and e.end <= whiles[0].end
             and e is not whiles[0]]
    assert len(inner) >= 5  # the body ran 5 times (plus 6 condition evaluations)


def test_eager_program_matches_interpreter_and_traces_each_op():
    module = parse_hlo(SOFTMAX)
    args = fake_arguments(module)
    program = EagerProgram(module, "cpu")
    np.testing.assert_allclose(program.run(args)[0], evaluate_module(module, args)[0], rtol=1e-5)
    timeline = trace_eager(module, args, "cpu", num_runs=2)
    ops = [i for i in module.entry.instructions if i.opcode != "parameter"]
    assert len(timeline.thunk_events()) == 2 * len(ops)
    assert {e.name for e in timeline.thunk_events()} == {i.name for i in ops}


def test_one_op_module_keeps_called_computations_only():
    module = parse_hlo(SOFTMAX)
    single = one_op_module(module.entry.instruction("sum"))
    assert sorted(c.name for c in single.computations) == sorted(["add_f32", single.entry.name])
    assert [i.opcode for i in single.entry.instructions] == ["parameter", "parameter", "reduce"]


def test_side_by_side_tracks_and_summary():
    module = parse_hlo(SOFTMAX)
    args = fake_arguments(module)
    timeline = trace_runs(compile_on(module, "cpu"), args, 2)
    trace_eager(module, args, "cpu", 2, timeline)
    trace = timeline.to_chrome_trace()
    names = {e["args"]["name"]: e["pid"] for e in trace["traceEvents"] if e["name"] == "process_name"}
    assert set(names) == {"compiled (cpu)", "eager (cpu)"} and len(set(names.values())) == 2
    summary = timeline.summary()
    assert "compiled (cpu): 2 run(s)" in summary and "eager (cpu): 2 run(s)" in summary


def test_record_protocol_and_no_overwrite(tmp_path):
    timeline = Timeline("manual")
    with timeline.run() as index:
        timeline.record("k", "kernel", 1.0, 1.5, 1000)
    assert index == 0
    (event,) = _complete_events(timeline.to_chrome_trace())
    assert event["dur"] == pytest.approx(5e5) and event["args"] == {"bytes": 1000, "run": 0}
    target = tmp_path / "exists.json"
    target.write_text("keep")
    with pytest.raises(FileExistsError):
        timeline.write_chrome_trace(target)
    assert target.read_text() == "keep"


BIG_ADD = """
HloModule big_add

ENTRY %main (x: f32[512,1024], y: f32[512,1024]) -> f32[512,1024] {
  %x = f32[512,1024]{1,0} parameter(0)
  %y = f32[512,1024]{1,0} parameter(1)
  %s = f32[512,1024]{1,0} add(%x, %y)
  ROOT %e = f32[512,1024]{1,0} exponential(%s)
}
"""


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="one core: no kernel is split")
@pytest.mark.parametrize("python_pool", [False, True])
def test_a_split_kernel_s_parts_lie_on_thread_lanes_inside_its_event(python_pool: bool) -> None:
    """A kernel split over the thread pool reports each part: every part once per run, inside
    the kernel's own event, on a lane per thread (the native pool's and the Python pool's alike);
    the Chrome trace names the lanes and the result is unchanged."""
    from unittest import mock

    from xla_teach.runtime import thunks as runtime_thunks

    module = parse_hlo(BIG_ADD)
    executable = compile_on(module, "cpu")
    split = [t for t in executable.entry.thunks if getattr(t, "partitions", 1) > 1]
    assert split, "a 2 MiB elementwise kernel is split over the cores"
    args = fake_arguments(module)
    with mock.patch.object(runtime_thunks, "native_pool", return_value=None) if python_pool else contextlib.nullcontext():
        timeline = trace_runs(executable, args, num_runs=2)
        out = executable.execute(list(args))[0]
    np.testing.assert_allclose(out, np.exp(args[0] + args[1]), rtol=4 * np.finfo(np.float32).eps)
    for run in range(2):
        for thunk in split:
            (event,) = [e for e in timeline.thunk_events() if e.run == run and e.name == thunk.name]
            parts = [q for q in timeline.parts if q.run == run and q.name == thunk.name]
            assert sorted(q.part for q in parts) == list(range(min(thunk.partitions, thunk.outer_size)))
            assert all(event.start <= q.start <= q.end <= event.end for q in parts)
    assert set(timeline.lanes.values()) == set(range(len(timeline.lanes))) and len(timeline.lanes) >= 1
    trace = timeline.to_chrome_trace()
    lanes = {e["args"]["name"] for e in trace["traceEvents"] if e["name"] == "thread_name"}
    assert {f"pool lane {k + 1}" for k in range(len(timeline.lanes))} <= lanes
    assert sum(e.get("cat") == "part" for e in trace["traceEvents"]) == len(timeline.parts)
