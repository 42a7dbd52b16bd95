"""select-and-scatter-expander (the GPU's): max-pooling's gradient as a reduce-window that picks
each window's element and a scatter of the source onto the picks. Oracle: the interpreter on the
module before the rewrite (its select-and-scatter is the loop the operation's definition
describes), with overlapping windows, SAME padding (windows that are partly and wholly padding),
ties (GE keeps the first of equal elements, GT the last) and NaN; the rewritten module also runs
on the CPU backend's reduce-window and scatter kernels, and compiles for the GPU, where the
select-and-scatter was one thread."""

from __future__ import annotations

import numpy as np
import pytest

from xla_teach.api import compile_module
from xla_teach.hlo.evaluator import evaluate_module
from xla_teach.hlo.text.parser import parse_hlo
from xla_teach.passes.expanders.select_and_scatter_expander import SelectAndScatterExpander

MODULE = """HloModule m
pick {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT p = pred[] compare(a, b), direction=DIRECTION
}
add {
  c = f32[] parameter(0)
  d = f32[] parameter(1)
  ROOT sum = f32[] add(c, d)
}
ENTRY main {
  x = f32[OPERAND] parameter(0)
  s = f32[SOURCE] parameter(1)
  z = f32[] constant(0)
  ROOT r = f32[OPERAND] select-and-scatter(x, s, z), window={WINDOW}, select=pick, scatter=add
}
"""
CASES = {
    "2x2 pooling, stride 2": ("GE", "4,6", "2,3", "size=2x2 stride=2x2"),
    "3x3 overlapping, stride 1": ("GE", "5,5", "3,3", "size=3x3"),
    "SAME padding": ("GE", "5,5", "3,3", "size=3x3 stride=2x2 pad=1_1x1_1"),
    "windows wholly in padding": ("GE", "3,3", "4,4", "size=2x2 pad=2_0x0_2"),
    "GT keeps the last of ties": ("GT", "4,6", "2,3", "size=2x2 stride=2x2"),
    "NHWC, as JAX's max-pool gradient": ("GE", "2,6,6,3", "2,3,3,3", "size=1x2x2x1 stride=1x2x2x1"),
}


def module_of(name: str) -> str:
    direction, operand, source, window = CASES[name]
    return (MODULE.replace("DIRECTION", direction).replace("OPERAND", operand).replace("SOURCE", source)
            .replace("WINDOW", window))


def inputs(text: str) -> list[np.ndarray]:
    module = parse_hlo(text)
    rng = np.random.default_rng(0)
    x, s = (p.shape.dimensions for p in module.entry.parameter_instructions)
    operand = rng.integers(-3, 4, x).astype(np.float32)  # small integers: many ties
    operand.ravel()[::7] = np.nan
    return [operand, rng.standard_normal(s).astype(np.float32)]


@pytest.mark.parametrize("name", CASES)
def test_the_picks_and_the_scatter_give_select_and_scatter_s_result(name: str) -> None:
    text = module_of(name)
    before = parse_hlo(text)
    after = before.clone()
    assert SelectAndScatterExpander().run(after)
    assert not any(i.opcode == "select-and-scatter" for i in after.entry.instructions)
    args = inputs(text)
    want = evaluate_module(before, args)[0]
    np.testing.assert_array_equal(evaluate_module(after, args)[0], want)
    # The CPU's reduce-window and scatter kernels on the rewritten module (sums of a few f32
    # source values at one position may round in another order: a few ulps of the largest).
    got = compile_module(after, "cpu").execute(args)[0]
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6 * float(np.abs(args[1]).sum()))


def test_the_gpu_compiles_select_and_scatter_as_parallel_kernels() -> None:
    executable = compile_module(module_of("SAME padding"), "gpu")
    opcodes = {i.opcode for i in executable.module.entry.instructions} | {
        j.opcode for i in executable.module.entry.instructions if i.opcode == "fusion"
        for j in i.fused_computation.instructions}
    assert "select-and-scatter" not in opcodes and {"reduce-window", "scatter"} <= opcodes
