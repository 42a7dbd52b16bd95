"""XLA's three extra buffer reports, written next to ``*-buffer-assignment.txt`` in dumps.

* ``-buffer-assignment-values.txt`` -- every value: where it is defined, who uses it (operand
  by operand), and the instruction that makes it;
* ``-live-range.txt`` -- the schedule, each value's live range in steps, and the buffers live at
  the peak with a running total (``HloLiveRange`` in XLA);
* ``-memory-usage-report.txt`` -- per allocation, its values by offset with cumulative sizes.

The peak here is buffer assignment's own (:attr:`BufferAssignment.peak_bytes`), the figure
``memory_analysis().peak_memory_in_bytes`` reports: the live-range report lists exactly the
buffers it adds up.
"""

from __future__ import annotations

from xla_teach.passes.scheduling.buffer_assignment import BufferAssignment, HloValue


def _value_ref(value: HloValue) -> str:
    return f"<{value.id} {value.label()} @0>"


def values_report(ba: BufferAssignment) -> str:
    total = sum(a.size for a in ba.allocations)
    lines = ["", f"Total bytes used: {total} ({_human(total)})", "", "Used values:"]
    for value in ba.values:
        instr = value.instruction
        lines += [_value_ref(value), " positions:", f"  {value.label()}", " uses:"]
        uses = [f"  {user.name}, operand {i}" for user in instr.users for i, op in enumerate(user.operands)
                if op is instr]
        lines += uses or ["  (none)"]
        lines.append(f" from instruction: {instr.to_text(print_large_constants=False).removeprefix('ROOT ')}")
    return "\n".join(lines) + "\n"


def live_range_report(ba: BufferAssignment) -> str:
    by_id = {v.id: v for v in ba.values}
    steps = len(ba.order)
    lines = [f"HloLiveRange (max {steps}):", "  InstructionSequence:"]
    lines += [f"    {n}:{instr.name}" for n, instr in enumerate(ba.order)]
    lines.append("  BufferLiveRange:")
    for value in ba.values:
        start, end = ba.live_ranges.get(value.id, (0, steps))
        index = "{" + ",".join(map(str, value.index)) + "}"
        lines.append(f"    {value.instruction.name}{index}:{start}-{end}")
    lines.append(f"  Live ranges at {ba.peak_step} (peak):")
    cumulative = 0
    for buffer in sorted((b for b in ba.live_buffers if b.live_at(ba.peak_step)), key=lambda b: -b.size):
        cumulative += buffer.size
        names = ", ".join(f"{by_id[v].instruction.name}{{{','.join(map(str, by_id[v].index))}}}"
                          for v in buffer.values)
        lines.append(f"    {names}: {buffer.size} bytes (cumulative: {cumulative} bytes)")
    lines.append(f"  Peak: {ba.peak_bytes} bytes")
    return "\n".join(lines) + "\n"


def memory_usage_report(ba: BufferAssignment) -> str:
    total = sum(a.size for a in ba.allocations)
    lines = ["Memory Space: default (color=0)", f"Total bytes: {total} ({_human(total)})"]
    for alloc in sorted(ba.allocations, key=lambda a: -a.size):
        lines += ["", "  cumulative_size;       size;       offset; used_by_n_values; shapes_list",
                  "  " + "-" * 60]
        by_offset: dict[int, list[HloValue]] = {}
        for value, offset in alloc.values:
            by_offset.setdefault(offset, []).append(value)
        cumulative = 0
        for offset, values in sorted(by_offset.items()):
            size = max(v.size for v in values)
            cumulative += size
            share = cumulative * 100 // max(alloc.size, 1)
            shapes = ", ".join(sorted({v.shape.to_text(print_layout=False) for v in values}))
            lines.append(f"  {_human(cumulative):>9s}({share:3d}%); {_human(size):>10s}; {offset:12d}; "
                         f"{len(values):16d}; {shapes}")
    return "\n".join(lines) + "\n"


def _human(n: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.1f}{unit}"
    return f"{n}B"
