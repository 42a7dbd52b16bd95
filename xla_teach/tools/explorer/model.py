"""The explorer's data: everything the page shows, gathered from one compilation as plain JSON.

* ``passes`` -- every pass run in order (pipeline, name, changed, time, instruction and fusion
  counts, notes) and, for the passes that changed the module, the structural diff
  (:mod:`.structural_diff`) and the index of a graph of what changed;
* ``instructions`` -- every instruction of the optimized module: its HLO line, opcode, shape,
  the front end's ``op_name`` and Python source line, the fusion that holds it, the kernel
  that computes it, its buffer slice,
  and its sharding (in a program for several devices: the graph draws a band whose colour
  stands for how the value is split, and collectives in their own colour);
* ``code`` -- each kernel's code (its LLVM IR with the ``.wrapped`` function it calls, optimized
  IR, assembly, runtime-library functions, PTX), packed (:mod:`.kernel_code`);
* ``sources`` -- the Python lines the metadata points at, read from the files when they exist;
* ``entry`` and ``palette`` -- the ENTRY computation's name and the colour of each category of op
  (XLA's colours, :mod:`xla_teach.tools.render.style`): the page lays the module's graph out itself,
  grouped by op_name scope (``static/module_graph.js``), from each instruction's ``operands``;
* each changed pass's ``sides`` -- the instructions it touched and their neighbours, before and
  after, which the page draws side by side in its own renderer (:mod:`.pass_view`), and its
  ``order`` when it changed the ENTRY's schedule; ``renamed`` maps names that fusion absorbed to
  what holds them in the optimized module;
* ``memory`` -- the ENTRY computation's schedule and every buffer its peak counts, with live
  ranges, so the page can draw them and name what is live at the peak;
* ``profile`` (when asked for) -- each thunk's mean time over timed runs after warm-up runs, on
  fake arguments, and the last run's events, for the heat colours and the timeline.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from xla_teach.backends.llvm.kernel_support import kernel_symbols
from xla_teach.hlo import op_semantics
from xla_teach.hlo.backend_config import backend_config_object
from xla_teach.hlo.ir import HloInstruction, HloModule
from xla_teach.hlo.opcodes import CONTROL_FLOW_OPCODES, OPCODES
from xla_teach.hlo.shape import Shape
from xla_teach.hlo.sharding import HloSharding
from xla_teach.hlo.text.parser import parse_hlo
from xla_teach.passes.pass_base import PassRecord, source_code
from xla_teach.tools.explorer.kernel_code import kernel_code, pack
from xla_teach.tools.explorer.pass_view import final_names, order_change, pass_sides
from xla_teach.tools.explorer.structural_diff import fusion_owners, structural_diff
from xla_teach.tools.render import style


@dataclass
class ExplorerData:
    title: str
    backend: str = ""
    passes: list[dict[str, Any]] = field(default_factory=list)
    instructions: dict[str, dict[str, Any]] = field(default_factory=dict)
    sources: dict[str, dict[int, str]] = field(default_factory=dict)
    entry: str = ""
    palette: dict[str, list[str]] = field(default_factory=dict)  # category -> [fill, stroke, font]
    legend: list[list[str]] = field(default_factory=list)  # [label, fill, stroke, font], one per colour
    module_text: str = ""
    memory: dict[str, Any] | None = None  # the ENTRY's buffers over its schedule (see _memory)
    profile: dict[str, Any] | None = None  # measured thunk times (see _profile)
    code: str = ""  # every kernel's code, packed (kernel_code.pack)
    renamed: dict[str, str] = field(default_factory=dict)  # a name notes use -> what holds it now (pass_view)
    rule_code: dict[str, str] = field(default_factory=dict)  # "file:line" -> the code of a rule a step names
    categories: dict[str, str] = field(default_factory=dict)  # opcode -> colour category (a step's boxes)
    # opcode -> {"summary", "example"} for the opcodes on the page (hlo/op_semantics.py), and the
    # built docs page they come from ("" when this checkout has no built site)
    semantics: dict[str, dict[str, str]] = field(default_factory=dict)
    semantics_page: str = ""

    def as_json(self) -> dict[str, Any]:
        return {"title": self.title, "backend": self.backend, "passes": self.passes,
                "instructions": self.instructions,
                "sources": {f: {str(k): v for k, v in lines.items()} for f, lines in self.sources.items()},
                "entry": self.entry, "palette": self.palette,
                "legend": self.legend, "moduleText": self.module_text,
                "memory": self.memory, "profile": self.profile, "code": self.code,
                "renamed": self.renamed, "ruleCode": self.rule_code,
                "categories": self.categories, "semantics": self.semantics, "semanticsPage": self.semantics_page}


def _metadata(instr: HloInstruction) -> dict[str, Any]:
    fields = dict(instr.metadata.fields) if instr.metadata else {}
    return {"op_name": fields.get("op_name", ""), "source_file": fields.get("source_file", ""),
            "source_line": int(fields.get("source_line", 0) or 0)}


def split_label(sharding: HloSharding) -> str:
    """A sharding in a few words, for the module graph: ``split 4x1``, ``split 2x1, x2 copies``,
    ``replicated``, ``on device 3`` (a tuple's elements joined by ``|``)."""
    if sharding.is_tuple:
        return " | ".join(split_label(e) for e in sharding.elements)
    if sharding.kind == "maximal":
        return f"on device {sharding.device}"
    if sharding.kind != "tiled" or all(d == 1 for d in sharding.data_tile_dims):
        return sharding.kind if sharding.kind != "tiled" else "replicated"
    label = "split " + "x".join(str(d) for d in sharding.data_tile_dims)
    copies = 1
    for d in sharding.tile_dims[sharding.data_rank:]:
        copies *= d
    return label + (f", x{copies} copies" if copies > 1 else "")


def instruction_table(module: HloModule, executable: Any,
                       code: dict[str, list[list[str]]]) -> dict[str, dict[str, Any]]:
    assignment = executable.buffer_assignment
    owners = fusion_owners(module)
    table: dict[str, dict[str, Any]] = {}
    for comp in module.computations:
        owner = owners.get(comp.name)
        sequential = assignment.computations.get(comp.name) if assignment is not None else None
        for instr in comp.instructions:
            entry: dict[str, Any] = {"line": instr.to_text(print_metadata=False).strip(), "opcode": instr.opcode,
                                     "shape": str(instr.shape), "computation": comp.name, "fusion": owner or "",
                                     "operands": [o.name for o in instr.operands], "category": style.category(instr),
                                     **_metadata(instr)}
            if instr.opcode == "parameter":
                entry["parameter_number"] = instr.parameter_number
            if instr.sharding is not None:
                entry["sharding"] = str(instr.sharding)
                entry["split"] = split_label(instr.sharding)
            if instr.opcode == "fusion":
                entry["fusion_kind"] = instr.fusion_kind
                entry["members"] = [i.name for i in instr.fused_computation.instructions if i.opcode != "parameter"]
                entry["fused_root"] = instr.fused_computation.root.name
            elif instr.opcode in CONTROL_FLOW_OPCODES:
                entry.update(_called(instr))
            for symbol in kernel_symbols(instr.name):
                if symbol in code:
                    entry["kernel"] = symbol  # its code: the page's packed ``code`` (kernel_code.py)
            if sequential is not None and not instr.shape.is_tuple and not instr.shape.is_token:
                try:
                    piece = sequential.slice(instr)
                except (KeyError, ValueError, AssertionError):
                    piece = None
                if piece is not None:
                    entry["buffer"] = (f"allocation {piece.allocation.index} ({piece.allocation.kind}), offset "
                                       f"{piece.offset}, {piece.size} bytes")
            table.setdefault(instr.name, entry)
    return table


def _called(instr: HloInstruction) -> dict[str, Any]:
    """What a loop, conditional or call opens into in the graph: each computation it calls
    (``role``: body, condition, branch k, callee) with its instructions and root, which operand
    each of its parameters stands for, and a loop's known trip count."""
    if instr.opcode == "while":
        parts = [("body", instr.attrs["body"], 0), ("condition", instr.attrs["condition"], 0)]
    elif instr.opcode == "conditional":
        parts = [(f"branch {k}", comp, k + 1) for k, comp in enumerate(instr.branch_computations())]
    else:
        parts = [("callee", instr.attrs["to_apply"], 0)]
    called = []
    for role, comp, first_operand in parts:
        params = {p.name: first_operand + p.parameter_number for p in comp.parameter_instructions}
        called.append({"role": role, "computation": comp.name, "root": comp.root.name,
                       "members": [i.name for i in comp.instructions if i.opcode != "parameter"],
                       "param_operand": params})
    entry: dict[str, Any] = {"called": called}
    config = backend_config_object(instr) or {}
    trips = config.get("known_trip_count", {}).get("n") if isinstance(config.get("known_trip_count"), dict) else None
    if trips is not None:
        entry["trip_count"] = int(trips)
    return entry


def _sources(table: dict[str, dict[str, Any]]) -> dict[str, dict[int, str]]:
    wanted: dict[str, set[int]] = {}
    for entry in table.values():
        if entry["source_file"] and entry["source_line"]:
            wanted.setdefault(entry["source_file"], set()).add(entry["source_line"])
    sources: dict[str, dict[int, str]] = {}
    for name, lines in wanted.items():
        path = Path(name)
        if not path.is_file():
            continue
        try:
            text = path.read_text(errors="replace").splitlines()
        except OSError:
            continue
        sources[name] = {n: text[n - 1] for n in sorted(lines) if 0 < n <= len(text)}
    return sources


def _pass_entry(record: PassRecord) -> dict[str, Any]:
    return {"index": record.index, "pipeline": record.pipeline, "name": record.pass_name, "changed": record.changed,
            "ms": round(record.seconds * 1e3, 3),
            "instructions": [record.instructions_before, record.instructions_after],
            "fusions": [record.fusions_before, record.fusions_after], "notes": list(record.notes),
            "skipped": record.skipped, "diff": None, "sides": None, "order": None,
            "steps": [{"rule": s.rule, "where": f"{s.source_file}:{s.source_line}" if s.source_file else "",
                       "before": s.before, "after": s.after, "touched": s.touched} for s in record.steps]}


def _rule_code(passes: list[dict[str, Any]]) -> dict[str, str]:
    """``"file:line" -> the code there`` for every rule a recorded step names."""
    return {step["where"]: source_code(step["where"]) for entry in passes for step in entry["steps"] if step["where"]}


def _value_label(value: Any) -> str:
    """How the memory view names a buffer's value: by its role where the instruction has several
    (``while.1: state element 2``, ``tuple.3 {1}``)."""
    instr, index = value.instruction, tuple(value.index)
    if not index:
        return instr.name
    if instr.opcode == "while":
        return f"{instr.name}: state element {','.join(map(str, index))}"
    if instr.opcode == "conditional":
        return f"{instr.name}: result {','.join(map(str, index))}"
    return f"{instr.name} {{{','.join(map(str, index))}}}"


def _memory(executable: Any) -> dict[str, Any] | None:
    """The buffers that buffer assignment's peak adds up (``memory_analysis().peak_memory_in_bytes``)."""
    assignment = executable.buffer_assignment
    if assignment is None:
        return None
    entry = assignment.entry
    by_id = {v.id: v for v in entry.values}
    buffers = []
    for b in entry.live_buffers:
        first = by_id[b.values[0]]
        try:  # where its bytes are: the memory view draws the temporaries by offset in their arena
            piece = entry.slice(first.instruction, tuple(first.index))
            where = {"allocation": piece.allocation.index, "offset": piece.offset}
        except (KeyError, ValueError, AssertionError):
            where = {}
        buffers.append({"names": [by_id[v].instruction.name for v in b.values],
                        "labels": [_value_label(by_id[v]) for v in b.values],
                        "size": b.size, "start": b.start, "end": b.end, "kind": b.kind, **where})
    return {"steps": [i.name for i in entry.order], "buffers": buffers, "peak_step": entry.peak_step,
            "peak_bytes": entry.peak_bytes, "temp_bytes": entry.temp_bytes}


@dataclass
class _ThunkTimes:
    times: dict[str, list[float]]  # HLO instruction -> its thunk's times (µs), one per call
    kinds: dict[str, str]  # HLO instruction -> thunk kind
    names: dict[str, str]  # kernel symbol -> HLO instruction
    timeline: Any
    nbytes: dict[str, int]  # HLO instruction -> bytes its thunk reports (a collective: its payload)


def _thunk_times(executable: Any, args: list[Any], runs: int) -> _ThunkTimes:
    """Each thunk's times over ``runs`` runs after two warm-up runs, by HLO instruction name."""
    from xla_teach.tools.timeline import trace_runs

    timeline = trace_runs(executable, args, runs, warmup=2)
    names: dict[str, str] = {}
    for comp in executable.module.computations:
        for instr in comp.instructions:
            for symbol in kernel_symbols(instr.name):
                names.setdefault(symbol, instr.name)
    result = _ThunkTimes({}, {}, names, timeline, {})
    for event in timeline.thunk_events():
        name = names.get(event.name, event.name)
        result.times.setdefault(name, []).append(event.seconds * 1e6)
        result.kinds[name] = event.kind
        result.nbytes[name] = event.nbytes
    return result


def _profile(executable: Any, runs: int, compile: CompileService | None) -> dict[str, Any]:
    """Mean time of each thunk over ``runs`` runs (after two warm-up runs) on fake arguments (a
    program of several devices runs on all of them, device 0 timed: ``tools/timeline.py``), the
    runs' events, the estimated time of each instruction inside a fusion (given a compile
    service; without one a fusion counts whole in its own scope), and the time of each op_name scope."""
    from xla_teach.tools.bugs.fake_data import fake_arguments

    args = fake_arguments(executable.module)
    measured = _thunk_times(executable, args, runs)
    run_spans = [e for e in measured.timeline.events if e.kind == "run"]
    run_us = sum(e.seconds for e in run_spans) / max(len(run_spans), 1) * 1e6
    spans = sorted(e.seconds for e in run_spans) or [0.0]
    median_us = (spans[(len(spans) - 1) // 2] + spans[len(spans) // 2]) / 2 * 1e6
    thunks = {n: {"us": sum(t) / runs, "calls": len(t) / runs, "kind": measured.kinds[n], "bytes": measured.nbytes[n]}
              for n, t in measured.times.items()}
    # A kernel of a loop body or branch runs inside its loop's thunk, whose time includes it:
    # "nested" marks it, so that the times of a run add up once (the page sums the rest).
    entry_names = {i.name for i in executable.module.entry.instructions}
    for name, thunk in thunks.items():
        thunk["nested"] = name not in entry_names
    for thunk in executable.thunks():
        trips = getattr(thunk, "trip_count", None)
        if trips and getattr(thunk, "name", None) in thunks:
            thunks[thunk.name]["iterations"] = trips
            thunks[thunk.name]["per_iteration_us"] = thunks[thunk.name]["us"] / trips
    inside = _inside_fusions(executable, args, runs, thunks, compile) if compile is not None else {}
    return {"runs": runs, "run_us": run_us, "median_us": median_us, "thunks": thunks,
            "devices": executable.module.device_count(),
            "timeline": _timeline_tracks(measured), "inside": inside,
            "scopes": _scope_times(executable.module, thunks, inside)}


def _timeline_tracks(measured: _ThunkTimes) -> dict[str, Any]:
    """Every timed run's events for the page's timeline, compactly: times in µs from the first
    run's start; each thunk event ``[name, run, start, us, kind, depth]`` (``depth`` 1 for a
    kernel inside a loop's thunk, 2 inside a loop inside a loop...); each part of a kernel split
    over the thread pool ``[name, run, lane, start, us, part]``."""
    timeline = measured.timeline
    spans = sorted((e for e in timeline.events if e.kind == "run"), key=lambda e: e.start)
    origin = spans[0].start if spans else 0.0
    names: dict[str, int] = {}
    kinds: dict[str, int] = {}

    def us(t: float) -> float:
        return round(t * 1e6, 2)

    def index(table: dict[str, int], key: str) -> int:
        return table.setdefault(key, len(table))

    events: list[list[Any]] = []
    thunk_events = sorted(timeline.thunk_events(), key=lambda e: (e.start, -e.end))
    open_ends: list[float] = []  # the ends of the events that enclose the next one
    for e in thunk_events:
        while open_ends and open_ends[-1] <= e.start:
            open_ends.pop()
        name = measured.names.get(e.name, e.name)
        events.append([index(names, name), e.run, us(e.start - origin), us(e.seconds), index(kinds, e.kind),
                       len(open_ends)])
        open_ends.append(e.end)
    parts = [[index(names, measured.names.get(q.name, q.name)), q.run, q.lane, us(q.start - origin),
              us(q.end - q.start), q.part] for q in timeline.parts]
    return {"names": list(names), "kinds": list(kinds), "runs": [[us(e.start - origin), us(e.seconds)] for e in spans],
            "events": events, "parts": parts, "lanes": len(timeline.lanes)}


def _inside_fusions(executable: Any, args: list[Any], runs: int, thunks: dict[str, dict[str, Any]],
                    compile: CompileService) -> dict[str, Any]:
    """Time per instruction inside each fusion, estimated: the module is defused (``defuser``) and
    compiled without optimizations, so each fused instruction runs as its own kernel and is timed
    alone; a fusion's measured time is then shared among its instructions in proportion to those
    times. (Fused, they share loads and loops, so the shares are estimates; ``alone_us`` says
    what the instructions cost unfused, the fusion's saving.)"""
    from xla_teach import flags
    from xla_teach.passes.fusion.defuser import defuse_module

    module: HloModule = executable.module
    fusions = [i for i in module.entry.instructions if i.opcode == "fusion" and i.name in thunks]
    if not fusions:
        return {}
    defused = parse_hlo(module.to_text())
    copies = defuse_module(defused)
    with flags.override(xla_teach_hlo_opt_level=0, xla_dump_to=""):
        unfused = compile(defused, executable.backend)
    alone = _thunk_times(unfused, args, runs).times
    inside: dict[str, Any] = {}
    for fusion in fusions:
        own = {i.name: sum(alone.get(copies.get(i.name, ""), [])) / runs
               for i in fusion.fused_computation.instructions if i.opcode != "parameter"}
        total = sum(own.values())
        if total <= 0:
            continue
        measured = thunks[fusion.name]["us"]
        inside[fusion.name] = {"alone_us": total, "members": {
            name: {"us": measured * us / total, "alone_us": us} for name, us in own.items() if us > 0}}
    return inside


def op_name_scopes(op_name: str) -> list[str]:
    """``"jit(f)/transpose(jvp(g))/mul"`` -> ``["jit(f)", "transpose(jvp(g))", "mul"]`` (a ``/``
    inside brackets stays), as the page's module graph splits them."""
    parts, depth, current = [], 0, ""
    for c in op_name:
        depth += (c in "([") - (c in ")]")
        if c == "/" and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += c
    return [*parts, current]


def _scope_times(module: HloModule, thunks: dict[str, dict[str, Any]], inside: dict[str, Any]) -> dict[str, float]:
    """µs per run of every op_name scope (``jit(f)/jvp(loss)/layer1``): kernels outside fusions
    count whole, fused instructions by their estimated share (one that a pass made, with no
    op_name, in its fusion's scope)."""
    by_name = {i.name: i for comp in module.computations for i in comp.instructions}
    scopes: dict[str, float] = {}

    def op_name(name: str) -> str:
        instr = by_name.get(name)
        return str(_metadata(instr)["op_name"]) if instr is not None else ""

    def add(name: str, us: float, fusion: str = "") -> None:
        named = op_name(name) or op_name(fusion)
        parts = op_name_scopes(named)[:-1] if named else []
        for depth in range(1, len(parts) + 1):
            key = "/".join(parts[:depth])
            scopes[key] = scopes.get(key, 0.0) + us

    for name, thunk in thunks.items():
        if name in inside:
            for member, share in inside[name]["members"].items():
                add(member, share["us"], name)
        else:
            add(name, thunk["us"])
    return dict(sorted(scopes.items()))


CompileService = Callable[[HloModule, str], Any]  # (module, backend) -> executable: api.compile_module


def build_data(executable: Any, title: str | None = None, graphs: bool = True,
               profile_runs: int = 0, light: bool = False, compile: CompileService | None = None) -> ExplorerData:
    """Everything about one compiled executable (an ``Executable`` from ``compile_module``);
    ``profile_runs > 0`` also runs it that many times on fake arguments to time its thunks.
    ``light`` (one side of a compare page) leaves out what costs seconds at a model's size: the
    kernels' code, every pass's structural diff and pictures, and the time inside fusions.
    ``compile`` is the compile service the time inside fusions needs (it compiles the module
    defused); the explorer never calls the driver itself, the caller hands it over
    (``Compiled.explore`` and ``xla-teach explore`` pass ``api.compile_module``)."""
    module: HloModule = executable.module
    data = ExplorerData(title or module.name, backend=executable.backend)
    data.module_text = "" if light else module.to_text()
    symbols = [s for comp in module.computations for i in comp.instructions for s in kernel_symbols(i.name)]
    code = {} if light else kernel_code(executable.artifacts, symbols)
    data.instructions = instruction_table(module, executable, code)
    data.code = pack(code)
    data.sources = _sources(data.instructions)
    data.memory = _memory(executable)
    if profile_runs > 0:
        data.profile = _profile(executable, profile_runs, None if light else compile)
    data.entry = module.entry.name
    add_colours(data)
    recorder = executable.recorder
    add_passes(data, recorder.records if recorder is not None else [], graphs, diffs=not light)
    return data


def add_colours(data: ExplorerData) -> None:
    """The colour of each category of op (XLA's), the legend, and each opcode's category; and
    what each opcode on the page computes (its operation-semantics entry)."""
    data.palette = {c: [style.COLORS[n].fill, style.COLORS[n].stroke, style.COLORS[n].font]
                    for c, n in style.CATEGORY_COLORS.items()}
    data.legend = [[label, c.fill, c.stroke, c.font] for label, c in style.legend_entries()]
    data.categories = {op: style.category(HloInstruction(op, Shape.scalar("f32"))) for op in OPCODES}
    add_semantics(data)


def add_semantics(data: ExplorerData) -> None:
    """Each opcode's one-sentence meaning and example (the node panel shows them, offline), and
    the docs' operation-semantics page when this checkout has built the site (``mkdocs build``)."""
    opcodes = {entry["opcode"] for entry in data.instructions.values()}
    for opcode in sorted(opcodes):
        entry = op_semantics.semantics(opcode)
        if entry is not None:
            data.semantics[opcode] = {"summary": entry.summary,
                                      "example": entry.example.module if entry.example else ""}
    page = Path(__file__).resolve().parents[3] / "site" / "operation-semantics" / "index.html"
    data.semantics_page = page.as_uri() if page.is_file() else ""


def add_passes(data: ExplorerData, records: list[PassRecord], graphs: bool = True, diffs: bool = True) -> None:
    """The pass list of the page: one entry per record, and for each that changed the module its
    structural diff and (``graphs``) its before/after pictures; then the names fusion absorbed.
    Works on any records: xla_teach's own, or those read from XLA's per-pass dump files."""
    parsed: dict[str, HloModule] = {}  # one pass's "after" is the next one's "before": parse each text once

    def parse(text: str) -> HloModule:
        if text not in parsed:
            if len(parsed) > 4:
                parsed.clear()
            parsed[text] = parse_hlo(text)
        return parsed[text]

    found = []
    for record in records:
        entry = _pass_entry(record)
        if record.changed and not record.skipped and diffs:
            before, after = parse(record.before), parse(record.after)
            diff = structural_diff(before, after)
            found.append(diff)
            entry["diff"] = diff.as_json()
            if graphs:
                entry["sides"] = pass_sides(before, after, diff)
                entry["order"] = order_change(before, after)
        data.passes.append(entry)
    data.renamed = final_names(found, set(data.instructions))
    data.rule_code = _rule_code(data.passes)
