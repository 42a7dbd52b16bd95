"""The package drawn as a house: its floors, and the imports between them, read from the code.

A module may import only from its own floor or below (``tests/test_layers.py`` checks every
import, inside functions too); ``docs/hooks/architecture_picture.py`` draws the floors and how many
imports run from each to the ones below it, at every docs build, for docs/architecture.md.
"""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1]

# (module prefix, floor): the longest prefix that matches a module gives its floor.
FLOORS: tuple[tuple[str, int], ...] = (
    ("xla_teach.flags", 0), ("xla_teach.hlo", 0),
    ("xla_teach.passes", 1),
    ("xla_teach.runtime", 2), ("xla_teach.distributed", 2),  # the public name of runtime/distributed.py
    ("xla_teach.backends.llvm", 3), ("xla_teach.backends.options", 3), ("xla_teach.backends.compile_listeners", 3),
    ("xla_teach.backends.backend_info", 3),
    ("xla_teach.backends", 4), ("xla_teach.backends.registry", 5),
    ("xla_teach.api", 6),
    ("xla_teach.tools", 7),
    ("xla_teach.frontend", 8), ("xla_teach.numpy", 8), ("xla_teach.nn", 8), ("xla_teach.lax", 8),
    ("xla_teach.sharding", 8), ("xla_teach.multihost_utils", 8),
    ("xla_teach.graph", 9), ("xla_teach.aot", 9),
    ("xla_teach.exercises", 10), ("xla_teach.demo", 10),
    ("xla_teach.tools.cli", 11),  # the command line, over everything
    ("xla_teach.tools.cli.registry", 7),  # the table of subcommands, filled from every floor below it
    ("xla_teach", 12),
)
FLOOR_NAMES = {0: "IR, flags", 1: "passes", 2: "runtime", 3: "shared LLVM, options, listeners",
               4: "backends", 5: "backend registry", 6: "driver (api)", 7: "tools", 8: "front end",
               9: "graph runner, AOT", 10: "exercises, demo", 11: "command line", 12: "package"}


# Inside the front end (floor 8), its own layers, each importing only the ones before it:
# core -> primitives -> the NumPy API -> transforms -> libraries (docs/frontend.md, "Where the code is").
FRONTEND_LAYERS: dict[str, int] = {
    **dict.fromkeys(("__init__", "tracer", "pytree", "dtypes", "errors"), 0),
    **dict.fromkeys(("primitives", "lax_ops"), 1),
    **dict.fromkeys(("numpy_api", "numpy_api_shape", "numpy_api_reduce", "numpy_api_linalg", "indexing"), 2),
    **dict.fromkeys(("jit", "stages", "autodiff", "autodiff_rules", "autodiff_rules_indexing", "autodiff_rules_window",
                     "control_flow", "control_flow_trace", "control_flow_autodiff", "conditional", "scan_loop",
                     "shard_map", "sharding", "sharded_array"), 3),
    **dict.fromkeys(("nn", "random", "optimizers"), 4),
}
FRONTEND_LAYER_NAMES = {0: "core", 1: "primitives", 2: "NumPy API", 3: "transforms", 4: "libraries"}
# The rules that differentiate primitives are written with primitives (``lax_ops``), as JAX's
# are with ``lax``: they import nothing of the NumPy API.
RULES = ("autodiff_rules", "autodiff_rules_indexing", "autodiff_rules_window", "control_flow_autodiff")
# The one import allowed up a layer: called outside jit, a NumPy function runs by jitting itself.
FRONTEND_EXCEPTIONS = {("numpy_api", "jit")}


def frontend_problems() -> list[str]:
    """``file:line imports module`` for every import inside the front end that goes up a layer, or
    from a rule into the NumPy API; and every front-end module that has no layer."""
    problems = []
    for path in sorted((PACKAGE / "frontend").glob("*.py")):
        if path.stem not in FRONTEND_LAYERS:
            problems.append(f"{path.relative_to(PACKAGE.parent)} has no layer in house.FRONTEND_LAYERS")
            continue
        mine = FRONTEND_LAYERS[path.stem]
        for line, target in imports(path):
            if not target.startswith("xla_teach.frontend."):
                continue
            other = target.split(".")[2]
            theirs = FRONTEND_LAYERS.get(other, 0)
            upward = theirs > mine and (path.stem, other) not in FRONTEND_EXCEPTIONS
            if upward or (path.stem in RULES and theirs == 2):
                problems.append(f"{path.relative_to(PACKAGE.parent)}:{line} ({FRONTEND_LAYER_NAMES[mine]}) imports "
                                f"{target} ({FRONTEND_LAYER_NAMES[theirs]})")
    return problems


def floor(module: str) -> int:
    best = max((prefix for prefix, _ in FLOORS if module == prefix or module.startswith(prefix + ".")), key=len)
    return dict(FLOORS)[best]


def module_name(path: Path) -> str:
    return ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts).removesuffix(".__init__")


def imports(path: Path) -> list[tuple[int, str]]:
    """Every xla_teach module ``path`` imports, at module level or inside a function: (line, module)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("xla_teach"):
            found += [(node.lineno, f"xla_teach.{a.name}") for a in node.names] if node.module == "xla_teach" \
                else [(node.lineno, node.module)]
        elif isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if a.name.startswith("xla_teach")]
    return found


def upward_imports() -> list[str]:
    """``file:line imports module`` for every import that reaches a floor above its module's."""
    upward = []
    for path in sorted(PACKAGE.rglob("*.py")):
        name = module_name(path)
        if name == "xla_teach":
            continue
        upward += [f"{path.relative_to(PACKAGE.parent)}:{line} imports {target}" for line, target in imports(path)
                   if floor(target) > floor(name)]
    return upward


def floor_edges() -> Counter[tuple[int, int]]:
    """How many imports run from each floor to each floor below it."""
    edges: Counter[tuple[int, int]] = Counter()
    for path in PACKAGE.rglob("*.py"):
        source = floor(module_name(path))
        for _, target in imports(path):
            if floor(target) < source:
                edges[(source, floor(target))] += 1
    return edges


def dot() -> str:
    """The house as a Graphviz graph (the docs render it at build time: no script from elsewhere):
    one box per floor, top to bottom, each arrow labelled with the number of imports down it."""
    lines = ["digraph house {", "  rankdir=TB; nodesep=0.2; ranksep=0.25; concentrate=true;",
             '  node [shape=box, style="rounded,filled", fillcolor="#eef3fb", fontname="Helvetica", fontsize=18];',
             '  edge [fontname="Helvetica", fontsize=16, color="#546e7a"];']
    for number in sorted(FLOOR_NAMES, reverse=True):
        members = sorted({p.removeprefix("xla_teach.") or "xla_teach" for p, f in FLOORS if f == number})
        label = f"{number}: {FLOOR_NAMES[number]}\\n" + "\\n".join(
            ", ".join(members[i:i + 3]) for i in range(0, len(members), 3))
        lines.append(f'  F{number} [label="{label}"];')
    for (source, target), count in sorted(floor_edges().items(), reverse=True):
        lines.append(f'  F{source} -> F{target} [label="{count}"];')
    lines.append("}")
    return "\n".join(lines)
