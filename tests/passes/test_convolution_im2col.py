"""convolution-im2col (the GPU's): a convolution as one product of its patches. Oracle: the
interpreter's convolution on the module before the rewrite, over the dimension numbers and
windows JAX writes -- NHWC and NCHW, strides, SAME padding, negative padding, the input
gradient's base dilation, kernel dilation and reversal, 1-D, 3-D, 1x1, output dimensions in another
order, batch and feature swapped as a gradient writes them; refusals for grouped convolutions and
windows too large to copy out; on the GPU, a convolution compiles to a dot kernel."""

from __future__ import annotations

import json

import pytest

from tests.passes.pass_test_utils import assert_same_results
from xla_teach.api import compile_module
from xla_teach.backends.llvm.kernel_context import is_dot_kernel
from xla_teach.hlo.opcodes import AttrKind
from xla_teach.hlo.shape_inference import infer_shape
from xla_teach.hlo.text.attribute_parser import parse_attribute_value
from xla_teach.hlo.text.parser import parse_hlo, parse_shape
from xla_teach.passes.lowering.convolution_im2col import ConvolutionIm2col

CASES = {
    "NHWC SAME": ("f32[2,6,6,3]", "f32[3,3,3,4]", "size=3x3 pad=1_1x1_1", "b01f_01io->b01f"),
    "stride 2": ("f32[2,7,7,3]", "f32[3,3,3,4]", "size=3x3 stride=2x2 pad=1_1x1_1", "b01f_01io->b01f"),
    "NCHW": ("f32[2,3,6,6]", "f32[4,3,3,3]", "size=3x3 pad=1_1x1_1", "bf01_oi01->bf01"),
    "input gradient (base dilation)": ("f32[2,4,4,3]", "f32[3,3,3,4]", "size=3x3 pad=2_2x2_2 lhs_dilate=2x2",
                                       "b01f_01io->b01f"),
    "kernel dilation": ("f32[2,6,6,3]", "f32[2,2,3,4]", "size=2x2 rhs_dilate=2x2", "b01f_01io->b01f"),
    "kernel reversal": ("f32[2,6,6,3]", "f32[3,3,3,4]", "size=3x3 pad=1_1x1_1 rhs_reversal=1x1", "b01f_01io->b01f"),
    "1-D": ("f32[2,9,3]", "f32[3,3,5]", "size=3 pad=1_1", "b0f_0io->b0f"),
    "1x1": ("f32[2,5,5,3]", "f32[1,1,3,4]", "size=1x1", "b01f_01io->b01f"),
    "output in another order": ("f32[2,6,6,3]", "f32[3,3,3,4]", "size=3x3 pad=1_1x1_1", "b01f_01io->f01b"),
    "batch and feature swapped, negative padding": ("f32[3,6,6,2]", "f32[3,3,3,4]", "size=3x3 pad=0_-1x1_1",
                                                    "f01b_01io->b01f"),
    "3-D": ("f32[2,4,4,4,3]", "f32[2,2,2,3,4]", "size=2x2x2", "b012f_012io->b012f"),
}


def conv_module(lhs: str, rhs: str, window: str, labels: str, groups: int = 1) -> str:
    attrs = {"window": parse_attribute_value(AttrKind.WINDOW, "{" + window + "}"),
             "dim_labels": parse_attribute_value(AttrKind.DIM_LABELS, labels),
             "feature_group_count": groups, "batch_group_count": 1}
    out = infer_shape("convolution", [parse_shape(lhs), parse_shape(rhs)], attrs).to_text()
    grouped = f", feature_group_count={groups}" if groups > 1 else ""
    return (f"HloModule m\nENTRY main {{\n  x = {lhs} parameter(0)\n  w = {rhs} parameter(1)\n"
            f"  ROOT c = {out} convolution(x, w), window={{{window}}}, dim_labels={labels}{grouped}\n}}\n")


@pytest.mark.parametrize("name", CASES)
def test_the_product_of_the_patches_is_the_convolution(name: str) -> None:
    before = parse_hlo(conv_module(*CASES[name]))
    after = before.clone()
    assert ConvolutionIm2col().run(after)
    assert not any(i.opcode == "convolution" for i in after.entry.instructions)
    # A sum of up to 27 products in another order: a few ulps of the terms' sum.
    assert_same_results(before, after, rtol=1e-5)


@pytest.mark.parametrize("module", [
    conv_module("f32[2,6,6,4]", "f32[3,3,2,4]", "size=3x3 pad=1_1x1_1", "b01f_01io->b01f", groups=2),
    conv_module("f32[2,12,12,3]", "f32[6,6,3,4]", "size=6x6", "b01f_01io->b01f"),  # 36 window positions
], ids=["grouped", "a window too large"])
def test_what_is_not_rewritten(module: str) -> None:
    assert not ConvolutionIm2col().run(parse_hlo(module))


def test_a_convolution_on_the_gpu_is_a_dot_kernel() -> None:
    executable = compile_module(conv_module(*CASES["NHWC SAME"]), "gpu")
    kernels = [i for i in executable.module.entry.instructions if i.backend_config]
    assert not any(i.opcode == "convolution" for i in executable.module.entry.instructions)
    dots = [i for i in kernels if is_dot_kernel(i)]
    assert dots and all("algorithm" in json.loads(i.backend_config)["launch_dimensions"] for i in dots)
