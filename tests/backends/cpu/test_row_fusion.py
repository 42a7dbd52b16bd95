"""The CPU ``row-fusion`` pass and its kernel: softmax-like row computations become one kCustom
fusion, computed row by row, with the interpreter's results."""

from __future__ import annotations

import numpy as np

from tests.backends.backend_test_utils import assert_same, run_both
from xla_teach.api import compile_module
from xla_teach.hlo.text.parser import parse_hlo
from xla_teach.passes.fusion.row_fusion import RowFusion, is_row_fusion
from xla_teach.passes.pass_base import HloPassPipeline, PassRecorder

REDUCERS = """add { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT s = f32[] add(a, b) }
max { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT s = f32[] maximum(a, b) }
"""

SOFTMAX = f"""HloModule softmax
{REDUCERS}
ENTRY main {{
  x = f32[8,100] parameter(0)
  ninf = f32[] constant(-inf)
  mx = f32[8] reduce(x, ninf), dimensions={{1}}, to_apply=max
  mb = f32[8,100] broadcast(mx), dimensions={{0}}
  s = f32[8,100] subtract(x, mb)
  e = f32[8,100] exponential(s)
  zero = f32[] constant(0)
  sm = f32[8] reduce(e, zero), dimensions={{1}}, to_apply=add
  sb = f32[8,100] broadcast(sm), dimensions={{0}}
  ROOT d = f32[8,100] divide(e, sb)
}}
"""

LAYER_NORM = f"""HloModule layer_norm
{REDUCERS}
ENTRY main {{
  x = f32[3,5,64] parameter(0)
  g = f32[3,5,64] parameter(1)
  zero = f32[] constant(0)
  n = f32[] constant(0.015625)
  nb = f32[3,5,64] broadcast(n), dimensions={{}}
  sum = f32[3,5] reduce(x, zero), dimensions={{2}}, to_apply=add
  sb = f32[3,5,64] broadcast(sum), dimensions={{0,1}}
  mean = f32[3,5,64] multiply(sb, nb)
  c = f32[3,5,64] subtract(x, mean)
  c2 = f32[3,5,64] multiply(c, c)
  var = f32[3,5] reduce(c2, zero), dimensions={{2}}, to_apply=add
  vb = f32[3,5,64] broadcast(var), dimensions={{0,1}}
  v = f32[3,5,64] multiply(vb, nb)
  eps = f32[] constant(1e-5)
  epsb = f32[3,5,64] broadcast(eps), dimensions={{}}
  ve = f32[3,5,64] add(v, epsb)
  r = f32[3,5,64] rsqrt(ve)
  y = f32[3,5,64] multiply(c, r)
  ROOT o = f32[3,5,64] multiply(y, g)
}}
"""


def _run_pass(text: str) -> tuple[object, PassRecorder]:
    module = parse_hlo(text)
    recorder = PassRecorder()
    HloPassPipeline("p", [RowFusion()]).run(module, recorder=recorder)
    return module, recorder


def test_softmax_becomes_one_row_fusion() -> None:
    module, recorder = _run_pass(SOFTMAX)
    root = module.entry.root
    assert is_row_fusion(root) and root.fusion_kind == "kCustom"
    ops = sorted(i.opcode for i in root.fused_computation.instructions if i.opcode != "parameter")
    assert ops.count("reduce") == 2 and "exponential" in ops and "divide" in ops
    assert [i.opcode for i in module.entry.instructions if i.opcode not in ("parameter", "constant")] == ["fusion"]
    assert any("2 row reductions" in n for r in recorder.records for n in r.notes)


def test_softmax_and_layer_norm_compile_to_one_kernel_and_match() -> None:
    for text in (SOFTMAX, LAYER_NORM):
        exe = compile_module(text, "cpu")
        kernels = [i for i in exe.module.entry.instructions if i.opcode not in ("parameter", "constant")]
        assert len(kernels) == 1 and is_row_fusion(kernels[0]), exe.module.to_text()
        got, want = run_both(text, None, "cpu")
        assert_same(got, want)


def test_a_value_used_outside_stays_out() -> None:
    # The row max is also an output: it cannot hide inside the fusion.
    text = SOFTMAX.replace("ROOT d = f32[8,100] divide(e, sb)",
                           "d = f32[8,100] divide(e, sb)\n  ROOT t = (f32[8,100], f32[8]) tuple(d, mx)")
    module, _ = _run_pass(text)
    fusion = module.entry.root.operand(0)
    assert is_row_fusion(fusion)
    assert [i.opcode for i in fusion.fused_computation.instructions].count("reduce") == 1
    got, want = run_both(text, None, "cpu")
    assert_same(got, want)


def test_column_reductions_and_long_rows_are_left_alone() -> None:
    column = SOFTMAX.replace("dimensions={1}, to_apply=max", "dimensions={0}, to_apply=max").replace(
        "mx = f32[8] reduce", "mx = f32[100] reduce").replace("mb = f32[8,100] broadcast(mx), dimensions={0}",
                                                               "mb = f32[8,100] broadcast(mx), dimensions={1}")
    module, _ = _run_pass(column)
    # The column max stays an ordinary reduce; only the row sum joins the fusion.
    assert [i.attrs["dimensions"] for i in module.entry.instructions if i.opcode == "reduce"] == [(0,)]
    fusion = module.entry.root
    assert is_row_fusion(fusion)
    assert [i.opcode for i in fusion.fused_computation.instructions].count("reduce") == 1
    got, want = run_both(column, None, "cpu")
    assert_same(got, want)
    long_rows = SOFTMAX.replace("8,100", "2,40000").replace("f32[8]", "f32[2]")
    module, recorder = _run_pass(long_rows)
    assert not any(is_row_fusion(i) for i in module.entry.instructions)
    assert any("too long" in n for r in recorder.records for n in r.notes)


def test_row_fusion_on_odd_shapes_f16_and_edge_values() -> None:
    text = SOFTMAX.replace("f32[8,100]", "f16[5,37]").replace("f32[8]", "f16[5]").replace("f32[]", "f16[]")
    got, want = run_both(text, None, "cpu")
    assert_same(got, want, {"rtol": 1e-2, "atol": 1e-3})
    exe = compile_module(SOFTMAX, "cpu")
    x = np.zeros((8, 100), np.float32)
    x[0, :] = -np.inf
    x[1, 3] = np.inf
    x[2, 5] = np.nan
    from xla_teach.hlo.evaluator import HloEvaluator

    want = HloEvaluator().evaluate_module(parse_hlo(SOFTMAX), [x])
    assert_same(exe.execute([x]), want)


def test_values_reread_after_their_reduction_come_from_the_row_cache() -> None:
    """softmax's e = exp(x - max) is summed and then divided: it is computed once per element,
    stored into a per-row stack array while its reduction runs and loaded again for the output.
    Layer norm's reduced values (x itself, (x - mean)^2) are not reread, so nothing is cached."""
    from xla_teach.backends.cpu.kernels.row_fusion import cached_row_values

    for text, cached in ((SOFTMAX, ["e"]), (LAYER_NORM, [])):
        exe = compile_module(text, "cpu")
        fusion = exe.module.entry.root
        assert is_row_fusion(fusion)
        reduces = [i for i in fusion.fused_computation.post_order() if i.opcode == "reduce"]
        names = [v.name.split(".")[0] for v in cached_row_values(reduces, 100)]
        assert names == cached, names
        assert ("row_cache." in exe.artifacts.llvm_ir) == bool(cached)
        got, want = run_both(text, None, "cpu")
        assert_same(got, want)
