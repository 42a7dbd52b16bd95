"""The run-time half of auto-clustering: ``_XlaCompile`` and ``_XlaRun``.

:func:`lower_function` is xla_teach's tf2xla: it traces a cluster's function with
``xla_teach.jit``, calling every op's NumPy-style definition with
``m = xla_teach.numpy``, so the ops *emit HLO* instead of computing. Each op's
instructions carry ``op_name`` metadata ``jit(cluster_0)/<node name>/...``, so the
HLO can be traced back to the graph. The module is named as TensorFlow names it::

    cluster_0__XlaCompiledKernel_true__XlaHasReferenceVars_false__XlaNumConstantArgs_0__XlaNumResourceArgs_0_

and compiled by :func:`xla_teach.api.compile_module` -- the normal pipeline, so
``XLA_FLAGS=--xla_dump_to=...`` writes one set of dump files per cluster.

:class:`XlaCompilationCache` is TensorFlow's ``XlaCompilationCache``: compiled
executables keyed on (function, argument dtypes and shapes). A new shape means a
new compilation; every compilation is kept in :attr:`XlaCompilationCache.log` with
its reason, and the second and later compilations of one cluster are logged to the
``xla_teach.graph`` logger as ``recompiled_on_launch``.
"""

from __future__ import annotations

import inspect
import logging
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from xla_teach.graph.graph import GraphFunction
from xla_teach.graph.op_registry import OPS, public_attrs
from xla_teach.hlo.ir import HloModule

logger = logging.getLogger("xla_teach.graph")


def module_name(function: GraphFunction) -> str:
    """TensorFlow's canonical name of a function with attributes (the HLO module's name)."""
    attrs = "".join(f"{k}_{str(v).lower() if isinstance(v, bool) else v}_" for k, v in sorted(function.attrs.items()))
    return f"{function.name}_{attrs}" if attrs else function.name


def signature_of(args: Sequence[np.ndarray]) -> str:
    """``f32[8,4], s32[8]``: what a compiled cluster is specialised to."""
    from xla_teach.hlo.types import PrimitiveType

    return ", ".join(f"{PrimitiveType.from_dtype(a.dtype).value}[{','.join(map(str, a.shape))}]" for a in args)


def lower_function(function: GraphFunction, args: Sequence[np.ndarray], backend: str = "cpu") -> HloModule:
    """Trace ``function`` for these argument shapes into an HLO module (no compilation)."""
    import xla_teach.numpy as xnp
    from xla_teach.frontend.jit import jit
    from xla_teach.frontend.tracer import name_scope

    nodes = function.graph.topological_order()
    arg_nodes = function.args

    def body(*values: Any) -> tuple[Any, ...]:
        env: dict[tuple[int, int], Any] = {(id(n), 0): v for n, v in zip(arg_nodes, values, strict=True)}
        results: dict[int, Any] = {}
        for node in nodes:
            if node.op == "_Arg":
                continue
            inputs = [env[(id(t.node), t.index)] for t in node.inputs]
            if node.op == "_Retval":
                results[node.attrs["index"]] = inputs[0]
                continue
            with name_scope(node.name):
                out = OPS[node.op].compute(xnp, *inputs, **public_attrs(node.attrs))  # type: ignore[misc]
            for i, value in enumerate(out if isinstance(out, tuple) else (out,)):
                env[(id(node), i)] = value
        return tuple(results[i] for i in range(len(results)))

    body.__name__ = function.name
    names = [re.sub(r"\W", "_", n.name) for n in arg_nodes]
    body.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [inspect.Parameter(n, inspect.Parameter.POSITIONAL_ONLY) for n in names])
    module = jit(body, backend=backend).lower(*args).module
    module.name = module_name(function)
    return module


@dataclass(frozen=True)
class CompileEvent:
    cluster: str
    signature: str
    reason: str
    seconds: float


@dataclass
class _Entry:
    key: str
    executable: Any
    num_outputs: int
    launches: int = 0


class XlaCompilationCache:
    """Executables per (cluster, input signature), compiled on first sight."""

    def __init__(self, backend: str = "cpu") -> None:
        self.backend = backend
        self._entries: dict[str, _Entry] = {}
        self.log: list[CompileEvent] = []
        self.hits = 0

    def compile(self, function: GraphFunction, args: Sequence[np.ndarray]) -> str:
        """The key of ``function``'s executable for these arguments (compiling on a miss)."""
        from xla_teach.api import compile_module

        signature = signature_of(args)
        key = f"{function.name}({signature})"
        if key in self._entries:
            self.hits += 1
            return key
        start = time.perf_counter()
        module = lower_function(function, args, self.backend)
        executable = compile_module(module, self.backend)
        seconds = time.perf_counter() - start
        previous = [e for e in self.log if e.cluster == function.name]
        if previous:
            reason = f"recompiled_on_launch: new input signature ({previous[-1].signature}) -> ({signature})"
            logger.info("%s: %s", function.name, reason)
        else:
            reason = "first launch"
        self.log.append(CompileEvent(function.name, signature, reason, seconds))
        self._entries[key] = _Entry(key, executable, len(function.retvals))
        return key

    def run(self, key: str, args: Sequence[np.ndarray], profiler: Any = None) -> list[np.ndarray]:
        entry = self._entries.get(key)
        if entry is None:
            raise KeyError(f"_XlaRun: no compiled executable for key {key!r} (did _XlaCompile run?)")
        entry.launches += 1
        outputs = entry.executable.execute(list(args), profiler=profiler)
        if len(outputs) != entry.num_outputs:
            raise RuntimeError(f"_XlaRun {key}: the executable returned {len(outputs)} arrays, "
                               f"expected {entry.num_outputs}")
        return list(outputs)

    def executable(self, key: str) -> Any:
        return self._entries[key].executable

    def compile_count(self, cluster: str | None = None) -> int:
        return sum(1 for e in self.log if cluster is None or e.cluster == cluster)

    def summary(self) -> str:
        """One line per compiled signature: launches, compile time, why it was compiled."""
        lines = []
        for event in self.log:
            entry = self._entries[f"{event.cluster}({event.signature})"]
            lines.append(f"{event.cluster}({event.signature}): {entry.launches} launch(es), compiled in "
                         f"{event.seconds * 1e3:.1f} ms ({event.reason})")
        return "\n".join(lines) if lines else "(nothing compiled)"
