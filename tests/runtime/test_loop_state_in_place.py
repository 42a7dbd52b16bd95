"""A while loop on the CPU updates its state in place: the body's buffer assignment writes each
computed state element into the buffer it came in, so no iteration allocates a new one. The loop
runs in its results' buffers, which are its initial values' own when those die at the loop
(computed there by the instructions before it); otherwise the initial values are copied in once,
so neither the caller's arrays nor values read after the loop are written over."""

from __future__ import annotations

import numpy as np

from xla_teach.api import compile_module
from xla_teach.hlo.evaluator import HloEvaluator
from xla_teach.hlo.text.parser import parse_hlo

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
    # both elements: the counter's add and the multiply-add are the last readers of their element
    assert [a.output_index for a in shared] == [(0,), (1,)], [a.describe() for a in body.assignment.output_aliases]
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
    state = [np.zeros((), np.int32), np.ones(1024, np.float32)]  # the loop's own buffers
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


# Newton's square root as JAX writes a fori_loop: the initial guess is a broadcast computed just
# for the loop, ``a`` rides along unchanged, and the loop's result is the ENTRY's result.
NEWTON = """HloModule newton
cond {
  s = (s32[], f32[256], f32[256]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(20)
  ROOT lt = pred[] compare(i, n), direction=LT
}
body {
  s = (s32[], f32[256], f32[256]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  one = s32[] constant(1)
  next = s32[] add(i, one)
  x = f32[256] get-tuple-element(s), index=1
  a = f32[256] get-tuple-element(s), index=2
  q = f32[256] divide(a, x)
  sum = f32[256] add(x, q)
  half = f32[] constant(0.5)
  halves = f32[256] broadcast(half), dimensions={}
  y = f32[256] multiply(sum, halves)
  ROOT t = (s32[], f32[256], f32[256]) tuple(next, y, a)
}
ENTRY main {
  a = f32[256] parameter(0)
  zero = s32[] constant(0)
  one = f32[] constant(1)
  guess = f32[256] broadcast(one), dimensions={}
  init = (s32[], f32[256], f32[256]) tuple(zero, guess, a)
  w = (s32[], f32[256], f32[256]) while(init), condition=cond, body=body
  ROOT r = f32[256] get-tuple-element(w), index=1
}
"""


def _check_against_evaluator(text: str, args: list[np.ndarray]) -> list[np.ndarray]:
    executable = compile_module(text, "cpu")
    kept = [a.copy() for a in args]
    want = HloEvaluator().evaluate_module(parse_hlo(text), kept)
    for _ in range(2):  # a second run must start from the same initial values
        got = executable.execute(args)
        got = got if isinstance(got, (list, tuple)) else [got]
        for g, w in zip(got, want if isinstance(want, (list, tuple)) else [want], strict=True):
            np.testing.assert_allclose(g, w, rtol=1e-6)
    for a, k in zip(args, kept, strict=True):
        np.testing.assert_array_equal(a, k)  # the caller's arrays are never the loop's state
    return executable


def test_the_loop_runs_in_its_output_buffer_and_reads_a_passed_through_parameter_where_it_is() -> None:
    a = np.abs(np.random.default_rng(3).standard_normal(256).astype(np.float32)) + 0.1
    executable = _check_against_evaluator(NEWTON, [a])
    ba = executable.buffer_assignment.entry
    module = executable.artifacts.optimized_module
    w = next(i for i in module.entry.instructions if i.opcode == "while")
    guess = w.operand(0).operand(1)
    assert ba.slice(guess) == ba.slice(w, (1,)) and ba.slice(w, (1,)).allocation.kind == "output"
    assert ba.slice(w, (2,)).allocation.kind == "parameter"  # `a` is read where the caller keeps it
    assert ba.temp_bytes <= 64  # only the counter: no copy of the guess, none of `a`
    assert _while_thunk(executable).path == "fixed addresses"


KEPT = """HloModule kept
cond {
  s = (s32[], f32[128]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(4)
  ROOT lt = pred[] compare(i, n), direction=LT
}
body {
  s = (s32[], f32[128]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  one = s32[] constant(1)
  next = s32[] add(i, one)
  x = f32[128] get-tuple-element(s), index=1
  y = f32[128] add(x, x)
  ROOT t = (s32[], f32[128]) tuple(next, y)
}
ENTRY main {
  p = f32[128] parameter(0)
  e = f32[128] exponential(p)
  zero = s32[] constant(0)
  init = (s32[], f32[128]) tuple(zero, e)
  w = (s32[], f32[128]) while(init), condition=cond, body=body
  r = f32[128] get-tuple-element(w), index=1
  m = f32[128] multiply(r, e)
  ROOT out = (f32[128], f32[128]) tuple(m, e)
}
"""


def test_an_initial_value_read_after_the_loop_is_copied_in_not_written_over() -> None:
    p = np.random.default_rng(4).standard_normal(128).astype(np.float32)
    executable = _check_against_evaluator(KEPT, [p])
    ba = executable.buffer_assignment.entry
    module = executable.artifacts.optimized_module
    w = next(i for i in module.entry.instructions if i.opcode == "while")
    start = w.operand(0).operand(1)
    assert ba.slice(start) != ba.slice(w, (1,))


MIDDLE = KEPT.replace("ROOT out = (f32[128], f32[128]) tuple(m, e)", "ROOT out = f32[128] negate(m)").replace(
    "m = f32[128] multiply(r, e)", "m = f32[128] multiply(r, r)")


def test_a_loop_in_the_middle_runs_in_its_initial_values_bytes() -> None:
    p = np.random.default_rng(5).standard_normal(128).astype(np.float32)
    executable = _check_against_evaluator(MIDDLE, [p])
    ba = executable.buffer_assignment.entry
    module = executable.artifacts.optimized_module
    w = next(i for i in module.entry.instructions if i.opcode == "while")
    start = w.operand(0).operand(1)
    assert ba.slice(start) == ba.slice(w, (1,)) and ba.slice(start).allocation.kind == "temp"


def test_a_profiled_loop_times_its_bound_kernels_each_iteration() -> None:
    """The profiler (timeline, explorer) sees the loop as it runs unprofiled: buffers bound once,
    each kernel of each iteration timed -- the same results."""
    from xla_teach.tools.timeline import Timeline

    executable = compile_module(LOOP, "cpu")
    x = np.random.default_rng(2).standard_normal(1024).astype(np.float32)
    timeline = Timeline()
    got = executable.execute([x], profiler=timeline)
    assert _while_thunk(executable).path == "fixed addresses"
    body = next(s for name, s in executable.sequences.items() if name.startswith("body"))
    for thunk in body.thunks:
        assert sum(e.name == thunk.name for e in timeline.events) == 10  # one per iteration
    for g, w in zip(got, executable.execute([x]), strict=True):
        np.testing.assert_array_equal(g, w)
