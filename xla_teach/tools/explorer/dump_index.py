"""``index.html`` of a dump folder: every module and its files, with what XLA's file names mean.

A folder written by ``--xla_dump_to`` holds a dozen files per module
(``module_0003.jit_step.cpu_after_optimizations.txt`` ...). The index groups them by module,
opens each module's explorer, and explains the names in a legend. It is rewritten after every
compilation that dumps into the folder.

Two ``jit_step`` modules are told apart by ``module_NNNN.NAME.summary.json`` (written beside the
explorer, :func:`module_summary`): the Python line the program comes from, when it was
compiled and how long that took, its size before and after optimization, its kernels and its
peak memory -- one row each in the index's table.
"""

from __future__ import annotations

import html
import json
import re
import time
from pathlib import Path
from typing import Any

_FILE = re.compile(r"^(?:\d+\.)?module_(\d{4})\.(?:(.+?)\.)?((?:\d{4}\.)?[A-Za-z_]\w*[\w.\-]*)$")

MARKER = "<!-- xla_teach dump index -->"
LEGEND = [
    ("explorer.html", "the compile explorer: passes, graph, source lines, kernels, buffers (open this)"),
    ("before_optimizations.txt", "the HLO the front end produced, before any pass"),
    ("cpu_after_optimizations.txt / gpu_…", "the HLO after the backend's passes: fusions, layouts, schedule"),
    ("…-buffer-assignment.txt", "which buffer and offset every value lives in, and why"),
    ("…-buffer-assignment-values.txt", "every value, its uses, and the instruction that makes it"),
    ("…-live-range.txt / …-memory-usage-report.txt", "live ranges over the schedule, the peak; bytes per allocation"),
    ("NNNN.PIPELINE.after_PASS.before_NEXT.txt", "the module between two passes (--xla_dump_hlo_pass_re)"),
    ("ir-no-opt.ll / ir-with-opt.ll", "LLVM IR of the kernels before / after LLVM's optimizer"),
    (".s / .ptx", "the machine code: CPU assembly, or PTX for the GPU"),
    (".dot / .html / .svg", "graph drawings of a stage (--xla_dump_hlo_as_dot / _html / _svg)"),
    ("snapshot.N.npz", "a run's inputs and outputs, to replay (xla-teach replay)"),
    ("summary.json", "xla_teach's own: where the program comes from, its sizes, compile time (this table)"),
    ("debug_options", "the flags the compilation ran with"),
]


def module_summary(module: Any, executable: Any, backend: str) -> str:
    """What tells this compilation apart from another of the same name, as JSON."""
    source = ""
    for instr in module.entry.instructions:
        fields = dict(instr.metadata.fields) if instr.metadata else {}
        if fields.get("source_file") and instr.opcode != "parameter":
            source = f"{fields['source_file']}:{fields.get('source_line', '?')}"
            break
    artifacts = executable.artifacts
    kernels = len(re.findall(r"^define void @", artifacts.llvm_ir, re.MULTILINE)) or len(
        re.findall(r"^\.visible \.entry ", artifacts.ptx, re.MULTILINE))
    assignment = executable.buffer_assignment
    timings = executable.compile_timings
    return json.dumps({
        "source": source, "backend": backend, "compiled_at": time.strftime("%Y-%m-%d %H:%M:%S"),
        "compile_seconds": round(sum(timings.values()), 3),
        "instructions_before": module.instruction_count(), "instructions_after": executable.module.instruction_count(),
        "kernels": kernels, "peak_bytes": assignment.entry.peak_bytes if assignment is not None else None,
    }, indent=1) + "\n"


def _size(n: int | None) -> str:
    if n is None:
        return ""
    return f"{n / 2**20:.1f} MiB" if n >= 2**20 else f"{n / 1024:.1f} KiB" if n >= 1024 else f"{n} B"


def _xla_passes_section(directory: Path) -> str:
    """The table of XLA's passes in a dump written with ``--xla_dump_hlo_pass_re=.*``, those that
    xla_teach lacks first; nothing for a folder without them."""
    from xla_teach.tools.explorer.xla_dump import xla_passes_table

    rows = xla_passes_table(directory)
    if not rows:
        return ""
    body = []
    for row in rows:
        mine = row["xla_teach"]
        where = (f'<code>{html.escape(str(mine).replace(".", "/"))}.py</code> (docs: pass reference, '
                 f'{html.escape(str(row["pass"]))})' if mine else '<span class="none">none</span>')
        body.append(f"<tr><td><code>{html.escape(str(row['pass']))}</code></td><td>{row['times']}</td><td>"
                    f"{html.escape(', '.join(row['pipelines']))}</td><td>{where}</td></tr>")  # type: ignore[arg-type]
    lacking = sum(row["xla_teach"] is None for row in rows)
    return (f"<h2>XLA's passes here</h2><p>{len(rows)} passes of XLA changed a module in this folder; xla_teach "
            f"has a pass of the same name for {len(rows) - lacking} of them. The {lacking} it lacks come first: "
            "what a contributor could add next.</p><table><thead><tr><th>XLA's pass</th><th>times</th>"
            f"<th>pipelines</th><th>xla_teach's pass</th></tr></thead><tbody>{''.join(body)}</tbody></table>")


def write_dump_index(directory: str | Path) -> Path:
    directory = Path(directory)
    modules: dict[str, dict[str, Any]] = {}
    for path in sorted(directory.iterdir()):
        match = _FILE.match(path.name)
        if not match or path.name == "index.html":
            continue
        module_id, name = match.group(1), match.group(2) or ""
        entry = modules.setdefault(module_id, {"name": name, "files": [], "summary": {}})
        if name and not entry["name"]:
            entry["name"] = name
        entry["files"].append(path.name)
        if path.name.endswith(".summary.json"):
            try:
                entry["summary"] = json.loads(path.read_text())
            except (OSError, ValueError):
                pass
    rows = []
    for module_id, entry in sorted(modules.items()):
        files: list[str] = entry["files"]
        info: dict[str, Any] = entry["summary"]
        pages = [(f, label) for suffix, label in (
            (".xla.explorer.html", "XLA's passes"), (".vs_xla_teach.diff.html", "XLA vs xla_teach"),
            (".explorer.html", "explorer")) for f in files if f.endswith(suffix)
            and (suffix != ".explorer.html" or not f.endswith(".xla.explorer.html"))]
        opener = (" ".join(f'<a class="open" href="{html.escape(f)}">{label}</a>' for f, label in pages) if pages
                  else '<span class="none">no explorer</span>')
        links = "".join(f'<li><a href="{html.escape(f)}">{html.escape(f)}</a></li>' for f in files)
        sizes = (f"{info['instructions_before']} &rarr; {info['instructions_after']}"
                 if "instructions_before" in info else "")
        cells = [f"<b>{module_id}</b>", f"<b>{html.escape(str(entry['name']))}</b><br><code>"
                 f"{html.escape(str(info.get('source', '')))}</code>", html.escape(str(info.get("backend", ""))),
                 html.escape(str(info.get("compiled_at", ""))),
                 f"{info['compile_seconds']:.2f} s" if "compile_seconds" in info else "", sizes,
                 str(info.get("kernels", "")), _size(info.get("peak_bytes")), opener,
                 f"<details><summary>{len(files)} files</summary><ul>{links}</ul></details>"]
        rows.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    head = "".join(f"<th>{h}</th>" for h in ("module", "program, from", "backend", "compiled", "took", "instructions",
                                             "kernels", "peak memory", "", "files"))
    legend = "".join(f"<tr><td><code>{html.escape(a)}</code></td><td>{html.escape(b)}</td></tr>" for a, b in LEGEND)
    page = f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">{MARKER}<title>{html.escape(directory.name)} - xla_teach dumps</title>
<style>
body {{ font: 14px/1.45 system-ui, Helvetica, Arial, sans-serif; margin: 1.5em auto; max-width: 78em; padding: 0 1em;
        color: #212121; }}
h1 {{ font-size: 20px; overflow-wrap: anywhere; }} h2 {{ font-size: 15px; margin: 1em 0 0.3em; }}
table {{ border-collapse: collapse; font-size: 13px; width: 100%; table-layout: auto; }}
th {{ text-align: left; color: #37474f; border-bottom: 2px solid #cfd8dc; padding: 4px 8px 4px 0; }}
td {{ border-top: 1px solid #eceff1; padding: 5px 8px 5px 0; vertical-align: top; overflow-wrap: anywhere; }}
td code {{ color: #455a64; font-size: 12px; }}
a.open {{ font-size: 13px; background: #1565c0; color: #fff; padding: 2px 10px; border-radius: 4px;
          text-decoration: none; white-space: nowrap; }}
.none {{ font-size: 12px; color: #546e7a; }}
ul {{ margin: 0.3em 0; padding-left: 1.2em; font-size: 12.5px; }}
</style></head><body>
<h1>Dumps in {html.escape(str(directory))}</h1>
<p>{len(modules)} module{'s' if len(modules) != 1 else ''}. Each compilation writes its files under one
<code>module_NNNN</code> number, as XLA's <code>--xla_dump_to</code> does.</p>
<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>
{_xla_passes_section(directory)}
<h2>What the file names mean</h2><table>{legend}</table>
</body></html>
"""
    path = directory / "index.html"
    if path.exists() and MARKER not in path.read_text(errors="replace"):
        raise FileExistsError(f"{path} exists and was not written by xla_teach; not replacing it")
    path.write_text(page, encoding="utf-8")
    return path
