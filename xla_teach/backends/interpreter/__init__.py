"""The ``"interpreter"`` backend: the reference evaluator behind the common Executable API.

Like XLA's Interpreter platform it is the oracle: no HLO passes change the module
(its semantics are the definition of "right"), every op runs with NumPy.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from xla_teach.backends.compiler_base import CompilerBase
from xla_teach.hlo.evaluator import HloEvaluator
from xla_teach.hlo.evaluator.arguments import check_arguments
from xla_teach.hlo.ir import HloModule
from xla_teach.hlo.verifier import verify_module
from xla_teach.passes.pipeline import spmd_partitioning
from xla_teach.passes.spmd.spmd_partitioner import needs_partitioning
from xla_teach.runtime.executable import CompiledArtifacts, CompiledExecutable
from xla_teach.runtime.thunks import Profiler


class InterpreterExecutable(CompiledExecutable):
    backend = "interpreter"

    def __init__(self, module: HloModule, flush_denormals: bool = True) -> None:
        self.module = module
        self.flush_denormals = flush_denormals  # as XLA's CPU runtime (--xla_teach_flush_denormals)
        self.artifacts = CompiledArtifacts(optimized_module=module)
        self.keep_alive = None

    def execute(self, args: Sequence[np.ndarray], profiler: Profiler | None = None) -> list[np.ndarray]:
        import time

        values = check_arguments(self.module.entry, args)
        start = time.perf_counter()
        result = HloEvaluator(flush_denormals=self.flush_denormals).evaluate_computation(self.module.entry, values)
        if profiler is not None:
            profiler.record(self.module.entry.name, "interpreter", start, time.perf_counter(), 0)
        return _flatten(result)


def _flatten(value: object) -> list[np.ndarray]:
    if isinstance(value, tuple):
        return [leaf for element in value for leaf in _flatten(element)]
    return [value]  # type: ignore[list-item]


class InterpreterCompiler(CompilerBase):
    """Runs the module as written: no passes (the reference must not depend on them)."""

    platform = "interpreter"
    schedules = False

    def run_hlo_passes(self, module: HloModule) -> HloModule:
        """The module as written -- or through ``options.pipeline`` when one is given (a tool
        running passes of its choice before interpreting, as ``bisect`` does)."""
        verify_module(module)
        if self.options.pipeline is not None:
            return super().run_hlo_passes(module)
        optimized = module.clone()
        if needs_partitioning(optimized):  # the one pass it runs: JAX's global program made per-device
            spmd_partitioning().run(optimized, self.options.pass_options, self.recorder)
        return optimized

    def run_backend(self, optimized: HloModule) -> InterpreterExecutable:
        return InterpreterExecutable(optimized, self.options.flush_denormals)

