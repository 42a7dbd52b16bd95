"""The table of ``xla-teach`` subcommands and the option helpers they share.

A subcommand is ``configure(parser)`` plus ``run(args) -> exit code``, added with
:func:`register` by the module that implements it: ``tools/cli/__init__.py`` (XLA's tools),
``tools/cli/extra.py`` (render, explore, diff, demo), ``aot/cli.py`` and ``exercises/cli.py``.
``tools/cli/__init__.py`` imports those modules by name, so this table is complete before any command
line is parsed, and none of them imports ``tools/cli/__init__.py`` back.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass


@dataclass
class Subcommand:
    name: str
    help: str
    configure: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]


SUBCOMMANDS: dict[str, Subcommand] = {}


def register(name: str, help: str, configure: Callable[[argparse.ArgumentParser], None],
             run: Callable[[argparse.Namespace], int]) -> None:
    """Add a subcommand (``grade``, ``render``... register themselves the same way)."""
    SUBCOMMANDS[name] = Subcommand(name, help, configure, run)


# ---- option helpers ------------------------------------------------------------------------
BOOL_OPTIONS: set[str] = set()  # "--name" of every boolean option (for --name=true|false)


def add_bool(parser: argparse.ArgumentParser, name: str, default: bool, help: str) -> None:
    """XLA's (absl's) boolean flags: ``--flag``, ``--noflag``, ``--flag=true``, ``--flag=false``."""
    dest = name.lstrip("-")
    BOOL_OPTIONS.add(name)
    parser.add_argument(name, dest=dest, action="store_true", default=default,
                        help=f"{help} (default {str(default).lower()}; --no{dest} or ={str(not default).lower()} "
                        "to change)")
    parser.add_argument(f"--no{dest}", dest=dest, action="store_false", help=argparse.SUPPRESS)


def rewrite_bools(argv: list[str]) -> list[str]:
    """``--flag=true`` -> ``--flag``, ``--flag=false`` -> ``--noflag`` (argparse knows only the bare forms)."""
    rewritten = []
    for item in argv:
        name, sep, value = item.partition("=")
        if sep and name in BOOL_OPTIONS:
            if value.lower() in ("true", "1", "yes"):
                item = name
            elif value.lower() in ("false", "0", "no"):
                item = "--no" + name[2:]
        rewritten.append(item)
    return rewritten
