"""LLVM IR to PTX through llvmlite's NVPTX target.

The GPU backend emits one LLVM module with a ``ptx_kernel`` function per kernel,
optimizes it with LLVM's ``-O3`` pipeline for ``nvptx64-nvidia-cuda`` and asks
the NVPTX code generator for PTX text -- the "assembly" a CUDA driver
JIT-compiles (``cuModuleLoadData``) or ``ptxas`` assembles into a cubin.

PTX versions: the PTX ISA written must be one the consumer accepts. PTX 8.0
(CUDA 12.0+) covers sm_80 and sm_90 and is accepted by every driver and
``ptxas`` since, so it is the default.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path

import llvmlite.binding as llvm

TRIPLE = "nvptx64-nvidia-cuda"
DEFAULT_ARCH = "sm_80"
PTX_FEATURE = "+ptx80"
DATA_LAYOUT = "e-p6:32:32-i64:64-i128:128-v16:16-v32:32-n16:32:64"
_lock = threading.Lock()


@functools.cache
def _initialize() -> None:
    llvm.initialize_all_targets()
    llvm.initialize_all_asmprinters()


def normalize_arch(arch: str) -> str:
    """``"90"``, ``"sm90"``, ``"sm_90"`` -> ``"sm_90"``."""
    match = re.fullmatch(r"(?:sm_?)?(\d+)([a-z]?)", arch.strip())
    if not match:
        raise ValueError(f"GPU architecture '{arch}' is not of the form sm_80 / sm_90")
    return f"sm_{match.group(1)}{match.group(2)}"


def target_machine(arch: str, opt_level: int = 3) -> llvm.TargetMachine:
    _initialize()
    target = llvm.Target.from_triple(TRIPLE)
    return target.create_target_machine(cpu=normalize_arch(arch).rstrip("a"), features=PTX_FEATURE,
                                        opt=min(max(opt_level, 0), 3))


def compile_to_ptx(ir_text: str, arch: str, opt_level: int = 3) -> tuple[str, str]:
    """(optimized LLVM IR, PTX) for one module."""
    from xla_teach.backends.llvm.kernel_support import optimize_module

    tm = target_machine(arch, opt_level)
    with _lock:
        module = llvm.parse_assembly(ir_text)
        module.triple = TRIPLE
        module.verify()
        optimize_module(module, tm, opt_level)
        optimized = str(module)
        ptx = tm.emit_assembly(module)
    return optimized, canonicalize_narrow_integers(ptx)


def ptxas_path() -> str | None:
    """``ptxas`` from PATH, else the one in PyPI's ``nvidia-cuda-nvcc`` wheel (the ``test`` extra)."""
    found = shutil.which("ptxas")
    if found:
        return found
    try:
        import nvidia.cu13  # the namespace package of CUDA 13's PyPI wheels
    except ImportError:
        return None
    for root in nvidia.cu13.__path__:
        candidate = Path(root) / "bin" / "ptxas"
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return None


def assemble_with_ptxas(ptx: str, arch: str) -> tuple[bool, str]:
    """Run ``ptxas`` on ``ptx`` (returns success and its messages); needs ptxas on PATH."""
    tool = ptxas_path()
    if tool is None:
        raise FileNotFoundError("ptxas is not on PATH")
    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp) / "kernel.ptx"
        source.write_text(ptx)
        result = subprocess.run([tool, f"-arch={normalize_arch(arch)}", str(source), "-o",
                                 str(Path(tmp) / "kernel.cubin")], capture_output=True, text=True, timeout=120)
    return result.returncode == 0, (result.stdout + result.stderr).strip()


# ---- a ptxas workaround -------------------------------------------------------------------
# PTX has 16-bit integer registers, but the GPU computes in 32-bit ones. The CUDA 13.0 ptxas
# (and the driver's JIT) compiles ``neg.s16`` of -32768 to a 32-bit register holding +32768 --
# a value no 16-bit register can hold -- and later instructions that trust the register to be
# sign-extended (``cvt.s32.s16``, ``shr.s16``) then read 32768 where -32768 is meant: ``negate``
# of an s16 -32768 followed by a convert to s32, a shift right, or a bitcast to f16 gave wrong
# answers on an H200 (found by the hypothesis-generated modules run on the device). Each
# ``neg.s16`` is therefore rewritten into an equivalent that ptxas does not turn back into it.
_NEG16 = re.compile(r"^(\s*)(neg|abs)\.s16\s+(%\w+),\s*(%\w+);", re.MULTILINE)


def canonicalize_narrow_integers(ptx: str) -> str:
    """Rewrite every ``neg.s16`` (see above) so that its result is a proper 16-bit value."""
    variant = os.environ.get("XLA_TEACH_PTX_NEG16", "wide")

    def rewrite(match: re.Match[str]) -> str:
        indent, op, dest, source = match.groups()
        if variant == "none":
            return match.group(0)
        if op == "abs":
            return (f"{indent}{{ .reg .b32 %wide; cvt.s32.s16 %wide, {source}; abs.s32 %wide, %wide; "
                    f"cvt.u16.u32 {dest}, %wide; }}") if variant == "wide" else match.group(0)
        if variant == "not":
            return f"{indent}not.b16 {dest}, {source}; add.s16 {dest}, {dest}, 1;"
        if variant == "xor":
            return f"{indent}xor.b16 {dest}, {source}, 0xFFFF; add.s16 {dest}, {dest}, 1;"
        return (f"{indent}{{ .reg .b32 %wide; cvt.s32.s16 %wide, {source}; neg.s32 %wide, %wide; "
                f"cvt.u16.u32 {dest}, %wide; }}")

    return _NEG16.sub(rewrite, ptx)
