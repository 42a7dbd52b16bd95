"""rng-expander: the golden docstring example, then the interpreter as the oracle -- the expanded
module must give *bit-identical* results to the legacy ``rng`` it replaces, for every
distribution and element type, on ordinary and special (NaN, inf, -0.0, extreme) bounds, with
several rngs drawing one after another."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

from tests.passes.pass_test_utils import check_pass, random_inputs, special_inputs
from xla_teach.hlo.evaluator import evaluate_module
from xla_teach.hlo.parser import parse_hlo
from xla_teach.passes.expanders import rng_expander
from xla_teach.passes.expanders.rng_expander import RngExpander


def _docstring_block(label: str) -> str:
    lines = (inspect.getdoc(rng_expander) or "").splitlines()
    block = []
    for line in lines[lines.index(f"{label}::") + 1:]:
        if line.strip() and not line.startswith("    "):
            break
        block.append(line[4:])
    return "HloModule m\n" + "\n".join(block)


def test_docstring_example() -> None:
    check_pass(RngExpander(), _docstring_block("Before"), _docstring_block("After"))


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


def test_counters_are_constants_in_the_expanded_module() -> None:
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
    states = sorted(tuple(int(v) for v in i.literal) for i in module.entry.instructions if i.name.startswith("state"))
    # The interpreter runs the root's operands first, then what only a side effect keeps alive:
    # y (the root) draws first and uses ceil(2 * 2 / 4) = 1 block, then x starts at counter 1.
    assert states == [(0, 0), (0, 1)]


@pytest.mark.parametrize("where,call", [
    ("body", "w = (s32[], f32[3]) while(t), condition=cond, body=body"),
    ("branch", "w = (s32[], f32[3]) conditional(p, t, t), true_computation=body, false_computation=body"),
])
def test_rng_that_may_run_many_times_is_rejected_clearly(where: str, call: str) -> None:
    module = parse_hlo(f"""
HloModule m
cond {{
  s = (s32[], f32[3]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(4)
  ROOT lt = pred[] compare(i, n), direction=LT
}}
body {{
  s = (s32[], f32[3]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  one = s32[] constant(1)
  j = s32[] add(i, one)
  lo = f32[] constant(0)
  hi = f32[] constant(1)
  r = f32[3] rng(lo, hi), distribution=rng_uniform
  ROOT t = (s32[], f32[3]) tuple(j, r)
}}
ENTRY main {{
  p = pred[] parameter(0)
  zero = s32[] constant(0)
  x = f32[3] parameter(1)
  t = (s32[], f32[3]) tuple(zero, x)
  {call}
  ROOT g = f32[3] get-tuple-element(w), index=1
}}
""")
    with pytest.raises(NotImplementedError, match=r"rng-expander: r \(rng\) is reached through w"):
        RngExpander().run(module)


def test_normal_of_integers_is_rejected_clearly() -> None:
    module = parse_hlo(ONE.replace("TYPE", "s32").replace("DIST", "rng_normal"))
    with pytest.raises(ValueError, match=r"r: rng rng_normal of s32\[3,7\].* normal takes floats"):
        RngExpander().run(module)


def test_rng_in_a_computation_called_twice_is_rejected_clearly() -> None:
    module = parse_hlo("""
HloModule m
draw {
  p = f32[] parameter(0)
  ROOT r = f32[2] rng(p, p), distribution=rng_uniform
}
ENTRY main {
  a = f32[] parameter(0)
  x = f32[2] call(a), to_apply=draw
  y = f32[2] call(a), to_apply=draw
  ROOT s = f32[2] add(x, y)
}
""")
    with pytest.raises(NotImplementedError, match="called from more than one place"):
        RngExpander().run(module)
