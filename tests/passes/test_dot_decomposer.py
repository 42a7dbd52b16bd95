"""dot_decomposer: every dot of the GPU pipeline becomes [batch, m, k] x [batch, k, n] products
the dot kernels take. Oracles: golden text for ``x @ W`` on 3-D activations (reshapes only, no
transpose), the interpreter on the module before and after for each kind of dimension numbers
JAX writes (dense, weight gradient, batch dimensions in the middle, matrix-vector, contracting
dimensions listed out of order), and the GPU compile: a transformer block's dots all get a dot
kernel instead of a loop over output elements."""

from __future__ import annotations

import json

import pytest

from tests.passes.pass_test_utils import assert_same_results, check_pass
from xla_teach.api import compile_module
from xla_teach.backends.llvm.kernel_context import is_dot_kernel
from xla_teach.hlo.text.parser import parse_hlo
from xla_teach.passes.lowering.dot_decomposer import DotDecomposer, is_matrix_product


def dot_module(lhs: str, rhs: str, out: str, numbers: str) -> str:
    return (f"HloModule m\nENTRY main {{\n  x = {lhs} parameter(0)\n  w = {rhs} parameter(1)\n"
            f"  ROOT d = {out} dot(x, w), {numbers}\n}}\n")


def test_dense_layer_on_3d_activations_is_one_product_of_the_merged_rows() -> None:
    check_pass(DotDecomposer(), dot_module("f32[8,16,32]", "f32[32,24]", "f32[8,16,24]",
                                           "lhs_contracting_dims={2}, rhs_contracting_dims={0}"), """
HloModule m
ENTRY main {
  x = f32[8,16,32] parameter(0)
  reshape = f32[128,32] reshape(x)
  w = f32[32,24] parameter(1)
  dot = f32[128,24] dot(reshape, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT d = f32[8,16,24] reshape(dot)
}""")


CASES = {
    "weight gradient": ("f32[8,16,32]", "f32[8,16,24]", "f32[32,24]",
                        "lhs_contracting_dims={0,1}, rhs_contracting_dims={0,1}"),
    "contracting listed out of order": ("f32[8,16,32]", "f32[16,8,24]", "f32[32,24]",
                                        "lhs_contracting_dims={1,0}, rhs_contracting_dims={0,1}"),
    "batch in the middle": ("f32[4,3,5,6]", "f32[3,6,7]", "f32[3,4,5,7]",
                            "lhs_batch_dims={1}, rhs_batch_dims={0}, lhs_contracting_dims={3}, "
                            "rhs_contracting_dims={1}"),
    "matrix-vector": ("f32[2,3,5]", "f32[5]", "f32[2,3]", "lhs_contracting_dims={2}, rhs_contracting_dims={0}"),
    "weights on the left": ("f32[24,32]", "f32[4,6,32]", "f32[24,4,6]",
                            "lhs_contracting_dims={1}, rhs_contracting_dims={2}"),
    "two batch dimensions, attention scores": ("f32[2,4,8,16]", "f32[2,4,8,16]", "f32[2,4,8,8]",
                                               "lhs_batch_dims={0,1}, rhs_batch_dims={0,1}, "
                                               "lhs_contracting_dims={3}, rhs_contracting_dims={3}"),
}


@pytest.mark.parametrize("name", CASES)
def test_each_dot_becomes_a_matrix_product_with_the_same_results(name: str) -> None:
    before = parse_hlo(dot_module(*CASES[name]))
    after = before.clone()
    changed = DotDecomposer().run(after)
    dots = [i for i in after.entry.instructions if i.opcode == "dot"]
    assert len(dots) == 1 and is_matrix_product(dots[0])
    assert changed == (not is_matrix_product(before.entry.root))
    assert_same_results(before, after)


def test_a_transformer_step_on_the_gpu_runs_every_dot_as_a_dot_kernel() -> None:
    """A layer of a GPT-style step, as JAX writes it (3-D activations, a GELU MLP, its gradient):
    before this pass all 4 of its dots ran as loop kernels (every output element summing its own
    products); now each is a tiled, register-tiled or tensor-core product."""
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp
    import numpy as np

    def loss(w1, w2, x):  # type: ignore[no-untyped-def]
        return jnp.sum(jax.nn.gelu(x @ w1) @ w2)

    args = [np.zeros((64, 256), np.float32), np.zeros((256, 64), np.float32), np.zeros((4, 32, 64), np.float32)]
    text = jax.jit(jax.grad(loss, argnums=(0, 1))).lower(*args).compiler_ir("hlo").as_hlo_text()
    executable = compile_module(text, "gpu")
    algorithms = [json.loads(i.backend_config)["launch_dimensions"].get("algorithm", "a loop")
                  for i in executable.module.entry.instructions if i.backend_config and is_dot_kernel(i)]
    assert len(algorithms) >= 4 and "a loop" not in algorithms, algorithms
