"""``TF_XLA_FLAGS``: the switches TensorFlow reads for auto-clustering, same names.

::

    TF_XLA_FLAGS="--tf_xla_auto_jit=2 --tf_xla_cpu_global_jit" python train.py
    TF_DUMP_GRAPH_PREFIX=/tmp/graphs TF_XLA_FLAGS="--tf_xla_clustering_debug --tf_xla_auto_jit=2 \\
        --tf_xla_cpu_global_jit" XLA_FLAGS="--xla_dump_to=/tmp/graphs" python train.py

=====================================  ============================================================
flag                                   meaning
=====================================  ============================================================
``--tf_xla_auto_jit=N``                0: use the session's setting (off unless ``Session(auto_jit=..)``);
                                       -1: off; 1: cluster ops likely to gain (fusible ones);
                                       2: cluster everything compilable
``--tf_xla_cpu_global_jit``            also auto-cluster on the CPU (without it: no CPU clusters)
``--tf_xla_min_cluster_size=N``        drop clusters with fewer than N ops (Const/Identity count 0)
``--tf_xla_max_cluster_size=N``        never grow a cluster beyond N ops
``--tf_xla_clustering_debug``          write graphs before/after each clustering pass to
                                       ``$TF_DUMP_GRAPH_PREFIX`` (text + Graphviz)
``--tf_xla_cluster_exclude_ops=A,B``   never cluster these op types
=====================================  ============================================================

The flags are parsed like ``XLA_FLAGS`` (see :mod:`xla_teach.flags`): an unknown
flag is a :class:`~xla_teach.flags.FlagError` that suggests the closest names.
"""

from __future__ import annotations

import difflib
import os
from dataclasses import dataclass, fields
from typing import Any

from xla_teach.flags import Flag, FlagError, parse_value

ENV = "TF_XLA_FLAGS"
DUMP_ENV = "TF_DUMP_GRAPH_PREFIX"

TF_FLAGS: dict[str, Flag] = {f.name: f for f in [
    Flag("tf_xla_auto_jit", int, 0, "0 = the session's setting, -1 = off, 1 = likely-to-help ops, 2 = all "
         "compilable ops."),
    Flag("tf_xla_cpu_global_jit", bool, False, "Auto-cluster on the CPU too."),
    Flag("tf_xla_min_cluster_size", int, 4, "Smallest cluster kept (Const and Identity count 0)."),
    Flag("tf_xla_max_cluster_size", int, 2**31 - 1, "Largest cluster built."),
    Flag("tf_xla_clustering_debug", bool, False, "Dump graphs before/after clustering to TF_DUMP_GRAPH_PREFIX."),
    Flag("tf_xla_cluster_exclude_ops", str, "", "Comma-separated op types never clustered."),
]}


@dataclass(frozen=True)
class TfXlaFlags:
    """The parsed ``TF_XLA_FLAGS`` (defaults as in TensorFlow's ``jit/flags.cc``)."""

    tf_xla_auto_jit: int = 0
    tf_xla_cpu_global_jit: bool = False
    tf_xla_min_cluster_size: int = 4
    tf_xla_max_cluster_size: int = 2**31 - 1
    tf_xla_clustering_debug: bool = False
    tf_xla_cluster_exclude_ops: str = ""

    @property
    def exclude_ops(self) -> frozenset[str]:
        return frozenset(op.strip() for op in self.tf_xla_cluster_exclude_ops.split(",") if op.strip())

    def with_values(self, **values: Any) -> TfXlaFlags:
        merged = {f.name: getattr(self, f.name) for f in fields(self)}
        for name, value in values.items():
            merged[_known(name)] = value
        return TfXlaFlags(**merged)


def _known(name: str) -> str:
    if name not in TF_FLAGS:
        close = difflib.get_close_matches(name, TF_FLAGS, n=2, cutoff=0.85)
        hint = f" (did you mean {', '.join('--' + c for c in close)}?)" if close else ""
        raise FlagError(f"unknown flag --{name} in {ENV}{hint}; known: {', '.join('--' + n for n in TF_FLAGS)}")
    return name


def parse_tf_xla_flags(text: str | None = None) -> TfXlaFlags:
    """Parse ``text`` (default: the ``TF_XLA_FLAGS`` environment variable)."""
    text = os.environ.get(ENV, "") if text is None else text
    values: dict[str, Any] = {}
    for item in text.split():
        if not item.startswith("--"):
            raise FlagError(f"flags start with '--': '{item}' in {ENV}")
        name, sep, value = item[2:].partition("=")
        flag = TF_FLAGS[_known(name)]
        values[name] = parse_value(flag, value if sep else None)
    auto_jit = values.get("tf_xla_auto_jit", 0)
    if auto_jit not in (-1, 0, 1, 2):
        raise FlagError(f"--tf_xla_auto_jit takes -1, 0, 1 or 2, not {auto_jit}")
    return TfXlaFlags(**values)
