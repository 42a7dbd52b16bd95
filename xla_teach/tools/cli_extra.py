"""The ``render`` and ``demo`` subcommands of ``xla-teach`` (registered into :mod:`xla_teach.tools.cli`).

    xla-teach render module.txt -o module.svg [--optimized] [--collapse_fusions] [--max_nodes=N]
    xla-teach demo [--n N] [--dump-to DIR]
"""

from __future__ import annotations

import argparse
from pathlib import Path

from xla_teach.tools.cli import add_bool, register


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
    from xla_teach.tools.render import render_to_file
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
    p.add_argument("--dump-to", default=None, help="dump folder (default: a new dumps/seed_example_N)")
    add_bool(p, "--skip_gpu", False, "skip the GPU compilation step")


def _run_demo(a: argparse.Namespace) -> int:
    from xla_teach.demo import main as demo_main

    argv = ["--n", str(a.n)] + (["--dump-to", a.dump_to] if a.dump_to else []) + (["--no-gpu"] if a.skip_gpu else [])
    return demo_main(argv)


register("render", "draw an HLO module as dot / svg / png / html", _configure_render, _run_render)
register("demo", "the seeds' reduce_sum(x + y*z) through the whole compiler (make demo)", _configure_demo, _run_demo)
