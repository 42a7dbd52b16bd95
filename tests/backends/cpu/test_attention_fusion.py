"""``attention-fusion``: a product, a softmax over its rows and a second product become one kernel
that keeps the scores in a tile on the stack. Checked against the interpreter on the HLO before
the pass (every layout of q, k and v that gemm reads, blocks of queries that do not divide the
sequence, f64, a scale carried in as a scalar operand), with no temporary buffer; what the pass must
leave alone (a mask read from memory, a softmax over the queries, a score product used twice)."""

from __future__ import annotations

import numpy as np
import pytest

from xla_teach.api import compile_module
from xla_teach.hlo.evaluator import HloEvaluator
from xla_teach.hlo.text.parser import parse_hlo

REDUCERS = """
max_t {
  a = $t[] parameter(0)
  b = $t[] parameter(1)
  ROOT m = $t[] maximum(a, b)
}
add_t {
  a = $t[] parameter(0)
  b = $t[] parameter(1)
  ROOT s = $t[] add(a, b)
}
"""

# softmax(scale * q k^T) v, as JAX writes it (with the max's stop_gradient already gone).
ATTENTION = """HloModule attention
""" + REDUCERS + """
ENTRY main {
  q = $t[$Q] parameter(0)
  k = $t[$K] parameter(1)
  v = $t[$V] parameter(2)
  scale = $t[] $SCALE
  s = $t[$S] dot(q, k), lhs_batch_dims={0,1}, lhs_contracting_dims={$QC}, rhs_batch_dims={0,1}, rhs_contracting_dims={$KC}
  scales = $t[$S] broadcast(scale), dimensions={}
  scaled = $t[$S] multiply(s, scales)
  ninf = $t[] constant(-inf)
  mx = $t[$R] reduce(scaled, ninf), dimensions={3}, to_apply=max_t
  mxb = $t[$S] broadcast(mx), dimensions={0,1,2}
  sh = $t[$S] subtract(scaled, mxb)
  e = $t[$S] exponential(sh)
  zero = $t[] constant(0)
  sum = $t[$R] reduce(e, zero), dimensions={3}, to_apply=add_t
  sb = $t[$S] broadcast(sum), dimensions={0,1,2}
  p = $t[$S] divide(e, sb)
  ROOT o = $t[$O] dot(p, v), lhs_batch_dims={0,1}, lhs_contracting_dims={3}, rhs_batch_dims={0,1}, rhs_contracting_dims={$VC}
}
"""


def attention(t: str = "f32", b: int = 2, h: int = 3, sq: int = 40, sk: int = 56, d: int = 48, dv: int = 52,
              q_t: bool = False, k_t: bool = False, v_t: bool = False, scale_param: bool = False) -> str:
    q = f"{b},{h},{d},{sq}" if q_t else f"{b},{h},{sq},{d}"
    k = f"{b},{h},{d},{sk}" if k_t else f"{b},{h},{sk},{d}"
    v = f"{b},{h},{dv},{sk}" if v_t else f"{b},{h},{sk},{dv}"
    text = ATTENTION
    for key, value in (("$QC", "2" if q_t else "3"), ("$KC", "2" if k_t else "3"), ("$VC", "3" if v_t else "2"),
                       ("$SCALE", "parameter(3)" if scale_param else "constant(0.125)"),
                       ("$Q", q), ("$K", k), ("$V", v), ("$S", f"{b},{h},{sq},{sk}"), ("$R", f"{b},{h},{sq}"),
                       ("$O", f"{b},{h},{sq},{dv}"), ("$t", t)):
        text = text.replace(key, value)
    return text


def _run(text: str, seed: int = 0) -> tuple[object, list[np.ndarray], list[np.ndarray]]:
    module = parse_hlo(text)
    rng = np.random.default_rng(seed)
    args = []
    for p in module.entry.parameter_instructions:
        dims, dtype = p.shape.dimensions, p.shape.element_type.dtype
        args.append(np.asarray(rng.standard_normal(dims) if dims else 0.3, dtype=dtype))
    executable = compile_module(text, "cpu")
    return executable, executable.execute(args), HloEvaluator().evaluate_module(parse_hlo(text), args)


CASES = {
    "as_jax_writes_it": {},
    "blocks_that_do_not_divide_the_queries": {"sq": 300, "sk": 384, "d": 16, "dv": 8},
    "q_transposed": {"q_t": True},
    "k_transposed": {"k_t": True},
    "v_transposed": {"v_t": True},
    "all_transposed": {"q_t": True, "k_t": True, "v_t": True},
    "f64": {"t": "f64"},
    "scale_as_an_operand": {"scale_param": True},
}


@pytest.mark.parametrize("name", CASES)
def test_fused_attention_matches_the_interpreter_without_temporaries(name: str) -> None:
    kw = CASES[name]
    executable, got, want = _run(attention(**kw))
    optimized = executable.module.to_text()
    assert '"__cpu_attention"' in optimized, optimized
    assert optimized.count(" dot(") == 2  # both inside the fusion, none outside
    tol = 1e-12 if kw.get("t") == "f64" else 2e-5
    np.testing.assert_allclose(got[0], want[0] if isinstance(want, list) else want, rtol=tol, atol=tol)
    assert executable.buffer_assignment.temp_bytes() == 0


def test_the_interpreter_runs_the_fused_module_too() -> None:
    """The optimized HLO (fusion, nested row fusion and all) means what the original does."""
    text = attention()
    executable, got, want = _run(text)
    module = parse_hlo(executable.module.to_text())
    rng = np.random.default_rng(0)
    args = [np.asarray(rng.standard_normal(p.shape.dimensions), np.float32)
            for p in parse_hlo(text).entry.parameter_instructions]
    again = HloEvaluator().evaluate_module(module, args)
    np.testing.assert_allclose(again[0] if isinstance(again, list) else again, got[0], rtol=2e-5, atol=2e-5)


MASKED = attention().replace("p = f32[2,3,40,56] divide(e, sb)", "pm = f32[2,3,40,56] divide(e, sb)\n"
                             "  mask = f32[2,3,40,56] parameter(3)\n  p = f32[2,3,40,56] multiply(pm, mask)")
OVER_QUERIES = attention().replace("dimensions={3}, to_apply", "dimensions={2}, to_apply").replace(
    "f32[2,3,40] reduce", "f32[2,3,56] reduce").replace("dimensions={0,1,2}", "dimensions={0,1,3}")


@pytest.mark.parametrize("text", [MASKED, OVER_QUERIES], ids=["mask_read_from_memory", "softmax_over_queries"])
def test_left_alone_and_still_right(text: str) -> None:
    executable, got, want = _run(text)
    assert "__cpu_attention" not in executable.module.to_text()
    np.testing.assert_allclose(got[0], want[0] if isinstance(want, list) else want, rtol=2e-5, atol=2e-5)
