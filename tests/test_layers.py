"""Layers stay apart. The backends are siblings: the CPU and GPU compilers share what lives in ``backends/llvm`` and
``passes/``, and neither imports the other (nor does the shared layer import either). A module
that reaches across fails here, with the line that does it."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "xla_teach"
FORBIDDEN = {
    "backends/cpu": ("xla_teach.backends.gpu",),
    "backends/gpu": ("xla_teach.backends.cpu",),
    "backends/llvm": ("xla_teach.backends.cpu", "xla_teach.backends.gpu"),
}


def _imports(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.append((node.lineno, node.module))
        elif isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
    return found


def test_no_backend_imports_another() -> None:
    crossings = []
    for folder, banned in FORBIDDEN.items():
        for path in sorted((PACKAGE / folder).rglob("*.py")):
            for line, module in _imports(path):
                if module.startswith(banned):
                    crossings.append(f"{path.relative_to(PACKAGE.parent)}:{line} imports {module}")
    assert crossings == []


def test_no_module_imports_another_module_s_private_names() -> None:
    """``from xla_teach.x import _helper`` reaches into x's internals: make the helper public, or
    move it to the layer both use."""
    private = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("xla_teach"):
                private += [f"{path.relative_to(PACKAGE.parent)}:{node.lineno} {node.module}.{a.name}"
                            for a in node.names if a.name.startswith("_") and not a.name.startswith("__")]
    assert private == []


def test_no_import_cycles_between_modules() -> None:
    """Module-level imports form no cycle (an import inside a function, done when it runs, may
    go back up a layer; a cycle at module level makes the import order matter)."""
    import networkx as nx

    modules = {}
    for path in PACKAGE.rglob("*.py"):
        name = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        modules[name.removesuffix(".__init__")] = path
    graph = nx.DiGraph()
    for name, path in modules.items():
        for node in ast.parse(path.read_text(), filename=str(path)).body:
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("xla_teach"):
                for alias in node.names:
                    sub = f"{node.module}.{alias.name}"
                    graph.add_edge(name, sub if sub in modules else node.module)
            elif isinstance(node, ast.Import):
                graph.add_edges_from((name, a.name) for a in node.names if a.name.startswith("xla_teach"))
    cycles = list(nx.simple_cycles(graph))
    assert cycles == [], cycles[:5]


def test_no_import_runs_back_up_the_house() -> None:
    """Counting the imports inside functions too: none reaches a floor above its module's (the
    floors: ``xla_teach/tools/house.py``; the front end sits above the tools because it offers
    them to the user, ``Compiled.explore``; the driver tells the tools what happens through
    ``backends/compile_listeners.py`` and never imports them)."""
    from xla_teach.tools.house import upward_imports

    upward = upward_imports()
    assert upward == [], "\n".join(upward)


def test_the_front_end_is_layered_and_its_rules_use_primitives_only() -> None:
    """Inside the front end: core -> primitives -> the NumPy API -> transforms -> libraries, no
    import up a layer (but the one named in ``house.FRONTEND_EXCEPTIONS``), and the rules that
    differentiate primitives import no NumPy API module (they use ``lax_ops``)."""
    from xla_teach.tools.house import frontend_problems

    problems = frontend_problems()
    assert problems == [], "\n".join(problems)


def test_no_import_knot_even_counting_imports_inside_functions() -> None:
    """Counting imports inside functions too (not those only for type checkers), no two modules
    import each other, directly or through others: the package is a layered graph. (Where a lower
    layer must call a higher one, the higher one registers itself: e.g. ``xla_teach.numpy`` gives
    the tracer its operators, ``graph/ops.py`` gives graph tensors theirs.)"""
    import networkx as nx

    graph = nx.DiGraph()
    for path in sorted(PACKAGE.rglob("*.py")):
        name = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts).removesuffix(".__init__")
        todo: list[ast.AST] = [ast.parse(path.read_text(), filename=str(path))]
        while todo:
            node = todo.pop()
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                todo.extend(node.orelse)
                continue
            todo.extend(ast.iter_child_nodes(node))
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("xla_teach"):
                graph.add_edges_from((name, f"{node.module}.{a.name}" if node.module == "xla_teach" else node.module)
                                     for a in node.names)
            elif isinstance(node, ast.Import):
                graph.add_edges_from((name, a.name) for a in node.names if a.name.startswith("xla_teach"))
    knots = [sorted(group) for group in nx.strongly_connected_components(graph) if len(group) > 1]
    assert knots == [], knots
