"""reduce-window-rewriter (the GPU's): a cumulative reduce-window -- JAX's cumsum, cummax,
cumprod -- as ``ceil(log2 n)`` passes of shift-and-combine. Oracle: the interpreter's
reduce-window on the module before the rewrite, along either dimension, forward and reversed,
for add, multiply, maximum, minimum in f32 and s32 (integers and max/min bit for bit; float sums
within the error bound of regrouping n terms); what is not cumulative is left alone; on the GPU
a cumsum over rows of 1000 compiles to no reduce-window."""

from __future__ import annotations

import numpy as np
import pytest

from xla_teach.api import compile_module
from xla_teach.hlo.evaluator import evaluate_module
from xla_teach.hlo.text.parser import parse_hlo
from xla_teach.passes.lowering.reduce_window_rewriter import ReduceWindowRewriter


def cumulative(dtype: str, shape: tuple[int, ...], dim: int, reverse: bool, op: str, init: str) -> str:
    n = shape[dim]
    sizes = ["1"] * len(shape)
    pads = ["0_0"] * len(shape)
    sizes[dim], pads[dim] = str(n), (f"0_{n - 1}" if reverse else f"{n - 1}_0")
    dims = ",".join(map(str, shape))
    return (f"HloModule m\nreducer {{\n  a = {dtype}[] parameter(0)\n  b = {dtype}[] parameter(1)\n"
            f"  ROOT r = {dtype}[] {op}(a, b)\n}}\nENTRY main {{\n  x = {dtype}[{dims}] parameter(0)\n"
            f"  i = {dtype}[] constant({init})\n  ROOT c = {dtype}[{dims}] reduce-window(x, i), "
            f"window={{size={'x'.join(sizes)} pad={'x'.join(pads)}}}, to_apply=reducer\n}}\n")


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize(("shape", "dim"), [((5, 7), 1), ((5, 7), 0), ((33,), 0), ((3, 1000), 1)])
@pytest.mark.parametrize(("dtype", "op", "init"), [("f32", "add", "0"), ("f32", "maximum", "-inf"),
                                                  ("f32", "minimum", "inf"), ("s32", "add", "0"),
                                                  ("s32", "multiply", "1")])
def test_log_steps_give_the_windows_results(dtype: str, op: str, init: str, shape: tuple[int, ...], dim: int,
                                            reverse: bool) -> None:
    text = cumulative(dtype, shape, dim, reverse, op, init)
    before, after = parse_hlo(text), parse_hlo(text)
    assert ReduceWindowRewriter().run(after)
    assert not any(i.opcode == "reduce-window" for i in after.entry.instructions)
    rng = np.random.default_rng(0)
    x = rng.integers(-3, 4, shape).astype(np.int32) if dtype == "s32" else rng.standard_normal(shape).astype(np.float32)
    want, got = evaluate_module(before, [x])[0], evaluate_module(after, [x])[0]
    if dtype == "s32" or op != "add":
        np.testing.assert_array_equal(got, want)
    else:  # n terms regrouped: within 2 * gamma_n * sum|x| of each other
        n = shape[dim]
        np.testing.assert_allclose(got, want, rtol=0, atol=2 * n * 2.0**-24 * float(np.abs(x).sum(axis=dim).max()))


@pytest.mark.parametrize("text", [
    cumulative("f32", (8,), 0, False, "add", "1"),  # an init that is not the identity
    cumulative("f32", (8,), 0, False, "subtract", "0"),  # not associative
    cumulative("f32", (8,), 0, False, "add", "0").replace("size=8 pad=7_0", "size=4 pad=3_0"),  # a short window
], ids=["init", "subtract", "short window"])
def test_what_is_not_cumulative_is_left_alone(text: str) -> None:
    assert not ReduceWindowRewriter().run(parse_hlo(text))


def test_a_gpu_cumsum_has_no_reduce_window() -> None:
    executable = compile_module(cumulative("f32", (64, 1000), 1, False, "add", "0"), "gpu")
    opcodes = {i.opcode for c in executable.module.computations for i in c.instructions}
    assert "reduce-window" not in opcodes
