"""Debug flags, spelled as XLA spells them, read from ``XLA_FLAGS`` or set from Python.

``XLA_FLAGS`` is a space-separated list of ``--name=value`` items, read when a
compilation needs its options (so changing the environment between compilations
works)::

    XLA_FLAGS="--xla_dump_to=/tmp/dump --xla_dump_hlo_pass_re=.*" python train.py

From Python::

    import xla_teach
    xla_teach.flags.set(xla_dump_to="/tmp/dump")          # process-wide
    with xla_teach.flags.override(xla_dump_hlo_as_dot=True):
        ...                                                # only inside the block
    xla_teach.flags.get("xla_dump_to")

An unknown or malformed flag raises :class:`FlagError` naming the closest known
flags -- the real XLA just aborts. xla_teach's own flags start with ``--xla_teach_``.
The table of flags in the docs is generated from :data:`FLAGS`.
"""

from __future__ import annotations

import contextlib
import difflib
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any


class FlagError(ValueError):
    """An unknown flag name or a value of the wrong type."""


@dataclass(frozen=True)
class Flag:
    name: str
    type: type
    default: Any
    help: str


def _f(name: str, type_: type, default: Any, help_: str) -> Flag:
    return Flag(name, type_, default, help_)


FLAGS: dict[str, Flag] = {f.name: f for f in [
    _f("xla_dump_to", str, "", "Directory for dump files ('-' = stdout). Files already there are never "
       "overwritten: module numbers continue after the highest present."),
    _f("xla_dump_hlo_as_text", bool, False, "Dump HLO as text (.txt); the default format when only "
       "--xla_dump_to is given."),
    _f("xla_dump_hlo_as_long_text", bool, True, "Text dumps use the long form (% names, signatures)."),
    _f("xla_dump_hlo_as_dot", bool, False, "Dump the HLO graph as Graphviz source (.dot)."),
    _f("xla_dump_hlo_as_html", bool, False, "Dump a self-contained HTML page with the graph rendered as SVG."),
    _f("xla_teach_dump_hlo_as_svg", bool, False, "xla_teach: also dump the graph as .svg (needs Graphviz's dot)."),
    _f("xla_dump_hlo_pass_re", str, "", "Also dump the module between passes whose name matches this regular "
       "expression; '.*' dumps after every pass that changed the module."),
    _f("xla_dump_hlo_pipeline_re", str, "", "Restrict per-pass dumps to pipelines whose name matches."),
    _f("xla_dump_hlo_module_re", str, "", "Only dump modules whose name matches this regular expression."),
    _f("xla_dump_include_timestamp", bool, False, "Prefix dump file names with a microsecond timestamp."),
    _f("xla_dump_max_hlo_modules", int, -1, "Stop dumping new modules once this many module ids are present "
       "in the dump directory (-1: no limit)."),
    _f("xla_dump_hlo_snapshots", bool, False, "Write a snapshot (module, arguments, results) on every execution."),
    _f("xla_dump_large_constants", bool, False, "Print constants with more than 10 elements in full."),
    _f("xla_dump_disable_metadata", bool, False, "Omit metadata={...} from dumped HLO text."),
    _f("xla_disable_hlo_passes", str, "",
       "Comma-separated pass names to skip; a sub-pipeline's name (simplification) skips all of it."),
    _f("xla_disable_all_hlo_passes", bool, False, "Skip every HLO pass (the module must already be runnable)."),
    _f("xla_backend_optimization_level", int, 3, "LLVM optimization level (0-3) of the CPU/GPU backends."),
    _f("xla_force_host_platform_device_count", int, 0, "How many CPU devices this process has (one thread each, "
       "collectives between them); 0: as many as a module's num_partitions x num_replicas asks for."),
    _f("xla_cpu_parallel_codegen_split_count", int, 32, "Split a large CPU LLVM module for parallel compilation "
       "(1: do not split). xla_teach compiles at most two parts at once: the second in a codegen worker process, "
       "since llvmlite runs one LLVM call at a time per process."),
    _f("xla_cpu_enable_fast_math", bool, False, "Accepted for compatibility; xla_teach never uses fast math."),
    _f("xla_cpu_multi_thread_eigen", bool, True, "Accepted for compatibility; the threads of BLAS calls follow "
       "OPENBLAS_NUM_THREADS (xla_teach_cpu_parallel splits generated kernels)."),
    _f("xla_gpu_cuda_data_dir", str, "", "Accepted for compatibility (xla_teach needs no CUDA SDK files)."),
    _f("xla_gpu_enable_command_buffer", str, "FUSION,CUBLAS,CUSTOM_CALL", "Kernels that may run as CUDA graphs "
       "(command buffers) instead of one launch each. Every xla_teach kernel is its own code, so any value turns "
       "graphs on; an empty value launches each kernel from the host."),
    _f("xla_gpu_graph_min_graph_size", int, 5, "The fewest kernels in a row that are captured into one CUDA graph."),
    _f("xla_teach_hlo_opt_level", int, 2, "xla_teach: HLO optimization level; 0 runs only the passes a backend "
       "needs (no simplification, no fusion)."),
    _f("xla_teach_debug", int, 0, "xla_teach: print stages while compiling: 1 passes run, 2 timings, 3 HLO "
       "after each changed pass, 4 LLVM IR/PTX, 5 assembly."),
    _f("xla_teach_cpu_parallel", bool, True, "xla_teach: split large CPU kernels across threads."),
    _f("xla_teach_flush_denormals", bool, True, "xla_teach: flush denormal floats to zero while the CPU backend "
       "runs (FTZ/DAZ, as XLA's CPU runtime always does) and in the interpreter; false keeps IEEE denormals."),
    _f("xla_teach_dump_explorer", bool, True, "xla_teach: with --xla_dump_to, also write each module's compile "
       "explorer (explorer.html) and the folder's index.html."),
    _f("xla_teach_gpu_arch", str, "", "xla_teach: GPU architecture to compile for (e.g. sm_90); default: the "
       "device's, or sm_80 without one."),
    _f("xla_teach_collective_timeout_seconds", int, 600, "xla_teach: how long a collective may wait for the "
       "other devices -- threads in this process, or processes under MPI -- before the run stops with a report "
       "of who did not arrive and where (0: forever)."),
    _f("xla_teach_gpu_tf32", bool, True, "xla_teach: let large f32 dots at default precision run on tensor cores "
       "in TF32 (10-bit mantissa inputs, f32 sums), as XLA's GPU compiler does; false keeps full f32."),
]}

_lock = threading.Lock()
_overrides: dict[str, Any] = {}
_local = threading.local()


def _suggest(name: str) -> str:
    close = difflib.get_close_matches(name, FLAGS, n=3, cutoff=0.5)
    return f" (did you mean {', '.join('--' + c for c in close)}?)" if close else ""


def parse_value(flag: Flag, text: str | None) -> Any:
    """Convert the text after ``=`` (None for a bare ``--flag``) to the flag's type."""
    if flag.type is bool:
        if text is None or text.lower() in ("true", "1", "yes"):
            return True
        if text.lower() in ("false", "0", "no"):
            return False
        raise FlagError(f"--{flag.name} takes true or false, not '{text}'")
    if text is None:
        raise FlagError(f"--{flag.name} needs a value (--{flag.name}=...)")
    if flag.type is int:
        try:
            return int(text)
        except ValueError:
            raise FlagError(f"--{flag.name} takes an integer, not '{text}'") from None
    return text


def parse_flag_string(text: str, where: str = "in XLA_FLAGS") -> dict[str, Any]:
    """Parse an ``XLA_FLAGS``-style string into ``{name: value}``; ``where`` says where the text
    came from in error messages (``"on the command line"``)."""
    values: dict[str, Any] = {}
    for item in text.split():
        if not item.startswith("--"):
            raise FlagError(f"flags start with '--': '{item}' {where}")
        name, sep, value = item[2:].partition("=")
        if name not in FLAGS:
            raise FlagError(f"unknown flag --{name} {where}{_suggest(name)}")
        values[name] = parse_value(FLAGS[name], value if sep else None)
    return values


def _check(name: str, value: Any) -> Any:
    if name not in FLAGS:
        raise FlagError(f"unknown flag '{name}'{_suggest(name)}")
    flag = FLAGS[name]
    if isinstance(value, str) and flag.type is not str:
        return parse_value(flag, value)
    if flag.type is bool and not isinstance(value, bool):
        raise FlagError(f"--{name} is a bool, got {value!r}")
    if flag.type is int and (not isinstance(value, int) or isinstance(value, bool)):
        raise FlagError(f"--{name} is an int, got {value!r}")
    if flag.type is str and not isinstance(value, str):
        raise FlagError(f"--{name} is a string, got {value!r}")
    return value


def current() -> dict[str, Any]:
    """Every flag's effective value: defaults < XLA_FLAGS < set() < override()."""
    values = {name: flag.default for name, flag in FLAGS.items()}
    values.update(parse_flag_string(os.environ.get("XLA_FLAGS", "")))
    with _lock:
        values.update(_overrides)
    for layer in getattr(_local, "stack", []):
        values.update(layer)
    return values


def get(name: str) -> Any:
    name = name.lstrip("-")
    if name not in FLAGS:
        raise FlagError(f"unknown flag '{name}'{_suggest(name)}")
    return current()[name]


def set(**values: Any) -> None:  # noqa: A001 - mirrors jax.config-style naming
    """Set flags for the whole process (until :func:`reset`)."""
    checked = {name: _check(name, value) for name, value in values.items()}
    with _lock:
        _overrides.update(checked)


def reset(*names: str) -> None:
    """Forget values given to :func:`set` (all of them without arguments)."""
    with _lock:
        if not names:
            _overrides.clear()
        for name in names:
            _overrides.pop(name, None)


@contextlib.contextmanager
def override(**values: Any) -> Iterator[None]:
    """Set flags inside a ``with`` block only (per thread)."""
    checked = {name: _check(name, value) for name, value in values.items()}
    stack = getattr(_local, "stack", None)
    if stack is None:
        stack = _local.stack = []
    stack.append(checked)
    try:
        yield
    finally:
        stack.pop()


def flags_table_markdown() -> str:
    """The reference table for the docs, generated from :data:`FLAGS`."""
    lines = ["| flag | type | default | meaning |", "|---|---|---|---|"]
    for flag in FLAGS.values():
        default = repr(flag.default) if flag.type is str else str(flag.default).lower() if flag.type is bool else (
            str(flag.default))
        lines.append(f"| `--{flag.name}` | {flag.type.__name__} | `{default}` | {flag.help} |")
    return "\n".join(lines)
