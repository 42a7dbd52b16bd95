"""``index.html`` of a dump folder: every module and its files, with what XLA's file names mean.

A folder written by ``--xla_dump_to`` holds a dozen files per module
(``module_0003.jit_step.cpu_after_optimizations.txt`` ...). The index groups them by module,
opens each module's explorer, and explains the names in a legend. It is rewritten after every
compilation that dumps into the folder.
"""

from __future__ import annotations

import html
import re
from pathlib import Path

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
    ("debug_options", "the flags the compilation ran with"),
]


def write_dump_index(directory: str | Path) -> Path:
    directory = Path(directory)
    modules: dict[str, dict[str, object]] = {}
    for path in sorted(directory.iterdir()):
        match = _FILE.match(path.name)
        if not match or path.name == "index.html":
            continue
        module_id, name = match.group(1), match.group(2) or ""
        entry = modules.setdefault(module_id, {"name": name, "files": []})
        if name and not entry["name"]:
            entry["name"] = name
        entry["files"].append(path.name)  # type: ignore[union-attr]
    rows = []
    for module_id, entry in sorted(modules.items()):
        files: list[str] = entry["files"]  # type: ignore[assignment]
        explorer = next((f for f in files if f.endswith(".explorer.html")), None)
        opener = (f'<a class="open" href="{html.escape(explorer)}">open the explorer</a>' if explorer
                  else '<span class="none">no explorer</span>')
        links = "".join(f'<li><a href="{html.escape(f)}">{html.escape(f)}</a></li>' for f in files)
        rows.append(f"<section><h2>module {module_id} <span>{html.escape(str(entry['name']))}</span> {opener}</h2>"
                    f"<details><summary>{len(files)} files</summary><ul>{links}</ul></details></section>")
    legend = "".join(f"<tr><td><code>{html.escape(a)}</code></td><td>{html.escape(b)}</td></tr>" for a, b in LEGEND)
    page = f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">{MARKER}<title>{html.escape(directory.name)} - xla_teach dumps</title>
<style>
body {{ font: 14px/1.45 system-ui, Helvetica, Arial, sans-serif; margin: 1.5em auto; max-width: 60em; color: #212121; }}
h1 {{ font-size: 20px; }} h2 {{ font-size: 15px; margin: 0.2em 0; }} h2 span {{ color: #546e7a; font-weight: normal; }}
section {{ border: 1px solid #cfd8dc; border-radius: 6px; padding: 0.5em 0.8em; margin: 0.6em 0; }}
a.open {{ margin-left: 1em; font-size: 13px; background: #1565c0; color: #fff; padding: 2px 10px; border-radius: 4px;
          text-decoration: none; }}
.none {{ margin-left: 1em; font-size: 12px; color: #90a4ae; }}
ul {{ margin: 0.3em 0; columns: 2; font-size: 12.5px; }} table {{ border-collapse: collapse; font-size: 13px; }}
td {{ border-top: 1px solid #eceff1; padding: 3px 10px 3px 0; vertical-align: top; }}
</style></head><body>
<h1>Dumps in {html.escape(str(directory))}</h1>
<p>{len(modules)} module{'s' if len(modules) != 1 else ''}. Each compilation writes its files under one
<code>module_NNNN</code> number, as XLA's <code>--xla_dump_to</code> does.</p>
{''.join(rows)}
<h2>What the file names mean</h2><table>{legend}</table>
</body></html>
"""
    path = directory / "index.html"
    if path.exists() and MARKER not in path.read_text(errors="replace"):
        raise FileExistsError(f"{path} exists and was not written by xla_teach; not replacing it")
    path.write_text(page, encoding="utf-8")
    return path
