"""Jupyter rich display: modules and computations show as graphs, pass records as diffs.

In a notebook, the last expression of a cell is shown through its ``_repr_svg_``
or ``_repr_html_`` method when it has one. :func:`install` (called by
``import xla_teach``) gives xla_teach's objects those methods:

===========================  ==========================================================
object                       shown as
===========================  ==========================================================
``HloModule``                the ENTRY computation's graph (SVG)
``HloComputation``           its graph (SVG)
``PassRecord``               the pass's counts, notes, before/after graphs and diff
``PassRecorder``             the full step-through pass report
an executable                backend, timings, passes, the optimized graph, the code
``Lowered`` (``jit.lower``)  the traced module's graph (SVG) and its HLO text
``Compiled``                 as an executable (its summary)
===========================  ==========================================================

The methods are attached here rather than written in ``ir.py`` so the IR does not
depend on Graphviz; everything is imported only when a notebook asks for a
picture. Without Graphviz's ``dot`` the SVG methods return None and Jupyter falls
back to the plain text repr.
"""

from __future__ import annotations

import sys
from typing import Any

from xla_teach.hlo.ir import HloComputation, HloModule
from xla_teach.passes.pass_base import PassRecord, PassRecorder
from xla_teach.runtime.executable import CompiledExecutable

# Executable classes, by module and class name: patched if imported, else registered with IPython by name.
EXECUTABLE_CLASSES = (
    ("xla_teach.runtime.executable", "Executable"),
    ("xla_teach.backends.interpreter", "InterpreterExecutable"),
    ("xla_teach.backends.gpu.compiler", "GpuCompiledExecutable"),
    ("xla_teach.backends.gpu.executable", "GpuExecutable"),
)
DISPLAY_MAX_NODES = 150


def _svg_or_none(obj: HloModule | HloComputation) -> str | None:
    from xla_teach.tools.render import GraphvizNotFound, RenderError, render_svg, svg_for_inline

    try:
        return svg_for_inline(render_svg(obj, max_nodes=DISPLAY_MAX_NODES))
    except (GraphvizNotFound, RenderError):
        return None


def module_repr_svg(self: HloModule) -> str | None:
    return _svg_or_none(self)


def computation_repr_svg(self: HloComputation) -> str | None:
    return _svg_or_none(self)


def record_repr_html(self: PassRecord) -> str:
    from xla_teach.tools.render.html_report import REPORT_CSS, GraphCache, record_html

    graphs = GraphCache({"max_nodes": DISPLAY_MAX_NODES})
    # Jupyter has no page script here: show the section (and hide the step buttons).
    body = record_html(self, graphs).replace('<section class="pass"', '<section class="pass current"', 1)
    return f"<div><style>{REPORT_CSS} .controls {{ display: none; }}</style>{body}</div>"


def recorder_repr_html(self: PassRecorder) -> str:
    import html as html_lib

    from xla_teach.tools.render.html_report import pass_report_html

    page = pass_report_html(self, max_nodes=DISPLAY_MAX_NODES)
    # A full page with its own script: show it in a sandboxed frame so it cannot clash with the notebook.
    return (f'<iframe srcdoc="{html_lib.escape(page, quote=True)}" style="width:100%;height:720px;'
            'border:1px solid #cfd8dc" sandbox="allow-scripts"></iframe>')


def executable_html(exe: CompiledExecutable) -> str:
    """A summary of a compiled executable: backend, compile timings, passes, graph, code."""
    from html import escape

    module, artifacts, timings, recorder = exe.module, exe.artifacts, exe.compile_timings, exe.recorder
    parts = [f"<div><h3>{escape(module.name)} compiled for <code>{escape(exe.backend or '?')}</code></h3>"]
    if timings:
        rows = "".join(f"<tr><td>{escape(k)}</td><td>{v * 1e3:.2f} ms</td></tr>" for k, v in timings.items())
        parts.append(f"<table><tr><th>compile stage</th><th>time</th></tr>{rows}</table>")
    if recorder is not None:
        changed = len(recorder.changed_records())
        parts.append(f"<details><summary>{len(recorder)} pass runs, {changed} changed the module</summary>"
                     f"<pre>{escape(recorder.table())}</pre></details>")
    from xla_teach.tools.render import GraphvizNotFound, RenderError, render_svg, svg_for_inline

    try:
        svg = svg_for_inline(render_svg(module, collapse_fusions=True, max_nodes=DISPLAY_MAX_NODES))
        parts.append(f"<details open><summary>optimized graph (fusions collapsed)</summary>{svg}</details>")
    except (GraphvizNotFound, RenderError):
        pass
    parts.append(f"<details><summary>optimized HLO</summary><pre>{escape(module.to_text())}</pre></details>")
    for label, text in (("buffer assignment", artifacts.buffer_assignment_text), ("LLVM IR", artifacts.llvm_ir),
                        ("optimized LLVM IR", artifacts.optimized_llvm_ir), ("assembly", artifacts.assembly),
                        ("PTX", artifacts.ptx)):
        if text:
            parts.append(f"<details><summary>{label} ({len(text.splitlines())} lines)</summary>"
                         f"<pre>{escape(text)}</pre></details>")
    parts.append("</div>")
    return "\n".join(parts)


def lowered_repr_html(self: Any) -> str:
    """``jit(f).lower(...)``: the traced module before any pass, as a graph and as text."""
    from html import escape

    module = self.module
    svg = _svg_or_none(module) or ""
    return (f"<div><h3>{escape(module.name)} lowered for <code>{escape(str(self.backend))}</code> "
            f"(before optimizations)</h3>{svg}<details><summary>HLO</summary>"
            f"<pre>{escape(module.to_text())}</pre></details></div>")


def compiled_repr_html(self: Any) -> str:
    """``jit(f).lower(...).compile()``: the summary of the executable it wraps."""
    return executable_html(self.executable)


def _patch_executables() -> None:
    for module_name, class_name in EXECUTABLE_CLASSES:
        mod = sys.modules.get(module_name)
        cls = getattr(mod, class_name, None) if mod is not None else None
        if cls is not None and "_repr_html_" not in vars(cls):
            cls._repr_html_ = executable_html


def _register_with_ipython() -> None:
    """Inside IPython, register executables by class name: no import needed until one is shown."""
    ipython_mod = sys.modules.get("IPython")
    get_ipython = getattr(ipython_mod, "get_ipython", None) if ipython_mod is not None else None
    shell = get_ipython() if get_ipython is not None else None
    if shell is None:
        return
    formatter = shell.display_formatter.formatters["text/html"]
    for module_name, class_name in EXECUTABLE_CLASSES:
        formatter.for_type_by_name(module_name, class_name, executable_html)


def install(lowered: type | None = None, compiled: type | None = None) -> None:
    """Give xla_teach's objects their Jupyter reprs (idempotent, imports nothing heavy). The front
    end's ``Lowered`` and ``Compiled`` classes are handed in by ``xla_teach/__init__.py``, which
    sits above both (a tool does not import the front end)."""
    HloModule._repr_svg_ = module_repr_svg  # type: ignore[attr-defined]
    HloComputation._repr_svg_ = computation_repr_svg  # type: ignore[attr-defined]
    PassRecord._repr_html_ = record_repr_html  # type: ignore[attr-defined]
    PassRecorder._repr_html_ = recorder_repr_html  # type: ignore[attr-defined]
    if lowered is not None:
        lowered._repr_html_ = lowered_repr_html  # type: ignore[attr-defined]
    if compiled is not None:
        compiled._repr_html_ = compiled_repr_html  # type: ignore[attr-defined]
    _patch_executables()
    _register_with_ipython()
