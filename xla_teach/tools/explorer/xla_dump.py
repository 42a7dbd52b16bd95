"""XLA's own passes, from its dump, in the explorer: what XLA did to a program, pass by pass.

``XLA_FLAGS="--xla_dump_to=DIR --xla_dump_hlo_pass_re=.*"`` makes XLA write the module after every
pass that changed it, numbered in the order they ran::

    module_0000.jit_f.0005.simplification.after_pipeline-start.before_algsimp.txt
    module_0000.jit_f.0014.HLO_passes_after_layout_assignment.after_fusion.before_fusion-wrapper.txt
    module_0000.jit_f.0016.copy-insertion.after_adding_copies_to_resolve_interference.txt

(number, pipeline, the pass it comes after, the pass that runs next). Read in order from
``before_optimizations.txt``, each file is one step: the pass named after ``after_`` turned the
module before it into this one (``after_pipeline-start`` is the module as a pipeline starts). The
steps become the explorer's pass records -- the same structural diffs, before/after pictures and
graph as for xla_teach's own compiles -- and XLA's ``*_after_optimizations.txt`` is the module
drawn; each fusion's kernel shows the LLVM IR XLA dumped for it (``*.ir-no-opt.ll``,
``*.ir-with-opt.ll``) or, in a GPU dump, its launch from XLA's thunk sequence (``thunk_sequence.txt``:
the kernel's grid, threads and shared memory, and the CUDA graph -- XLA's command buffer -- it
runs in), and the memory view draws XLA's own buffer assignment
(:mod:`~xla_teach.tools.explorer.xla_memory`). A file that cannot be read is named on the page,
never a crash. Each step
also says which xla_teach pass has XLA's pass's name, or that none does (:func:`bridge`), and
:func:`passes_xla_teach_lacks` lists what XLA ran that xla_teach has no pass for.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import Path

from xla_teach.backends.llvm.kernel_support import ptx_name
from xla_teach.hlo.text.parser import parse_hlo
from xla_teach.passes.pass_base import PassRecord
from xla_teach.tools.explorer.kernel_code import pack
from xla_teach.tools.explorer.model import ExplorerData, add_colours, add_passes, instruction_table
from xla_teach.tools.explorer.xla_memory import xla_memory

STEP = re.compile(r"\.(?P<n>\d{4})\.(?P<pipeline>[^.]+)\.after_(?P<after>[^.]+)(?:\.before_(?P<next>[^.]+))?\.txt$")


@dataclass
class _NoBuffers:
    """What the instruction table asks of an executable: XLA's buffers are in its own report."""

    buffer_assignment: None = None


def modules_with_pass_dumps(folder: Path) -> list[str]:
    """The prefixes (``module_0000.jit_f``) of the modules whose passes XLA dumped one by one."""
    found = set()
    for path in folder.glob("module_*.txt"):
        match = STEP.search(path.name)
        if match:
            found.add(path.name[: match.start()])
    return sorted(found)


def _counts(text: str) -> tuple[int, int]:
    instructions = len(re.findall(r"^\s+(?:ROOT\s+)?%?[\w.\-]+ = ", text, re.MULTILINE))
    return instructions, len(re.findall(r" fusion\(", text))


def xla_pass_records(folder: Path, prefix: str) -> tuple[list[PassRecord], list[str]]:
    """XLA's passes of one module as pass records, in the order XLA ran them, and the files that
    could not be read."""
    steps = sorted((int(m["n"]), p, m) for p in folder.glob(f"{prefix}.*.txt") if (m := STEP.search(p.name))
                   and p.name[: m.start()] == prefix)
    first = folder / f"{prefix}.before_optimizations.txt"
    state = first.read_text() if first.is_file() else ""
    records, problems = [], []
    for _, path, match in steps:
        try:
            text = path.read_text()
        except (OSError, UnicodeDecodeError) as err:
            problems.append(f"{path.name}: {err}")
            continue
        name = match["after"]
        if name == "pipeline-start" and text == state:
            continue  # the module as a pipeline starts: nothing new
        before, after = _counts(state), _counts(text)
        note = f"XLA's dump {path.name}" + (f"; the next pass: {match['next']}" if match["next"] else "")
        pass_name = name if name != "pipeline-start" else "(between pipelines)"
        records.append(PassRecord(len(records), match["pipeline"], pass_name, text != state, state, text,
                                  before[0], after[0], before[1], after[1], 0.0, notes=[note, bridge(pass_name)]))
        state = text
    return records, problems


@functools.cache
def xla_teach_pass_names() -> dict[str, str]:
    """xla_teach's passes (of the CPU pipeline) by name -> the module that holds each."""
    from xla_teach.backends.cpu.cpu_pipeline import cpu_pipeline
    from xla_teach.passes.pass_base import HloPassPipeline

    found: dict[str, str] = {}
    stack: list[object] = [cpu_pipeline()]
    while stack:
        item = stack.pop()
        if isinstance(item, HloPassPipeline):
            stack.extend(item.passes)
        else:
            found.setdefault(str(getattr(item, "name", "")), type(item).__module__)
    return found


def bridge(xla_pass: str) -> str:
    """The line that ties an XLA pass to xla_teach's: the pass of the same name and where it is
    (its page in the docs' pass reference), or plainly that xla_teach has none."""
    if xla_pass == "(between pipelines)":
        return "the module as the next pipeline starts"
    mine = xla_teach_pass_names().get(xla_pass)
    if mine is None:
        return f"xla_teach has no pass named {xla_pass}"
    return f"xla_teach's {xla_pass}: {mine.replace('.', '/')}.py (docs: pass-reference/{xla_pass})"


def xla_passes_table(folder: str | Path) -> list[dict[str, object]]:
    """Every pass XLA ran in a dump folder that changed a module: its name, the pipelines it ran in,
    how many times, and xla_teach's pass of the same name (its source and docs page) or None --
    XLA's passes that xla_teach lacks first, the table a contributor reads."""
    mine = xla_teach_pass_names()
    rows: dict[str, dict[str, object]] = {}
    for path in sorted(Path(folder).glob("module_*.txt")):
        match = STEP.search(path.name)
        if not match or match["after"] == "pipeline-start":
            continue
        row = rows.setdefault(match["after"], {"pass": match["after"], "pipelines": [], "times": 0,
                                               "xla_teach": mine.get(match["after"])})
        row["times"] = int(row["times"]) + 1  # type: ignore[call-overload]
        if match["pipeline"] not in row["pipelines"]:  # type: ignore[operator]
            row["pipelines"].append(match["pipeline"])  # type: ignore[union-attr]
    return sorted(rows.values(), key=lambda r: (r["xla_teach"] is not None, str(r["pass"])))


def passes_xla_teach_lacks(folder: str | Path) -> dict[str, int]:
    """Every pass XLA ran (changing a module) in a dump folder that xla_teach has no pass of the same
    name for, with how many times it ran: what a contributor could add next."""
    mine = xla_teach_pass_names()
    lacking: dict[str, int] = {}
    for path in sorted(Path(folder).glob("module_*.txt")):
        match = STEP.search(path.name)
        if match and match["after"] != "pipeline-start" and match["after"] not in mine:
            lacking[match["after"]] = lacking.get(match["after"], 0) + 1
    return dict(sorted(lacking.items()))


def _kernel_ir(folder: Path, prefix: str) -> dict[str, list[list[str]]]:
    """Each kernel's LLVM IR as XLA dumped it, by the fusion it computes."""
    code: dict[str, list[list[str]]] = {}
    for path in sorted(folder.glob(f"{prefix}.*_kernel_module.ir-*.ll")):
        kernel = path.name[len(prefix) + 1:].split("_kernel_module.")[0]
        title = "LLVM IR, optimized (XLA)" if "with-opt" in path.name else "LLVM IR (XLA)"
        code.setdefault(kernel, []).append([title, path.read_text(errors="replace")])
    for versions in code.values():
        versions.sort(key=lambda v: v[0] != "LLVM IR (XLA)")
    return code


THUNK = re.compile(r"^(?P<indent>\s*)(?P<id>\d+): (?P<kind>\w+) \[[^\]]*\]\s*(?P<kernel>\S+) "
                   r"grid: \[(?P<grid>[^\]]*)\]"
                   r" threads: \[(?P<threads>[^\]]*)\]\s+shared_memory: (?P<shared>\d+) bytes", re.MULTILINE)
COMMAND_BUFFER = re.compile(r"^\s*(?P<id>\d+): kCommandBuffer", re.MULTILINE)


def _gpu_launches(folder: Path, prefix: str, names: set[str]) -> dict[str, list[list[str]]]:
    """Each GPU kernel's launch as XLA's thunk sequence lists it (after its thunk passes, which
    gather kernels into command buffers, when that file is there), by the instruction it computes:
    the sequence names a kernel by its PTX symbol (:func:`ptx_name`: ``fusion.27`` is ``fusion_27``)."""
    files = [folder / f"{prefix}.thunk_sequence_after_thunk_passes.txt", folder / f"{prefix}.thunk_sequence.txt"]
    path = next((f for f in files if f.is_file()), None)
    if path is None:
        return {}
    text = path.read_text(errors="replace")
    by_symbol = {ptx_name(n): n for n in names}
    buffers = [m.start() for m in COMMAND_BUFFER.finditer(text)]
    code: dict[str, list[list[str]]] = {}
    for m in THUNK.finditer(text):
        name = by_symbol.get(m["kernel"], m["kernel"])
        inside = bool(m["indent"]) and any(start < m.start() for start in buffers)
        where = ", recorded in a CUDA graph (XLA's command buffer)" if inside else ""
        code.setdefault(name, []).append(["launch (XLA's thunk sequence)", (
            f"kernel {m['kernel']}: thunk {m['id']} of {path.name}, {m['kind']}{where}\n"
            f"grid (blocks): [{m['grid']}]\nthreads per block: [{m['threads']}]\n"
            f"shared memory: {m['shared']} bytes\n")])
    return code


def xla_dump_data(folder: str | Path, prefix: str, graphs: bool = True) -> ExplorerData:
    """The explorer's data for one module of an XLA dump folder: XLA's passes stepped, XLA's
    optimized module drawn, XLA's kernels' IR in the panels."""
    folder = Path(folder)
    records, problems = xla_pass_records(folder, prefix)
    optimized = sorted(folder.glob(f"{prefix}.*after_optimizations.txt"))
    final = optimized[0] if optimized else None
    data = ExplorerData(f"XLA: {prefix.split('.', 1)[-1]}", backend="XLA's own passes")
    if final is not None:
        module = parse_hlo(final.read_text())
        code = _kernel_ir(folder, prefix)
        names = {i.name for c in module.computations for i in c.instructions}
        for kernel, sections in _gpu_launches(folder, prefix, names).items():
            code.setdefault(kernel, []).extend(sections)
        data.instructions = instruction_table(module, _NoBuffers(), code)
        data.code = pack(code)
        data.entry = module.entry.name
        data.module_text = final.read_text()
        data.memory, missing = xla_memory(folder, prefix)
        problems += missing
    else:
        problems.append(f"no {prefix}.*after_optimizations.txt: the graph is missing")
    add_colours(data)
    add_passes(data, records, graphs)
    if problems:
        data.passes.insert(0, {"index": -1, "pipeline": "dump", "name": "unread files", "changed": False, "ms": 0,
                               "instructions": [0, 0], "fusions": [0, 0], "notes": problems, "skipped": "unreadable",
                               "diff": None, "sides": None, "order": None, "steps": []})
    return data
