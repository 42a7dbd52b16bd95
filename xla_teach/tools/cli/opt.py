"""``opt``: run HLO passes on a module and print any stage, like XLA's ``hlo-opt``.

Two ways to pick the passes:

* ``--passes=dce,fusion`` runs just those passes, in that order (names as in dumps);
* no ``--passes``: the platform's whole pipeline (``--list-passes`` shows it).

and one way to pick what is printed, ``--stage``:

============================  ============================================================
``hlo``                       the HLO after the passes (default)
``buffer-assignment``         the buffer assignment (allocations, offsets, live values)
``llvm_ir``                   LLVM IR as emitted (XLA: ``llvm-before-optimizations``)
``optimized_llvm_ir``         LLVM IR after ``-O3`` (XLA: ``llvm``, ``llvm-after-optimizations``)
``asm``                       the machine code (CPU)
``ptx``                       the PTX (GPU; needs no GPU)
``pass-summary``              xla_teach: one line per pass run, with instruction counts and time,
                              followed by the pass's notes (fusion's reasons for each refusal)
============================  ============================================================
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

from xla_teach.hlo.ir import HloModule
from xla_teach.passes.pass_base import HloPass, HloPassPipeline
from xla_teach.tools.tool_support import ToolError, backend_pipeline, compile_on, normalize_platform

# stage -> (CompiledArtifacts attribute, description); aliases map XLA's names onto ours.
STAGES: dict[str, tuple[str, str]] = {
    "hlo": ("", "HLO after the passes"),
    "buffer-assignment": ("buffer_assignment_text", "buffer assignment"),
    "llvm_ir": ("llvm_ir", "LLVM IR before LLVM's optimizations"),
    "optimized_llvm_ir": ("optimized_llvm_ir", "LLVM IR after LLVM's optimizations"),
    "asm": ("assembly", "machine code (CPU)"),
    "ptx": ("ptx", "PTX (GPU)"),
    "pass-summary": ("", "one line per pass run, with its notes"),
}
STAGE_ALIASES = {"llvm-before-optimizations": "llvm_ir", "llvm": "optimized_llvm_ir",
                 "llvm-after-optimizations": "optimized_llvm_ir", "hlo-backend": "hlo", "assembly": "asm"}


@dataclass
class PassInfo:
    name: str
    pipeline: str  # the pipeline that holds it in the platform's pipeline
    doc: str


def _leaf_passes(pipeline: HloPassPipeline) -> list[tuple[HloPass, str]]:
    found: list[tuple[HloPass, str]] = []
    for p in pipeline.passes:
        if isinstance(p, HloPassPipeline):
            found += _leaf_passes(p)
        else:
            found.append((p, pipeline.name))
    return found


def list_passes(platform: str = "cpu") -> list[PassInfo]:
    """Every pass of the platform's pipeline, in pipeline order, each name once."""
    seen: dict[str, PassInfo] = {}
    for p, parent in _leaf_passes(backend_pipeline(platform)):
        if p.name not in seen:
            doc = (type(p).__doc__ or sys.modules[type(p).__module__].__doc__ or "").strip()
            seen[p.name] = PassInfo(p.name, parent, doc.splitlines()[0] if doc else "")
    return list(seen.values())


def passes_by_name(names: list[str], platform: str = "cpu") -> HloPassPipeline:
    """A pipeline ``opt`` of fresh instances of the named passes (or sub-pipelines), in order."""
    pipeline = HloPassPipeline("opt", [])
    for name in names:
        source = backend_pipeline(platform)  # fresh instances, so passes never share state
        found = next((p for p, _ in _leaf_passes(source) if p.name == name), None) or source.find(name)
        if found is None:
            known = ", ".join(info.name for info in list_passes(platform))
            raise ToolError(f"unknown pass '{name}' for platform {normalize_platform(platform)} (known: {known})")
        pipeline.add_pass(found)
    return pipeline


def normalize_stage(stage: str) -> str:
    stage = STAGE_ALIASES.get(stage, stage)
    if stage not in STAGES:
        raise ToolError(f"unknown --stage '{stage}' (known: {', '.join(STAGES)}; XLA's "
                        f"{', '.join(STAGE_ALIASES)} are accepted too)")
    return stage


def run_opt(module: HloModule, platform: str = "cpu", passes: list[str] | None = None, stage: str = "hlo") -> str:
    """Run the passes (named ones, or the platform's pipeline) and return ``stage``'s text."""
    from xla_teach.api import warn_unmatched_disabled_passes
    from xla_teach.backends.options import CompileOptions
    from xla_teach.backends.registry import compiler_for

    platform = normalize_platform(platform)
    stage = normalize_stage(stage)
    pipeline = passes_by_name(passes, platform) if passes else None
    if stage in ("hlo", "pass-summary"):
        if pipeline is not None:
            optimized = module.clone()
            compiler = compiler_for(platform, CompileOptions.from_flags())
            pipeline.run(optimized, compiler.options.pass_options, compiler.recorder)
        else:
            compiler = compiler_for(platform, CompileOptions.from_flags())
            optimized = compiler.run_hlo_passes(module)
        warn_unmatched_disabled_passes(compiler.options, compiler.recorder, platform)
        if stage == "pass-summary":
            return compiler.recorder.table(notes=True) or "(no passes ran)"
        return optimized.to_text()
    executable = compile_on(module, platform, pipeline)
    text = getattr(executable.artifacts, STAGES[stage][0], "")
    if not text:
        raise ToolError(f"platform {platform} has no stage {stage} ({STAGES[stage][1]}); "
                        f"try --platform={'gpu' if stage == 'ptx' else 'cpu'}")
    return text
