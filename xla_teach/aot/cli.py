"""``xla-teach aot``: tfcompile for an HLO file (registered into :mod:`xla_teach.tools.cli`).

    xla-teach aot module.hlo --entry_point=mlp --out_dir=build/
    # wrote build/mlp.o, build/mlp.h, build/mlp_main.c
    # build: cc -O2 -o build/mlp_main build/mlp_main.c build/mlp.o -lm

Option names follow tfcompile where it has them (``--entry_point``, ``--target_cpu``).
"""

from __future__ import annotations

import argparse

from xla_teach.tools.cli.registry import add_bool, register


def _configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", help="HLO text (a module with a fixed signature; a real XLA dump works)")
    p.add_argument("--entry_point", default="", help="name of the C function (default: the module's name)")
    p.add_argument("--out_dir", default=".", help="where <entry>.o, <entry>.h and <entry>_main.c go")
    p.add_argument("--target_cpu", default="", help="LLVM CPU name; '' = generic (portable), 'native' = this "
                   "machine's CPU")
    add_bool(p, "--gen_main", True, "also write the example C program <entry>_main.c")
    add_bool(p, "--overwrite", False, "replace existing output files")


def _run(a: argparse.Namespace) -> int:
    from xla_teach.aot.tfcompile import compile_aot

    result = compile_aot(a.file, a.out_dir, entry_point=a.entry_point or None, target_cpu=a.target_cpu,
                         emit_main=a.gen_main, overwrite=a.overwrite)
    written = [result.object_path, result.header_path] + ([result.main_path] if result.main_path else [])
    print(f"wrote {', '.join(str(p) for p in written)}")
    print(f"entry point: {result.entry_point}({', '.join(b.c_name for b in result.args + result.results)}, temp); "
          f"temp buffer {result.temp_size} bytes")
    if result.external_symbols:
        print(f"external symbols (libc/libm): {', '.join(result.external_symbols)}")
    if result.build_command:
        print(f"build: {result.build_command}")
    return 0


register("aot", "compile an HLO module ahead of time to an object file + C header (tfcompile)", _configure, _run)
