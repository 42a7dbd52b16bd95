"""``rng``, ``topk``, ``all-gather`` and ``collective-permute`` on the CPU backend, bit for bit
against the reference interpreter, on special inputs too (NaN, +-inf, -0.0, integer extremes);
and the clear errors for what one replica or a fixed Philox counter cannot express."""

from __future__ import annotations

import numpy as np
import pytest

from tests.passes.pass_test_utils import special_inputs
from xla_teach.api import compile_module
from xla_teach.hlo.evaluator import HloEvaluator
from xla_teach.hlo.parser import parse_hlo


def _assert_cpu_bit_identical(text: str, shifts: int = 5) -> None:
    module = parse_hlo(text)
    executable = compile_module(text, "cpu")
    for shift in range(shifts):
        args = special_inputs(module, shift)
        want = HloEvaluator().evaluate_module(module, args)
        got = executable.execute(args)
        for w, g in zip(want, got, strict=True):
            w, g = np.asarray(w), np.asarray(g)
            assert w.dtype == g.dtype and w.shape == g.shape
            assert w.tobytes() == g.tobytes(), f"{text}\nargs {args}\ninterpreter {w}\ncpu         {g}"


RNG = """
HloModule m
ENTRY main {
  a = TYPE[] parameter(0)
  b = TYPE[] parameter(1)
  first = TYPE[2,9] rng(a, b), distribution=DIST
  ROOT second = TYPE[13] rng(b, a), distribution=DIST
}
"""


@pytest.mark.parametrize("etype,distribution", [
    ("f32", "rng_uniform"), ("f16", "rng_uniform"), ("f64", "rng_uniform"), ("s8", "rng_uniform"),
    ("u32", "rng_uniform"), ("s64", "rng_uniform"), ("f32", "rng_normal"), ("bf16", "rng_normal"),
])
def test_rng_matches_the_interpreter_bit_for_bit(etype: str, distribution: str) -> None:
    _assert_cpu_bit_identical(RNG.replace("TYPE", etype).replace("DIST", distribution))


@pytest.mark.parametrize("etype", ["f32", "f16", "s16", "u8"])
def test_topk_matches_the_interpreter_bit_for_bit(etype: str) -> None:
    _assert_cpu_bit_identical(f"""
HloModule m
ENTRY main {{
  x = {etype}[4,23] parameter(0)
  a = ({etype}[4,6], s32[4,6]) topk(x), k=6, largest=true
  ROOT b = ({etype}[4,23], s32[4,23]) topk(x), k=23, largest=false
}}
""")


def test_collectives_match_the_interpreter_bit_for_bit() -> None:
    _assert_cpu_bit_identical("""
HloModule m
ENTRY main {
  x = f32[3,5] parameter(0)
  g = f32[3,5] all-gather(x), dimensions={1}, replica_groups={{0}}
  p = f32[3,5] collective-permute(g), source_target_pairs={{1,0},{0,0}}
  q = f32[3,5] collective-permute(x), source_target_pairs={{0,1}}
  ROOT t = (f32[3,5], f32[3,5]) tuple(p, q)
}
""", shifts=2)


def test_all_gather_over_several_replicas_is_rejected_clearly() -> None:
    text = """
HloModule m
ENTRY main {
  x = f32[3,5] parameter(0)
  ROOT g = f32[6,5] all-gather(x), dimensions={0}, replica_groups={{0,1}}
}
"""
    with pytest.raises(NotImplementedError, match=r"all-gather of f32\[3,5\] into f32\[6,5\] needs several replicas"):
        compile_module(text, "cpu")


def test_rng_in_a_loop_body_is_rejected_clearly() -> None:
    text = """
HloModule m
cond {
  s = (s32[], f32[3]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(4)
  ROOT lt = pred[] compare(i, n), direction=LT
}
body {
  s = (s32[], f32[3]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  one = s32[] constant(1)
  j = s32[] add(i, one)
  lo = f32[] constant(0)
  hi = f32[] constant(1)
  r = f32[3] rng(lo, hi), distribution=rng_uniform
  ROOT t = (s32[], f32[3]) tuple(j, r)
}
ENTRY main {
  zero = s32[] constant(0)
  x = f32[3] parameter(0)
  t = (s32[], f32[3]) tuple(zero, x)
  w = (s32[], f32[3]) while(t), condition=cond, body=body
  ROOT g = f32[3] get-tuple-element(w), index=1
}
"""
    with pytest.raises(NotImplementedError, match=r"r \(rng\) is reached through w \(while\)"):
        compile_module(text, "cpu")
