"""Denormals in constant folding, as XLA folds them: elementwise ops keep IEEE denormals, dots and
convolutions fold as if they were flushed. Found by the differential fuzzer against XLA
(``fuzz_20163``: a convolution of constants where ``3.4e38 * -1.47e-39 = -0.5`` is one of the
terms; XLA gives 4.0, the CPU backend folded it to 3.5). The expected values are XLA's (JAX 0.10.2),
recorded here; the fold is checked against them and against the unfolded CPU run."""

from __future__ import annotations

import numpy as np

from xla_teach.api import compile_module
from xla_teach.hlo.text.parser import parse_hlo
from xla_teach.passes.simplifiers.constant_folding import ConstantFolding

CONV = """HloModule fuzz_20163
ENTRY main {
  a = f32[1,2,2,5] constant({ { { { 1, 4, -3, 3, 0.5 }, { 3, 0, -0, 3, 1 } }, { { nan, 3.40282347e+38, 3, 0, -1 }, { 1.17549435e-38, -0, 2.93873588e-39, 1, 3 } } } })
  w = f32[2,2,3,1] constant({ { { {-2}, {4}, {0} }, { {-inf}, {1}, {0.5} } }, { { {1}, {1}, {0.5} }, { {-1.46936794e-39}, {0}, {-1} } } })
  ROOT c = f32[1,2,1,9] convolution(a, w), window={size=3x1 lhs_dilate=2x2}, dim_labels=bf01_oi01->bf01
}"""
XLA_CONV = np.array([[[[np.nan, 0, -np.inf, 0, -np.inf, 0, np.nan, 0, np.inf]],
                      [[np.nan, 0, 4, 0, -3, 0, 3.5, 0, -2]]]], np.float32)

PRODUCTS = """HloModule products
ENTRY main {
  a = f32[1,2] constant({ { 3.40282347e+38, 1 } })
  b = f32[2,1] constant({ { -1.46936794e-39 }, { 4 } })
  d = f32[1,1] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  x = f32[] constant(3.40282347e+38)
  y = f32[] constant(-1.46936794e-39)
  m = f32[] multiply(x, y)
  ROOT t = (f32[1,1], f32[]) tuple(d, m)
}"""


def folded(text: str) -> list[np.ndarray]:
    module = parse_hlo(text)
    ConstantFolding().run(module)
    root = module.entry.root
    return [np.asarray(root.literal)] if root.opcode == "constant" else [np.asarray(o.literal) for o in root.operands]


def test_a_folded_convolution_gives_xlas_values() -> None:
    (got,) = folded(CONV)
    np.testing.assert_array_equal(got, XLA_CONV)
    np.testing.assert_array_equal(compile_module(CONV, "cpu").execute([])[0], XLA_CONV)


def test_a_folded_dot_flushes_and_a_folded_product_keeps_denormals_as_xla_does() -> None:
    """XLA: ``jnp.dot`` of these constants folds to 4.0; their elementwise product to -0.49999997."""
    dot, product = folded(PRODUCTS)
    assert dot.reshape(()) == np.float32(4)
    assert product == np.float32(-0.49999997)
