"""A dot fusion whose epilogue ends in a bitcast to another shape, as XLA's CPU compiler writes
``x @ W + b`` on 3-D activations (the product ``f32[32,24]``, the result ``f32[4,8,24]``): run as XLA
fused it (only the defuser, which keeps fusions the CPU's kernels emit), the product is written in
the dot's shape and the epilogue stores each element at the same place in the result's shape.
Oracle: the interpreter, within the rounding-error bound of the sums."""

from __future__ import annotations

import numpy as np
import pytest

from tests.backends.backend_test_utils import assert_same, reference
from xla_teach.api import compile_module
from xla_teach.backends.options import CompileOptions
from xla_teach.hlo.text.parser import parse_hlo
from xla_teach.passes.fusion.defuser import Defuser
from xla_teach.passes.pass_base import HloPassPipeline

FUSION = """HloModule dot_bitcast_epilogue, is_scheduled=true

fused_dot {
  p0 = f32[32,16]{1,0} parameter(0)
  p1 = f32[16,24]{1,0} parameter(1)
  p2 = f32[24]{0} parameter(2)
  dot = f32[32,24]{1,0} dot(p0, p1), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  b = f32[32,24]{1,0} broadcast(p2), dimensions={1}
  add = f32[32,24]{1,0} add(dot, b)
  ROOT r = f32[4,8,24]{2,1,0} bitcast(add)
}

ENTRY main {
  x = f32[32,16]{1,0} parameter(0)
  w = f32[16,24]{1,0} parameter(1)
  bias = f32[24]{0} parameter(2)
  ROOT f = f32[4,8,24]{2,1,0} fusion(x, w, bias), kind=kOutput, calls=fused_dot
}
"""


@pytest.mark.parametrize("strategy", ["blas", "loops"])
def test_a_dot_epilogue_that_bitcasts_stores_each_element_where_the_result_has_it(strategy: str) -> None:
    text = FUSION.replace("rhs_contracting_dims={0}", 'rhs_contracting_dims={0}, backend_config={"dot_strategy":'
                          f'"{strategy}"}}')
    rng = np.random.default_rng(0)
    args = [rng.standard_normal((32, 16)).astype(np.float32), rng.standard_normal((16, 24)).astype(np.float32),
            rng.standard_normal(24).astype(np.float32)]
    options = CompileOptions.from_flags()
    options.pipeline = HloPassPipeline("as-fused", [Defuser(lambda fusion: True)])
    executable = compile_module(parse_hlo(text), "cpu", options)
    assert [i.opcode for i in executable.module.entry.instructions if i.opcode == "fusion"] == ["fusion"]
    assert_same(executable.execute(args), reference(parse_hlo(text), args))
