"""Options of one compilation, filled from the flags (``XLA_FLAGS`` / ``xla_teach.flags``).

Two options let a student's own passes run inside a real compilation (``jit``,
``compile_module``, the CLI tools), on top of the backend's pipeline:

* ``extra_passes=[("before:fusion", MyPass())]`` -- each pass goes ``before:NAME`` or
  ``after:NAME`` (the first pass or sub-pipeline called NAME, searched outermost
  pipeline first, so ``before:fusion`` means before the whole fusion sub-pipeline),
  or ``"start"`` / ``"end"`` of the pipeline;
* ``pipeline_hook=fn`` -- ``fn(pipeline)`` may edit the backend's freshly built
  pipeline in any way (``pipeline.find("simplification").insert_after("algsimp", p)``).

The extra passes are inserted first, then the hook runs. Both apply to the backends
that run HLO passes (cpu, gpu); the interpreter runs the module as written.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from xla_teach.passes.pass_base import HloPass, HloPassPipeline, PassOptions

PipelineHook = Callable[[HloPassPipeline], None]


@dataclass
class CompileOptions:
    llvm_opt_level: int = 3  # --xla_backend_optimization_level
    pass_options: PassOptions = field(default_factory=PassOptions)
    keep_assembly: bool = True
    run_hlo_passes: bool = True  # False: the module is already optimized (run-hlo-module)
    cpu_parallel: bool = True
    split_codegen: bool = True  # --xla_cpu_parallel_codegen_split_count > 1: large modules in two processes
    flush_denormals: bool = True  # --xla_teach_flush_denormals: CPU runs and the interpreter, as XLA CPU
    gpu_arch: str = ""
    gpu_tf32: bool = True  # --xla_teach_gpu_tf32: large default-precision f32 dots on TF32 tensor cores
    gpu_graph_min_size: int = 5  # --xla_gpu_graph_min_graph_size; 0: no CUDA graphs (--xla_gpu_enable_command_buffer=)
    debug_level: int = 0
    extra_passes: Sequence[tuple[str, HloPass]] = ()  # (position, pass): "before:NAME", "after:NAME", ...
    pipeline_hook: PipelineHook | None = None  # edits the backend's pipeline before it runs
    pipeline: HloPassPipeline | None = None  # replaces the backend's HLO passes (bisect plants a broken pass)

    def customize_pipeline(self, pipeline: HloPassPipeline) -> HloPassPipeline:
        """Insert ``extra_passes`` into ``pipeline``, then call ``pipeline_hook`` on it."""
        for entry in self.extra_passes:
            if not (isinstance(entry, tuple) and len(entry) == 2 and isinstance(entry[0], str)
                    and isinstance(entry[1], HloPass)):
                raise ValueError("CompileOptions.extra_passes takes (position, pass) pairs such as "
                                 f"('before:fusion', MyPass()), got {entry!r:.80}")
            insert_pass(pipeline, *entry)
        if self.pipeline_hook is not None:
            self.pipeline_hook(pipeline)
        return pipeline

    @staticmethod
    def from_flags(values: dict[str, Any] | None = None) -> CompileOptions:
        from xla_teach import flags

        v = values if values is not None else flags.current()
        disabled = frozenset(p.strip() for p in str(v["xla_disable_hlo_passes"]).split(",") if p.strip())
        return CompileOptions(
            llvm_opt_level=int(v["xla_backend_optimization_level"]),
            pass_options=PassOptions(disabled_passes=disabled, disable_all=bool(v["xla_disable_all_hlo_passes"]),
                                     opt_level=int(v["xla_teach_hlo_opt_level"])),
            cpu_parallel=bool(v["xla_teach_cpu_parallel"]),
            split_codegen=int(v["xla_cpu_parallel_codegen_split_count"]) > 1,
            flush_denormals=bool(v["xla_teach_flush_denormals"]),
            gpu_arch=str(v["xla_teach_gpu_arch"]),
            gpu_tf32=bool(v["xla_teach_gpu_tf32"]),
            gpu_graph_min_size=int(v["xla_gpu_graph_min_graph_size"]) if str(v["xla_gpu_enable_command_buffer"]).strip()
            else 0,
            debug_level=int(v["xla_teach_debug"]),
        )


def insert_pass(pipeline: HloPassPipeline, position: str, p: HloPass) -> None:
    """Put ``p`` at ``position``: ``"start"``, ``"end"``, ``"before:NAME"`` or ``"after:NAME"``."""
    if position in ("start", "end"):
        pipeline.passes.insert(0 if position == "start" else len(pipeline.passes), p)
        return
    where, _, name = position.partition(":")
    if where not in ("before", "after") or not name:
        raise ValueError(f"extra_passes: position {position!r} must be 'start', 'end', 'before:NAME' or "
                         "'after:NAME'")
    owner = _owner_of(pipeline, name)
    if owner is None:
        raise ValueError(f"extra_passes: {position!r}: no pass named '{name}' in the {pipeline.name} pipeline; "
                         f"it runs:\n{pipeline.describe()}")
    if where == "before":
        owner.insert_before(name, p)
    else:
        owner.insert_after(name, p)


def _owner_of(pipeline: HloPassPipeline, name: str) -> HloPassPipeline | None:
    """The outermost (then first) pipeline that has a direct pass called ``name``."""
    level = [pipeline]
    while level:
        for candidate in level:
            if name in candidate.pass_names():
                return candidate
        level = [p for candidate in level for p in candidate.passes if isinstance(p, HloPassPipeline)]
    return None
