"""change-op-data-type: f16/bf16 and mixed-type dots and convolutions are computed in f32 (golden
text), with the interpreter's results, and no longer fall back to one inner product per output
element. Also the regression behind it: a BLAS-sized dot with a narrowing epilogue."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from tests.passes.pass_test_utils import check_pass
from xla_teach.api import compile_module
from xla_teach.backends.cpu.passes.change_op_data_type import ChangeOpDataType
from xla_teach.hlo.evaluator import HloEvaluator
from xla_teach.hlo.text.parser import parse_hlo

DTYPES = {"f16": np.float16, "bf16": ml_dtypes.bfloat16, "f32": np.float32, "f64": np.float64}


def test_golden_mixed_dot_keeps_its_f32_result() -> None:
    check_pass(ChangeOpDataType(), """
HloModule m
ENTRY main {
  a = bf16[2,3] parameter(0)
  b = f32[3,4] parameter(1)
  ROOT d = f32[2,4] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}
""", """
HloModule m
ENTRY main {
  a = bf16[2,3] parameter(0)
  convert = f32[2,3] convert(a)
  b = f32[3,4] parameter(1)
  ROOT d = f32[2,4] dot(convert, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}
""")


def test_products_already_in_their_accumulation_type_are_left_alone() -> None:
    check_pass(ChangeOpDataType(), """
HloModule m
ENTRY main {
  a = f32[2,3] parameter(0)
  b = f32[3,4] parameter(1)
  d = f32[2,4] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  i = s8[2,3] parameter(2)
  j = s8[3,4] parameter(3)
  k = s32[2,4] dot(i, j), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT t = (f32[2,4], s32[2,4]) tuple(d, k)
}
""", None)


@pytest.mark.parametrize("lhs,rhs,out", [("f16", "f16", "f16"), ("bf16", "bf16", "bf16"), ("f16", "f16", "f32"),
                                         ("bf16", "f32", "f32"), ("f32", "f64", "f64")])
def test_dots_match_the_interpreter_and_leave_the_elemental_path(lhs: str, rhs: str, out: str) -> None:
    m, k, n = 64, 96, 80  # 491520 multiply-adds: BLAS-sized once in f32
    text = f"""HloModule d
ENTRY main {{
  a = {lhs}[{m},{k}] parameter(0)
  b = {rhs}[{k},{n}] parameter(1)
  ROOT d = {out}[{m},{n}] dot(a, b), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}
}}"""
    exe = compile_module(text, "cpu")
    assert '"dot_strategy":"elemental"' not in exe.module.to_text()
    rng = np.random.default_rng(0)
    args = [rng.uniform(-1, 1, (m, k)).astype(DTYPES[lhs]), rng.uniform(-1, 1, (k, n)).astype(DTYPES[rhs])]
    (got,) = exe.execute(args)
    (want,) = HloEvaluator().evaluate_module(parse_hlo(text), args)
    assert got.dtype == want.dtype
    # the same f32 sums in another order, rounded once to the result type
    rtol = {"f16": 2e-3, "bf16": 1.6e-2}.get(out, 1e-5)
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=rtol, atol=rtol)


def test_half_precision_convolution_is_computed_in_f32() -> None:
    text = """HloModule c
ENTRY main {
  x = f16[1,8,8,3] parameter(0)
  w = f16[3,3,3,4] parameter(1)
  ROOT y = f16[1,8,8,4] convolution(x, w), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f
}"""
    exe = compile_module(text, "cpu")
    assert "f32[1,8,8,4]" in exe.module.to_text()
    rng = np.random.default_rng(1)
    args = [rng.uniform(-1, 1, (1, 8, 8, 3)).astype(np.float16), rng.uniform(-1, 1, (3, 3, 3, 4)).astype(np.float16)]
    (got,) = exe.execute(args)
    (want,) = HloEvaluator().evaluate_module(parse_hlo(text), args)
    np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), rtol=2e-3, atol=2e-3)


@pytest.mark.parametrize("root", ["f16[256,256] convert(d)", "pred[256,256] compare(d, d), direction=GE"])
def test_blas_dot_with_a_narrowing_epilogue(root: str) -> None:
    """Regression: the epilogue was fused into the BLAS dot's output fusion and sgemm wrote f32
    sums into the f16/pred output buffer, past its end (a bus error)."""
    text = f"""HloModule d
ENTRY main {{
  a = f32[256,256] parameter(0)
  b = f32[256,256] parameter(1)
  d = f32[256,256] dot(a, b), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}
  ROOT r = {root}
}}"""
    rng = np.random.default_rng(2)
    args = [rng.standard_normal((256, 256), dtype=np.float32) for _ in range(2)]
    (got,) = compile_module(text, "cpu").execute(args)
    (want,) = HloEvaluator().evaluate_module(parse_hlo(text), args)
    np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), rtol=2e-3, atol=2e-2)
