"""Two compiles in one page: ``xla-teach diff A B`` and ``compiled.explore(compare=other)``.

The page puts the two optimized modules side by side, each drawn by the explorer's own renderer
(``static/module_graph.js``) and each panned, zoomed and opened on its own, with the summary of
:mod:`xla_teach.tools.bugs.compile_diff` beside them: the passes that did something on one side only,
the fusions only one side made, instructions, kernels, peak memory, compile and run time, and the
time of each ``op_name`` scope on each side. A click on an instruction selects its counterparts
on the other side.

**Mapping instructions.** Names are no help across two compiles: fusions are numbered in the
order they are made, and two JAX versions name everything differently. What survives every
pass is the metadata the front end wrote (``provenance``: a pass that creates an instruction
gives it the op_name and source line of what it replaces). So each instruction of the drawn
computations *covers* a set of keys -- ``(opcode, op_name, source line)`` of itself and, for a
fusion, of every instruction fused into it (a parameter by its number, an instruction without
op_name by its name) -- and its counterparts are the instructions of the other side covering
any of the same keys, the most shared first (an instruction of the same name first: one module
compiled twice keeps the names of what it did not fuse). ``add.5`` left unfused on one side and inside
``fusion.3`` on the other map to each other; a fusion cut differently maps to every fusion that
holds a piece of it. Where no strong key is shared, ``(op_name, source line)`` alone is tried
(a pass that changed the opcode: a divide made a multiply).
"""

from __future__ import annotations

import html
from collections import Counter
from pathlib import Path
from typing import Any

from xla_teach.hlo.ir import HloInstruction, HloModule
from xla_teach.tools.bugs.compile_diff import CompileDiff, Side, compile_diff
from xla_teach.tools.explorer.model import build_data
from xla_teach.tools.explorer.page import offline_page
from xla_teach.tools.explorer.structural_diff import fusion_owners

MAX_COUNTERPARTS = 32  # a fusion maps to each unfused instruction it holds

Key = tuple[Any, ...]
Index = tuple[dict[str, tuple[set[Key], set[Key]]], dict[Key, list[str]], dict[Key, list[str]]]


def _own_keys(instr: HloInstruction, entry: str) -> tuple[Key | None, Key | None]:
    """An instruction's strong key and its weak one (None where it has none)."""
    if instr.opcode == "parameter" and instr.parent is not None and instr.parent.name == entry:
        return ("parameter", instr.parameter_number), None
    fields = instr.metadata.fields if instr.metadata else {}
    op_name = str(fields.get("op_name", ""))
    if not op_name:
        return ("name", instr.name), None
    line = int(fields.get("source_line", 0) or 0)
    return (instr.opcode, op_name, line), (op_name, line)


def covered_keys(instr: HloInstruction, entry: str = "") -> tuple[set[Key], set[Key]]:
    """The strong and weak keys of an instruction and of everything fused into it (``entry``: the
    ENTRY computation's name, whose parameters are known by their numbers). A ``get-tuple-element``
    or ``bitcast`` that the front end did not write (no op_name: a pass made it, to take one
    result of a multi-output fusion, say) stands for what it reads."""
    strong: set[Key] = set()
    weak: set[Key] = set()
    top = instr
    for _ in range(8):
        fields = top.metadata.fields if top.metadata else {}
        if top.opcode in ("get-tuple-element", "bitcast") and not fields.get("op_name") and top.operands:
            top = top.operands[0]
        else:
            break
    stack = [top]
    while stack:
        current = stack.pop()
        if current.opcode == "fusion":
            stack.extend(i for i in current.fused_computation.instructions if i.opcode != "parameter")
            if current is not top:
                continue
        if current.opcode == "parameter" and current is not top:
            continue
        s, w = _own_keys(current, entry)
        if current.opcode == "constant" and current is not top:
            s = None  # a fused constant (a 0, a 1) is a weak sign of what the fusion computes
        if s is not None:
            strong.add(s)
        if w is not None:
            weak.add(w)
    return strong, weak


def _drawn(module: HloModule) -> list[HloInstruction]:
    """The instructions a compare page can select: those of every computation that is not a
    fusion's (the ENTRY, loop bodies, branches)."""
    fused = set(fusion_owners(module))
    return [i for c in module.computations if c.name not in fused for i in c.instructions]


def instruction_mapping(a: HloModule, b: HloModule) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """Each selectable instruction of ``a`` -> its counterparts in ``b`` (most shared keys first),
    and the same from ``b`` to ``a``; an instruction with none maps to an empty list."""

    def index(module: HloModule) -> Index:
        keys = {i.name: covered_keys(i, module.entry.name) for i in _drawn(module)}
        by_strong: dict[Key, list[str]] = {}
        by_weak: dict[Key, list[str]] = {}
        for name, (strong, weak) in keys.items():
            for k in strong:
                by_strong.setdefault(k, []).append(name)
            for k in weak:
                by_weak.setdefault(k, []).append(name)
        return keys, by_strong, by_weak

    sides = index(a), index(b)

    def one_way(mine: int) -> dict[str, list[str]]:
        keys, _, _ = sides[mine]
        _, by_strong, by_weak = sides[1 - mine]
        result = {}
        for name, (strong, weak) in keys.items():
            score: Counter[str] = Counter()
            for k in strong:
                score.update(by_strong.get(k, ()))
            if not score:
                for k in weak:
                    score.update(by_weak.get(k, ()))
            if score[name] > 0:  # the same name, sharing a key: the same instruction compiled twice
                score[name] += 1000
            result[name] = [n for n, _ in score.most_common(MAX_COUNTERPARTS)]
        return result

    return one_way(0), one_way(1)


def _side_json(side: Side, runs: int) -> dict[str, Any]:
    """What the page needs of one side: its instruction table for the graph, its sizes, memory,
    compile time and (when run) the time of each thunk and op_name scope."""
    executable = side.executable
    data = build_data(executable, side.label, graphs=False, profile_runs=runs, light=True)
    memory = data.memory or {}
    profile = data.profile
    if profile is not None:
        side.milliseconds = profile["median_us"] / 1e3
    timings = executable.compile_timings
    return {
        "label": side.label, "entry": data.entry, "instructions": data.instructions, "palette": data.palette,
        "legend": data.legend, "backend": data.backend,
        "sizes": {"instructions": executable.module.instruction_count(), "kernels": side.kernels,
                  "fusions": sum(side.fusions.values()), "peak_bytes": side.peak_bytes,
                  "temp_bytes": memory.get("temp_bytes"), "compile_s": sum(timings.values()) or None},
        "profile": None if profile is None else {
            "runs": profile["runs"], "run_us": profile["run_us"], "median_us": profile["median_us"],
            "thunks": {n: round(t["us"], 3) for n, t in profile["thunks"].items() if not t["nested"]},
            "scopes": profile["scopes"]},
    }


def _fusion_rows(a: Side, b: Side) -> list[dict[str, Any]]:
    """Each kind of fusion (kind and the opcodes fused) with the fusions of that kind on each side."""

    def named(side: Side) -> dict[str, list[str]]:
        found: dict[str, list[str]] = {}
        for comp in side.executable.module.computations:
            for instr in comp.instructions:
                if instr.opcode == "fusion":
                    found.setdefault(side.fusion_signature(instr), []).append(instr.name)
        return found

    on_a, on_b = named(a), named(b)
    rows = [{"what": what, "a": on_a.get(what, []), "b": on_b.get(what, [])} for what in {**on_a, **on_b}]
    return sorted(rows, key=lambda r: (len(r["a"]) == len(r["b"]), -abs(len(r["a"]) - len(r["b"])), r["what"]))


def compare_json(diff: CompileDiff, runs: int) -> dict[str, Any]:
    """The page's data: both sides, the mapping, the passes and the fusions."""
    a, b = _side_json(diff.a, runs), _side_json(diff.b, runs)
    map_a, map_b = instruction_mapping(diff.a.executable.module, diff.b.executable.module)
    passes = [{"name": name, "a": mark_a, "b": mark_b} for name, mark_a, mark_b in diff.passes]
    return {"a": a, "b": b, "map": {"a": map_a, "b": map_b}, "passes": passes, "fusions": _fusion_rows(diff.a, diff.b),
            "text": diff.to_text()}


_BODY = """<header>
  <h1>{title}</h1><span class="backend">compare</span>
  <span class="spacer"></span>
  <input id="search" type="search" placeholder="Search both sides ( / )" autocomplete="off">
  <button id="summary" title="the comparison (0)">Summary</button>
  <button id="fit" title="fit both graphs (f)">Fit</button>
</header>
<div class="layout">
  <main id="sides">
    <section class="side pane" id="side-a"></section><section class="side pane" id="side-b"></section>
  </main>
  <aside id="details"></aside>
</div>"""


def compare_html(diff: CompileDiff, runs: int = 5, title: str | None = None) -> str:
    """The compare page of two compiles as one offline HTML file."""
    text = html.escape(title or f"{diff.a.label} vs {diff.b.label}")
    return offline_page(text, "compile diff", _BODY.format(title=text), compare_json(diff, runs),
                        ["explorer.css", "compare.css"], ["vendor/dagre.min.js", "module_graph.js", "compare.js"],
                        body_class="compare")


def write_compare(a: Any, b: Any, path: str | Path, labels: tuple[str, str] = ("A", "B"), runs: int = 5,
                  title: str | None = None) -> Path:
    """Compare two executables (``compile_module``'s) in a page written to ``path`` (never over an
    existing file); ``runs`` timed runs of each (0: compile only)."""
    target = Path(path)
    if target.exists():
        raise FileExistsError(f"{target} exists; not overwriting it")
    if not target.parent.is_dir():
        raise FileNotFoundError(f"cannot write the compare page to {target}: folder {target.parent} does not exist")
    diff = compile_diff(Side(labels[0], a), Side(labels[1], b), runs=0)
    target.write_text(compare_html(diff, runs, title), encoding="utf-8")
    return target
