"""``rng``, ``topk``, ``all-gather`` and ``collective-permute`` on the CPU backend, bit for bit
against the reference interpreter, on special inputs too (NaN, +-inf, -0.0, integer extremes);
``rng`` inside loops, branches and twice-called computations too; and the clear errors for what
one replica cannot express or an rng run once per element cannot order."""

from __future__ import annotations

import numpy as np
import pytest

from tests.passes.pass_test_utils import special_inputs
from xla_teach.api import compile_module, execute
from xla_teach.hlo.evaluator import HloEvaluator
from xla_teach.hlo.text.parser import parse_hlo


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
    ("u32", "rng_uniform"), ("s64", "rng_uniform"), ("f32", "rng_normal"), ("bf16", "rng_normal"), ("pred", "rng_uniform"),
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


RNG_IN_CONTROL_FLOW = """
HloModule m
draw {
  p = f32[] parameter(0)
  q = f32[] parameter(1)
  ROOT r = f32[2,3] rng(p, q), distribution=rng_normal
}
ints {
  pq = (f32[], f32[]) parameter(0)
  lo = s32[] constant(-5)
  hi = s32[] constant(1000)
  i = s32[6] rng(lo, hi), distribution=rng_uniform
  ROOT c = f32[6] convert(i)
}
floats {
  pq = (f32[], f32[]) parameter(0)
  p = f32[] get-tuple-element(pq), index=0
  q = f32[] get-tuple-element(pq), index=1
  ROOT u = f32[6] rng(p, q), distribution=rng_uniform
}
cond {
  s = (s32[], f32[6], f32[]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(5)
  ROOT lt = pred[] compare(i, n), direction=LT
}
body {
  s = (s32[], f32[6], f32[]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  one = s32[] constant(1)
  j = s32[] add(i, one)
  x = f32[6] get-tuple-element(s), index=1
  a = f32[] get-tuple-element(s), index=2
  two = s32[] constant(2)
  k = s32[] remainder(i, two)
  aa = (f32[], f32[]) tuple(a, a)
  d = f32[6] conditional(k, aa, aa), branch_computations={floats, ints}
  y = f32[6] add(x, d)
  ROOT t = (s32[], f32[6], f32[]) tuple(j, y, a)
}
ENTRY main {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  first = f32[2,3] call(a, b), to_apply=draw
  start = s32[] constant(0)
  x = f32[6] broadcast(a), dimensions={}
  t = (s32[], f32[6], f32[]) tuple(start, x, b)
  w = (s32[], f32[6], f32[]) while(t), condition=cond, body=body
  loop = f32[6] get-tuple-element(w), index=1
  second = f32[2,3] call(b, a), to_apply=draw
  k = s32[] parameter(2)
  ab = (f32[], f32[]) tuple(a, b)
  picked = f32[6] conditional(k, ab, ab), branch_computations={floats, ints}
  ROOT r = (f32[2,3], f32[6], f32[2,3], f32[6]) tuple(first, loop, second, picked)
}
"""


def test_rng_in_loops_branches_and_twice_called_computations_matches_the_interpreter() -> None:
    """Each rng execution draws where the previous one stopped, in the interpreter's order: five
    loop iterations alternating between two conditional branches, a computation called twice."""
    module = parse_hlo(RNG_IN_CONTROL_FLOW)
    executable = compile_module(RNG_IN_CONTROL_FLOW, "cpu")
    for k in (0, 1, 2, -1):
        args = [np.float32(-1.5), np.float32(2.0), np.int32(k)]
        want = HloEvaluator().evaluate_module(module, args)
        for run in range(2):  # the same executable again: a fresh counter, as a fresh interpreter
            got = executable.execute(args)
            for w, g in zip(want, got, strict=True):
                assert w.dtype == g.dtype and w.shape == g.shape
                assert w.tobytes() == g.tobytes(), f"k={k} run {run}: interpreter {w}, cpu {g}"
    assert not np.array_equal(want[0], want[2]), "the two calls of draw must draw different numbers"


def test_rng_state_is_a_kernel_over_a_global_reset_at_the_start() -> None:
    executable = compile_module(RNG_IN_CONTROL_FLOW, "cpu")
    ir_text = executable.artifacts.llvm_ir
    assert "@xla_teach_rng_state = internal global [2 x i64]" in ir_text.replace('"', "")
    entry = executable.entry.thunks
    assert entry[0].name == "rng_state_reset"
    opcodes = {i.opcode for i in executable.artifacts.optimized_module.instructions()}
    assert "rng-get-and-update-state" in opcodes and "rng" not in opcodes


def test_rng_run_once_per_element_is_rejected_clearly() -> None:
    text = """
HloModule m
noisy {
  p = f32[] parameter(0)
  r = f32[] rng(p, p), distribution=rng_uniform
  ROOT s = f32[] add(p, r)
}
ENTRY main {
  x = f32[3] parameter(0)
  ROOT m = f32[3] map(x), dimensions={0}, to_apply=noisy
}
"""
    with pytest.raises(NotImplementedError, match=r"r \(rng\) is reached through m \(map\)"):
        compile_module(text, "cpu")


def test_variadic_all_reduce_compiles_per_operand() -> None:
    """all-reduce-splitter gives each operand its own all-reduce; on one device each result is
    its operand (the interpreter's meaning)."""
    text = """
HloModule m
add_f {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY main {
  x = f32[4] parameter(0)
  y = f32[2,3] parameter(1)
  r = (f32[4], f32[2,3]) all-reduce(x, y), replica_groups={}, to_apply=add_f
  a = f32[4] get-tuple-element(r), index=0
  b = f32[2,3] get-tuple-element(r), index=1
  ROOT t = (f32[4], f32[2,3]) tuple(a, b)
}
"""
    x, y = np.arange(4, dtype=np.float32), np.arange(6, dtype=np.float32).reshape(2, 3)
    want = execute(text, [x, y], backend="interpreter")
    got = execute(text, [x, y], backend="cpu")
    for w, g, arg in zip(want, got, (x, y), strict=True):
        np.testing.assert_array_equal(g, w)
        np.testing.assert_array_equal(g, arg)
