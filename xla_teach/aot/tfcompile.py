"""Ahead-of-time compilation to an object file and a C header (TensorFlow's ``tfcompile``).

::

    from xla_teach.aot import compile_aot
    result = compile_aot(module, "out/", entry_point="mlp")       # or an HLO file, or fn + example_args
    print(result.build_command)      # cc -O2 -o out/mlp_main out/mlp_main.c out/mlp.o -lm

writes ``out/mlp.o`` (machine code), ``out/mlp.h`` (one entry point with typed
buffers and their sizes) and ``out/mlp_main.c`` (an example program). The program
needs no Python and no xla_teach at run time.

How it is built, stage by stage:

1. the CPU backend's HLO passes (the normal pipeline, so fusion etc. happen);
2. every ``dot`` is switched to the ``loops`` (or ``elemental``) strategy: the JIT
   finds OpenBLAS inside NumPy at run time, an object file could not;
3. buffer assignment and the CPU IR emitter, as for the JIT -- one LLVM function per kernel;
4. :func:`~xla_teach.aot.entry_emitter.emit_entry_function` adds the C entry point
   that calls the kernels in schedule order (the job the Python thunk loop does
   for the JIT);
5. LLVM ``-O3`` and ``TargetMachine.emit_object`` (position-independent code).

**Restriction (documented choice):** ``while``, ``conditional``, ``call`` and
``custom-call`` run as Python host thunks in xla_teach's CPU runtime, so a module
that still has one of them in its ENTRY after optimization is refused with an
:class:`AotError` naming the instruction. Sort kernels call ``malloc``/``free`` and
a few math functions may become libm calls: the header lists the symbols, and the
build command links ``-lm``.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import llvmlite.binding as llvm
import numpy as np

from xla_teach.aot.entry_emitter import emit_entry_function
from xla_teach.aot.header import C_TYPES, BufferInfo, c_identifier, render_example_main, render_header
from xla_teach.backends.cpu.compiler import CpuCompiler
from xla_teach.backends.cpu.ir_emitter import CpuIrEmitter, HostPlan
from xla_teach.backends.cpu.jit import initialize_llvm
from xla_teach.backends.cpu.kernels.convolution import IM2COL_GEMM, conv_strategy
from xla_teach.backends.llvm.gemm import gemm_shape
from xla_teach.backends.llvm.kernel_support import optimize_module
from xla_teach.backends.options import CompileOptions
from xla_teach.hlo.backend_config import set_backend_config_field
from xla_teach.hlo.ir import HloModule
from xla_teach.hlo.types import PrimitiveType
from xla_teach.passes.scheduling.buffer_assignment import ModuleBufferAssignment


class AotError(ValueError):
    """The module cannot be compiled ahead of time (the message says which op and why)."""


# Reserved words of C (C11 and C23), which cannot name the entry point function.
C_KEYWORDS = frozenset("""auto break case char const continue default do double else enum extern float for goto if
inline int long register restrict return short signed sizeof static struct switch typedef union unsigned void
volatile while bool true false nullptr alignas alignof constexpr static_assert thread_local typeof typeof_unqual
_Alignas _Alignof _Atomic _Bool _Complex _Generic _Imaginary _Noreturn _Static_assert _Thread_local""".split())

@dataclass
class AotResult:
    entry_point: str
    object_path: Path
    header_path: Path
    main_path: Path | None
    args: list[BufferInfo]
    results: list[BufferInfo]
    temp_size: int
    external_symbols: list[str] = field(default_factory=list)
    optimized_module: HloModule | None = None

    @property
    def build_command(self) -> str:
        """How to build the example program with the system C compiler."""
        if self.main_path is None:
            return ""
        exe = self.main_path.with_suffix("")
        return f"cc -O2 -o {exe} {self.main_path} {self.object_path} -lm"


# ---- inputs -------------------------------------------------------------------------------
def load_module(source: HloModule | str | Path | Callable[..., Any],
                example_args: Sequence[Any] | None = None) -> HloModule:
    """An HloModule from a module, HLO text, an HLO file, or a jit-able function + example arguments."""
    if isinstance(source, HloModule):
        return source.clone()
    if callable(source):
        from xla_teach.frontend.jit import jit

        if example_args is None:
            raise AotError("compiling a function ahead of time needs example_args: arrays (or (shape, dtype) "
                           "pairs) giving the fixed signature")
        arrays = [np.zeros(a[0], dtype=a[1]) if isinstance(a, tuple) else np.asarray(a) for a in example_args]
        return jit(source).lower(*arrays).module
    from xla_teach.hlo.text.parser import parse_hlo

    text = str(source)
    if "\n" not in text and Path(text).exists():
        text = Path(text).read_text()
    return parse_hlo(text)


def _check_signature(module: HloModule) -> None:
    for param in module.entry.parameter_instructions:
        if not param.shape.is_array:
            raise AotError(f"parameter {param.name} has shape {param.shape.to_text()}; AOT entry points take "
                           "arrays only (flatten tuples into separate parameters)")
    root = module.entry.root
    leaves = root.shape.tuple_shapes if root.shape.is_tuple else [root.shape]
    if any(not s.is_array for s in leaves):
        raise AotError(f"the result {root.shape.to_text()} must be an array or a flat tuple of arrays")
    for shape in [p.shape for p in module.entry.parameter_instructions] + list(leaves):
        if shape.element_type not in C_TYPES:
            raise AotError(f"element type {shape.element_type.value} has no C type in the generated header")


# ---- compilation ------------------------------------------------------------------------------
def force_loop_dots(module: HloModule) -> int:
    """Switch every dot's ``dot_strategy`` away from ``blas`` and every convolution away from the
    runtime library's ``im2col_gemm`` (an object file has neither OpenBLAS nor this process's
    runtime library to call)."""
    changed = 0
    for instr in module.instructions():
        if instr.opcode == "convolution" and conv_strategy(instr) == IM2COL_GEMM:
            set_backend_config_field(instr, "conv_strategy", "elemental", replace_unreadable=True)
            changed += 1
        if instr.opcode != "dot":
            continue
        config = json.loads(instr.backend_config) if instr.backend_config else {}
        if config.get("dot_strategy", "blas") != "blas":
            continue
        gemm = gemm_shape(instr)
        narrow = instr.shape.element_type in (PrimitiveType.F16, PrimitiveType.BF16, PrimitiveType.PRED)
        config["dot_strategy"] = "loops" if gemm is not None and gemm.batch == 1 and not narrow else "elemental"
        instr.backend_config = json.dumps(config, separators=(",", ":"))
        changed += 1
    return changed


def _target_machine(target_cpu: str) -> llvm.TargetMachine:
    initialize_llvm()
    target = llvm.Target.from_default_triple()
    if target_cpu == "native":
        cpu, features = llvm.get_host_cpu_name(), llvm.get_host_cpu_features().flatten()
    else:
        cpu, features = target_cpu, ""
    # LLVM only prints "'x' is not a recognized processor" on stderr for an unknown CPU name, then
    # aborts the whole process later, while emitting code. Catch the message and stop cleanly.
    with _captured_stderr() as captured:
        machine = target.create_target_machine(cpu=cpu, features=features, opt=3, reloc="pic", codemodel="small")
    if "not a recognized processor" in captured.text():
        raise AotError(f"--target_cpu={target_cpu!r} is not a CPU LLVM knows for {target.triple} (use '' for a "
                       f"generic CPU, 'native' for this machine's ({llvm.get_host_cpu_name()}), or an LLVM name "
                       "such as 'x86-64-v3' or 'skylake')")
    return machine


class _StderrCapture:
    """What LLVM (C++, so file descriptor 2, not ``sys.stderr``) printed while captured."""

    def __init__(self) -> None:
        self.file = tempfile.TemporaryFile()

    def text(self) -> str:
        self.file.seek(0)
        return self.file.read().decode(errors="replace")


@contextlib.contextmanager
def _captured_stderr() -> Iterator[_StderrCapture]:
    capture = _StderrCapture()
    saved = os.dup(2)
    try:
        os.dup2(capture.file.fileno(), 2)
        yield capture
    finally:
        os.dup2(saved, 2)
        os.close(saved)


_TEMP_ENTRY = "__xla_teach_aot_entry"


def _object_code(ir_text: str, target_cpu: str, entry: str) -> tuple[bytes, list[str]]:
    """Machine code exporting only ``entry``: kernels become internal (so LLVM may inline
    them, and a kernel that happens to be called like the entry point cannot clash)."""
    tm = _target_machine(target_cpu)
    module = llvm.parse_assembly(ir_text)
    module.triple = tm.triple
    module.data_layout = str(tm.target_data)
    for fn in module.functions:
        if not fn.is_declaration and fn.name != _TEMP_ENTRY:
            fn.linkage = llvm.Linkage.internal
            if fn.name == entry:
                fn.name = f"{entry}.kernel"
    module.get_function(_TEMP_ENTRY).name = entry
    module.verify()
    optimize_module(module, tm, 3)
    symbols = sorted(f.name for f in module.functions if f.is_declaration and not f.name.startswith("llvm."))
    return tm.emit_object(module), symbols


def compile_aot(source: HloModule | str | Path | Callable[..., Any], out_dir: str | Path,
                entry_point: str | None = None, example_args: Sequence[Any] | None = None,
                target_cpu: str = "", emit_main: bool = True, overwrite: bool = False) -> AotResult:
    """Compile ``source`` for a fixed signature into ``<entry>.o``, ``<entry>.h`` (+ ``<entry>_main.c``).

    ``target_cpu``: ``""`` = a generic CPU of the host's architecture (portable, as tfcompile's
    default), ``"native"`` = this machine's CPU and features, or an LLVM CPU name.
    """
    module = load_module(source, example_args)
    _check_signature(module)
    entry = entry_point or re.sub(r"\W", "_", module.name)
    if not re.fullmatch(r"[A-Za-z_]\w*", entry) or entry in C_KEYWORDS:
        raise AotError(f"entry point {entry!r} is not a C identifier" + (" (it is a C keyword)" if entry in
                                                                          C_KEYWORDS else ""))
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise AotError(f"--out_dir={out} is a file, not a folder")
    paths = [out / f"{entry}.o", out / f"{entry}.h"] + ([out / f"{entry}_main.c"] if emit_main else [])
    existing = [str(p) for p in paths if p.exists()]
    if existing and not overwrite:
        raise FileExistsError(f"refusing to overwrite {', '.join(existing)} (pass overwrite=True / --overwrite)")

    compiler = CpuCompiler(CompileOptions.from_flags())
    optimized = compiler.run_hlo_passes(module)
    force_loop_dots(optimized)
    assignments = ModuleBufferAssignment(optimized)
    emitter = CpuIrEmitter(optimized, assignments)
    plan = emitter.emit_all()[optimized.entry.name]
    for step in plan.steps:
        if isinstance(step, HostPlan):
            instr = step.instruction
            raise AotError(f"cannot compile {module.name} ahead of time: %{instr.name} ({instr.opcode}) runs as a "
                           "Python host thunk in xla_teach's CPU runtime; AOT supports modules whose ENTRY is "
                           "straight-line kernels (unroll loops, or compute branches with select)")
    taken = {entry}
    args = [BufferInfo(c_identifier(p.name, f"arg{i}", taken), p.name, p.shape)
            for i, p in enumerate(optimized.entry.parameter_instructions)]
    root = optimized.entry.root
    results = [BufferInfo(c_identifier(f"result{n}", f"result{n}", taken), root.name,
                          root.shape.tuple_shapes[idx[0]] if idx else root.shape)
               for n, idx in enumerate(root.shape.leaf_indices())]
    emit_entry_function(emitter.llvm_module, _TEMP_ENTRY, plan)
    code, symbols = _object_code(str(emitter.llvm_module), target_cpu, entry)
    foreign = [s for s in symbols if "gemm" in s or s.startswith("xla_teach_")]
    if foreign:
        raise AotError(f"internal: the object still calls BLAS or the runtime library ({', '.join(foreign)})")

    out.mkdir(parents=True, exist_ok=True)
    paths[0].write_bytes(code)
    temp_size = plan.assignment.temp_bytes
    paths[1].write_text(render_header(entry, args, results, temp_size, module.name, symbols))
    main_path = None
    if emit_main:
        main_path = paths[2]
        main_path.write_text(render_example_main(entry, paths[1].name, args, results))
    return AotResult(entry, paths[0], paths[1], main_path, args, results, temp_size, symbols, optimized)
