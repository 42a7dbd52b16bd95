"""The ``render`` and ``demo`` subcommands of ``xla-teach`` (registered into :mod:`xla_teach.tools.cli`).

    xla-teach render module.txt -o module.svg [--optimized] [--collapse_fusions] [--max_nodes=N]
    xla-teach demo [--n N] [--dump_to DIR] [--skip_gpu]
    xla-teach explore PATH [-o FILE] [--platform cpu]
    xla-teach diff A [B] [--a_flags=...] [--b_flags=...] [--platform cpu] [--runs N] [-o PAGE] [--text]
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from xla_teach.hlo.ir import HloModule
from xla_teach.tools.cli.registry import add_bool, register

if TYPE_CHECKING:
    from xla_teach.passes.pass_base import HloPass, HloPassPipeline


def _configure_render(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", help="HLO text (a real XLA dump works) or a snapshot (.npz)")
    p.add_argument("-o", "--output", default="", help="output file; its extension picks the format "
                   "(dot, svg, png, html). Default: <input>.svg. Never overwritten.")
    p.add_argument("--format", default="", help="dot | svg | png | html (overrides the extension)")
    p.add_argument("--platform", default="cpu", help="backend whose pipeline --optimized runs (default cpu)")
    add_bool(p, "--optimized", False, "draw the module after the backend's HLO passes")
    add_bool(p, "--collapse_fusions", False, "draw each fusion as one node")
    p.add_argument("--max_nodes", type=int, default=0, help="keep at most N nodes around the root (0 = all)")


def _run_render(a: argparse.Namespace) -> int:
    from xla_teach.tools.render.html_report import render_to_file
    from xla_teach.tools.tool_support import compile_on, load_hlo_input

    module = load_hlo_input(a.file).module
    if a.optimized:
        module = compile_on(module, a.platform).module
    fmt = a.format or None
    output = Path(a.output) if a.output else Path(a.file).with_suffix(f".{fmt or 'svg'}")
    options: dict[str, object] = {"collapse_fusions": a.collapse_fusions}
    if a.max_nodes:
        options["max_nodes"] = a.max_nodes
    written = render_to_file(module, output, fmt, **options)
    print(f"wrote {written}")
    return 0


def _configure_demo(p: argparse.ArgumentParser) -> None:
    p.add_argument("--n", type=int, default=1 << 22, help="elements per input (default 2^22)")
    # Options are spelt with underscores, as XLA's tools spell theirs (--dump-to is accepted too).
    p.add_argument("--dump_to", "--dump-to", dest="dump_to", default=None,
                   help="dump folder (default: a new dumps/seed_example_N)")
    add_bool(p, "--skip_gpu", False, "skip the GPU compilation step")


def _run_demo(a: argparse.Namespace) -> int:
    from xla_teach.demo import main as demo_main

    argv = ["--n", str(a.n)] + (["--dump-to", a.dump_to] if a.dump_to else []) + (["--no-gpu"] if a.skip_gpu else [])
    return demo_main(argv)


def _configure_explore(p: argparse.ArgumentParser) -> None:
    p.add_argument("path", help="HLO text (a real XLA dump works), a snapshot (.npz), or a dump folder")
    p.add_argument("-o", "--output", default="", help="the page to write (default: <input>.explorer.html; for a "
                   "dump folder, each module's explorer and the folder's index.html). Never overwritten.")
    p.add_argument("--platform", default="cpu", help="backend to compile for (default cpu)")
    p.add_argument("--profile", type=int, default=0, metavar="RUNS",
                   help="also run it RUNS times on fake arguments (after 2 warm-up runs) for the profile view")


def _run_explore(a: argparse.Namespace) -> int:
    from xla_teach.api import compile_module
    from xla_teach.tools.explorer import write_explorer
    from xla_teach.tools.explorer.dump_index import write_dump_index
    from xla_teach.tools.tool_support import ToolError, compile_on

    path = Path(a.path)
    if path.is_dir():
        modules = sorted(path.glob("*module_*.before_optimizations.txt"))
        if not modules:
            raise ToolError(_not_a_dump(path))
        _write_xla_pass_explorers(path)
        for source in modules:
            target = source.with_name(source.name.replace("before_optimizations.txt", "explorer.html"))
            if target.exists():
                print(f"kept {target} (exists)")
                continue
            write_explorer(compile_on(_compilable(source), a.platform), target,
                           profile_runs=a.profile, compile=compile_module)
            print(f"wrote {target}")
        print(f"open {write_dump_index(path)}")
        return 0
    output = Path(a.output) if a.output else path.with_name(path.stem + ".explorer.html")
    if output.exists():
        raise ToolError(f"{output} exists; not overwriting it (choose another -o)")
    written = write_explorer(compile_on(_compilable(a.path), a.platform), output, profile_runs=a.profile,
                             compile=compile_module)
    print(f"open {written}")
    return 0


def _not_a_dump(path: Path) -> str:
    """Why a folder has no module to explore: XLA wrote protos only, or it is not a dump."""
    if any(path.glob("*module_*.pb")):
        return (f"{path} holds XLA's modules as protos (--xla_dump_hlo_as_proto) and no text: xla_teach reads HLO "
                "text; dump again with --xla_dump_hlo_as_text as well")
    return f"{path} holds no *.before_optimizations.txt: not a dump folder (--xla_dump_to)"


def _write_xla_pass_explorers(folder: Path) -> None:
    """For every module whose passes XLA dumped one by one (``--xla_dump_hlo_pass_re=.*``), a page
    stepping through XLA's own passes: ``<module>.xla.explorer.html``."""
    from xla_teach.tools.explorer.page import explorer_page
    from xla_teach.tools.explorer.xla_dump import modules_with_pass_dumps, passes_xla_teach_lacks, xla_dump_data

    lacking = passes_xla_teach_lacks(folder)
    if lacking:
        print("XLA's passes that changed a module here and that xla_teach has no pass of the same name for:")
        for name, times in lacking.items():
            print(f"  {name:<48} x{times}")
    for prefix in modules_with_pass_dumps(folder):
        target = folder / f"{prefix}.xla.explorer.html"
        if target.exists():
            print(f"kept {target} (exists)")
            continue
        target.write_text(explorer_page(xla_dump_data(folder, prefix)), encoding="utf-8")
        print(f"wrote {target} (XLA's own passes)")
        side_by_side = folder / f"{prefix}.vs_xla_teach.diff.html"
        if not side_by_side.exists() and _compare_with_xla_teach(folder, prefix, side_by_side):
            print(f"wrote {side_by_side} (XLA's optimized module beside xla_teach's compile of the same program)")


def _compare_with_xla_teach(folder: Path, prefix: str, target: Path, runs: int = 3) -> bool:
    """The compare page of XLA's optimized module (run as it is by xla_teach's backend: XLA's
    fusions, xla_teach's kernels) beside xla_teach's own compile of the module before
    optimizations; False when the dump lacks either."""
    from xla_teach.tools.explorer.compare import write_compare
    from xla_teach.tools.tool_support import compile_on

    optimized = sorted(folder.glob(f"{prefix}.*after_optimizations.txt"))
    before = folder / f"{prefix}.before_optimizations.txt"
    if not optimized or not before.is_file():
        return False
    xla = compile_on(_compilable(optimized[0]), "cpu", pipeline=_fusions_as_they_are("cpu"))
    mine = compile_on(_compilable(before), "cpu")
    write_compare(xla, mine, target, ("XLA's optimized module (run by xla_teach)", "xla_teach's compile"), runs)
    return True


def _fusions_as_they_are(platform: str) -> HloPassPipeline:
    """Only the backend's ``defuser``: XLA's fusions stay as XLA made them where the backend has a
    kernel for them, the others (a lone scatter XLA wrapped in a fusion) are unwrapped for the
    backend's own kernels; nothing else is rewritten."""
    from xla_teach.passes.pass_base import HloPassPipeline
    from xla_teach.tools.tool_support import backend_pipeline

    def leaves(pipeline: HloPassPipeline) -> list[HloPass]:
        return [q for p in pipeline.passes for q in (leaves(p) if isinstance(p, HloPassPipeline) else [p])]

    defuser = next(p for p in leaves(backend_pipeline(platform)) if p.name == "defuser")
    return HloPassPipeline("xla-fusions-as-they-are", [defuser])


def _configure_diff(p: argparse.ArgumentParser) -> None:
    p.add_argument("a", help="HLO text, a snapshot, or a dump folder (its first module)")
    p.add_argument("b", nargs="?", default="", help="the same for side B (default: A again, with --b_flags)")
    p.add_argument("--a_flags", default="", help="XLA_FLAGS-style flags for compiling side A")
    p.add_argument("--b_flags", default="", help="XLA_FLAGS-style flags for compiling side B")
    p.add_argument("--platform", default="cpu", help="backend to compile for (default cpu)")
    p.add_argument("--runs", type=int, default=5, help="timed runs of each side (0: do not run)")
    p.add_argument("-o", "--output", default="", help="the compare page to write (default: <A>.diff.html beside A's "
                   "module). Never overwritten.")
    add_bool(p, "--text", False, "print the comparison as text only; write no page")


def _diff_input(path: str) -> Path:
    from xla_teach.tools.tool_support import ToolError

    source = Path(path)
    if source.is_dir():
        modules = sorted(source.glob("*module_*.before_optimizations.txt"))
        if not modules:
            raise ToolError(_not_a_dump(source))
        return modules[0]
    return source


def _compilable(path: str | Path) -> HloModule:
    """The module of ``path``; constants its text elided (``{...}``, as XLA's dumps print large
    ones) are given made-up values, said on stderr: what the compiler does depends on their
    shapes, not their values (unless it folds them), so the module can be compiled and looked at."""
    import sys

    from xla_teach.tools.bugs.fake_data import fill_elided_constants
    from xla_teach.tools.tool_support import load_hlo_input

    module = load_hlo_input(str(path)).module
    filled = fill_elided_constants(module)
    if filled:
        print(f"note: {path}: {len(filled)} constant(s) printed as {{...}} ({', '.join(filled[:3])}"
              f"{' ...' if len(filled) > 3 else ''}) were given made-up values to compile it; the passes, fusions "
              "and buffers are the module's, the numbers a run gives are not", file=sys.stderr)
    return module


def _run_diff(a: argparse.Namespace) -> int:
    from xla_teach import flags
    from xla_teach.flags import parse_flag_string
    from xla_teach.tools.bugs.compile_diff import Side, compile_diff
    from xla_teach.tools.explorer.compare import compare_html
    from xla_teach.tools.tool_support import ToolError, compile_on, fresh_path

    if not a.b and a.a_flags == a.b_flags:
        raise ToolError("diff needs two modules, or one module and --a_flags/--b_flags that differ")
    overrides = [parse_flag_string(text, where="in --a_flags/--b_flags") for text in (a.a_flags, a.b_flags)]
    first = _diff_input(a.a)
    output = None
    if not a.text:
        stem = first.name.removesuffix(".txt").removesuffix(".hlo")
        output = fresh_path(a.output or first.with_name(stem + ".diff.html"))
    sides = []
    for path, flag_text, override in ((a.a, a.a_flags, overrides[0]), (a.b or a.a, a.b_flags, overrides[1])):
        source = _diff_input(path)
        with flags.override(**override):
            executable = compile_on(_compilable(source), a.platform)
        sides.append(Side(f"{source} ({a.platform}{', ' + flag_text if flag_text else ''})", executable))
    if output is None:
        print(compile_diff(*sides, runs=a.runs).to_text())
        return 0
    diff = compile_diff(*sides, runs=0)
    page = compare_html(diff, runs=a.runs)  # times both sides (profile), then fills the text's run times
    print(diff.to_text())
    output.write_text(page, encoding="utf-8")
    print(f"open {output}")
    return 0


register("render", "draw an HLO module as dot / svg / png / html", _configure_render, _run_render)
register("diff", "compare two compilations in a page: the modules side by side, passes, fusions, memory, time",
         _configure_diff, _run_diff)
register("explore", "write the compile explorer of a module or a dump folder (one offline HTML page)",
         _configure_explore, _run_explore)
register("demo", "the example reduce_sum(x + y*z) through the whole compiler (make demo)", _configure_demo, _run_demo)
