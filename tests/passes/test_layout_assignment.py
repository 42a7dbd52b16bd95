"""``layout-assignment``: the ENTRY's intermediate arrays become row-major, the parameters and the
result keep the caller's layouts, and a module with a bitcast is left alone. On JAX's weight
gradient (a product, then a ``{0,1}`` transpose and a row-major update) the CPU then computes the
product already transposed and updates it in place: no temporary."""

from __future__ import annotations

import numpy as np

from xla_teach.api import compile_module
from xla_teach.hlo.evaluator import HloEvaluator
from xla_teach.hlo.text.parser import parse_hlo
from xla_teach.passes.lowering.layout_assignment import LayoutAssignment

# w - 0.1 * transpose(g^T x): the shape of JAX's SGD update of a weight matrix
UPDATE = """HloModule update
ENTRY main {
  w = f32[96,64] parameter(0)
  g = f32[128,64] parameter(1)
  x = f32[128,96] parameter(2)
  d = f32[64,96] dot(g, x), lhs_contracting_dims={0}, rhs_contracting_dims={0}
  t = f32[96,64]{0,1} transpose(d), dimensions={1,0}
  lr = f32[] constant(0.1)
  lrs = f32[96,64]{0,1} broadcast(lr), dimensions={}
  m = f32[96,64]{0,1} multiply(t, lrs)
  ROOT u = f32[96,64] subtract(w, m)
}
"""


def test_intermediates_become_row_major_and_the_update_runs_on_the_product() -> None:
    module = parse_hlo(UPDATE)
    assert LayoutAssignment().run(module)
    entry = module.entry
    assert all(i.shape.has_default_layout() for i in entry.instructions)
    rng = np.random.default_rng(0)
    args = [rng.standard_normal(p.shape.dimensions).astype(np.float32) for p in entry.parameter_instructions]
    executable = compile_module(UPDATE, "cpu")
    optimized = executable.module.to_text()
    assert "transpose" not in optimized and '"dot_strategy":"blas"' in optimized
    assert executable.buffer_assignment.temp_bytes() == 0
    (got,) = executable.execute(args)
    (want,) = HloEvaluator().evaluate_module(parse_hlo(UPDATE), args)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_parameters_results_and_modules_with_bitcasts_keep_their_layouts() -> None:
    text = """HloModule keep
ENTRY main {
  a = f32[3,2]{0,1} parameter(0)
  n = f32[3,2]{0,1} negate(a)
  ROOT r = f32[3,2]{0,1} exponential(n)
}
"""
    module = parse_hlo(text)
    assert LayoutAssignment().run(module)  # n only
    entry = module.entry
    assert not entry.parameter(0).shape.has_default_layout() and not entry.root.shape.has_default_layout()
    with_bitcast = parse_hlo(text.replace("ROOT r = f32[3,2]{0,1} exponential(n)",
                                          "e = f32[3,2]{0,1} exponential(n)\n  ROOT r = f32[2,3] bitcast(e)"))
    assert not LayoutAssignment().run(with_bitcast)
