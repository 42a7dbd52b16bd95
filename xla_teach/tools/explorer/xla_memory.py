"""XLA's own buffer assignment, from its dump, for the explorer's memory view.

With ``--xla_dump_to`` XLA's CPU and GPU compilers write, beside the optimized module::

    module_0000.jit_f.cpu_after_optimizations-buffer-assignment.txt   allocations and their values
    module_0000.jit_f.cpu_after_optimizations-live-range.txt          the schedule and live ranges
    module_0000.jit_f.cpu_after_optimizations-memory-usage-report.txt allocations by size

An allocation is a block of memory; each value placed in it has a size and an offset::

    allocation 6: size 96, preallocated-temp:
     value: <12 ynn_fusion @0> (size=96,offset=0): f32[8,3]{1,0}

and the live-range file gives the ENTRY's order and when each value lives (``ynn_fusion{}:2-3``:
from step 2 to step 3). Together they are the memory view's data -- the same picture as for
xla_teach's own buffer assignment: bytes live over the schedule, buffers by address, what is live
at the peak -- for XLA's plan. Values that live only inside a fusion (``thread-local``) have no
live range in the ENTRY and are left out, as xla_teach's view leaves them out.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

ALLOCATION = re.compile(r"^allocation (\d+): size (\d+), (.*):$")
VALUE = re.compile(r"^ value: <\d+ (?P<name>[^\s{>]+)(?P<index>\{[\d,]*\})?[^>]*> \(size=(?P<size>\d+),"
                   r"offset=(?P<offset>\d+)\)")
RANGE = re.compile(r"^\s+(?P<name>[^\s{]+)(?P<index>\{[\d,]*\}):(?P<start>\d+)-(?P<end>\d+)$")
STEP = re.compile(r"^\s+(\d+):(\S+)$")
PEAK = re.compile(r"Live ranges at (\d+) \(peak\)")


def allocation_kind(words: str) -> str:
    """The memory view's kind of an allocation, from XLA's description of it."""
    if "parameter" in words:
        return "parameter"
    if "output" in words or "live-out" in words:
        return "output"
    if "constant" in words:
        return "constant"
    return "temp"  # preallocated-temp, thread-local


def read_buffer_assignment(text: str) -> list[dict[str, Any]]:
    """Every value of XLA's buffer assignment: name, index, size, allocation, offset, kind."""
    values: list[dict[str, Any]] = []
    allocation, kind = -1, "temp"
    for line in text.splitlines():
        match = ALLOCATION.match(line)
        if match:
            allocation, kind = int(match[1]), allocation_kind(match[3])
            continue
        match = VALUE.match(line)
        if match and allocation >= 0:
            values.append({"name": match["name"], "index": match["index"] or "{}", "size": int(match["size"]),
                           "allocation": allocation, "offset": int(match["offset"]), "kind": kind})
    return values


def read_live_range(text: str) -> tuple[list[str], dict[tuple[str, str], tuple[int, int]], int | None]:
    """The schedule's steps, each value's live range by (name, index), and the peak's step."""
    steps: list[str] = []
    ranges: dict[tuple[str, str], tuple[int, int]] = {}
    section = ""
    peak = None
    for line in text.splitlines():
        stripped = line.strip()
        if stripped in ("InstructionSequence:", "BufferLiveRange:"):
            section = stripped
            continue
        if PEAK.search(line):
            peak = int(PEAK.search(line)[1])  # type: ignore[index]
            section = ""
            continue
        if section == "InstructionSequence:" and (m := STEP.match(line)):
            steps.append(m[2])
        elif section == "BufferLiveRange:" and (m := RANGE.match(line)):
            ranges[(m["name"], m["index"])] = (int(m["start"]), int(m["end"]))
    return steps, ranges, peak


def xla_memory(folder: Path, prefix: str) -> tuple[dict[str, Any] | None, list[str]]:
    """The memory view's data for one module of an XLA dump, and the problems met (files missing
    or unreadable: the view is then left out and the page says why)."""
    assignment = sorted(folder.glob(f"{prefix}.*after_optimizations-buffer-assignment.txt"))
    live = sorted(folder.glob(f"{prefix}.*after_optimizations-live-range.txt"))
    if not assignment or not live:
        return None, [f"no {prefix}.*-buffer-assignment.txt and -live-range.txt: XLA's memory plan is missing"]
    try:
        values = read_buffer_assignment(assignment[0].read_text(errors="replace"))
        steps, ranges, peak = read_live_range(live[0].read_text(errors="replace"))
    except OSError as error:
        return None, [f"{assignment[0].name}: {error}"]
    buffers = []
    for value in values:
        span = ranges.get((value["name"], value["index"]))
        if span is None:
            continue  # lives inside a fusion or another computation: not in the ENTRY's schedule
        label = value["name"] if value["index"] == "{}" else f"{value['name']} {value['index']}"
        buffers.append({"names": [value["name"]], "labels": [label], "size": value["size"], "start": span[0],
                        "end": span[1], "kind": value["kind"], "allocation": value["allocation"],
                        "offset": value["offset"]})
    if not steps or not buffers:
        return None, [f"{live[0].name}: no schedule or live ranges could be read"]
    live_bytes = [sum(b["size"] for b in buffers if b["start"] <= t <= b["end"]) for t in range(len(steps))]
    peak_step = peak if peak is not None and peak < len(steps) else max(range(len(steps)), key=live_bytes.__getitem__)
    temp_allocations = {b["allocation"]: 0 for b in buffers if b["kind"] == "temp"}
    for b in buffers:
        if b["kind"] == "temp":
            temp_allocations[b["allocation"]] = max(temp_allocations[b["allocation"]], b["offset"] + b["size"])
    return {"steps": steps, "buffers": buffers, "peak_step": peak_step, "peak_bytes": live_bytes[peak_step],
            "temp_bytes": sum(temp_allocations.values()), "source": "XLA's buffer assignment"}, []
