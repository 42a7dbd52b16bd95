"""xla_teach: an educational, fully instrumented re-implementation of the XLA compiler.

The stable public surface (other tools depend on these names):

* :func:`parse_hlo` -- HLO text (as XLA dumps it) to an :class:`HloModule`;
* :meth:`HloModule.to_text` (also ``str(module)``) -- back to XLA's text format;
* :class:`XlaBuilder` -- build HLO one op at a time, with shape inference;
* :func:`execute` -- run a module on a backend (``"interpreter"`` is the reference).
"""

from xla_teach import numpy as _numpy  # noqa: F401 - gives traced arrays their operators and methods
from xla_teach.api import execute
from xla_teach.frontend.autodiff import grad, jvp, value_and_grad, vjp
from xla_teach.frontend.errors import CompilationError
from xla_teach.frontend.jit import jit
from xla_teach.frontend.shard_map import shard_map
from xla_teach.frontend.sharded_array import ShardedArray, device_put, make_array_from_process_local_data
from xla_teach.frontend.sharding import device_count, devices, make_mesh, with_sharding_constraint
from xla_teach.frontend.stages import Compiled as _Compiled
from xla_teach.frontend.stages import Lowered as _Lowered
from xla_teach.frontend.tracer import name_scope as named_scope
from xla_teach.hlo.builder import XlaBuilder
from xla_teach.hlo.ir import HloComputation, HloInstruction, HloModule
from xla_teach.hlo.shape import Layout, Shape
from xla_teach.hlo.text.parser import HloParseError, parse_hlo, parse_shape
from xla_teach.hlo.types import PrimitiveType
from xla_teach.tools import dump as _dump  # noqa: F401 - subscribes the dumps to every compile
from xla_teach.tools.render.display import install as _install_rich_display

__version__ = "0.1.0"

# Jupyter shows modules as graphs, pass records as diffs (xla_teach/tools/render/display.py)
_install_rich_display(_Lowered, _Compiled)

__all__ = [
    "CompilationError",
    "HloComputation",
    "HloInstruction",
    "HloModule",
    "HloParseError",
    "Layout",
    "PrimitiveType",
    "Shape",
    "ShardedArray",
    "device_count",
    "device_put",
    "devices",
    "grad",
    "jit",
    "jvp",
    "make_array_from_process_local_data",
    "make_mesh",
    "named_scope",
    "XlaBuilder",
    "execute",
    "parse_hlo",
    "parse_shape",
    "shard_map",
    "value_and_grad",
    "vjp",
    "with_sharding_constraint",
]
