"""Identical kernels are compiled once (backends/llvm/kernel_dedup.py): the later one becomes an
LLVM alias of the first, runs the first's code, gives the interpreter's results, and the explorer
shows it the code it runs. Kernels that differ in anything -- an op, a constant, an inner
dimension -- stay apart."""

from __future__ import annotations

import numpy as np

from xla_teach.api import compile_module
from xla_teach.hlo.evaluator import HloEvaluator
from xla_teach.hlo.text.parser import parse_hlo
from xla_teach.tools.explorer.kernel_code import kernel_code

# the tanh of x, of y and of z are the same kernel: a 1-D loop over [begin, end), whatever the
# length (the runtime passes it); the exp of w is another
TWINS = """HloModule twins
ENTRY main {
  x = f32[64] parameter(0)
  y = f32[64] parameter(1)
  z = f32[128] parameter(2)
  w = f32[64] parameter(3)
  a = f32[64] tanh(x)
  b = f32[64] tanh(y)
  c = f32[64] exponential(w)
  d = f32[128] tanh(z)
  ROOT t = (f32[64], f32[64], f32[64], f32[128]) tuple(a, b, c, d)
}
"""


def test_a_repeated_kernel_is_compiled_once_and_computes_the_same() -> None:
    executable = compile_module(TWINS, "cpu")
    ir = executable.artifacts.llvm_ir
    aliases = [line for line in ir.splitlines() if " = alias " in line]
    assert aliases == ['@"b" = alias void (ptr, i64, i64), ptr @"a"', '@"d" = alias void (ptr, i64, i64), ptr @"a"']
    rng = np.random.default_rng(0)
    args = [rng.standard_normal(n).astype(np.float32) for n in (64, 64, 128, 64)]
    got = executable.execute(args)
    want = HloEvaluator().evaluate_module(parse_hlo(TWINS), args)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=4 * np.finfo(np.float32).eps, atol=0)  # within a few ulp
    code = kernel_code(executable.artifacts, ["b"])["b"]
    assert code[0][0] == "LLVM IR" and "b runs the same code as a" in code[0][1]


def test_kernels_that_differ_in_a_constant_or_an_inner_dimension_stay_apart() -> None:
    text = """HloModule apart
ENTRY main {
  x = f32[8,16] parameter(0)
  y = f32[8,16] parameter(1)
  z = f32[8,32] parameter(2)
  two = f32[] constant(2)
  three = f32[] constant(3)
  twos = f32[8,16] broadcast(two), dimensions={}
  threes = f32[8,16] broadcast(three), dimensions={}
  threes_wide = f32[8,32] broadcast(three), dimensions={}
  a = f32[8,16] multiply(x, twos)
  b = f32[8,16] multiply(y, threes)
  c = f32[8,32] multiply(z, threes_wide)
  ROOT t = (f32[8,16], f32[8,16], f32[8,32]) tuple(a, b, c)
}
"""
    executable = compile_module(text, "cpu")
    assert " = alias " not in executable.artifacts.llvm_ir
    rng = np.random.default_rng(1)
    args = [rng.standard_normal(s).astype(np.float32) for s in ((8, 16), (8, 16), (8, 32))]
    for g, w in zip(executable.execute(args), HloEvaluator().evaluate_module(parse_hlo(text), args), strict=True):
        np.testing.assert_array_equal(g, w)  # a product by 2 or 3: one rounding, the same on both
