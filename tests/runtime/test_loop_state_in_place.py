"""A while loop on the CPU updates its state in place: the body's buffer assignment writes each
computed state element into the buffer it came in, so no iteration allocates a new one; the
loop's first iteration works on copies, so neither the caller's arrays nor values read after the
loop are written over."""

from __future__ import annotations

import numpy as np

from xla_teach.api import compile_module
from xla_teach.hlo.evaluator import HloEvaluator
from xla_teach.hlo.parser import parse_hlo

LOOP = """HloModule loop
cond {
  s = (s32[], f32[1024]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(10)
  ROOT lt = pred[] compare(i, n), direction=LT
}
body {
  s = (s32[], f32[1024]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  one = s32[] constant(1)
  next = s32[] add(i, one)
  x = f32[1024] get-tuple-element(s), index=1
  half = f32[] constant(0.5)
  halves = f32[1024] broadcast(half), dimensions={}
  y = f32[1024] multiply(x, halves)
  z = f32[1024] add(y, halves)
  ROOT t = (s32[], f32[1024]) tuple(next, z)
}
ENTRY main {
  x = f32[1024] parameter(0)
  zero = s32[] constant(0)
  init = (s32[], f32[1024]) tuple(zero, x)
  w = (s32[], f32[1024]) while(init), condition=cond, body=body
  r = f32[1024] get-tuple-element(w), index=1
  ROOT out = (f32[1024], f32[1024]) tuple(r, x)
}
"""


def test_the_body_writes_the_state_in_place_and_the_caller_keeps_its_values() -> None:
    executable = compile_module(LOOP, "cpu")
    body = next(s for name, s in executable.sequences.items() if name.startswith("body"))
    shared = [a for a in body.assignment.output_aliases if a.shared]
    assert [a.output_index for a in shared] == [(1,)], [a.describe() for a in body.assignment.output_aliases]
    x = np.random.default_rng(0).standard_normal(1024).astype(np.float32)
    before = x.copy()
    got = executable.execute([x])
    want = HloEvaluator().evaluate_module(parse_hlo(LOOP), [before])
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g, w)
    np.testing.assert_array_equal(x, before)  # the argument, which is also the loop's initial state
    np.testing.assert_array_equal(got[1], before)  # x read after the loop: not the loop's buffer
    again = executable.execute([x])  # a second run starts from the caller's values again
    np.testing.assert_array_equal(again[0], want[0])


def test_each_iteration_reuses_the_same_buffer() -> None:
    """The body's result for the state element is the very array it received."""
    executable = compile_module(LOOP, "cpu")
    body = next(s for name, s in executable.sequences.items() if name.startswith("body"))
    state = body.own_state([np.zeros((), np.int32), np.ones(1024, np.float32)])
    out = body.run(state)
    assert np.shares_memory(out[1], state[1])
    np.testing.assert_array_equal(out[1], np.ones(1024, np.float32))  # 1 * 0.5 + 0.5


SWAP = """HloModule swap
cond {
  s = (s32[], f32[64], f32[64]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(5)
  ROOT lt = pred[] compare(i, n), direction=LT
}
body {
  s = (s32[], f32[64], f32[64]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  one = s32[] constant(1)
  next = s32[] add(i, one)
  a = f32[64] get-tuple-element(s), index=1
  b = f32[64] get-tuple-element(s), index=2
  ROOT t = (s32[], f32[64], f32[64]) tuple(next, b, a)
}
ENTRY main {
  x = f32[64] parameter(0)
  y = f32[64] parameter(1)
  zero = s32[] constant(0)
  init = (s32[], f32[64], f32[64]) tuple(zero, x, y)
  w = (s32[], f32[64], f32[64]) while(init), condition=cond, body=body
  i = s32[] get-tuple-element(w), index=0
  a = f32[64] get-tuple-element(w), index=1
  ROOT out = (s32[], f32[64]) tuple(i, a)
}
"""


def _while_thunk(executable):  # type: ignore[no-untyped-def]
    return next(t for t in executable.entry.thunks if getattr(t, "kind", "") == "while")


def test_a_loop_of_kernels_runs_with_fixed_addresses_and_leaves_its_constants_alone() -> None:
    """The counter's initial 0 is a constant of the ENTRY; the loop copies the next count back
    into a state element of its own, never into that constant: a second run starts from 0 again."""
    executable = compile_module(LOOP, "cpu")
    x = np.random.default_rng(1).standard_normal(1024).astype(np.float32)
    want = HloEvaluator().evaluate_module(parse_hlo(LOOP), [x])
    for _ in range(2):
        got = executable.execute([x])
        assert _while_thunk(executable).path == "fixed addresses"
        for g, w in zip(got, want, strict=True):
            np.testing.assert_array_equal(g, w)


def test_state_elements_that_trade_places_take_the_general_path() -> None:
    executable = compile_module(SWAP, "cpu")
    rng = np.random.default_rng(2)
    x, y = (rng.standard_normal(64).astype(np.float32) for _ in range(2))
    got = executable.execute([x, y])
    want = HloEvaluator().evaluate_module(parse_hlo(SWAP), [x, y])
    assert _while_thunk(executable).path == "general"
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g, w)
