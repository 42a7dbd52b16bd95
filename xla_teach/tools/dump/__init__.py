"""XLA-style dumps: what ``--xla_dump_to`` writes while a module compiles and runs.

The compile driver (:func:`xla_teach.api.compile_module`) drives one
:class:`ModuleDumper` per module::

    dumper = ModuleDumper.create(module, flags.current(), backend)   # None: not dumped
    dumper.before_optimizations(module)
    ... every pass run -> dumper.on_pass(record)
    dumper.after_compilation(executable)
    ... every execution -> dumper.snapshot(args, outputs)      # --xla_dump_hlo_snapshots

Files, for module ``jit_f`` numbered 3 on the CPU (``<ext>`` is ``txt``, ``dot``,
``html``, ``svg`` as the ``--xla_dump_hlo_as_*`` flags ask; text alone by default)::

    module_0003.jit_f.before_optimizations.<ext>
    module_0003.jit_f.debug_options                               the flags that differ from defaults
    module_0003.jit_f.0000.fusion.after_pipeline-start.before_fusion.<ext>      (--xla_dump_hlo_pass_re)
    module_0003.jit_f.0001.fusion.after_fusion.before_multi_output_fusion.<ext>
    module_0003.jit_f.cpu_after_optimizations.<ext>               (+ .top_level.html: fusions collapsed)
    module_0003.jit_f.cpu_after_optimizations-buffer-assignment.txt
    module_0003.jit_f.ir-no-opt.ll, .ir-with-opt.ll, .s           LLVM IR before/after LLVM's -O, assembly
    module_0003.jit_f.ptx                                         (GPU; after-optimizations is sm_8.0_gpu_...)
    module_0003.jit_f.snapshot.0.npz                              module + arguments + results of run 0

Per-pass dumps follow XLA's ``HloPassPipeline``: a dump when a pipeline starts
(``after_pipeline-start.before_<first pass>``) and one after each pass
(``after_<pass>.before_<next pass>``; ``pipeline-end`` after the last), numbered
``NNNN`` across the whole compilation. A dump is written when the regular
expression matches either neighbouring pass name; with exactly ``.*`` only passes
that changed the module are dumped after (XLA's rule). The listener sees passes
one at a time, so "pipeline starts" are inferred: a pass in another pipeline than
the previous one, or the first pass of a fixed-point pipeline coming round again.
"""

from __future__ import annotations

import re
import time
import warnings
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from xla_teach.backends.backend_info import backend_info
from xla_teach.backends.compile_listeners import subscribe
from xla_teach.hlo.ir import HloModule
from xla_teach.passes.pass_base import PassRecord
from xla_teach.tools.dump.files import DumpError, DumpWriter, known_module_ids, prepare_directory, reserve_module_id

__all__ = ["DumpError", "DumpFormats", "ModuleDumper", "after_optimizations_name"]

SNAPSHOT_SUFFIX = "snapshot.{n}.npz"  # XLA writes snapshot.<n>.pb (an HloSnapshot proto); ours is NumPy's npz


@dataclass(frozen=True)
class DumpFormats:
    """Which renderings each HLO dump gets (``--xla_dump_hlo_as_*``)."""

    text: bool = True
    dot: bool = False
    html: bool = False
    svg: bool = False

    @staticmethod
    def from_flags(values: dict[str, Any]) -> DumpFormats:
        text, dot, html = (bool(values.get(f"xla_dump_hlo_as_{f}")) for f in ("text", "dot", "html"))
        svg = bool(values.get("xla_teach_dump_hlo_as_svg"))
        if not (text or dot or html or svg):
            text = True  # XLA: with --xla_dump_to and no format flag, text is dumped
        return DumpFormats(text, dot, html, svg)

    @property
    def graphs(self) -> bool:
        return self.dot or self.html or self.svg


def after_optimizations_name(backend: str, arch: str = "") -> str:
    """``cpu_after_optimizations``, ``sm_8.0_gpu_after_optimizations`` (from ``sm_80``) or,
    for the interpreter, the older plain ``after_optimizations``."""
    info = backend_info(backend)
    prefix = info.dump_prefix
    match = re.fullmatch(r"sm_?(\d+)(\d)([a-z]?)", arch) if info.device == "gpu" else None
    if match:  # the GPU's dumps name the architecture
        return f"sm_{match.group(1)}.{match.group(2)}{match.group(3)}_{prefix}_after_optimizations"
    return f"{prefix}_after_optimizations" if prefix else "after_optimizations"


def _debug_options_text(values: dict[str, Any]) -> str:
    """The flags that differ from their defaults, as a text proto (what JAX writes)."""
    from xla_teach.flags import FLAGS

    lines = []
    for name, value in values.items():
        flag = FLAGS.get(name)
        if flag is None or value == flag.default:
            continue
        shown = f'"{value}"' if isinstance(value, str) else str(value).lower()
        lines.append(f"{name}: {shown}")
    return "\n".join(lines) + "\n"


class _PassDumps:
    """The per-pass part: decides which between-pass dumps to write and names them.

    Kept apart from :class:`ModuleDumper` so a finalizer can flush the last pending
    dump even when a later pass crashed the compilation (that dump shows the module
    just before the pass that broke it)."""

    def __init__(self, pass_re: str, pipeline_re: str, write_stage: Callable[[str, str], None]) -> None:
        self.pass_re = re.compile(pass_re) if pass_re else None
        self.only_changed = pass_re == ".*"
        self.pipeline_re = re.compile(pipeline_re) if pipeline_re else None
        self.write_stage = write_stage  # (suffix, module text) -> None
        self.counter = 0
        self.pipeline: str | None = None
        self.first_pass = ""
        self.pending: PassRecord | None = None

    def _matches(self, *names: str) -> bool:
        assert self.pass_re is not None
        return any(self.pass_re.search(n) for n in names)

    def _pipeline_ok(self, pipeline: str) -> bool:
        return self.pipeline_re is None or bool(self.pipeline_re.search(pipeline))

    def on_pass(self, record: PassRecord) -> None:
        if self.pass_re is None:
            return
        restart = record.pipeline != self.pipeline or record.pass_name == self.first_pass
        self.flush("pipeline-end" if restart else record.pass_name)
        if restart:
            self.pipeline, self.first_pass = record.pipeline, record.pass_name
            if self._matches("pipeline-start", record.pass_name) and self._pipeline_ok(record.pipeline):
                self._dump(record.pipeline, "pipeline-start", record.pass_name, record.before)
        self.pending = record

    def flush(self, next_name: str = "pipeline-end") -> None:
        record, self.pending = self.pending, None
        if record is None or not record.after:
            return
        if self.only_changed and not record.changed:
            return
        if self._matches(record.pass_name, next_name) and self._pipeline_ok(record.pipeline):
            self._dump(record.pipeline, record.pass_name, next_name, record.after)

    def _dump(self, pipeline: str, after: str, before: str, text: str) -> None:
        suffix = f"{self.counter:04d}.{pipeline}.after_{after}.before_{before}"
        self.counter += 1
        self.write_stage(suffix, text)


class _StageWriter:
    """Writes one HLO stage (a module at one point of the compilation) in every format
    the flags ask for: ``.txt``, ``.dot``, ``.svg``, ``.html``."""

    def __init__(self, writer: DumpWriter, formats: DumpFormats, values: dict[str, Any]) -> None:
        self.writer = writer
        self.formats = formats
        self.large_constants = bool(values.get("xla_dump_large_constants", False))
        self.print_metadata = not values.get("xla_dump_disable_metadata", False)
        self.long_form = bool(values.get("xla_dump_hlo_as_long_text", True))
        self._graph_warning_given = False

    def module_text(self, module: HloModule) -> str:
        return module.to_text(print_large_constants=self.large_constants, print_metadata=self.print_metadata,
                              long_form=self.long_form)

    def write_text_stage(self, suffix: str, text: str) -> None:
        """A per-pass stage arrives as text; reprint it with the dump options when possible."""
        module: HloModule | None = None
        needs_reprint = not (self.large_constants and self.print_metadata and self.long_form)
        if self.formats.graphs or needs_reprint:
            try:
                from xla_teach.hlo.text.parser import parse_hlo

                module = parse_hlo(text)
            except Exception as err:  # a dump must never break a compilation
                warnings.warn(f"xla_teach dump: cannot re-read the HLO for {suffix}: {err}", stacklevel=2)
        if module is None:
            if self.formats.text:
                self.writer.write(f"{suffix}.txt", text)
            return
        self.write_stage(suffix, module)

    def write_stage(self, suffix: str, module: HloModule, top_level: bool = False) -> None:
        if self.formats.text:
            self.writer.write(f"{suffix}.txt", self.module_text(module))
        if not self.formats.graphs:
            return
        from xla_teach.tools.render import hlo_to_dot

        title = self.writer.file_name(suffix)
        dot_text = hlo_to_dot(module, title=title)
        if self.formats.dot:
            self.writer.write(f"{suffix}.dot", dot_text)
        svg = self._svg(dot_text) if (self.formats.svg or self.formats.html) else None
        if self.formats.svg and svg is not None:
            self.writer.write(f"{suffix}.svg", svg)
        if self.formats.html:
            from xla_teach.tools.render.html_report import graph_page

            self.writer.write(f"{suffix}.html", graph_page(dot_text, title=title, svg=svg))
            if top_level:  # XLA's after-optimizations overview: fusion bodies hidden
                top = hlo_to_dot(module, title=title + ".top_level", collapse_fusions=True)
                self.writer.write(f"{suffix}.top_level.html",
                                  graph_page(top, title=title + ".top_level", svg=self._svg(top)))

    def _svg(self, dot_text: str) -> str | None:
        from xla_teach.tools.render import GraphvizNotFound, RenderError, to_svg

        try:
            return to_svg(dot_text)
        except (GraphvizNotFound, RenderError) as err:
            if not self._graph_warning_given:
                warnings.warn(f"xla_teach dump: no SVG graphs ({err})", stacklevel=3)
                self._graph_warning_given = True
            return None


class ModuleDumper:
    """Writes the dump files of one module (see the module docstring for the list)."""

    def __init__(self, writer: DumpWriter, module: HloModule, flag_values: dict[str, Any], backend: str) -> None:
        self.writer = writer
        self.module = module
        self.backend = backend
        self.flag_values = dict(flag_values)
        self.formats = DumpFormats.from_flags(flag_values)
        self.stages = _StageWriter(writer, self.formats, flag_values)
        self.snapshots_written = 0
        self.passes = _PassDumps(str(flag_values.get("xla_dump_hlo_pass_re", "")),
                                 str(flag_values.get("xla_dump_hlo_pipeline_re", "")), self.stages.write_text_stage)
        # Flush the last per-pass dump if the compilation dies before after_compilation().
        self._finalizer = weakref.finalize(self, _PassDumps.flush, self.passes)

    # ---- creation ---------------------------------------------------------------------
    @classmethod
    def create(cls, module: HloModule, flag_values: dict[str, Any], backend: str) -> ModuleDumper | None:
        """A dumper for ``module``, or None when the flags say not to dump it:
        ``--xla_dump_to`` unset, ``--xla_dump_hlo_module_re`` not matching the module
        name, or ``--xla_dump_max_hlo_modules`` module ids already in the folder."""
        dump_to = str(flag_values.get("xla_dump_to", ""))
        if not dump_to:
            return None
        module_re = str(flag_values.get("xla_dump_hlo_module_re", ""))
        if module_re:
            try:
                if not re.search(module_re, module.name):
                    return None
            except re.error as err:
                raise DumpError(f"--xla_dump_hlo_module_re={module_re} is not a regular expression: {err}") from None
        for name in ("xla_dump_hlo_pass_re", "xla_dump_hlo_pipeline_re"):
            _check_regex(name, str(flag_values.get(name, "")))
        directory = prepare_directory(dump_to)
        limit = int(flag_values.get("xla_dump_max_hlo_modules", -1))
        if directory is not None and limit >= 0 and len(known_module_ids(directory)) >= limit:
            warnings.warn(f"xla_teach dump: {dump_to} already holds {limit} or more modules "
                          f"(--xla_dump_max_hlo_modules={limit}); not dumping {module.name}", stacklevel=2)
            return None
        module_id = reserve_module_id(directory) if directory is not None else 0
        timestamp = int(time.time() * 1e6) if flag_values.get("xla_dump_include_timestamp") else None
        return cls(DumpWriter(directory, module.name, module_id, timestamp), module, flag_values, backend)

    @property
    def files(self) -> list[Path]:
        """Every file written so far, in order."""
        return self.writer.files

    @property
    def module_id(self) -> int:
        return self.writer.module_id

    # ---- the stages ---------------------------------------------------------------------
    def before_optimizations(self, module: HloModule) -> None:
        self.module = module
        self.stages.write_stage("before_optimizations", module)
        self.writer.write("debug_options", _debug_options_text(self.flag_values))

    def on_pass(self, record: PassRecord) -> None:
        """Pass listener: between-pass dumps when ``--xla_dump_hlo_pass_re`` matches."""
        self.passes.on_pass(record)

    def after_compilation(self, executable: Any) -> None:
        """The optimized module, its buffer assignment, LLVM IR, assembly or PTX; the executable
        keeps this dumper (``executable.dumper``) for the snapshots of its runs."""
        executable.dumper = self
        self.passes.flush("pipeline-end")
        artifacts = executable.artifacts
        optimized = executable.module
        arch = str(executable.arch or self.flag_values.get("xla_teach_gpu_arch", "") or "")
        target = re.search(r"^\s*\.target\s+(sm_\w+)", artifacts.ptx or "", flags=re.MULTILINE)
        if target:  # the PTX names the architecture it was compiled for
            arch = target.group(1)
        after = after_optimizations_name(self.backend, arch)
        self.stages.write_stage(after, optimized, top_level=True)
        if self.formats.text and artifacts.buffer_assignment_text:
            self.writer.write(f"{after}-buffer-assignment.txt", artifacts.buffer_assignment_text)
            assignment = executable.buffer_assignment
            if assignment is not None:
                from xla_teach.passes.scheduling import buffer_reports

                entry = assignment.entry
                self.writer.write(f"{after}-buffer-assignment-values.txt", buffer_reports.values_report(entry))
                self.writer.write(f"{after}-live-range.txt", buffer_reports.live_range_report(entry))
                self.writer.write(f"{after}-memory-usage-report.txt", buffer_reports.memory_usage_report(entry))
        for suffix, text in (("ir-no-opt.ll", artifacts.llvm_ir), ("ir-with-opt.ll", artifacts.optimized_llvm_ir),
                             ("s", artifacts.assembly), ("ptx", artifacts.ptx)):
            if text:
                self.writer.write(suffix, text)
        for name, text in (artifacts.extra or {}).items():
            if isinstance(text, str | bytes) and text:
                self.writer.write(name, text)
        if self.writer.directory is not None and bool(self.flag_values.get("xla_teach_dump_explorer", True)):
            from xla_teach.tools.explorer import explorer_html
            from xla_teach.tools.explorer.dump_index import module_summary, write_dump_index

            self.writer.write("explorer.html", explorer_html(executable))
            self.writer.write("summary.json", module_summary(self.module, executable, self.backend))
            write_dump_index(self.writer.directory)

    def snapshot(self, args: list[Any], outputs: list[Any]) -> Path | None:
        """Write ``module_XXXX.NAME.snapshot.N.npz`` (module, arguments, results) through
        :func:`xla_teach.tools.bugs.snapshot.save_snapshot`; N counts this module's runs.

        The module stored is the one given to the compiler (before optimizations), so
        replaying the snapshot recompiles it exactly as this run did. (XLA's
        ``.snapshot.N.pb`` from jaxlib holds the optimized module instead.)"""
        if self.writer.directory is None:
            return None  # a snapshot is binary: never printed to stdout
        from xla_teach.tools.bugs.snapshot import save_snapshot

        while True:
            suffix = SNAPSHOT_SUFFIX.format(n=self.snapshots_written)
            path = self.writer.path(suffix)
            self.snapshots_written += 1
            if path is not None and not path.exists():
                break
        save_snapshot(path, self.module, args, outputs, backend=self.backend)
        self.writer.files.append(path)
        return path

def _check_regex(flag: str, pattern: str) -> None:
    if not pattern:
        return
    try:
        re.compile(pattern)
    except re.error as err:
        raise DumpError(f"--{flag}={pattern} is not a regular expression: {err}") from None


subscribe("dump", ModuleDumper.create)  # every compile asks: dump this module? (backends/compile_listeners.py)
