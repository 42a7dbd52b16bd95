"""A profiler for thunks and kernels, written out as a Chrome trace (``chrome://tracing``, Perfetto).

Every executable's ``execute(args, profiler=...)`` reports each thunk it runs
(kernel launch, library call, copy, while loop...) to the profiler's
``record(name, kind, start, end, nbytes)``. :class:`Timeline` keeps those events,
tags them with the run they belong to, and writes the *trace event format*::

    {"traceEvents": [
       {"name": "add_reduce_fusion", "cat": "kernel", "ph": "X", "ts": 12.5, "dur": 3.1,
        "pid": 1, "tid": 1, "args": {"bytes": 12292, "run": 0}},
       ...],
     "displayTimeUnit": "ms"}

``ph: "X"`` is a *complete* event (start ``ts`` and duration ``dur``, both in
microseconds); ``args`` also name the HLO instruction the thunk runs (``hlo``), its ``op_name``
and its Python ``source`` line. Each run also gets one span on its own row ("runs"), and each
*track* -- e.g. a compiled run and an op-by-op (eager) run of the same program --
becomes its own process row, so the two can be compared side by side. A kernel split across
the thread pool also reports its parts (:meth:`Timeline.record_parts`): each part is an event on
the row of the thread that ran it ("pool lane 1", ...), under the kernel's own event.

:meth:`Timeline.summary` is the text version: per thunk, how often it ran, total
and mean time, share of the total, and bytes touched per second.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from xla_teach.backends.llvm.kernel_support import kernel_symbols
from xla_teach.hlo.ir import HloComputation, HloInstruction, HloModule
from xla_teach.hlo.shape import Shape
from xla_teach.runtime.executable import CompiledExecutable
from xla_teach.runtime.native_pool import PartTime

RUN_ROW = 0  # tid of the per-run spans; thunks are on tid 1
LANE_ROW = 100  # tid of the first thread-pool lane (the next lanes follow)


@dataclass
class TimelineEvent:
    name: str
    kind: str  # "kernel", "copy", "while", "interpreter", "run", ...
    start: float  # time.perf_counter() seconds
    end: float
    nbytes: int
    run: int  # which run (-1: outside any run)
    track: str  # which process row

    @property
    def seconds(self) -> float:
        return self.end - self.start


@dataclass
class PartEvent:
    """One part of a split kernel: which kernel, which thread ran it (``lane``: 0 for the first
    thread seen, 1 for the next...) and when."""

    name: str
    part: int
    lane: int
    start: float
    end: float
    run: int
    track: str


class Timeline:
    """Collects thunk events; pass it as ``profiler=`` to ``execute``."""

    def __init__(self, track: str = "xla_teach") -> None:
        self.events: list[TimelineEvent] = []
        self.track = track
        self.current_run = -1
        self._runs = 0
        self.instructions: dict[str, dict[str, Any]] = {}  # thunk name -> what the trace says of it
        self.parts: list[PartEvent] = []
        self.lanes: dict[int, int] = {}  # Linux thread id -> lane

    def annotate(self, module: HloModule) -> None:
        """Name, in every event of a thunk, the HLO instruction it runs with its op_name and source
        line (thunks are named after their instruction; GPU kernels with ``.`` spelt ``_``)."""
        for comp in module.computations:
            for instr in comp.instructions:
                fields = instr.metadata.fields if instr.metadata else {}
                info = {"hlo": instr.name, "op_name": str(fields.get("op_name", ""))}
                if fields.get("source_file"):
                    info["source"] = f"{fields['source_file']}:{fields.get('source_line', 0)}"
                for symbol in kernel_symbols(instr.name):
                    self.instructions.setdefault(symbol, info)

    # ---- the profiler protocol -------------------------------------------------------------
    def record(self, name: str, kind: str, start: float, end: float, nbytes: int) -> None:
        self.events.append(TimelineEvent(name, kind, start, end, int(nbytes), self.current_run, self.track))

    def record_parts(self, name: str, parts: list[PartTime]) -> None:
        """The parts of a split kernel (``runtime/thunks.py`` calls this after ``record``)."""
        for p in parts:
            lane = self.lanes.setdefault(p.thread, len(self.lanes))
            self.parts.append(PartEvent(name, p.part, lane, p.start, p.end, self.current_run, self.track))

    # ---- grouping -------------------------------------------------------------------------
    @contextmanager
    def run(self, label: str = "run") -> Iterator[int]:
        """Tag the events recorded inside the block with a new run number (yielded)."""
        index = self._runs
        self._runs += 1
        self.current_run = index
        start = time.perf_counter()
        try:
            yield index
        finally:
            end = time.perf_counter()
            self.events.append(TimelineEvent(f"{label} {index}", "run", start, end, 0, index, self.track))
            self.current_run = -1

    @contextmanager
    def on_track(self, track: str) -> Iterator[None]:
        """Record into another process row (e.g. ``"eager"`` next to ``"compiled"``)."""
        previous, self.track = self.track, track
        try:
            yield
        finally:
            self.track = previous

    def thunk_events(self) -> list[TimelineEvent]:
        return [e for e in self.events if e.kind != "run"]

    # ---- output -----------------------------------------------------------------------------
    def to_chrome_trace(self) -> dict[str, Any]:
        """The trace as a JSON-ready dict in the Chrome trace event format."""
        origin = min((e.start for e in self.events), default=0.0)
        tracks = list(dict.fromkeys(e.track for e in self.events))
        pids = {track: i + 1 for i, track in enumerate(tracks)}
        trace: list[dict[str, Any]] = []
        for track, pid in pids.items():
            trace.append({"name": "process_name", "ph": "M", "pid": pid, "tid": 0, "args": {"name": track}})
            trace.append({"name": "thread_name", "ph": "M", "pid": pid, "tid": RUN_ROW, "args": {"name": "runs"}})
            trace.append({"name": "thread_name", "ph": "M", "pid": pid, "tid": 1, "args": {"name": "thunks"}})
            for lane in sorted({q.lane for q in self.parts if q.track == track}):
                trace.append({"name": "thread_name", "ph": "M", "pid": pid, "tid": LANE_ROW + lane,
                              "args": {"name": f"pool lane {lane + 1}"}})
        for e in sorted(self.events, key=lambda e: (e.start, -e.end)):
            trace.append({
                "name": e.name, "cat": e.kind, "ph": "X",
                "ts": round((e.start - origin) * 1e6, 3), "dur": round(e.seconds * 1e6, 3),
                "pid": pids[e.track], "tid": RUN_ROW if e.kind == "run" else 1,
                "args": {"bytes": e.nbytes, "run": e.run, **self.instructions.get(e.name, {})},
            })
        for q in self.parts:
            trace.append({"name": f"{q.name} part {q.part}", "cat": "part", "ph": "X",
                          "ts": round((q.start - origin) * 1e6, 3), "dur": round((q.end - q.start) * 1e6, 3),
                          "pid": pids[q.track], "tid": LANE_ROW + q.lane,
                          "args": {"run": q.run, "kernel": q.name, **self.instructions.get(q.name, {})}})
        return {"traceEvents": trace, "displayTimeUnit": "ms"}

    def write_chrome_trace(self, path: str | Path, overwrite: bool = False) -> Path:
        """Write the trace JSON; an existing file is kept unless ``overwrite``."""
        path = Path(path)
        if path.exists() and not overwrite:
            raise FileExistsError(f"{path} already exists; refusing to overwrite it")
        path.write_text(json.dumps(self.to_chrome_trace(), indent=1))
        return path

    def summary(self) -> str:
        """Per thunk (and track): calls, total/mean time, share of all thunk time, GB/s."""
        rows: dict[tuple[str, str, str], list[TimelineEvent]] = {}
        for e in self.thunk_events():
            rows.setdefault((e.track, e.name, e.kind), []).append(e)
        total = sum(e.seconds for e in self.thunk_events()) or 1e-30
        lines = [f"{'track':<16} {'thunk':<36} {'kind':<12} {'calls':>5} {'total ms':>10} {'mean us':>10} "
                 f"{'%':>6} {'GB/s':>8}"]
        for (track, name, kind), events in sorted(rows.items(), key=lambda kv: -sum(e.seconds for e in kv[1])):
            seconds = sum(e.seconds for e in events)
            nbytes = sum(e.nbytes for e in events)
            rate = f"{nbytes / seconds / 1e9:8.2f}" if nbytes and seconds > 0 else f"{'-':>8}"
            lines.append(f"{track[:16]:<16} {name[:36]:<36} {kind[:12]:<12} {len(events):5d} {seconds * 1e3:10.3f} "
                         f"{seconds / len(events) * 1e6:10.2f} {100 * seconds / total:6.1f} {rate}")
        for track in dict.fromkeys(e.track for e in self.events):
            runs = [e for e in self.events if e.kind == "run" and e.track == track]
            if runs:
                mean = sum(e.seconds for e in runs) / len(runs)
                lines.append(f"{track}: {len(runs)} run(s), mean {mean * 1e3:.3f} ms per run")
        return "\n".join(lines)


def trace_runs(executable: CompiledExecutable, args: list[Any], num_runs: int = 1, timeline: Timeline | None = None,
               track: str | None = None, progress: Callable[[str], None] | None = None,
               warmup: int = 1) -> Timeline:
    """Run ``executable`` ``warmup`` times untimed (first-run costs: page faults, lazy loading,
    caches), then ``num_runs`` times with a profiler; returns the timeline, its events annotated
    with the HLO instruction, op_name and source line of each thunk."""
    timeline = timeline or Timeline()
    module = executable.module
    timeline.annotate(module)
    run = _runner(executable, module)
    for _ in range(warmup):
        run(list(args), None)
    with timeline.on_track(track or f"compiled ({executable.backend or '?'})"):
        for i in range(num_runs):
            if progress is not None and num_runs >= 20 and i % (num_runs // 10) == 0:
                progress(f"timeline: run {i + 1}/{num_runs}")
            with timeline.run():
                run(list(args), timeline)
    return timeline


def _runner(executable: CompiledExecutable, module: HloModule) -> Callable[[list[Any], Timeline | None], None]:
    """How to run ``executable`` once: as it is, or -- a per-device program of several devices --
    on every device at once, one thread each, as they run for real (a collective waits for the
    others), the profiler on device 0 alone: its timeline is one device's view of the run, each
    collective's time the wait for the slowest member plus the exchange."""
    devices = module.device_count()
    if devices <= 1:
        return lambda args, profiler: executable.execute(args, profiler=profiler)
    from xla_teach.hlo.evaluator.devices import run_devices

    def run(args: list[Any], profiler: Timeline | None) -> None:
        run_devices(devices, lambda device: executable.execute(
            args, profiler=profiler if device.index == 0 else None))

    return run


def one_op_module(instr: HloInstruction) -> HloModule:
    """A module whose ENTRY runs just ``instr`` on parameters (one per distinct operand)."""
    module = instr.parent.parent.clone(f"eager_{instr.name}")  # type: ignore[union-attr]
    old_entry = module.entry
    op = old_entry.instruction(instr.name)
    distinct = list(dict.fromkeys(op.operands))
    entry = HloComputation(f"eager.{instr.name}")
    params = {id(o): HloInstruction("parameter", o.shape, attrs={"parameter_number": i}, name=f"p{i}.{o.name}")
              for i, o in enumerate(distinct)}
    for param in params.values():
        entry.add_instruction(param)
    root = entry.add_instruction(op.clone_with_new_operands(op.shape, [params[id(o)] for o in op.operands]))
    entry.root_instruction = root
    module.entry_computation = None
    module.computations.remove(old_entry)
    module.add_computation(entry, is_entry=True, uniquify=False)
    module.entry_computation_layout = None
    module.is_scheduled = False
    reachable = {id(c) for c in module.computation_post_order() if _reaches(entry, c)}
    module.computations = [c for c in module.computations if id(c) in reachable]
    return module


def _reaches(start: HloComputation, target: HloComputation) -> bool:
    stack, seen = [start], set()
    while stack:
        comp = stack.pop()
        if comp is target:
            return True
        if id(comp) not in seen:
            seen.add(id(comp))
            stack.extend(comp.called_computations())
    return False


def _unflatten(leaves: list[Any], shape: Shape) -> Any:
    if not shape.is_tuple:
        return leaves.pop(0)
    return tuple(_unflatten(leaves, s) for s in shape.tuple_shapes)


class EagerProgram:
    """``module``'s ENTRY as a list of one-op executables, run one after the other."""

    def __init__(self, module: HloModule, platform: str = "cpu") -> None:
        from xla_teach.tools.tool_support import compile_on

        self.module = module
        self.steps: list[tuple[HloInstruction, Any]] = []
        for instr in module.entry.post_order():
            if instr.opcode != "parameter":
                self.steps.append((instr, compile_on(one_op_module(instr), platform)))

    def run(self, args: list[Any], profiler: Any = None) -> list[Any]:
        values: dict[int, Any] = {p.unique_id: a for p, a in zip(self.module.entry.parameter_instructions, args,
                                                                  strict=True)}
        for instr, executable in self.steps:
            operands = [values[o.unique_id] for o in dict.fromkeys(instr.operands)]
            start = time.perf_counter()
            leaves = executable.execute(operands)
            if profiler is not None:
                nbytes = sum(s.byte_size() for s in [instr.shape, *(o.shape for o in instr.operands)]
                             if s.is_array)
                profiler.record(instr.name, instr.opcode, start, time.perf_counter(), nbytes)
            values[instr.unique_id] = _unflatten(list(leaves), instr.shape)
        root = values[self.module.entry.root.unique_id]
        return list(_unflatten_root(root))


def _unflatten_root(value: Any) -> list[Any]:
    if isinstance(value, tuple):
        return [leaf for v in value for leaf in _unflatten_root(v)]
    return [value]


def trace_eager(module: HloModule, args: list[Any], platform: str = "cpu", num_runs: int = 1,
                timeline: Timeline | None = None) -> Timeline:
    """Run ``module`` op by op, as an eager framework dispatches it, and trace each op.

    Every ENTRY instruction becomes its own one-op module (compiled once); a run
    executes them in order, passing values between them as NumPy arrays -- each op
    is one event, and the gaps between events are the dispatch overhead that
    compilation (and fusion) removes.
    """
    timeline = timeline or Timeline()
    program = EagerProgram(module, platform)
    with timeline.on_track(f"eager ({platform})"):
        for _ in range(num_runs):
            with timeline.run():
                program.run(list(args), timeline)
    return timeline
