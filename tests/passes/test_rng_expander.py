"""rng-expander (its docstring example runs in test_pass_docstrings.py), with the interpreter as the oracle -- the expanded
module must give *bit-identical* results to the legacy ``rng`` it replaces, for every
distribution and element type, on ordinary and special (NaN, inf, -0.0, extreme) bounds, with
several rngs drawing one after another."""

from __future__ import annotations

import numpy as np
import pytest

from tests.passes.pass_test_utils import check_pass, random_inputs, special_inputs
from xla_teach.hlo.evaluator import evaluate_module
from xla_teach.hlo.text.parser import parse_hlo
from xla_teach.passes.expanders.rng_expander import RngExpander


def test_no_rng_is_no_change() -> None:
    check_pass(RngExpander(), """
HloModule m
ENTRY main {
  s = u64[2] parameter(0)
  ROOT r = (u64[2], u32[4]) rng-bit-generator(s), algorithm=rng_philox
}
""", None)


def _assert_bit_identical(text: str, inputs: list) -> None:
    original = parse_hlo(text)
    expanded = original.clone()
    assert RngExpander().run(expanded)
    assert not any(i.opcode == "rng" for i in expanded.instructions())
    for args in inputs:
        for want, got in zip(evaluate_module(original, args), evaluate_module(expanded, args), strict=True):
            want, got = np.asarray(want), np.asarray(got)
            assert want.dtype == got.dtype and want.shape == got.shape
            assert want.tobytes() == got.tobytes(), f"{text}\nargs {args}\nrng:      {want}\nexpanded: {got}"


ONE = """
HloModule m
ENTRY main {
  a = TYPE[] parameter(0)
  b = TYPE[] parameter(1)
  ROOT r = TYPE[3,7] rng(a, b), distribution=DIST
}
"""
CASES = [(t, "rng_uniform") for t in ["f16", "bf16", "f32", "f64", "s8", "u8", "s32", "u32", "s64", "u64"]]
CASES += [(t, "rng_normal") for t in ["f16", "bf16", "f32", "f64"]]


@pytest.mark.parametrize("etype,distribution", CASES)
def test_expansion_draws_the_same_bits(etype: str, distribution: str) -> None:
    text = ONE.replace("TYPE", etype).replace("DIST", distribution)
    module = parse_hlo(text)
    inputs = [random_inputs(module, seed) for seed in range(3)] + [special_inputs(module, s) for s in range(7)]
    inputs = [args for args in inputs if not _int64_draws_overflow(etype, args)]
    _assert_bit_identical(text, inputs)


def _int64_draws_overflow(etype: str, args: list) -> bool:
    """The interpreter collects u64 draws in an int64 array, which overflows above 2**63 - 1."""
    return etype == "u64" and int(max(args[0], args[1])) >= 2**63


def test_rngs_draw_one_after_another_through_calls() -> None:
    """Counters follow the interpreter's order -- operands first, descending into calls -- and a
    normal draw uses two blocks' worth per element."""
    _assert_bit_identical("""
HloModule m
inner {
  p = f32[] parameter(0)
  q = f32[] parameter(1)
  ROOT n = f32[5] rng(p, q), distribution=rng_normal
}
ENTRY main {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  u = f32[3] rng(a, b), distribution=rng_uniform
  c = f32[5] call(a, b), to_apply=inner
  e = f32[0] rng(a, b), distribution=rng_uniform
  v = f32[] rng(a, b), distribution=rng_uniform
  s = f32[3] broadcast(v), dimensions={}
  w = f32[3] add(u, s)
  ROOT t = (f32[3], f32[5], f32[0]) tuple(w, c, e)
}
""", [[np.float32(-1.5), np.float32(2.0)]])


def test_states_are_read_at_run_time_in_the_interpreters_order() -> None:
    module = parse_hlo("""
HloModule m
ENTRY main {
  a = s32[] parameter(0)
  b = s32[] parameter(1)
  x = s32[5] rng(a, b), distribution=rng_uniform
  ROOT y = s32[2] rng(a, b), distribution=rng_uniform
}
""")
    RngExpander().run(module)
    states = {i.name: i for i in module.entry.instructions if i.opcode == "rng-get-and-update-state"}
    # The interpreter runs the root's operands first, then what only a side effect keeps alive:
    # y (the root) draws first, ceil(2 * 2 / 4) = 1 block; x draws ceil(5 * 2 / 4) = 3 blocks after it.
    by_delta = {int(i.attr("delta")): i for i in states.values()}
    assert sorted(by_delta) == [1, 3]
    assert by_delta[1].control_predecessors == []
    assert by_delta[3].control_predecessors == [by_delta[1]]


LOOP_BODY = """
body {
  s = (s32[], f32[3], s32[2]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  one = s32[] constant(1)
  j = s32[] add(i, one)
  x = f32[3] get-tuple-element(s), index=1
  lo = f32[] constant(-1)
  hi = f32[] constant(1)
  r = f32[3] rng(lo, hi), distribution=rng_uniform
  y = f32[3] add(x, r)
  n = s32[2] get-tuple-element(s), index=2
  zero = s32[] constant(0)
  ten = s32[] constant(10)
  k = s32[2] rng(zero, ten), distribution=rng_uniform
  m = s32[2] multiply(n, k)
  ROOT t = (s32[], f32[3], s32[2]) tuple(j, y, m)
}
cond {
  s = (s32[], f32[3], s32[2]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(TRIPS)
  ROOT lt = pred[] compare(i, n), direction=LT
}
"""


@pytest.mark.parametrize("trips", [0, 1, 5])
def test_rng_in_a_loop_draws_fresh_numbers_each_iteration(trips: int) -> None:
    text = "HloModule m\n" + LOOP_BODY.replace("TRIPS", str(trips)) + """
ENTRY main {
  start = s32[] parameter(0)
  x = f32[3] parameter(1)
  n = s32[2] parameter(2)
  t = (s32[], f32[3], s32[2]) tuple(start, x, n)
  x0 = f32[] constant(0.5)
  before = f32[2] rng(x0, x0), distribution=rng_normal
  w = (s32[], f32[3], s32[2]) while(t), condition=cond, body=body
  after = f32[4] rng(x0, x0), distribution=rng_uniform
  ROOT r = ((s32[], f32[3], s32[2]), f32[2], f32[4]) tuple(w, before, after)
}
"""
    ones = np.ones(2, np.int32)
    _assert_bit_identical(text, [[np.int32(s), np.zeros(3, np.float32), ones] for s in (0, 2, -3)])


def test_rng_in_both_branches_of_a_conditional() -> None:
    _assert_bit_identical("""
HloModule m
uniform {
  p = f32[] parameter(0)
  q = f32[] constant(2)
  ROOT r = f32[6] rng(p, q), distribution=rng_uniform
}
normal {
  p = f32[] parameter(0)
  q = f32[] constant(2)
  n = f32[3] rng(p, q), distribution=rng_normal
  ROOT c = f32[6] concatenate(n, n), dimensions={0}
}
ENTRY main {
  k = s32[] parameter(0)
  a = f32[] parameter(1)
  first = f32[6] conditional(k, a, a), branch_computations={uniform, normal}
  second = f32[6] conditional(k, a, a), branch_computations={normal, uniform}
  ROOT t = (f32[6], f32[6]) tuple(first, second)
}
""", [[np.int32(k), np.float32(-0.25)] for k in (0, 1, 7)])


def test_rng_in_a_computation_called_twice_and_from_a_loop() -> None:
    _assert_bit_identical("""
HloModule m
draw {
  p = f32[] parameter(0)
  ROOT r = f32[2] rng(p, p), distribution=rng_normal
}
body {
  s = (s32[], f32[2]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  one = s32[] constant(1)
  j = s32[] add(i, one)
  half = f32[] constant(0.5)
  d = f32[2] call(half), to_apply=draw
  ROOT t = (s32[], f32[2]) tuple(j, d)
}
cond {
  s = (s32[], f32[2]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(3)
  ROOT lt = pred[] compare(i, n), direction=LT
}
ENTRY main {
  a = f32[] parameter(0)
  x = f32[2] call(a), to_apply=draw
  zero = s32[] constant(0)
  t = (s32[], f32[2]) tuple(zero, x)
  w = (s32[], f32[2]) while(t), condition=cond, body=body
  y = f32[2] call(a), to_apply=draw
  unused = f32[2] call(a), to_apply=draw
  ROOT r = ((s32[], f32[2]), f32[2], f32[2]) tuple(w, x, y)
}
""", [[np.float32(1.5)]])


def test_draws_are_ordered_by_control_edges_that_survive_inlining() -> None:
    """The callee's draw, inlined, keeps its place in the order: control edges on both sides."""
    text = """
HloModule m
draw {
  p = f32[] parameter(0)
  q = f32[] constant(4)
  ROOT r = f32[2] rng(p, q), distribution=rng_uniform
}
ENTRY main {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  u = f32[3] rng(a, b), distribution=rng_uniform
  c = f32[2] call(a), to_apply=draw
  dead = f32[2] call(a), to_apply=draw
  v = f32[5] rng(a, b), distribution=rng_uniform
  ROOT t = (f32[2], f32[5]) tuple(c, v)
}
"""
    module = parse_hlo(text)
    RngExpander().run(module)
    assert [c.name for c in module.computations] == ["main"]
    states = {int(i.attr("delta")): i for i in module.entry.instructions if i.opcode == "rng-get-and-update-state"}
    # The root's operands first -- c (1 block), then v (3 blocks) -- then the side-effecting u
    # (2 blocks). The dead call never runs in the interpreter: it is removed, not inlined.
    assert sorted(states) == [1, 2, 3]
    assert states[1].control_predecessors == []
    assert states[3].control_predecessors == [states[1]]
    assert states[2].control_predecessors == [states[3]]
    _assert_bit_identical(text, [[np.float32(0.5), np.float32(2)]])


def test_rng_that_runs_once_per_element_is_rejected_clearly() -> None:
    module = parse_hlo("""
HloModule m
noisy {
  p = f32[] parameter(0)
  r = f32[] rng(p, p), distribution=rng_uniform
  ROOT s = f32[] add(p, r)
}
ENTRY main {
  x = f32[4] parameter(0)
  ROOT m = f32[4] map(x), dimensions={0}, to_apply=noisy
}
""")
    with pytest.raises(NotImplementedError, match=r"rng-expander: r \(rng\) is reached through m \(map\)"):
        RngExpander().run(module)


def test_normal_of_integers_is_rejected_clearly() -> None:
    module = parse_hlo(ONE.replace("TYPE", "s32").replace("DIST", "rng_normal"))
    with pytest.raises(ValueError, match=r"r: rng rng_normal of s32\[3,7\].* normal takes floats"):
        RngExpander().run(module)
