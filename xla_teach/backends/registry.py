"""Backends by name: ``"interpreter"``, ``"cpu"``, ``"gpu"``.

Each backend provides a compiler class with ``run_hlo_passes(module)`` (returns
the optimized module, recording every pass in ``compiler.recorder``) and
``run_backend(optimized)`` (returns an executable with ``execute(args)``).
"""

from __future__ import annotations

from typing import Any

BACKENDS = ("interpreter", "cpu", "gpu")
DEFAULT_BACKEND = "cpu"


# XLA's platform names (as run_hlo_module spells them) mean the same backends.
ALIASES = {"host": "cpu", "cuda": "gpu", "nvptx": "gpu", "reference": "interpreter"}


def compiler_for(backend: str, options: Any = None) -> Any:
    backend = backend.strip().lower() if isinstance(backend, str) else backend
    backend = ALIASES.get(backend, backend)
    if backend == "interpreter":
        from xla_teach.backends.interpreter import InterpreterCompiler

        return InterpreterCompiler(options)
    if backend == "cpu":
        from xla_teach.backends.cpu.compiler import CpuCompiler

        return CpuCompiler(options)
    if backend == "gpu":
        try:
            from xla_teach.backends.gpu.compiler import GpuCompiler
        except ImportError as err:  # pragma: no cover - until the GPU backend lands
            raise NotImplementedError(f"the GPU backend is not available: {err}") from None
        return GpuCompiler(options)
    raise ValueError(f"unknown backend '{backend}' (known: {', '.join(BACKENDS)})")
