"""The emitted (non-BLAS) dot: a tiled i-k-j loop nest. Shapes straddle the tile sizes so partial
tiles in every dimension are exercised; results are checked against NumPy exactly for integers
and against the interpreter bit for bit for floats (the tiles keep the k order of the sums)."""

from __future__ import annotations

import numpy as np
import pytest

from xla_teach.api import compile_module
from xla_teach.backends.cpu.kernels.dot import TILE_I, TILE_J, TILE_K
from xla_teach.hlo.evaluator import HloEvaluator
from xla_teach.hlo.text.parser import parse_hlo

DOT = """HloModule dot
ENTRY main {{
  a = {t}[{m},{k}] parameter(0)
  b = {t}[{k},{n}] parameter(1)
  ROOT d = {t}[{m},{n}] dot(a, b), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}
}}
"""

BIAS_RELU = """HloModule dense
ENTRY main {{
  a = f32[{m},{k}] parameter(0)
  w = f32[{k},{n}] parameter(1)
  bias = f32[{n}] parameter(2)
  d = f32[{m},{n}] dot(a, w), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}
  bb = f32[{m},{n}] broadcast(bias), dimensions={{1}}
  s = f32[{m},{n}] add(d, bb)
  z = f32[] constant(0)
  zb = f32[{m},{n}] broadcast(z), dimensions={{}}
  ROOT r = f32[{m},{n}] maximum(s, zb)
}}
"""


@pytest.mark.parametrize("m,k,n", [(TILE_I * 2 + 3, TILE_K + 5, TILE_J + 7), (3, 2, 2), (5, 3, 300),
                                   (TILE_I, TILE_K, TILE_J)])
def test_integer_dot_uses_the_tiled_loops_and_is_exact(m: int, k: int, n: int) -> None:
    exe = compile_module(DOT.format(t="s32", m=m, k=k, n=n), "cpu")
    assert '"dot_strategy":"loops"' in exe.module.to_text()
    rng = np.random.default_rng(m * 1000 + n)
    a = rng.integers(-50, 50, (m, k), dtype=np.int32)
    b = rng.integers(-50, 50, (k, n), dtype=np.int32)
    (got,) = exe.execute([a, b])
    np.testing.assert_array_equal(got, a.astype(np.int64) @ b.astype(np.int64))


def test_small_float_dot_with_epilogue_matches_the_interpreter_bit_for_bit() -> None:
    text = BIAS_RELU.format(m=TILE_I + 1, k=20, n=9)  # small: below the BLAS threshold
    exe = compile_module(text, "cpu")
    optimized = exe.module.to_text()
    assert '"dot_strategy":"loops"' in optimized and "kind=kOutput" in optimized
    rng = np.random.default_rng(0)
    args = [rng.standard_normal(s, dtype=np.float32) for s in ((TILE_I + 1, 20), (20, 9), (9,))]
    (got,) = exe.execute(args)
    (want,) = HloEvaluator().evaluate_module(parse_hlo(text), args)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("lhs,rhs,out,dims", [
    # jnp.einsum("bmk,bkn->bmn") with b = 1, as JAX writes it (issue: a zip() crash in the emitter)
    ("f32[1,4]", "f32[1,4,2]", "f32[1,2]", "lhs_batch_dims={0}, lhs_contracting_dims={1}, rhs_batch_dims={0}, "
     "rhs_contracting_dims={1}"),
    ("f32[1,3,4]", "f32[1,4,5]", "f32[1,3,5]", "lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, "
     "rhs_contracting_dims={1}"),
    ("s32[1,1,3,4]", "s32[1,1,4]", "s32[1,1,3]", "lhs_batch_dims={0,1}, lhs_contracting_dims={3}, "
     "rhs_batch_dims={0,1}, rhs_contracting_dims={2}"),
])
def test_dot_with_batch_dimensions_of_size_one(lhs: str, rhs: str, out: str, dims: str) -> None:
    text = f"HloModule b\nENTRY e {{\n  a = {lhs} parameter(0)\n  b = {rhs} parameter(1)\n  ROOT d = {out} dot(a, b), {dims}\n}}\n"
    module = parse_hlo(text)
    rng = np.random.default_rng(1)
    args = [rng.integers(-9, 9, p.shape.dimensions).astype(p.shape.dtype) for p in module.entry.parameter_instructions]
    (got,) = compile_module(text, "cpu").execute(args)
    (want,) = HloEvaluator().evaluate_module(module, args)
    np.testing.assert_allclose(got, want, rtol=1e-6)
