"""A while loop of kernels runs as one native call (runtime/native_loop.py): no Python between
its kernels, split kernels handed to the native pool, state copied back natively -- and the
results are the interpreter's."""

from __future__ import annotations

import numpy as np
import pytest

from xla_teach.api import compile_module
from xla_teach.hlo.evaluator import HloEvaluator
from xla_teach.hlo.text.parser import parse_hlo
from xla_teach.runtime import native_loop
from xla_teach.runtime.native_pool import native_pool

# 2^20 elements: big enough that the body's kernel is split over the pool's threads; the counter
# is read after the next one is computed, so it is copied back into the state each iteration.
LOOP = """HloModule loop
cond {
  s = (s32[], f32[1024,1024]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(7)
  ROOT lt = pred[] compare(i, n), direction=LT
}
body {
  s = (s32[], f32[1024,1024]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  one = s32[] constant(1)
  next = s32[] add(i, one)
  x = f32[1024,1024] get-tuple-element(s), index=1
  f = f32[] convert(i)
  fs = f32[1024,1024] broadcast(f), dimensions={}
  y = f32[1024,1024] sine(x)
  z = f32[1024,1024] add(y, fs)
  ROOT t = (s32[], f32[1024,1024]) tuple(next, z)
}
ENTRY main {
  x = f32[1024,1024] parameter(0)
  zero = s32[] constant(0)
  init = (s32[], f32[1024,1024]) tuple(zero, x)
  w = (s32[], f32[1024,1024]) while(init), condition=cond, body=body
  ROOT r = f32[1024,1024] get-tuple-element(w), index=1
}
"""


def test_a_loop_of_kernels_is_one_native_call_with_the_interpreters_results(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []
    run = native_loop.run_loop

    def counted(*args):  # type: ignore[no-untyped-def]
        calls.append(args)
        return run(*args)

    monkeypatch.setattr(native_loop, "run_loop", counted)
    executable = compile_module(LOOP, "cpu")
    x = np.random.default_rng(0).standard_normal((1024, 1024)).astype(np.float32)
    got = executable.execute([x])[0]
    assert len(calls) == 1
    body_steps = calls[0][3]
    if native_pool() is not None:
        assert any(step.parts > 1 for step in body_steps[:calls[0][4]])  # the body is split over threads
    want = HloEvaluator().evaluate_module(parse_hlo(LOOP), [x])[0]
    # x <- sin(x) + i, 7 times: |sin'| <= 1 carries an error over unchanged, and each step adds at
    # most a rounding of the sine and of the sum, at magnitudes below 8 (a spacing of 2^-20)
    bound = 7 * 2 * float(np.spacing(np.float32(8)))
    np.testing.assert_allclose(got, want, rtol=0, atol=bound)
    np.testing.assert_array_equal(executable.execute([x])[0], got)  # a second run starts from 0 again
