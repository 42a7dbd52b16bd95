"""Dots as JAX writes them, each run as one BLAS gemm (or one per batch) over the operands as they
lie in memory: dense layers on 3-D activations and their two gradients, attention's ``bqhd``
einsums with batch dimensions in the middle, a convolution written as a dot, transposed and
non-default layouts. Each checks the strategy the ``dot-strategy`` pass chose (and its note) and
the result against the interpreter within the rounding-error bound of its terms."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tests.backends.backend_test_utils import assert_same, reference, run_both
from xla_teach.api import compile_module
from xla_teach.backends.cpu.blas import find_blas
from xla_teach.backends.cpu.kernels.dot import explain_dot_strategy
from xla_teach.backends.llvm.gemm import strided_gemm
from xla_teach.hlo.text.parser import parse_hlo

pytestmark = pytest.mark.skipif(find_blas() is None, reason="no BLAS library found")


def dot_module(lhs: str, rhs: str, out: str, dims: str, epilogue: bool = False) -> str:
    if not epilogue:
        return f"""HloModule dot
ENTRY main {{
  a = {lhs} parameter(0)
  b = {rhs} parameter(1)
  ROOT d = {out} dot(a, b), {dims}
}}"""
    dimensions = out.split("[")[1].split("]")[0]
    return f"""HloModule dot_epilogue
ENTRY main {{
  a = {lhs} parameter(0)
  b = {rhs} parameter(1)
  d = {out} dot(a, b), {dims}
  half = f32[] constant(0.5)
  halves = f32[{dimensions}] broadcast(half), dimensions={{}}
  scaled = f32[{dimensions}] multiply(d, halves)
  ROOT t = f32[{dimensions}] tanh(scaled)
}}"""


# (name, lhs, rhs, out, dimension numbers, what the note must say)
CASES = [
    ("dense_3d", "f32[4,32,64]", "f32[64,96]", "f32[4,32,96]",
     "lhs_contracting_dims={2}, rhs_contracting_dims={0}", "one gemm 128x64 @ 64x96 (rows of lhs [4, 32] folded"),
    # 2^24 multiply-adds: the rows are split between threads, each running its own gemm and epilogue
    ("dense_3d_split_across_threads", "f32[4,64,256]", "f32[256,256]", "f32[4,64,256]",
     "lhs_contracting_dims={2}, rhs_contracting_dims={0}", "one gemm 256x256 @ 256x256 (rows of lhs [4, 64]"),
    ("dense_3d_input_grad", "f32[4,32,96]", "f32[64,96]", "f32[4,32,64]",
     "lhs_contracting_dims={2}, rhs_contracting_dims={1}", "B transposed in the call"),
    ("dense_3d_weight_grad", "f32[4,32,64]", "f32[4,32,96]", "f32[64,96]",
     "lhs_contracting_dims={0,1}, rhs_contracting_dims={0,1}",
     "one gemm 64x128 @ 128x96 (contracted dims of lhs [4, 32] folded by layout), A transposed"),
    ("dense_4d_tied_embedding", "f32[2,4,16,64]", "f32[128,64]", "f32[2,4,16,128]",
     "lhs_contracting_dims={3}, rhs_contracting_dims={1}", "one gemm 128x64 @ 64x128"),
    ("attention_scores_bqhd", "f32[2,32,4,32]", "f32[2,32,4,32]", "f32[2,4,32,32]",
     "lhs_batch_dims={0,2}, lhs_contracting_dims={3}, rhs_batch_dims={0,2}, rhs_contracting_dims={3}",
     "8 gemms 32x32 @ 32x32, B transposed in the call, A and B read with a row stride"),
    ("attention_values_bqhd", "f32[2,4,32,32]", "f32[2,32,4,32]", "f32[2,4,32,32]",
     "lhs_batch_dims={0,1}, lhs_contracting_dims={3}, rhs_batch_dims={0,2}, rhs_contracting_dims={1}",
     "8 gemms 32x32 @ 32x32, B read with a row stride"),
    ("attention_grad_transposed", "f32[2,32,4,32]", "f32[2,4,32,32]", "f32[2,4,32,32]",
     "lhs_batch_dims={0,2}, lhs_contracting_dims={1}, rhs_batch_dims={0,1}, rhs_contracting_dims={2}",
     "A transposed in the call, A read with a row stride"),
    ("conv_1x1_as_dot", "f32[2,8,8,32]", "f32[32,48]", "f32[2,8,8,48]",
     "lhs_contracting_dims={3}, rhs_contracting_dims={0}", "one gemm 128x32 @ 32x48 (rows of lhs [2, 8, 8]"),
    ("matrix_vector", "f32[512,256]", "f32[256]", "f32[512]", "lhs_contracting_dims={1}, rhs_contracting_dims={0}",
     "one gemm 512x256 @ 256x1"),
    ("f64_batched", "f64[3,40,50]", "f64[3,50,30]", "f64[3,40,30]",
     "lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={1}",
     "3 gemms 40x50 @ 50x30"),
    ("column_major_lhs", "f32[96,64]{0,1}", "f32[64,80]", "f32[96,80]",
     "lhs_contracting_dims={1}, rhs_contracting_dims={0}", "A transposed in the call"),
    # MLP-Mixer's token mixing (a dense layer applied along the middle dimension) and its gradients:
    # the free dimensions of lhs split by the contracted one -- a loop of products, one per outer index
    ("mixer_token_mixing", "f32[8,32,48]", "f32[32,40]", "f32[8,48,40]",
     "lhs_contracting_dims={1}, rhs_contracting_dims={0}",
     "8 gemms 48x32 @ 32x40 (looping over free dims of lhs [8]), A transposed in the call"),
    # ... its weight gradient contracts {0, 2}, which memory does not hold together: products added up
    ("mixer_weight_grad", "f32[8,32,48]", "f32[8,48,40]", "f32[32,40]",
     "lhs_contracting_dims={0,2}, rhs_contracting_dims={0,1}",
     "8 gemms 32x48 @ 48x40 (looping over contracted dims [8], 8 products added into each result)"),
    # an RNN step's gates: 32 rows, 1024 columns -- the threads split the columns (B^T read in parts)
    ("few_rows_many_columns", "f32[32,256]", "f32[1024,256]", "f32[32,1024]",
     "lhs_contracting_dims={1}, rhs_contracting_dims={1}", "one gemm 32x256 @ 256x1024, B transposed in the call"),
    ("free_dims_of_rhs_split", "f32[40,32]", "f32[6,32,24]", "f32[40,6,24]",
     "lhs_contracting_dims={1}, rhs_contracting_dims={1}", "(looping over free dims of rhs [6])"),
]


@pytest.mark.parametrize("name,lhs,rhs,out,dims,note", CASES, ids=[c[0] for c in CASES])
def test_dot_runs_as_strided_gemms(name: str, lhs: str, rhs: str, out: str, dims: str, note: str) -> None:
    text = dot_module(lhs, rhs, out, dims)
    strategy, why = explain_dot_strategy(parse_hlo(text).entry.root)
    assert strategy == "blas" and note in why, why
    got, want = run_both(text, None, "cpu", seed=len(name))
    assert_same(got, want, what=name)


@pytest.mark.parametrize("name,lhs,rhs,out,dims,note", [c for c in CASES if c[1].startswith("f32") and "{" not in c[1]],
                         ids=[c[0] for c in CASES if c[1].startswith("f32") and "{" not in c[1]])
def test_output_fusion_keeps_the_gemm_and_its_epilogue(name: str, lhs: str, rhs: str, out: str, dims: str,
                                                       note: str) -> None:
    """``tanh(0.5 * dot)``: the dot stays a BLAS call inside a kOutput fusion, the epilogue runs
    over the rows each thread computed (rows of several dimensions taken apart again)."""
    text = dot_module(lhs, rhs, out, dims, epilogue=True)
    optimized = compile_module(text, "cpu").module.to_text()
    assert "kind=kOutput" in optimized and '"dot_strategy":"blas"' in optimized, optimized
    got, want = run_both(text, None, "cpu", seed=3)
    assert_same(got, want, what=name)


def test_a_result_without_contiguous_rows_stays_elemental() -> None:
    """A result whose rows and columns are both strided (its minor-most dimension a batch one) is no
    matrix BLAS can write: the dot keeps its element loop."""
    text = dot_module("f32[4,64,16]", "f32[4,16,64]", "f32[4,64,64]{0,2,1}",
                      "lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={1}")
    odd = parse_hlo(text).entry.root
    assert strided_gemm(odd) is None
    assert explain_dot_strategy(odd)[0] == "elemental"
    got, want = run_both(text, None, "cpu")
    assert_same(got, want)


def test_small_products_keep_their_loops_and_say_why() -> None:
    strategy, why = explain_dot_strategy(parse_hlo(dot_module(
        "f32[4,8]", "f32[8,5]", "f32[4,5]", "lhs_contracting_dims={1}, rhs_contracting_dims={0}")).entry.root)
    assert strategy == "loops" and "160 multiply-adds, under the 110592" in why, why


def test_every_dot_of_a_jax_gpt_training_step_is_a_blas_call() -> None:
    """The HLO JAX writes for one SGD step of a small GPT (tests/data/jax_models/generate.py): all
    21 dots of the optimized module -- forward, both gradients, attention -- become BLAS calls, and
    the step's loss and new weights agree with the interpreter within their error bounds."""
    data = Path(__file__).parents[2] / "data" / "jax_models"
    sizes = json.loads((data / "gpt_step.json").read_text())
    module = parse_hlo((data / "gpt_step.hlo").read_text())
    rng = np.random.default_rng(0)
    args = [rng.integers(0, sizes["vocab"], p.shape.dimensions).astype(np.int32) if p.shape.element_type.name == "S32"
            else (rng.standard_normal(p.shape.dimensions) * 0.1).astype(np.float32)
            for p in module.entry.parameter_instructions]
    want = reference(module, args)
    executable = compile_module(module, "cpu")
    dots = [i for i in executable.module.instructions() if i.opcode == "dot"]
    assert len(dots) == 21
    assert all('"dot_strategy":"blas"' in d.backend_config for d in dots), [d.backend_config for d in dots]
    assert_same(executable.execute(args), want, what="gpt_step")


ACCUMULATE = """HloModule accumulate
cond {
  s = (s32[], f32[64,96], f32[8,32,64], f32[8,32,96]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(8)
  ROOT lt = pred[] compare(i, n), direction=LT
}
body {
  s = (s32[], f32[64,96], f32[8,32,64], f32[8,32,96]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  one = s32[] constant(1)
  next = s32[] add(i, one)
  acc = f32[64,96] get-tuple-element(s), index=1
  xs = f32[8,32,64] get-tuple-element(s), index=2
  gs = f32[8,32,96] get-tuple-element(s), index=3
  zero = s32[] constant(0)
  x1 = f32[1,32,64] dynamic-slice(xs, i, zero, zero), dynamic_slice_sizes={1,32,64}
  x = f32[32,64] reshape(x1)
  g1 = f32[1,32,96] dynamic-slice(gs, i, zero, zero), dynamic_slice_sizes={1,32,96}
  g = f32[32,96] reshape(g1)
  d = f32[64,96] dot(x, g), lhs_contracting_dims={0}, rhs_contracting_dims={0}
  sum = f32[64,96] add(acc, d)
  ROOT t = (s32[], f32[64,96], f32[8,32,64], f32[8,32,96]) tuple(next, sum, xs, gs)
}
ENTRY main {
  acc = f32[64,96] parameter(0)
  xs = f32[8,32,64] parameter(1)
  gs = f32[8,32,96] parameter(2)
  zero = s32[] constant(0)
  init = (s32[], f32[64,96], f32[8,32,64], f32[8,32,96]) tuple(zero, acc, xs, gs)
  w = (s32[], f32[64,96], f32[8,32,64], f32[8,32,96]) while(init), condition=cond, body=body
  ROOT r = f32[64,96] get-tuple-element(w), index=1
}
"""


def test_a_gradient_added_to_its_accumulator_is_one_gemm_with_beta_one_in_place() -> None:
    """``acc + x^T g`` in a loop, as a scan's transpose accumulates a weight gradient: the output
    fusion runs in place over the accumulator (the loop state) and its gemm adds into it; outside
    a loop the accumulator is copied into the output first. Both give the interpreter's result
    within the bound of the sums (k = 32 terms per step, 8 steps added)."""
    executable = compile_module(ACCUMULATE, "cpu")
    body = next(s for name, s in executable.sequences.items() if name.startswith("body"))
    assert any(a.output_index == (1,) and a.shared for a in body.assignment.output_aliases)
    from xla_teach.passes.scheduling.in_place import dot_addend_parameter

    assert any(dot_addend_parameter(i) is not None for c in executable.module.computations for i in c.instructions)
    rng = np.random.default_rng(0)
    acc = rng.standard_normal((64, 96)).astype(np.float32)
    xs = rng.standard_normal((8, 32, 64)).astype(np.float32)
    gs = rng.standard_normal((8, 32, 96)).astype(np.float32)
    got = executable.execute([acc, xs, gs])[0]
    want = reference(ACCUMULATE, [acc, xs, gs])[0]
    terms = np.abs(acc) + np.einsum("tkm,tkn->mn", np.abs(xs), np.abs(gs))
    assert np.all(np.abs(got - want) <= 2 * (8 + 32) * np.finfo(np.float32).eps * terms)
    text = """HloModule add_to
ENTRY main {
  a = f32[32,64] parameter(0)
  b = f32[32,96] parameter(1)
  acc = f32[64,96] parameter(2)
  d = f32[64,96] dot(a, b), lhs_contracting_dims={0}, rhs_contracting_dims={0}
  ROOT s = f32[64,96] add(acc, d)
}"""
    got, want = run_both(text, None, "cpu", seed=5)
    assert_same(got, want)


def test_a_few_row_product_with_an_addend_splits_its_columns_and_copies_only_its_own() -> None:
    """``acc + a @ b`` with 32 rows and 1024 columns (an RNN step's gates plus the bias-and-input
    term): the threads split the columns, each first copying its own columns of ``acc`` (another
    buffer here) and then adding its gemm into them. The result is within the bound of the sums."""
    text = """HloModule gates
ENTRY main {
  a = f32[32,256] parameter(0)
  b = f32[256,1024] parameter(1)
  acc = f32[32,1024] parameter(2)
  d = f32[32,1024] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT s = f32[32,1024] add(acc, d)
}"""
    executable = compile_module(text, "cpu")
    assert "addend_row" in executable.artifacts.llvm_ir  # the copy of a thread's columns (a runtime width)
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((32, 256)).astype(np.float32), rng.standard_normal((256, 1024)).astype(np.float32)
    acc = rng.standard_normal((32, 1024)).astype(np.float32)
    got = executable.execute([a, b, acc])[0]
    want = reference(text, [a, b, acc])[0]
    terms = np.abs(acc) + np.abs(a) @ np.abs(b)
    assert np.all(np.abs(got - want) <= 2 * (256 + 1) * np.finfo(np.float32).eps * terms)
