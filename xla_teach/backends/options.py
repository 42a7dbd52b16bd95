"""Options of one compilation, filled from the flags (``XLA_FLAGS`` / ``xla_teach.flags``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from xla_teach.passes.pass_base import PassOptions


@dataclass
class CompileOptions:
    llvm_opt_level: int = 3  # --xla_backend_optimization_level
    pass_options: PassOptions = field(default_factory=PassOptions)
    keep_assembly: bool = True
    run_hlo_passes: bool = True  # False: the module is already optimized (run-hlo-module)
    cpu_parallel: bool = True
    gpu_arch: str = ""
    debug_level: int = 0

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
            gpu_arch=str(v["xla_teach_gpu_arch"]),
            debug_level=int(v["xla_teach_debug"]),
        )
