"""Stage introspection: ``jit(f).lower(*args)`` -> :class:`Lowered` -> ``.compile()`` -> :class:`Compiled`.

Every stage of the compiler can be looked at as text, with the names XLA's dump
files and JAX's ``Lowered.as_text`` use:

==========================  ===================================================
stage                       what it is
==========================  ===================================================
``"hlo"``                   the traced module, before any pass
``"optimized_hlo"``         after the backend's HLO passes (fusion, scheduling...)
``"optimized_hlo_dot"``     the optimized module as a Graphviz graph
``"buffer_assignment"``     which buffer every value lives in
``"llvm_ir"``               the LLVM IR the CPU/GPU emitter produced
``"optimized_llvm_ir"``     the same after LLVM's optimization passes
``"asm"``                   the machine code (CPU assembly)
``"ptx"``                   the GPU kernel code
==========================  ===================================================
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from xla_teach.hlo.ir import HloModule
from xla_teach.hlo.opcodes import BUFFER_NAMING_OPCODES
from xla_teach.hlo.shape import Shape

_ARTIFACT_OF_STAGE = {
    "llvm_ir": "llvm_ir",
    "optimized_llvm_ir": "optimized_llvm_ir",
    "asm": "assembly",
    "ptx": "ptx",
    "buffer_assignment": "buffer_assignment_text",
}
STAGES = ("hlo", "optimized_hlo", "optimized_hlo_dot", *_ARTIFACT_OF_STAGE)


def _normalize_stage(stage: str) -> str:
    name = stage.replace("-", "_").lower()
    if name not in STAGES:
        raise ValueError(f"unknown stage {stage!r}; known stages: {', '.join(STAGES)}")
    return name


class Lowered:
    """A traced function as an HLO module (not yet optimized or compiled)."""

    def __init__(self, module: HloModule, backend: str, compile_fn: Callable[[], Any]) -> None:
        self.module = module
        self.backend = backend
        self._compile_fn = compile_fn

    def as_text(self, stage: str = "hlo", **print_options: Any) -> str:
        """The module as HLO text (``"hlo"``), or a later stage (compiles first). For the HLO
        stages, ``print_options`` are the printer's (``print_metadata=False``,
        ``short_metadata=True``: the source file's name without its folder)."""
        if _normalize_stage(stage) == "hlo":
            return self.module.to_text(**print_options)
        return self.compile().as_text(stage, **print_options)

    def compile(self) -> Compiled:
        return self._compile_fn()

    def __str__(self) -> str:
        return self.as_text()


class Compiled:
    """A compiled executable with its stage record; callable like the jitted function."""

    def __init__(self, executable: Any, call: Callable[..., Any]) -> None:
        self.executable = executable
        self._call = call

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._call(*args, **kwargs)

    @property
    def backend(self) -> str:
        return str(self.executable.backend)

    def as_text(self, stage: str = "optimized_hlo", **print_options: Any) -> str:
        name = _normalize_stage(stage)
        artifacts = self.executable.artifacts
        if name == "hlo":
            raise ValueError("the unoptimized module is Lowered.as_text('hlo'); a Compiled holds the optimized one")
        if print_options and name != "optimized_hlo":
            raise ValueError(f"print options ({', '.join(print_options)}) apply to the HLO stages, not to '{stage}'")
        if name == "optimized_hlo":
            return artifacts.optimized_module.to_text(**print_options)
        if name == "optimized_hlo_dot":
            try:
                from xla_teach.tools.render import hlo_to_dot
            except ImportError:
                raise NotImplementedError("stage 'optimized_hlo_dot' needs the Graphviz exporter "
                                          "(xla_teach.tools.render), which has not landed yet") from None
            return str(hlo_to_dot(artifacts.optimized_module))
        text = getattr(artifacts, _ARTIFACT_OF_STAGE[name], "") or artifacts.extra.get(name, "")
        if not text:
            raise NotImplementedError(f"stage {stage!r} is not produced by the {self.backend!r} backend "
                                      f"({_why_missing(name, self.backend)})")
        return str(text)

    def explore(self, path: str | None = None, profile_runs: int = 0, compare: Compiled | None = None) -> Any:
        """The compile explorer of this executable: every pass, the graph, source lines, kernels and
        buffers on one offline page, written to ``path`` (default: a new temporary file). In Jupyter
        the returned page shows inline; ``.path`` is the file to open in a browser.
        ``profile_runs=N`` also times N runs on fake arguments (after warm-up) for its profile view.
        ``compare=other`` writes instead the page of this compile (A) and ``other`` (B) side by side:
        the two modules with their instructions mapped, the passes and fusions that differ, memory
        and time (``profile_runs`` timed runs of each, 0: compile figures only)."""
        from xla_teach.api import compile_module
        from xla_teach.tools.explorer import compare_page, explore

        if compare is not None:
            return compare_page(self.executable, compare.executable, path, profile_runs)
        return explore(self.executable, path, profile_runs=profile_runs, compile=compile_module)

    def pass_records(self) -> list[Any]:
        """One :class:`~xla_teach.passes.pass_base.PassRecord` per pass run (module before/after, timing)."""
        recorder = self.executable.recorder
        return list(recorder.records) if recorder is not None else []

    def compile_timings(self) -> dict[str, float]:
        return dict(self.executable.compile_timings)

    def cost_analysis(self) -> dict[str, float]:
        """XLA's HloCostAnalysis summary of the optimized module: ``flops``,
        ``transcendentals`` and ``bytes accessed`` (see :mod:`xla_teach.hlo.analysis.cost`)."""
        from xla_teach.hlo.analysis.cost import cost_analysis

        return cost_analysis(self.executable.artifacts.optimized_module)

    def memory_analysis(self) -> MemoryAnalysis:
        """Bytes of arguments, outputs, temporaries and constants of the optimized module.

        On backends with a buffer assignment (cpu, gpu) the temporaries are its arenas (one per
        sequential computation: the entry, loop bodies, branches), the alias size is the
        outputs written into donated arguments, and the peak is the entry's peak live bytes
        over the schedule. The interpreter has none: temp and peak are upper bounds (every
        non-root ENTRY value in a buffer of its own, all at once)."""
        module = self.executable.artifacts.optimized_module
        args = sum(_bytes(p.shape) for p in module.entry.parameter_instructions)
        out = _bytes(module.entry.root.shape)
        naive = sum(_bytes(i.shape) for i in module.entry.instructions
                    if i.opcode not in BUFFER_NAMING_OPCODES
                    and not i.is_root())
        consts = sum(_bytes(i.shape) for c in module.computations for i in c.instructions if i.opcode == "constant")
        assignment = self.executable.buffer_assignment
        if assignment is None:
            return MemoryAnalysis(argument_size_in_bytes=args, output_size_in_bytes=out,
                                  temp_size_upper_bound_in_bytes=naive, generated_code_size_in_bytes=0,
                                  constant_size_in_bytes=consts, temp_size_in_bytes=naive,
                                  peak_memory_in_bytes=args + out + naive + consts)
        return MemoryAnalysis(argument_size_in_bytes=args, output_size_in_bytes=out,
                              temp_size_upper_bound_in_bytes=naive, generated_code_size_in_bytes=0,
                              constant_size_in_bytes=consts, temp_size_in_bytes=assignment.temp_bytes(),
                              alias_size_in_bytes=assignment.entry.alias_bytes(),
                              peak_memory_in_bytes=assignment.peak_bytes(), from_buffer_assignment=True)


@dataclass(frozen=True)
class MemoryAnalysis:
    """Sizes in bytes (names as in JAX's ``CompiledMemoryStats``).

    ``output_size_in_bytes`` counts every output, including those written into donated
    arguments (``alias_size_in_bytes`` of them), so the memory a run needs is at most
    ``argument + output - alias + temp``. ``temp_size_in_bytes`` is buffer assignment's arena
    (with reuse) where there is one, and ``temp_size_upper_bound_in_bytes`` always the naive
    figure: every non-root ENTRY value in its own buffer."""

    argument_size_in_bytes: int
    output_size_in_bytes: int
    temp_size_upper_bound_in_bytes: int
    generated_code_size_in_bytes: int
    constant_size_in_bytes: int
    temp_size_in_bytes: int = 0
    alias_size_in_bytes: int = 0
    peak_memory_in_bytes: int = 0
    from_buffer_assignment: bool = False  # False: temp and peak are upper bounds (interpreter)


def _bytes(shape: Shape) -> int:
    if shape.is_tuple:
        return sum(_bytes(s) for s in shape.tuple_shapes)
    if not shape.element_type.is_array_type:
        return 0
    return int(np.prod(shape.dimensions, dtype=np.int64)) * shape.element_type.byte_size


def _why_missing(stage: str, backend: str) -> str:
    from xla_teach.backends.backend_info import BACKENDS, backend_info

    info = backend_info(backend)
    if not info.generates_code:
        return f"the {info.name} runs HLO directly: there is no code generation; use backend='cpu'"
    keepers = [i.name for i in BACKENDS.values() if stage in i.code_stages]
    if keepers:
        return f"the {info.name} backend records its code as {', '.join(repr(s) for s in info.code_stages)}; " \
               f"'{stage}' is kept by backend={keepers[0]!r}"
    return "this backend did not record it"
