"""``xla-teach``: XLA's debugging tools as one command with subcommands.

=================  ===========================  ==========================================
subcommand         XLA tool it mirrors          what it does
=================  ===========================  ==========================================
``replay``         ``replay_computation``       rerun a dumped module or snapshot, timed
``run-hlo-module`` ``run_hlo_module``           compare a platform with the interpreter
``opt``            ``hlo-opt``                  run passes, print HLO / LLVM IR / asm / PTX
``bisect``         ``hlo_bisect`` + more        find the pass that broke a program; shrink it
``timeline``       (profiler + trace viewer)    Chrome trace of every thunk, per run
``flags``          (``--helpfull``)             the table of ``--xla_*`` flags
=================  ===========================  ==========================================

Option names are XLA's where XLA has them (``--use_fake_data``, ``--num_runs``,
``--abs_error_bound``...). Every subcommand also accepts ``--xla_*`` flags (the
same as in ``XLA_FLAGS``), e.g. ``xla-teach opt m.hlo --xla_disable_hlo_passes=fusion``.

Adding a subcommand: write ``configure(parser)`` and ``run(args) -> exit code`` and call
:func:`~xla_teach.tools.cli.registry.register` (see the bottom of this file); a new module of
subcommands is imported at the top of this file. Errors a user can fix are one
line on stderr and exit code 2; a detected miscompile is exit code 1.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

# The other modules' subcommands register themselves when imported: this is the full list.
import xla_teach.aot.cli  # noqa: F401 - `aot`
import xla_teach.exercises.cli  # noqa: F401 - `grade`
import xla_teach.tools.cli.extra  # noqa: F401 - `render`, `explore`, `diff`, `demo`
from xla_teach.tools.cli.registry import SUBCOMMANDS, add_bool, register, rewrite_bools

if TYPE_CHECKING:
    from xla_teach.hlo.ir import HloModule
    from xla_teach.tools.tool_support import HloInput

PROG = "xla-teach"
# How `xla-teach --help` lists them: XLA's tools first.
HELP_ORDER = ("replay", "run-hlo-module", "opt", "bisect", "timeline", "flags", "explore", "diff", "render", "demo",
              "aot", "grade", "kit")


def add_platform(parser: argparse.ArgumentParser, default: str = "cpu", *aliases: str) -> None:
    parser.add_argument("--platform", *aliases, default=default,
                        help=f"cpu, gpu or interpreter (XLA's Host/CUDA/Interpreter work too; default {default})")


def add_inputs(parser: argparse.ArgumentParser) -> None:
    add_bool(parser, "--use_fake_data", False, "run on random arguments instead of a snapshot's")
    parser.add_argument("--input_literals_file", default="", metavar="NPZ",
                        help="arguments from a .npz with keys arg0..argN-1 (bf16 as uint16 bits)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the fake data (default 0)")


def add_injection(parser: argparse.ArgumentParser) -> None:
    from xla_teach.tools.bugs.bisect import BROKEN_PASSES

    parser.add_argument("--inject-bug", dest="inject_bug", default="", metavar="PASS",
                        help=f"TEST HOOK: plant a deliberately broken pass ({', '.join(BROKEN_PASSES)})")
    parser.add_argument("--inject-after", dest="inject_after", default="fusion", metavar="NAME",
                        help="the pass or pipeline after which the broken pass runs (default fusion)")


def pipeline_factory(args: argparse.Namespace, platform: str) -> Callable[[], object] | None:
    """None (the platform's own passes), or a maker of its pipeline with the planted pass."""
    if not getattr(args, "inject_bug", ""):
        return None
    from xla_teach.tools.bugs.bisect import inject_pass
    from xla_teach.tools.tool_support import backend_pipeline

    inject_pass(backend_pipeline(platform), args.inject_bug, args.inject_after)  # fail early on bad names
    return lambda: inject_pass(backend_pipeline(platform), args.inject_bug, args.inject_after)


def progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# ---- replay ---------------------------------------------------------------------------------
def _configure_replay(p: argparse.ArgumentParser) -> None:
    p.add_argument("files", nargs="+", metavar="FILE", help="HLO text (.txt/.hlo, also real XLA dumps) or "
                   "snapshot (.npz from --xla_dump_hlo_snapshots)")
    add_platform(p)
    add_inputs(p)
    p.add_argument("--num_runs", type=int, default=1, help="run N times, print the last (< 1: compile only)")
    add_bool(p, "--print_result", True, "print the results")
    add_bool(p, "--compile_only", False, "compile, do not run")
    add_devices(p)


def add_devices(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--num_partitions", type=int, default=None, metavar="N",
                        help="run the module on N devices (default: the module's num_partitions, or 1): a global "
                             "program with sharding annotations is partitioned first, as XLA does; a partitioned "
                             "(per-device) one runs on each device with fake inputs of its own. The interpreter "
                             "simulates the devices, the CPU runs a thread per device")
    parser.add_argument("--num_replicas", type=int, default=None, metavar="N", help="the same, for replicas")


def apply_num_partitions(a: argparse.Namespace, module: HloModule) -> None:
    """``--num_partitions`` stands in for a header that does not say how many devices (JAX's
    lowered text): it is written into the module's header."""
    if a.num_partitions and "num_partitions" not in module.header_attributes:
        module.header_attributes["num_partitions"] = str(a.num_partitions)


def run_if_several_devices(a: argparse.Namespace, loaded: HloInput, print_literals: bool) -> bool:
    """Run ``loaded``'s module on several devices when it (or --num_partitions/--num_replicas)
    asks for more than one; True if it did. A global program runs on its global arguments (a
    literals file, the snapshot's, or fake ones), partitioned; a per-device program on fake
    arguments per device. The interpreter simulates the devices and the CPU runs one thread per
    device; the GPU runs one: say so."""
    from xla_teach.backends.backend_info import backend_info
    from xla_teach.passes.spmd.spmd_partitioner import needs_partitioning
    from xla_teach.tools.cli.run_hlo_module import run_global_program, run_on_devices
    from xla_teach.tools.tool_support import ToolError, arguments_for, normalize_platform

    module = loaded.module
    apply_num_partitions(a, module)
    header = module.header_attributes
    devices = max(a.num_partitions or int(header.get("num_partitions", "1")),
                  a.num_replicas or int(header.get("num_replicas", "1")))
    if devices <= 1:
        return False
    platform = normalize_platform(a.platform)
    if backend_info(platform).devices == "one":
        raise ToolError(f"this module runs on {devices} devices; the interpreter simulates several devices and "
                        f"the CPU runs them as threads (--platform=interpreter or cpu); {platform} runs one")
    if needs_partitioning(module):
        given = bool(a.input_literals_file) or (loaded.arguments is not None and not a.use_fake_data)
        args = arguments_for(loaded, not given, a.input_literals_file, a.seed)
        run_global_program(module, args, print_literals, sys.stdout, platform)
    else:
        run_on_devices(module, devices, seed=a.seed, print_literals=print_literals, platform=platform)
    return True


def _header_asks_for_devices(path: str) -> bool:
    """Does the HLO text's first line say num_partitions or num_replicas > 1? (A cheap look, so
    that a one-device replay parses its file once.)"""
    import re

    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            head = f.readline(100_000)
    except OSError:
        return False
    return any(int(n) > 1 for n in re.findall(r"num_(?:partitions|replicas)=(\d+)", head))


def _run_replay(a: argparse.Namespace) -> int:
    from xla_teach.passes.spmd.spmd_partitioner import needs_partitioning
    from xla_teach.tools.bugs.replay import replay
    from xla_teach.tools.tool_support import load_hlo_input

    for i, path in enumerate(a.files):
        source: str | HloInput = path
        if a.num_partitions or a.num_replicas or _header_asks_for_devices(path):
            source = load_hlo_input(path, "auto")
            apply_num_partitions(a, source.module)
            # a global program replays as any other (compiling partitions it; it runs on global
            # arguments); a per-device one runs on each device
            if not needs_partitioning(source.module) and run_if_several_devices(a, source, a.print_result):
                continue
        if len(a.files) > 1 and a.num_runs > 1:
            progress(f"replay: file {i + 1}/{len(a.files)}: {path}")
        result = replay(source, a.platform, use_fake_data=a.use_fake_data, num_runs=a.num_runs,
                        print_result=a.print_result, compile_only=a.compile_only,
                        input_literals_file=a.input_literals_file, seed=a.seed)
        if not a.print_result and result.run_seconds:
            print(f"{path}: {result.module_name}: Done executing in {sum(result.run_seconds):.6f}s")
    return 0


# ---- run-hlo-module -----------------------------------------------------------------------------
def _check_error_bounds(a: argparse.Namespace, *options: str) -> None:
    """Error bounds are numbers >= 0 (``inf`` allowed). NaN is refused too: every comparison
    with it is false, so a NaN bound would let any difference through."""
    from xla_teach.tools.tool_support import ToolError

    for option in options:
        if not getattr(a, option) >= 0:
            raise ToolError(f"--{option} must be >= 0, got {getattr(a, option)}")


def _configure_run_hlo_module(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", help="HLO text or snapshot")
    add_platform(p)
    p.add_argument("--reference_platform", default="interpreter",
                   help="platform that gives the right answer (default interpreter; 'none': no comparison)")
    p.add_argument("--input_format", default="auto", choices=["auto", "hlo", "snapshot"])
    p.add_argument("--abs_error_bound", type=float, default=1e-3)
    p.add_argument("--rel_error_bound", type=float, default=1e-3)
    p.add_argument("--iterations", type=int, default=1, help="runs, each with new random inputs")
    add_bool(p, "--run_test_hlo_passes", True, "run the HLO passes on the test platform "
             "(false for an already-optimized dump)")
    add_bool(p, "--run_reference_hlo_passes", True, "run the HLO passes on the reference platform")
    add_bool(p, "--print_literals", False, "print arguments and results")
    add_devices(p)
    add_inputs(p)
    add_injection(p)


def _run_run_hlo_module(a: argparse.Namespace) -> int:
    from xla_teach.tools.cli.run_hlo_module import print_report, run_hlo_module
    from xla_teach.tools.tool_support import load_hlo_input, normalize_platform

    loaded = load_hlo_input(a.file, a.input_format)
    if run_if_several_devices(a, loaded, a.print_literals):
        return 0
    fixed_args = None
    if a.input_literals_file or (loaded.arguments is not None and not a.use_fake_data):
        from xla_teach.tools.tool_support import arguments_for

        fixed_args = arguments_for(loaded, a.use_fake_data, a.input_literals_file, a.seed)
    _check_error_bounds(a, "abs_error_bound", "rel_error_bound")
    platform = normalize_platform(a.platform)
    reference = "" if a.reference_platform.lower() in ("", "none") else normalize_platform(a.reference_platform)
    factory = pipeline_factory(a, platform)
    report = run_hlo_module(loaded.module, platform, reference, args=fixed_args, iterations=a.iterations,
                            abs_error_bound=a.abs_error_bound, rel_error_bound=a.rel_error_bound,
                            run_test_hlo_passes=a.run_test_hlo_passes,
                            run_reference_hlo_passes=a.run_reference_hlo_passes,
                            test_pipeline=factory() if factory else None, seed=a.seed, progress=progress)
    print_report(report, a.print_literals)
    return 0 if report.ok else 1


# ---- opt ------------------------------------------------------------------------------------------
def _configure_opt(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", nargs="?", help="HLO text or snapshot")
    add_platform(p)
    p.add_argument("--passes", default="", help="comma-separated passes to run (default: the whole pipeline)")
    p.add_argument("--stage", default="hlo", help="what to print: hlo, buffer-assignment, llvm_ir, "
                   "optimized_llvm_ir, asm, ptx, pass-summary (see --list-stages)")
    p.add_argument("--list-passes", dest="list_passes", action="store_true", help="list the platform's passes")
    p.add_argument("--list-stages", dest="list_stages", action="store_true", help="list the stages")
    p.add_argument("-o", "--output", default="", help="write to this file (never overwritten) instead of stdout")


def _run_opt(a: argparse.Namespace) -> int:
    from xla_teach.tools.cli.opt import STAGE_ALIASES, STAGES, list_passes, run_opt
    from xla_teach.tools.tool_support import ToolError, fresh_path, load_hlo_input

    if a.list_stages:
        for name, (_, what) in STAGES.items():
            aliases = [k for k, v in STAGE_ALIASES.items() if v == name]
            print(f"{name:<20} {what}" + (f"  (XLA: {', '.join(aliases)})" if aliases else ""))
        return 0
    if a.list_passes:
        for info in list_passes(a.platform):
            print(f"{info.name:<28} {info.pipeline:<22} {info.doc}")
        return 0
    if not a.file:
        raise ToolError("give an HLO file (or --list-passes / --list-stages)")
    output = fresh_path(a.output) if a.output else None
    passes = [p.strip() for p in a.passes.split(",") if p.strip()]
    text = run_opt(load_hlo_input(a.file).module, a.platform, passes or None, a.stage)
    if output is not None:
        output.write_text(text if text.endswith("\n") else text + "\n")
        print(f"wrote {output}", file=sys.stderr)
    else:
        print(text)
    return 0


# ---- bisect -----------------------------------------------------------------------------------------
def _configure_bisect(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", help="HLO text or snapshot of the module that miscompiles")
    add_platform(p, "cpu", "--test_platform")
    add_inputs(p)
    p.add_argument("--abs_error", type=float, default=0.01,
                   help="absolute error bound (hlo_bisect default 0.01)")
    p.add_argument("--rel_error", type=float, default=0.1, help="relative error bound (hlo_bisect default 0.1)")
    add_bool(p, "--shrink", True, "after finding the pass, shrink the module while it still fails")
    p.add_argument("--max_checks", type=int, default=300, help="at most this many shrinking candidates")
    p.add_argument("--dump_path", default="", help="write reproducer.hlo and reproducer.snapshot.npz here")
    add_injection(p)


def _run_bisect(a: argparse.Namespace) -> int:
    from xla_teach.tools.bugs.bisect import bisect_compilation, check_reproducer_directory, write_reproducer
    from xla_teach.tools.tool_support import arguments_for, load_hlo_input, normalize_platform

    _check_error_bounds(a, "abs_error", "rel_error")
    if a.dump_path:
        check_reproducer_directory(a.dump_path)
    loaded = load_hlo_input(a.file)
    platform = normalize_platform(a.platform)
    run_args = arguments_for(loaded, a.use_fake_data or loaded.arguments is None, a.input_literals_file, a.seed)
    report = bisect_compilation(loaded.module, run_args, platform, pipeline_factory(a, platform), a.abs_error,
                                a.rel_error, a.shrink, a.max_checks, progress)
    print(report.text())
    if report.shrunk is not None and a.dump_path:
        for path in write_reproducer(a.dump_path, report.shrunk, platform, f"bisect of {a.file}"):
            print(f"wrote {path}")
    return 1 if report.failure else 0


# ---- timeline -----------------------------------------------------------------------------------------
def _configure_timeline(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", help="HLO text or snapshot")
    add_platform(p)
    add_inputs(p)
    p.add_argument("--num_runs", type=int, default=10, help="runs to trace (default 10)")
    p.add_argument("-o", "--output", default="", help="trace file (default <module>.trace.json; never overwritten)")
    add_bool(p, "--eager", False, "also trace an op-by-op (eager) run, side by side")


def _run_timeline(a: argparse.Namespace) -> int:
    from xla_teach.tools.timeline import trace_eager, trace_runs
    from xla_teach.tools.tool_support import ToolError, arguments_for, compile_on, fresh_path, load_hlo_input

    loaded = load_hlo_input(a.file)
    output = fresh_path(a.output or f"{loaded.module.name}.trace.json")
    if a.num_runs < 1:
        raise ToolError(f"--num_runs must be at least 1, got {a.num_runs}")
    run_args = arguments_for(loaded, a.use_fake_data or loaded.arguments is None, a.input_literals_file, a.seed)
    timeline = trace_runs(compile_on(loaded.module, a.platform), run_args, a.num_runs, progress=progress)
    if a.eager:
        trace_eager(loaded.module, run_args, a.platform, a.num_runs, timeline)
    timeline.write_chrome_trace(output)
    print(timeline.summary())
    print(f"wrote {output} (open it in chrome://tracing or https://ui.perfetto.dev)")
    return 0


# ---- flags ----------------------------------------------------------------------------------------------
def _configure_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--format", default="markdown", choices=["markdown"], help="output format")


def _run_flags(a: argparse.Namespace) -> int:
    from xla_teach.flags import flags_table_markdown

    print(flags_table_markdown())
    return 0


register("replay", "rerun a dumped module or snapshot (replay_computation)", _configure_replay, _run_replay)
register("run-hlo-module", "run on a platform and on the interpreter, compare (run_hlo_module)",
         _configure_run_hlo_module, _run_run_hlo_module)
register("opt", "run HLO passes, print a stage (hlo-opt)", _configure_opt, _run_opt)
register("bisect", "find the pass that breaks a program, shrink it to a reproducer", _configure_bisect, _run_bisect)
register("timeline", "trace every thunk over N runs as Chrome trace JSON", _configure_timeline, _run_timeline)
register("flags", "print the table of --xla_* flags", _configure_flags, _run_flags)


# ---- main ---------------------------------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=PROG, description="XLA's debugging tools, for xla_teach. "
                                     "Every subcommand also accepts --xla_* flags.")
    parser.add_argument("--traceback", action="store_true", help="show the Python traceback of an error")
    sub = parser.add_subparsers(dest="command", metavar="SUBCOMMAND")
    ordered = sorted(SUBCOMMANDS.values(), key=lambda c: HELP_ORDER.index(c.name) if c.name in HELP_ORDER else 99)
    for command in ordered:
        command.configure(sub.add_parser(command.name, help=command.help, description=command.help))
    return parser


def _split_xla_flags(extra: list[str], parser: argparse.ArgumentParser) -> dict[str, object]:
    """``--xla_*`` arguments argparse did not know, parsed as XLA_FLAGS would be."""
    from xla_teach.flags import parse_flag_string

    unknown = [item for item in extra if not item.startswith("--xla_")]
    if unknown:
        parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    return parse_flag_string(" ".join(extra), where="on the command line")


def main(argv: list[str] | None = None) -> int:
    from xla_teach import flags

    parser = build_parser()
    args, extra = parser.parse_known_args(rewrite_bools(list(sys.argv[1:] if argv is None else argv)))
    if args.command is None:
        parser.print_help()
        return 2
    where = f"{PROG} {args.command}"
    try:
        xla_flags = _split_xla_flags(extra, parser)
        with flags.override(**xla_flags):
            return SUBCOMMANDS[args.command].run(args)
    except BrokenPipeError:  # `xla-teach flags | head`: the reader left; not an error
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except KeyboardInterrupt:
        print(f"{where}: interrupted", file=sys.stderr)
        return 130
    except Exception as err:  # every error becomes one clear message (details with --traceback)
        if args.traceback:
            raise
        print(f"{where}: error: {_describe(err)}", file=sys.stderr)
        return 2


def _describe(err: Exception) -> str:
    if isinstance(err, FileNotFoundError) and err.filename:
        return f"{err.filename}: no such file"
    if isinstance(err, ValueError | OSError | RuntimeError | NotImplementedError | LookupError):
        return str(err) or type(err).__name__
    return f"{type(err).__name__}: {err} (an internal error; rerun with --traceback and report it)"


