"""The CPU's convolutions: ``conv-canonicalization`` puts them in the blocked im2col kernel's layout
and they give the interpreter's results for every layout, stride, padding, dilation and rank
(JAX's weight gradients, whose window is the image, included); grouped convolutions and reversed
windows stay on the element loop. A NaN weight gives the interpreter's results too: where a window
reads padding the kernel then computes element by element, as written."""

from __future__ import annotations

import numpy as np
import pytest

from xla_teach.api import compile_module
from xla_teach.hlo.evaluator import HloEvaluator
from xla_teach.hlo.text.parser import parse_hlo

CONV = """HloModule c
ENTRY e {{
  x = {t}[{x}] parameter(0)
  w = {t}[{w}] parameter(1)
  ROOT c = {t}[{out}] convolution(x, w), window={{{window}}}, dim_labels={labels}{extra}
}}
"""

CASES = [
    # NHWC 3x3 SAME, as jax.lax.conv_general_dilated writes it
    ("f32", "2,9,9,4", "3,3,4,5", "2,9,9,5", "size=3x3 pad=1_1x1_1", "b01f_01io->b01f", ""),
    # NCHW, stride 2, VALID
    ("f32", "2,3,10,8", "6,3,3,3", "2,6,4,3", "size=3x3 stride=2x2", "bf01_oi01->bf01", ""),
    # 1-D, asymmetric padding, f64
    ("f64", "3,17,2", "4,2,7", "3,17,7", "size=4 pad=2_1", "b0f_0io->b0f", ""),
    # 3-D
    ("f32", "1,5,5,5,2", "2,2,2,2,3", "1,4,4,4,3", "size=2x2x2", "b012f_012io->b012f", ""),
    # a 1x1 convolution (a plain product)
    ("f32", "4,6,6,8", "1,1,8,16", "4,6,6,16", "size=1x1", "b01f_01io->b01f", ""),
    # many blocks of rows (2x24x24 = 1152 rows: 256 at a time, the last block partial), 3 channels
    ("f32", "2,24,24,3", "5,5,3,7", "2,24,24,7", "size=5x5 pad=2_2x2_2", "b01f_01io->b01f", ""),
    # strided and padded unevenly, kernel as JAX's input gradient writes it (01oi)
    ("f32", "2,11,9,4", "3,3,6,4", "2,5,4,6", "size=3x3 stride=2x2 pad=0_1x1_0", "b01f_01oi->b01f", ""),
    # base (lhs) dilation: the strided convolution's input gradient
    ("f32", "2,5,5,3", "3,3,3,4", "2,11,11,4", "size=3x3 pad=2_2x2_2 lhs_dilate=2x2", "b01f_01io->b01f", ""),
    # window (rhs) dilation, f64
    ("f64", "1,9,9,2", "3,3,2,3", "1,5,5,3", "size=3x3 rhs_dilate=2x2", "b01f_01io->b01f", ""),
    # a depth of 3x3x512: a few rows per block
    ("f32", "1,6,6,512", "3,3,512,4", "1,6,6,4", "size=3x3 pad=1_1x1_1", "b01f_01io->b01f", ""),
]


@pytest.mark.parametrize("t,x,w,out,window,labels,extra", CASES)
def test_rewritten_convolution_matches_the_interpreter(t: str, x: str, w: str, out: str, window: str,
                                                       labels: str, extra: str) -> None:
    text = CONV.format(t=t, x=x, w=w, out=out, window=window, labels=labels, extra=extra)
    exe = compile_module(text, "cpu")
    optimized = exe.module.to_text()
    assert '"conv_strategy":"im2col_gemm"' in optimized
    # One convolution, also when it reads padding: the kernel itself checks the weights at run time
    # (a NaN below must not meet the padding's zeros, as XLA skips padding cells).
    assert " conditional(" not in optimized and optimized.count("convolution(") == 1
    rng = np.random.default_rng(0)
    dtype = np.float64 if t == "f64" else np.float32
    args = [rng.standard_normal(tuple(int(d) for d in s.split(","))).astype(dtype) for s in (x, w)]
    tol = 1e-4 if t == "f32" else 1e-12  # sums of up to 4,608 products, in another order
    for weights in ("finite", "with a NaN", "with an inf last"):  # (the last: past the whole vectors)
        if weights == "with a NaN":
            args[1].flat[0] = np.nan
        if weights == "with an inf last":
            args[1].flat[0], args[1].flat[-1] = 1.0, np.inf
        (got,) = exe.execute(args)
        (want,) = HloEvaluator().evaluate_module(parse_hlo(text), args)
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol, equal_nan=True)


@pytest.mark.parametrize("window,extra,out", [("size=3x3 rhs_reversal=1x1", "", "1,6,6,4"),
                                              ("size=3x3", ", feature_group_count=2", "1,6,6,4")])
def test_grouped_and_reversed_convolutions_stay_on_the_element_loop(window: str, extra: str, out: str) -> None:
    w = "3,3,2,4" if "group" in extra else "3,3,4,4"
    text = CONV.format(t="f32", x="1,8,8,4", w=w, out=out, window=window, labels="b01f_01io->b01f", extra=extra)
    exe = compile_module(text, "cpu")
    assert "convolution(" in exe.module.to_text() and "im2col_gemm" not in exe.module.to_text()
    notes = [n for r in exe.recorder.records if r.pass_name == "conv-canonicalization" for n in r.notes]
    assert notes and ("reversed" in notes[0] or "grouped" in notes[0])
    rng = np.random.default_rng(1)
    args = [rng.standard_normal((1, 8, 8, 4)).astype(np.float32),
            rng.standard_normal(tuple(int(d) for d in w.split(","))).astype(np.float32)]
    (got,) = exe.execute(args)
    (want,) = HloEvaluator().evaluate_module(parse_hlo(text), args)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dims,out", [("6,8", "48"), ("64,3,1024", "192,1024"), ("5,7,3", "5,21")])
def test_a_fusion_rooted_in_a_reshape_loops_over_its_operand(dims: str, out: str) -> None:
    """The loop kernel runs such a fusion over the reshape's operand and stores into the same
    bytes (what makes the im2col patch matrix cheap); results equal the interpreter's exactly."""
    text = (f"HloModule r\nENTRY e {{\n  x = f32[{dims}] parameter(0)\n  s = f32[{dims}] negate(x)\n"
            f"  t = f32[{dims}] multiply(s, x)\n  ROOT r = f32[{out}] reshape(t)\n}}\n")
    exe = compile_module(text, "cpu")
    assert "kind=kLoop" in exe.module.to_text()
    x = np.random.default_rng(3).standard_normal(tuple(int(d) for d in dims.split(","))).astype(np.float32)
    (got,) = exe.execute([x])
    (want,) = HloEvaluator().evaluate_module(parse_hlo(text), [x])
    np.testing.assert_array_equal(got, want)


def test_a_weight_gradient_runs_the_im2col_kernel_in_blocks_of_few_rows() -> None:
    """JAX's weight gradient of a 3x3 convolution is a convolution whose window is the image
    (here 9x9), whose input is read as [C, S..., N] and whose output is the 3x3 kernel: few
    rows (C x 9), each a long window (81 taps x N)."""
    text = ("HloModule m\nENTRY e {\n  x = f32[3,11,11,2] parameter(0)\n  dy = f32[3,9,9,4] parameter(1)\n"
            "  ROOT dw = f32[3,3,2,4] convolution(x, dy), window={size=9x9}, dim_labels=f01b_i01o->01bf\n}\n")
    executable = compile_module(text, "cpu")
    assert '"conv_strategy":"im2col_gemm"' in executable.module.to_text()
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 11, 11, 2)).astype(np.float32)
    dy = rng.standard_normal((3, 9, 9, 4)).astype(np.float32)
    (got,) = executable.execute([x, dy])
    (want,) = HloEvaluator().evaluate_module(parse_hlo(text), [x, dy])
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("case", ["grad_x", "grad_w", "strided", "nchw"])
def test_the_convolutions_jax_writes_for_training_match_xla(case: str) -> None:
    """Forward, strided and NCHW convolutions and both gradients of a SAME 3x3 convolution, as
    JAX lowers them, give XLA's results on the CPU backend."""
    jax = pytest.importorskip("jax")
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 9, 9, 4)).astype(np.float32)
    w = (rng.standard_normal((3, 3, 4, 5)) * 0.3).astype(np.float32)

    def conv(x, w, stride=1, nchw=False):  # type: ignore[no-untyped-def]
        if nchw:
            return jax.lax.conv_general_dilated(x.transpose(0, 3, 1, 2), w, (stride, stride), "SAME",
                                                dimension_numbers=("NCHW", "HWIO", "NCHW"))
        return jax.lax.conv_general_dilated(x, w, (stride, stride), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))

    def loss(x, w):  # type: ignore[no-untyped-def]
        return (conv(x, w) ** 2).sum()

    fn = {"grad_x": jax.grad(loss, 0), "grad_w": jax.grad(loss, 1), "strided": lambda x, w: conv(x, w, 2),
          "nchw": lambda x, w: conv(x, w, nchw=True)}[case]
    jitted = jax.jit(fn)
    executable = compile_module(jitted.lower(x, w).compiler_ir("hlo").as_hlo_text(), "cpu")
    (got,) = executable.execute([x, w])
    np.testing.assert_allclose(got, np.asarray(jitted(x, w)), rtol=2e-4, atol=2e-4)
