"""What each backend is and can do, declared once: the table the driver and the tools read
instead of testing backend names.

    info = backend_info("cuda")      # XLA's platform names are aliases: -> the "gpu" entry
    info.generates_code, info.code_stages, info.devices

A backend's compiler and pipeline are named by import path, imported only when used, so this
table sits below every backend (``backends/registry.py`` builds the compilers from it).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class BackendInfo:
    name: str
    aliases: tuple[str, ...]  # XLA's platform names for it (run_hlo_module's --platform)
    compiler: str  # "module:Class"
    pipeline: str  # "module:function": a fresh copy of the HLO pipeline it runs
    generates_code: bool  # False: it runs HLO as it is (no LLVM IR, no assembly)
    code_stages: tuple[str, ...]  # the code it keeps, by Lowered.as_text stage name
    devices: str  # how a module for several devices runs: "simulated", "threads" or "one"
    device: str  # where its buffers live: "host" or "gpu"
    dump_prefix: str  # of the optimized module's dump name: "cpu_after_optimizations"...

    def make_compiler(self, options: Any = None) -> Any:
        return _load(self.compiler)(options)

    def make_pipeline(self) -> Any:
        return _load(self.pipeline)()


def _load(path: str) -> Any:
    module, _, name = path.partition(":")
    return getattr(importlib.import_module(module), name)


BACKENDS: dict[str, BackendInfo] = {info.name: info for info in (
    BackendInfo("interpreter", ("reference",), "xla_teach.backends.interpreter:InterpreterCompiler",
                "xla_teach.passes.pipeline:interpreter_pipeline", generates_code=False, code_stages=(),
                devices="simulated", device="host", dump_prefix=""),
    BackendInfo("cpu", ("host",), "xla_teach.backends.cpu.compiler:CpuCompiler",
                "xla_teach.backends.cpu.cpu_pipeline:cpu_pipeline", generates_code=True,
                code_stages=("llvm_ir", "optimized_llvm_ir", "asm"), devices="threads", device="host",
                dump_prefix="cpu"),
    BackendInfo("gpu", ("cuda", "nvptx"), "xla_teach.backends.gpu.compiler:GpuCompiler",
                "xla_teach.backends.gpu.gpu_pipeline:gpu_pipeline", generates_code=True, code_stages=("ptx",),
                devices="one", device="gpu", dump_prefix="gpu"),
)}
DEFAULT_BACKEND = "cpu"


class UnknownBackendError(ValueError):
    pass


def backend_info(name: str) -> BackendInfo:
    """The entry of ``name`` or of one of its aliases (any case); a clear error otherwise."""
    key = name.strip().lower() if isinstance(name, str) else name
    for info in BACKENDS.values():
        if key == info.name or key in info.aliases:
            return info
    raise UnknownBackendError(f"unknown backend '{name}' (known: {', '.join(BACKENDS)}; XLA's "
                              f"{', '.join(a for i in BACKENDS.values() for a in i.aliases)} are accepted too)")
