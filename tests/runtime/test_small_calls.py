"""A small program's call (runtime/executable.py's fast path): kernels with their buffer tables
filled once, only the arguments' and outputs' addresses written per call. Its results are the
interpreter's, each call's outputs are new arrays, and read-only or non-contiguous arguments
work as before."""

from __future__ import annotations

import numpy as np

from xla_teach.api import compile_module
from xla_teach.hlo.evaluator import HloEvaluator
from xla_teach.hlo.text.parser import parse_hlo

# two kernels (the sum is not fused with the sort), a constant and a temporary between them
TWO_KERNELS = """HloModule two
ENTRY main {
  x = f32[64] parameter(0)
  y = f32[64] parameter(1)
  c = f32[64] constant({0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31,32,33,34,35,36,37,38,39,40,41,42,43,44,45,46,47,48,49,50,51,52,53,54,55,56,57,58,59,60,61,62,63})
  s = f32[64] add(x, y)
  t = f32[64] multiply(s, c)
  ROOT r = f32[64] sort(t), dimensions={0}, is_stable=true, to_apply=lt
}
lt {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT l = pred[] compare(a, b), direction=LT
}
"""


def test_small_calls_give_the_interpreters_results_in_new_arrays() -> None:
    executable = compile_module(TWO_KERNELS, "cpu")
    rng = np.random.default_rng(0)
    outputs = []
    for _ in range(3):
        x, y = rng.standard_normal(64).astype(np.float32), rng.standard_normal(64).astype(np.float32)
        x.setflags(write=False)  # read-only: addressed another way
        want = HloEvaluator().evaluate_module(parse_hlo(TWO_KERNELS), [x, y])[0]
        got = executable.execute([x, y[::1]])[0]
        np.testing.assert_array_equal(got, want)  # x + y and a product by an integer: one rounding each
        outputs.append(got)
    assert not any(np.shares_memory(a, b) for i, a in enumerate(outputs) for b in outputs[i + 1:])
    strided = np.arange(128, dtype=np.float32)[::2]  # not contiguous: copied first
    want = HloEvaluator().evaluate_module(parse_hlo(TWO_KERNELS), [strided, strided])[0]
    np.testing.assert_array_equal(executable.execute([strided, strided])[0], want)
