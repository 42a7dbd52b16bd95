"""What the CPU and GPU compilers share: stage 1, the HLO passes.

A compiler has two stages, as XLA's ``Compiler`` does: ``run_hlo_passes(module)`` returns the
optimized module (recording every pass in ``self.recorder``), and ``run_backend(optimized)``
turns it into an executable. Subclasses say which pipeline stage 1 runs (``hlo_pipeline``) and
implement ``run_backend``; the options may add passes of the user's own to that pipeline
(``CompileOptions.extra_passes`` / ``pipeline_hook``, applied by :meth:`CompilerBase.pipeline`).
"""

from __future__ import annotations

import time

from xla_teach.backends.options import CompileOptions
from xla_teach.hlo.ir import HloModule
from xla_teach.passes.pass_base import HloPassPipeline, PassRecorder


class CompilerBase:
    platform = "unknown"
    schedules = True  # its code runs in a schedule (the interpreter's does not need one)

    def __init__(self, options: CompileOptions | None = None) -> None:
        self.options = options or CompileOptions()
        self.recorder = PassRecorder()
        self.timings: dict[str, float] = {}

    def hlo_pipeline(self) -> HloPassPipeline:
        """A fresh pipeline of the backend's own passes (subclasses build it)."""
        raise NotImplementedError

    def pipeline(self) -> HloPassPipeline:
        """What stage 1 runs: :meth:`hlo_pipeline` with the user's passes from the options
        (``extra_passes``, ``pipeline_hook``) inserted -- or the options' own ``pipeline``, which
        replaces it (the module is then scheduled afterwards if that pipeline did not)."""
        if self.options.pipeline is not None:
            return self.options.pipeline
        return self.options.customize_pipeline(self.hlo_pipeline())

    def run_hlo_passes(self, module: HloModule) -> HloModule:
        """A copy of ``module`` through the backend's pipeline (only scheduling when
        ``options.run_hlo_passes`` is off: the module is already optimized)."""
        start = time.perf_counter()
        optimized = module.clone()
        if self.options.run_hlo_passes:
            self.pipeline().run(optimized, self.options.pass_options, self.recorder)
            if self.options.pipeline is not None and self.schedules and not optimized.is_scheduled:
                from xla_teach.passes.scheduling.hlo_memory_scheduler import HloMemoryScheduler

                HloMemoryScheduler().run(optimized)
        else:
            from xla_teach.passes.scheduling.hlo_memory_scheduler import HloMemoryScheduler

            HloMemoryScheduler().run(optimized)
        self.timings["hlo_passes"] = time.perf_counter() - start
        return optimized

    def run_backend(self, optimized: HloModule):  # type: ignore[no-untyped-def]
        raise NotImplementedError

    def compile(self, module: HloModule):  # type: ignore[no-untyped-def]
        return self.run_backend(self.run_hlo_passes(module))
