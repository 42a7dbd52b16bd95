"""The CPU's top-k kernel (one pass per row, the best k kept sorted in the output) gives the
interpreter's results bit for bit -- descending (or ascending) in XLA's total order, ties to the
lower index -- for every element type, and computes XLA's own ``TopK`` custom call too."""

from __future__ import annotations

from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from xla_teach.api import compile_module
from xla_teach.backends.cpu.kernels.topk import MAX_K
from xla_teach.hlo.evaluator import HloEvaluator
from xla_teach.hlo.text.parser import parse_hlo

TYPES = {"f32": np.float32, "f64": np.float64, "f16": np.float16, "bf16": ml_dtypes.bfloat16,
         "s32": np.int32, "s8": np.int8, "u8": np.uint8, "u32": np.uint32, "s64": np.int64}


def topk_module(t: str, dims: tuple[int, ...], k: int, largest: bool) -> str:
    out = ",".join(str(d) for d in dims[:-1] + (k,))
    return (f"HloModule m\nENTRY e {{\n  x = {t}[{','.join(map(str, dims))}] parameter(0)\n"
            f"  ROOT t = ({t}[{out}], s32[{out}]) topk(x), k={k}, largest={'true' if largest else 'false'}\n}}\n")


def values(t: str, dims: tuple[int, ...], seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    dtype = TYPES[t]
    if t[0] in "fb":
        x = rng.choice([-2.0, -1.0, -0.0, 0.0, 0.5, 1.0, 3.0], size=dims)  # many ties
        x = np.where(rng.random(dims) < 0.5, rng.standard_normal(dims) * 10, x)
        x = np.where(rng.random(dims) < 0.05, rng.choice([np.nan, np.inf, -np.inf], size=dims), x)
        x = x.astype(dtype)
        if t == "f32":  # a negative NaN sorts below -inf in the total order
            x.reshape(-1)[::17] = np.float32(-np.nan)
        return x
    info = np.iinfo(dtype)
    x = rng.integers(max(info.min, -50), min(info.max, 50), size=dims)
    x = np.where(rng.random(dims) < 0.1, rng.choice([info.min, info.max], size=dims), x)
    return x.astype(dtype)


@pytest.mark.parametrize("t", list(TYPES))
@pytest.mark.parametrize("largest", [True, False])
@pytest.mark.parametrize(("dims", "k"), [((37,), 5), ((6, 50), 1), ((6, 50), 50), ((2, 3, 200), 17)])
def test_topk_kernel_equals_the_interpreter(t: str, largest: bool, dims: tuple[int, ...], k: int) -> None:
    text = topk_module(t, dims, k, largest)
    executable = compile_module(text, "cpu")
    assert [i.opcode for i in executable.module.entry.instructions] == ["parameter", "topk"], "not decomposed"
    x = values(t, dims, seed=len(dims) * 100 + k)
    got = executable.execute([x])
    want = HloEvaluator().evaluate_module(parse_hlo(text), [x])
    for g, w in zip(got, want, strict=True):
        assert g.dtype == w.dtype and g.tobytes() == w.tobytes()


def test_a_large_k_is_sorted_instead() -> None:
    big = compile_module(topk_module("f32", (4, 300), MAX_K + 1, True), "cpu")
    assert "topk" not in [i.opcode for i in big.module.entry.instructions]
    assert "sort" in [i.opcode for i in big.module.entry.instructions]
    x = values("f32", (4, 300), seed=1)
    want = HloEvaluator().evaluate_module(parse_hlo(topk_module("f32", (4, 300), MAX_K + 1, True)), [x])
    for g, w in zip(big.execute([x]), want, strict=True):
        assert g.tobytes() == w.tobytes()


def test_xlas_topk_custom_call_runs_as_the_kernel() -> None:
    """XLA CPU's optimized HLO of ``lax.top_k`` calls its ``TopK`` custom call; the CPU backend
    computes it with the kernel (``topk-custom-call-rewriter``), not in Python on the host."""
    text = (Path(__file__).parents[2] / "data" / "xla_optimized" / "top_k.txt").read_text()
    data = np.load(Path(__file__).parents[2] / "data" / "xla_optimized" / "top_k.npz")
    executable = compile_module(text, "cpu")
    described = executable.entry.describe()
    assert described.splitlines()[1:] == ["  kernel custom_call(3 buffers)"], described  # not a host call
    assert executable.module.entry.root.opcode == "topk"
    args = [data[k] for k in sorted(data.files) if k.startswith("arg")]
    outs = [data[k] for k in sorted(data.files) if k.startswith("out")]
    for g, w in zip(executable.execute(args), outs, strict=True):
        np.testing.assert_array_equal(g, w)
