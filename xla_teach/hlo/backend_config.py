"""Reading and writing one field of an instruction's ``backend_config``.

XLA keeps backend-specific choices in ``backend_config={...}``, a JSON object printed after the
instruction's attributes; xla_teach's CPU backend writes its choices there too
(``"dot_strategy"``, ``"conv_strategy"``), so the optimized HLO shows them. A config that is
not a JSON object (a backend's own text) is never rewritten unless the caller says so.
"""

from __future__ import annotations

import json
from typing import Any

from xla_teach.hlo.ir import HloInstruction


def backend_config_object(instr: HloInstruction) -> dict[str, Any] | None:
    """The config as a dict (empty when there is none), or None when it is not a JSON object."""
    if not instr.backend_config:
        return {}
    try:
        config = json.loads(instr.backend_config)
    except json.JSONDecodeError:
        return None
    return config if isinstance(config, dict) else None


def backend_config_field(instr: HloInstruction, key: str) -> str:
    """The field ``key`` as text ("" when absent or when the config is not a JSON object)."""
    config = backend_config_object(instr)
    return str(config.get(key, "")) if config else ""


def set_backend_config_field(instr: HloInstruction, key: str, value: object, *,
                             replace_unreadable: bool = False) -> bool:
    """Write ``key: value`` into the config, keeping its other fields; a config that is not a JSON
    object is left alone (False) unless ``replace_unreadable``."""
    config = backend_config_object(instr)
    if config is None:
        if not replace_unreadable:
            return False
        config = {}
    config[key] = value
    instr.backend_config = json.dumps(config, separators=(",", ":"))
    return True
