"""Row kernels written as vector code (backends/llvm/vector_emitter.py): which row fusions get it,
that they compute what the interpreter does (remainders, f64, odd reducers, broadcast vectors,
masks), and that a module of such kernels skips LLVM's loop vectorizer."""

from __future__ import annotations

import numpy as np
import pytest

from tests.backends.backend_test_utils import assert_same, run_both
from xla_teach.api import compile_module
from xla_teach.passes.fusion.row_fusion import is_row_fusion


def _reducers(t: str) -> str:
    return "\n".join(
        f"{name} {{ a = {t}[] parameter(0)  b = {t}[] parameter(1)  ROOT r = {t}[] {op}(a, b) }}"
        for name, op in (("add", "add"), ("max", "maximum"), ("min", "minimum"), ("mul", "multiply")))


def _softmax(t: str, rows: int, n: int) -> str:
    return f"""HloModule softmax
{_reducers(t)}
ENTRY main {{
  x = {t}[{rows},{n}] parameter(0)
  ninf = {t}[] constant(-inf)
  mx = {t}[{rows}] reduce(x, ninf), dimensions={{1}}, to_apply=max
  mb = {t}[{rows},{n}] broadcast(mx), dimensions={{0}}
  s = {t}[{rows},{n}] subtract(x, mb)
  e = {t}[{rows},{n}] exponential(s)
  zero = {t}[] constant(0)
  sm = {t}[{rows}] reduce(e, zero), dimensions={{1}}, to_apply=add
  sb = {t}[{rows},{n}] broadcast(sm), dimensions={{0}}
  ROOT d = {t}[{rows},{n}] divide(e, sb)
}}
"""


# A layer norm with its gain a vector along the row, a sum with a non-zero start, a min and a
# product, and a mask: every kind of value along the lanes.
MIXED = """HloModule mixed
REDUCERS
ENTRY main {
  x = f32[6,@N] parameter(0)
  g = f32[@N] parameter(1)
  k = f32[] parameter(2)
  start = f32[] constant(2.5)
  one = f32[] constant(1)
  inf = f32[] constant(inf)
  s = f32[6] reduce(x, start), dimensions={1}, to_apply=add
  lo = f32[6] reduce(x, inf), dimensions={1}, to_apply=min
  t = f32[6,@N] tanh(x)
  p = f32[6] reduce(t, one), dimensions={1}, to_apply=mul
  sb = f32[6,@N] broadcast(s), dimensions={0}
  lb = f32[6,@N] broadcast(lo), dimensions={0}
  pb = f32[6,@N] broadcast(p), dimensions={0}
  gb = f32[6,@N] broadcast(g), dimensions={1}
  kb = f32[6,@N] broadcast(k), dimensions={}
  c = f32[6,@N] subtract(x, lb)
  m = pred[6,@N] compare(x, sb), direction=GT
  z = f32[] constant(0)
  zero = f32[6,@N] broadcast(z), dimensions={}
  y = f32[6,@N] select(m, c, zero)
  w = f32[6,@N] multiply(y, gb)
  v = f32[6,@N] add(w, pb)
  ROOT o = f32[6,@N] multiply(v, kb)
}
""".replace("REDUCERS", _reducers("f32"))


def _vector_type(exe) -> str | None:  # noqa: ANN001
    text = exe.artifacts.llvm_ir
    for vector in ("<8 x float>", "<4 x double>"):
        if vector in text:
            return vector
    return None


@pytest.mark.parametrize("t,rows,n,lanes", [
    ("f32", 8, 100, "<8 x float>"),   # 96 in vectors (six steps of two), 4 left over
    ("f32", 3, 60, "<8 x float>"),    # 48 two vectors a step, one more vector, 4 left over
    ("f32", 3, 1024, "<8 x float>"),  # no remainder
    ("f32", 5, 9, "<8 x float>"),     # one vector and one element
    ("f64", 4, 37, "<4 x double>"),
    ("f32", 4, 5, None),              # shorter than a vector: scalar loops
])
def test_softmax_rows_in_vector_code_match_the_interpreter(t: str, rows: int, n: int, lanes: str | None) -> None:
    text = _softmax(t, rows, n)
    exe = compile_module(text, "cpu")
    assert is_row_fusion(exe.module.entry.root)
    assert _vector_type(exe) == lanes
    got, want = run_both(text, None, "cpu", seed=n)
    assert_same(got, want)


@pytest.mark.parametrize("n", [64, 75])
def test_every_kind_of_lane_value_matches_the_interpreter(n: int) -> None:
    text = MIXED.replace("@N", str(n))
    exe = compile_module(text, "cpu")
    assert is_row_fusion(exe.module.entry.root) and _vector_type(exe) == "<8 x float>"
    rng = np.random.default_rng(n)
    args = [rng.uniform(-1, 1, (6, n)).astype(np.float32), rng.uniform(0.5, 2, n).astype(np.float32),
            np.float32(1.5)]
    args[0][1, 7] = np.nan  # NaN through min, tanh, the product and the compare
    args[0][2, 3] = -np.inf
    got, want = run_both(text, args, "cpu")
    assert_same(got, want, {"rtol": 1e-5, "atol": 1e-6})


def test_a_row_across_the_layout_stays_scalar() -> None:
    """The row is dimension 1, but the layout's minor-most dimension is 0: consecutive row
    elements are not consecutive in memory, so the kernel keeps scalar loops."""
    text = _softmax("f32", 16, 64).replace("f32[16,64]", "f32[16,64]{0,1}")
    exe = compile_module(text, "cpu")
    assert _vector_type(exe) is None
    got, want = run_both(text, None, "cpu")
    assert_same(got, want)


def test_a_module_of_vector_code_skips_the_loop_vectorizer() -> None:
    """LLVM's loop vectorizer names its loops vector.body; a module whose every kernel is vector
    code already gets the short pipeline, which has none. A module that also has a plain loop
    kernel (here an elementwise exp after the softmax, which the row fusion leaves out because
    its result is also an output) gets -O3, vectorizer and all."""
    exe = compile_module(_softmax("f32", 8, 256), "cpu")
    assert "vector.body" not in exe.artifacts.optimized_llvm_ir
    assert "ways.body" in exe.artifacts.optimized_llvm_ir  # the max loop: two vectors a step
    mixed = _softmax("f32", 8, 256).replace(
        "  ROOT d = f32[8,256] divide(e, sb)",
        "  d = f32[8,256] divide(e, sb)\n  l = f32[8,256] log(x)\n  ROOT o = (f32[8,256], f32[8,256]) tuple(d, l)")
    exe = compile_module(mixed, "cpu")
    assert "vector.body" in exe.artifacts.optimized_llvm_ir
    got, want = run_both(mixed, None, "cpu")
    assert_same(got, want)


def test_a_scalar_predicate_selects_whole_rows() -> None:
    """select(p, x, row sum) with a scalar p: the same choice in every lane."""
    text = """HloModule m
add { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT r = f32[] add(a, b) }
ENTRY e {
  x = f32[4,40] parameter(0)
  p = pred[] parameter(1)
  z = f32[] constant(0)
  s = f32[4] reduce(x, z), dimensions={1}, to_apply=add
  sb = f32[4,40] broadcast(s), dimensions={0}
  y = f32[4,40] select(p, x, sb)
  ROOT o = f32[4,40] add(y, x)
}
"""
    exe = compile_module(text, "cpu")
    assert is_row_fusion(exe.module.entry.root) and _vector_type(exe) == "<8 x float>"
    x = np.random.default_rng(3).standard_normal((4, 40)).astype(np.float32)
    for flag in (True, False):
        got, want = run_both(text, [x, np.array(flag)], "cpu")
        assert_same(got, want)
