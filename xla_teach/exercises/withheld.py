"""What the student's process may not use: xla_teach's own implementation of the exercised thing.

The library under study is installed where the student's code runs, so a ``run()`` could call
xla_teach's own dead-code eliminator and score full marks without the work. Before the student's
file is loaded, the child process takes those implementations away (:func:`withhold`):

* every function and method *defined* in a withheld module (or the one function named) has its
  code replaced by a line that raises ``PermissionError`` naming the exercise -- replaced in the
  function object itself, so an alias imported elsewhere (``from ...dce import HloDCE``) is taken
  too, and the original code object is gone from the process;
* the module's source file and its cached bytecode become unreadable (Landlock leaves them out of
  what the process may read: :func:`withheld_files`), so the code cannot be read back and run.

The harness of each exercise runs without them (the tests check it with the reference solutions).
What stays is what the exercise builds on: the IR, the parser, the pass machinery, the math
library an emitter may call.
"""

from __future__ import annotations

import importlib
import sys
import types
from pathlib import Path
from typing import Any

# exercise -> modules (all they define) or "module:qualified.name" (one function or method)
WITHHELD: dict[str, tuple[str, ...]] = {
    "dce": ("xla_teach.passes.simplifiers.dce",),
    "cse": ("xla_teach.passes.simplifiers.cse",),
    "algsimp_rule": ("xla_teach.passes.simplifiers.algsimp_rules_arith",),
    "fusion_decision": ("xla_teach.passes.fusion.fusion_rules", "xla_teach.passes.fusion.instruction_fusion"),
    "elemental_emitter": ("xla_teach.backends.llvm.elemental_emitter", "xla_teach.backends.llvm.elemental_ops"),
    "reduction_loop": ("xla_teach.backends.cpu.kernels.reduction",),
    "liveness": ("xla_teach.passes.scheduling.buffer_assignment", "xla_teach.passes.scheduling.heap_simulator"),
    "shape_inference": ("xla_teach.hlo.shape_inference.contraction:infer_dot",),
    "autodiff_rule": ("xla_teach.frontend.autodiff_rules:_atan2",),
    "bisect": (),  # the exercise is to use xla_teach's bisect tool well
    "sharding": ("xla_teach.hlo.sharding:HloSharding.tile_index", "xla_teach.hlo.sharding:HloSharding.tile_shape",
                 "xla_teach.hlo.sharding:HloSharding.shard", "xla_teach.hlo.sharding:HloSharding.assemble",
                 "xla_teach.passes.spmd.spmd_partitioner"),
    "read_dump": ("xla_teach.tools.explorer.structural_diff:fusion_owners",),
    # the capstone's pipeline: the student's DCE, CSE, rule and fusion decision (capstone_support.py keeps
    # the simplifier's and the fusion pass's machinery, which the student did not write)
    "capstone": ("xla_teach.passes.simplifiers.dce", "xla_teach.passes.simplifiers.cse",
                 "xla_teach.passes.simplifiers.algsimp_rules_arith",
                 "xla_teach.passes.fusion.fusion_rules:fusion_decision"),
}


def _stub(message: str, like: types.CodeType) -> types.CodeType:
    """A code object that raises ``PermissionError(message)``, fit to replace ``like`` (same free
    variables, so that it can be assigned to a closure's ``__code__``)."""
    namespace: dict[str, Any] = {}
    exec(f"def withheld(*args, **kwargs):\n    raise PermissionError({message!r})\n", namespace)  # noqa: S102
    code = namespace["withheld"].__code__
    return code.replace(co_freevars=like.co_freevars, co_name=like.co_name) if like.co_freevars else \
        code.replace(co_name=like.co_name)


def _functions_of(owner: Any, module_name: str) -> list[types.FunctionType]:
    """The functions a module or class defines (methods, static and class methods, properties)."""
    found: list[types.FunctionType] = []
    for value in list(vars(owner).values()):
        for candidate in (value, getattr(value, "__func__", None), getattr(value, "fget", None),
                          getattr(value, "fset", None), getattr(value, "__wrapped__", None)):
            if isinstance(candidate, types.FunctionType) and candidate.__module__ == module_name:
                found.append(candidate)
        if isinstance(value, type) and value.__module__ == module_name and owner is not value:
            found += _functions_of(value, module_name)
    return found


def withhold(exercise: str) -> list[str]:
    """Take away the exercised implementations in this process; returns the names taken."""
    taken = []
    for target in WITHHELD.get(exercise, ()):
        module_name, _, function = target.partition(":")
        module = importlib.import_module(module_name)
        if function:
            found: Any = module
            for part in function.split("."):
                found = getattr(found, part)
            functions = [getattr(found, "__func__", found)]
        else:
            functions = _functions_of(module, module_name)
        message = (f"{target.replace(':', '.')} is xla_teach's own answer to the `{exercise}` exercise: it is "
                   "not available while grading (write it yourself)")
        for fn in functions:
            fn.__code__ = _stub(message, fn.__code__)
        taken.append(target)
    return taken


def withheld_files(exercise: str) -> list[Path]:
    """The source and bytecode files of the withheld modules (left out of what may be read)."""
    files: list[Path] = []
    for name in dict.fromkeys(t.partition(":")[0] for t in WITHHELD.get(exercise, ())):
        module = sys.modules.get(name) or importlib.import_module(name)
        source = Path(module.__file__ or "")
        files.append(source)
        cache = source.parent / "__pycache__"
        if cache.is_dir():
            files += sorted(cache.glob(f"{source.stem}.*.pyc"))
    return files
