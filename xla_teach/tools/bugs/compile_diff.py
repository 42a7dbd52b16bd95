"""``xla-teach diff``: two compilations side by side -- what each pass did, the fusions and
kernels that differ, and the peak memory and run time of each.

    xla-teach diff a.hlo b.hlo                         # two modules
    xla-teach diff dumpA/ dumpB/                       # the first module of two dump folders
    xla-teach diff m.hlo --b_flags=--xla_disable_hlo_passes=fusion   # one module, two flag sets

Passes are matched by pipeline, name and occurrence (the third ``algsimp`` of one side with the
third of the other). Fusions are compared by what they compute -- their kind and the opcodes
fused inside -- since their names depend on the order they were made in. Run times are medians
over ``runs`` runs on the same fake arguments, after one warm-up run.
"""

from __future__ import annotations

import statistics
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from xla_teach.hlo.opcodes import BUFFER_NAMING_OPCODES
from xla_teach.tools.bugs.fake_data import fake_arguments


@dataclass
class Side:
    label: str
    executable: Any
    milliseconds: float | None = None

    @staticmethod
    def fusion_signature(instr: Any) -> str:
        """What a fusion computes, whatever its name: ``kLoop(add exponential multiply)``."""
        inside = sorted(i.opcode for i in instr.fused_computation.instructions if i.opcode != "parameter")
        return f"{instr.fusion_kind}({' '.join(inside)})"

    @property
    def fusions(self) -> Counter[str]:
        found: Counter[str] = Counter()
        for comp in self.executable.module.computations:
            for instr in comp.instructions:
                if instr.opcode == "fusion":
                    found[self.fusion_signature(instr)] += 1
        return found

    @property
    def kernels(self) -> int:
        return sum(1 for i in self.executable.module.entry.instructions if i.opcode not in BUFFER_NAMING_OPCODES)

    @property
    def peak_bytes(self) -> int | None:
        assignment = self.executable.buffer_assignment
        return None if assignment is None else int(assignment.peak_bytes())


@dataclass
class CompileDiff:
    a: Side
    b: Side
    passes: list[tuple[str, str, str]] = field(default_factory=list)  # (pass, A's mark, B's mark)

    def to_text(self) -> str:
        lines = [f"A: {self.a.label}", f"B: {self.b.label}", "",
                 f"{'pipeline/pass':<56s} {'A':>9s} {'B':>9s}   (* changed the module, . did not, - did not run)"]
        for name, mark_a, mark_b in self.passes:
            flag = "" if mark_a == mark_b else "   <- differs"
            lines.append(f"{name:<56s} {mark_a:>9s} {mark_b:>9s}{flag}")
        fa, fb = self.a.fusions, self.b.fusions
        lines += ["", f"fusions: A {sum(fa.values())}, B {sum(fb.values())}; kernels: A {self.a.kernels}, "
                      f"B {self.b.kernels}"]
        for title, only in (("only in A", fa - fb), ("only in B", fb - fa)):
            for what, count in sorted(only.items()):
                lines.append(f"  {title}: {count} x {what}")
        if fa == fb:
            lines.append("  the same fusions on both sides")
        pa, pb = self.a.peak_bytes, self.b.peak_bytes
        if pa is not None and pb is not None:
            lines.append(f"peak memory: A {pa} bytes, B {pb} bytes ({pb - pa:+d} bytes, B/A {pb / max(pa, 1):.2f}x)")
        ta, tb = self.a.milliseconds, self.b.milliseconds
        if ta is not None and tb is not None:
            lines.append(f"run time: A {ta:.3f} ms, B {tb:.3f} ms (B/A {tb / max(ta, 1e-9):.2f}x, median, fake data)")
        return "\n".join(lines)


def _marks(executable: Any) -> list[tuple[str, str]]:
    recorder = executable.recorder
    seen: Counter[str] = Counter()
    marks = []
    for record in (recorder.records if recorder is not None else []):
        name = f"{record.pipeline}/{record.pass_name}"
        seen[name] += 1
        key = name if seen[name] == 1 else f"{name} #{seen[name]}"
        marks.append((key, "-" if record.skipped else ("*" if record.changed else ".")))
    return marks


def _time(executable: Any, runs: int) -> float:
    args = fake_arguments(executable.module)
    executable.execute(args)
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        executable.execute(args)
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def compile_diff(a: Side, b: Side, runs: int = 5) -> CompileDiff:
    if runs > 0:
        a.milliseconds, b.milliseconds = _time(a.executable, runs), _time(b.executable, runs)
    marks_a, marks_b = dict(_marks(a.executable)), dict(_marks(b.executable))
    order = list(marks_a) + [k for k in marks_b if k not in marks_a]
    diff = CompileDiff(a, b)
    diff.passes = [(k, marks_a.get(k, "-"), marks_b.get(k, "-")) for k in order]
    return diff
