"""The compile driver every door goes through: ``jit``, ``execute``, the CLI tools.

:func:`compile_module` reads the flags, writes the dumps they ask for, runs the
backend's HLO passes (recording every stage) and its code generation, and
returns an executable. :func:`execute` compiles and runs in one call.

The debug ladder (``--xla_teach_debug=N`` or ``XLA_TEACH_DEBUG=N``) prints what
happened: 1 the passes that ran, 2 with timings, 3 the HLO after each pass that
changed it, 4 the LLVM IR / PTX, 5 the assembly.
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
import os
import sys
import warnings
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from xla_teach import flags
from xla_teach.backends.backend_info import backend_info
from xla_teach.backends.compile_listeners import listeners_for
from xla_teach.backends.options import CompileOptions
from xla_teach.backends.registry import DEFAULT_BACKEND, compiler_for
from xla_teach.hlo.errors import MissingConstantsError
from xla_teach.hlo.ir import HloModule
from xla_teach.passes.spmd.spmd_partitioner import needs_partitioning


def _debug_level(values: dict[str, Any]) -> int:
    env = os.environ.get("XLA_TEACH_DEBUG", "").strip()
    if env and not env.isdigit():
        raise flags.FlagError(f"XLA_TEACH_DEBUG takes a level 0..5 (1 passes, 2 timings, 3 HLO after each pass, "
                              f"4 LLVM IR / PTX, 5 assembly), not '{env}'")
    return max(int(values["xla_teach_debug"]), int(env) if env else 0)


def compile_module(module: HloModule | str, backend: str = DEFAULT_BACKEND,
                   options: CompileOptions | None = None) -> Any:
    """Compile ``module`` (an HloModule or HLO text) for ``backend``. A module whose constants
    were elided (``{...}``) raises :class:`~xla_teach.hlo.errors.MissingConstantsError`.

    Python's cyclic garbage collector is paused while the compiler runs. A compile allocates tens
    of thousands of short-lived objects, enough to trigger collections, and a collection scans
    every object of the caller's process: with JAX loaded, a few milliseconds of a 25 ms compile
    spent on other people's objects. What the compile leaves behind is collected afterwards."""
    with _garbage_collection_paused():
        return _compile_module(module, backend, options)


@contextlib.contextmanager
def _garbage_collection_paused() -> Iterator[None]:
    paused = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if paused:
            gc.enable()


def _compile_module(module: HloModule | str, backend: str, options: CompileOptions | None) -> Any:
    if isinstance(module, str):
        from xla_teach.hlo.text.parser import parse_hlo

        module = parse_hlo(module)
    if not isinstance(module, HloModule):
        raise ValueError(f"compile_module needs an HloModule or HLO text, got {type(module).__name__} "
                        "(to compile a Python function use xla_teach.jit)")
    elided = [f"{i.name} ({i.shape})" for c in module.computations for i in c.instructions
              if i.opcode == "constant" and i.attrs.get("literal_elided")]
    if elided:
        raise MissingConstantsError(module.name, elided)
    values = flags.current()
    options = options or CompileOptions.from_flags(values)
    compiler = compiler_for(backend, options)
    listeners = listeners_for(module, values, backend)  # the dumps, when the flags ask for them
    for listener in listeners.values():
        listener.before_optimizations(module)
        options.pass_options.listeners.append(listener.on_pass)
    optimized = compiler.run_hlo_passes(module)
    warn_unmatched_disabled_passes(options, compiler.recorder, backend)
    executable = compiler.run_backend(optimized)
    executable.recorder = compiler.recorder
    executable.compile_timings = dict(compiler.timings)
    for listener in listeners.values():  # (the dumper attaches itself: executable.dumper)
        listener.after_compilation(executable)
        options.pass_options.listeners.remove(listener.on_pass)
    _debug_print(_debug_level(values), executable)
    return executable


def warn_unmatched_disabled_passes(options: CompileOptions, recorder: Any, backend: str) -> None:
    """XLA ignores a misspelled ``--xla_disable_hlo_passes`` name silently, so a student who
    writes ``fusoin`` wonders why fusion still ran. Say so (a warning: XLA accepts it)."""
    ran = {record.pass_name for record in getattr(recorder, "records", [])}
    unmatched = sorted(options.pass_options.disabled_passes - ran)
    if ran and unmatched:
        names = ", ".join(repr(name) for name in unmatched)
        warnings.warn(f"--xla_disable_hlo_passes: no pass named {names} ran in the {backend} pipeline, so it "
                      f"disabled nothing (passes that ran: {', '.join(sorted(ran))})", UserWarning, stacklevel=3)


def execute(module: HloModule | str, args: Sequence[Any], backend: str = DEFAULT_BACKEND) -> list[np.ndarray]:
    """Run ``module`` on ``args`` (arrays in ENTRY parameter order); returns the ENTRY
    result's leaves. Wrong argument count, shapes or dtypes raise ``ValueError``.

    ``backend`` is ``"cpu"`` by default (compiled with LLVM for the host); pass
    ``"interpreter"`` for the reference semantics every backend is checked against.

    A module for several devices (``num_partitions`` or ``num_replicas`` > 1 in its header: a
    per-device SPMD program) takes and returns *global* arrays, as ``jax.jit`` does: its
    parameters' shardings split the arguments, the devices run it -- simulated by the
    interpreter, or on the CPU as one thread per device whose collectives meet in this process
    -- and the outputs are put back together
    (:func:`~xla_teach.hlo.evaluator.devices.run_global`)."""
    if isinstance(module, str):
        from xla_teach.hlo.text.parser import parse_hlo

        module = parse_hlo(module)
    if isinstance(module, HloModule) and module.device_count() > 1:
        return _execute_on_devices(module, list(args), backend)
    executable = compile_module(module, backend)
    outputs = executable.execute(list(args))
    dumper = executable.dumper
    if dumper is not None and flags.get("xla_dump_hlo_snapshots"):
        dumper.snapshot(list(args), outputs)
    return outputs


def _execute_on_devices(module: HloModule, args: list[Any], backend: str) -> list[np.ndarray]:
    devices = backend_info(backend).devices
    if devices == "one":
        raise ValueError(f"{module.name} runs on {module.device_count()} devices; the interpreter simulates several "
                         f"devices and the CPU runs them as threads, but the {backend} backend runs one")
    if devices == "threads" or needs_partitioning(module):
        # Compiling partitions a global program first (the pipeline's spmd-partitioning stage):
        # the devices run the per-device module, which splits the global arguments.
        executable = compile_module(module, backend)
        return run_on_devices(executable.module, executable if devices == "threads" else None, args, backend)
    return run_on_devices(module, None, args, backend)


def run_on_devices(module: HloModule, executable: Any, args: list[Any], backend: str,
                   keep_split: bool = False) -> list[Any]:
    """Run a compiled per-device ``module`` on global ``args``: one thread per device (CPU) or the
    interpreter's simulated devices; over MPI this process's device. Returns the global results,
    or with ``keep_split`` each result's pieces where they were computed. An argument may be
    :class:`~xla_teach.hlo.evaluator.devices.Pieces` already on the devices."""
    from xla_teach.hlo.evaluator.devices import run_devices, run_global
    from xla_teach.runtime import distributed

    count = module.device_count()
    if distributed.process_count() > 1:
        return _execute_over_mpi(module, args, backend, executable, keep_split)
    if backend_info(backend).devices == "simulated":
        return run_global(module, args, keep_split=keep_split)
    available = int(flags.get("xla_force_host_platform_device_count"))
    if available and available < count:
        raise ValueError(f"{module.name} runs on {count} devices, but --xla_force_host_platform_device_count="
                         f"{available} gives the CPU platform {available}")

    def run(per_device: list[list[np.ndarray]]) -> list[list[np.ndarray]]:
        return run_devices(count, lambda device: executable.execute(per_device[device.index]))

    return run_global(module, args, run=run, keep_split=keep_split)


def _execute_over_mpi(module: HloModule, args: list[Any], backend: str, executable: Any = None,
                      keep_split: bool = False) -> list[Any]:
    """This process runs its own device of ``module`` (``distributed.initialize()`` was called)."""
    from xla_teach.hlo.evaluator.core import HloEvaluator
    from xla_teach.hlo.evaluator.devices import Pieces, run_global
    from xla_teach.runtime import distributed

    count, processes = module.device_count(), distributed.process_count()
    shapes = ",".join(f"{a.dtype}{list(a.dims)}" if isinstance(a, Pieces)
                      else f"{np.asarray(a).dtype}{list(np.shape(a))}" for a in args)
    distributed.agree("program", lambda: hashlib.sha256(f"{module.to_text()}|{shapes}|{backend}".encode()).hexdigest(),
                      remember=(module, f"{shapes}|{backend}"))
    if processes != count:
        raise distributed.DistributedError(f"{module.name} runs on {count} devices, but mpiexec started {processes} "
                                           "processes (one per device)")
    distributed.agree("global arguments", lambda: _digest_of_global(args), remember=(module, f"values|{shapes}"),
                      hint="at the first run every process must pass the same global arrays; to feed each process "
                           "its own data use make_array_from_process_local_data")
    devices = backend_info(backend).devices
    if devices == "simulated":
        def one(device: Any, pieces: list[np.ndarray]) -> list[np.ndarray]:
            evaluator = HloEvaluator()
            evaluator.device = device
            return evaluator.evaluate_module(module, pieces)
    elif devices == "threads":
        executable = executable or compile_module(module, backend)

        def one(device: Any, pieces: list[np.ndarray]) -> list[np.ndarray]:
            return executable.execute(pieces)
    else:
        raise ValueError(f"{module.name}: over MPI each process runs the interpreter or the CPU, not {backend}")
    root = module.entry.root_instruction  # replicated outputs, and ones kept split, need not travel
    gather = None if root.sharding is None else [not s.is_replicated for s in (
        root.sharding.elements if root.sharding.is_tuple else [root.sharding])]
    if keep_split:
        gather = [False] * (len(root.shape.tuple_shapes) if root.shape.is_tuple else 1)
    return run_global(module, args, run=lambda per_device: distributed.run_here(
        lambda device: one(device, per_device[device.index]), gather), only=distributed.process_index(),
        keep_split=keep_split)


def _digest_of_global(args: list[Any]) -> str:
    """A hash of the arguments every process passes whole (not the pieces each feeds itself)."""
    from xla_teach.hlo.evaluator.devices import Pieces

    digest = hashlib.sha256()
    for a in args:
        if not isinstance(a, Pieces):
            digest.update(np.ascontiguousarray(a).view(np.uint8).reshape(-1).data)
    return digest.hexdigest()


def _debug_print(level: int, executable: Any) -> None:
    if level <= 0:
        return
    out = sys.stderr
    recorder = executable.recorder
    if recorder is not None:
        for record in recorder.records:
            line = f"[xla_teach] {record.pipeline}/{record.pass_name}: {'changed' if record.changed else 'no change'}"
            if level >= 2:
                line += f" ({record.seconds * 1e3:.2f} ms)"
            print(line, file=out)
            if level >= 3 and record.changed:
                print(record.after, file=out)
    artifacts = executable.artifacts
    if level >= 4:
        print(artifacts.llvm_ir or artifacts.ptx, file=out)
    if level >= 5:
        print(artifacts.assembly, file=out)
