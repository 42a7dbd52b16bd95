"""Backends by name: ``"interpreter"``, ``"cpu"``, ``"gpu"`` (and XLA's platform names for them).

What each backend is -- its compiler, its pipeline, what code it keeps, how it runs several
devices -- is declared once in :mod:`xla_teach.backends.backend_info`. Each compiler has
``run_hlo_passes(module)`` (returns the optimized module, recording every pass in
``compiler.recorder``) and ``run_backend(optimized)`` (returns an executable with
``execute(args)``).
"""

from __future__ import annotations

from typing import Any

from xla_teach.backends.backend_info import BACKENDS as _TABLE
from xla_teach.backends.backend_info import DEFAULT_BACKEND, backend_info

BACKENDS = tuple(_TABLE)
ALIASES = {alias: info.name for info in _TABLE.values() for alias in info.aliases}


def compiler_for(backend: str, options: Any = None) -> Any:
    """A compiler of ``backend`` (a name or an alias) with these options."""
    return backend_info(backend).make_compiler(options)


__all__ = ["ALIASES", "BACKENDS", "DEFAULT_BACKEND", "compiler_for"]
