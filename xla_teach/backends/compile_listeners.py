"""Compile events, for what watches a compilation without being part of it: dumps, records.

The compile driver (:func:`xla_teach.api.compile_module`) tells every subscribed listener what
happens -- the module before optimization, each pass, the executable at the end -- and never
imports the listeners: a tool *subscribes* (``tools/dump/`` does when it is imported, and
``import xla_teach`` imports it), so the dependency runs from the tools down to the driver,
like XLA's dump service sitting below its compiler::

    subscribe("dump", ModuleDumper.create)   # factory(module, flag values, backend) -> listener or None

A factory returns None when its listener has nothing to do for this compile (dumping off, say).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from xla_teach.hlo.ir import HloModule
from xla_teach.passes.pass_base import PassRecord


class CompileListener(Protocol):
    def before_optimizations(self, module: HloModule) -> None: ...
    def on_pass(self, record: PassRecord) -> None: ...
    def after_compilation(self, executable: Any) -> None: ...


ListenerFactory = Callable[[HloModule, dict[str, Any], str], "CompileListener | None"]
_FACTORIES: dict[str, ListenerFactory] = {}


def subscribe(name: str, factory: ListenerFactory) -> None:
    """Call ``factory`` at the start of every compilation (once per name: subscribing again replaces it)."""
    _FACTORIES[name] = factory


def listeners_for(module: HloModule, flag_values: dict[str, Any], backend: str) -> dict[str, CompileListener]:
    """The listeners of one compilation, by the name they subscribed under."""
    found = {}
    for name, factory in _FACTORIES.items():
        listener = factory(module, flag_values, backend)
        if listener is not None:
            found[name] = listener
    return found
