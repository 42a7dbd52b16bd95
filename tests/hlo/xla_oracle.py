"""Run HLO text on real XLA -- jaxlib's CPU client -- as the oracle for what an op means.

``run_on_xla(text, args)`` parses the text with XLA's own HLO parser, converts it to StableHLO,
compiles it for XLA's CPU and runs it: the flattened results, as NumPy arrays. The calling test
is skipped when JAX is not installed (the ``bench`` extra) or its jaxlib lacks these entry points.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

# jaxlib 0.10.2's XLA CPU aborts the whole process (a CHECK failure in its emitter) when it compiles
# a ``scan`` with ``is_associative=true``. The attribute only allows regrouping the steps -- the
# results are the same without it -- so the oracle runs the scan without it.
_ASSOCIATIVE_HINT = re.compile(r",\s*is_associative=true")


def run_on_xla(text: str, args: Sequence[Any]) -> list[np.ndarray]:
    jax = pytest.importorskip("jax", reason="real XLA (jaxlib) is the oracle: pip install -e '.[bench]'")
    try:
        from jax._src.lib import xla_client
        from jaxlib import _hlo
    except ImportError as error:  # another jaxlib: these are its internals
        pytest.skip(f"this jaxlib cannot run HLO text: {error}")
    module = _hlo.hlo_module_from_text(_ASSOCIATIVE_HINT.sub("", text))
    stablehlo = xla_client._xla.mlir.hlo_to_stablehlo(module.as_serialized_hlo_module_proto())
    device = jax.devices("cpu")[0]
    executable = device.client.compile_and_load(stablehlo, xla_client.DeviceList((device,)),
                                                xla_client.CompileOptions())
    outputs = executable.execute_sharded([jax.device_put(np.asarray(a), device) for a in args])
    return [np.asarray(out[0]) for out in outputs.disassemble_into_single_device_arrays()]
