"""The CPU pipeline's own passes and run-time choices, each checked against an oracle:

* ``tree_reduction_rewriter`` and ``reshape-to-bitcast``: golden before/after HLO, cases the
  pass must leave alone, and the interpreter's results before and after;
* ``dot-strategy``: the BLAS-or-loops choice is written into the optimized HLO text;
* ``--xla_teach_hlo_opt_level=0`` skips the HLO optimizations and
  ``--xla_backend_optimization_level=0`` LLVM's, and both still compute the interpreter's results;
* large loop kernels are split across threads (``KernelThunk.partitions``), and the split run
  still covers every element.
"""

from __future__ import annotations

import json
from unittest import mock

import numpy as np
import pytest

from tests.backends.backend_test_utils import assert_same, reference
from tests.passes.pass_test_utils import check_pass
from xla_teach import flags
from xla_teach.api import compile_module
from xla_teach.backends.cpu.kernels.dot import find_blas
from xla_teach.backends.cpu.passes.dot_strategy import DotStrategy
from xla_teach.hlo.evaluator import HloEvaluator
from xla_teach.hlo.text.parser import parse_hlo
from xla_teach.passes.lowering.reshape_to_bitcast import ReshapeToBitcast
from xla_teach.passes.lowering.tree_reduction_rewriter import TreeReductionRewriter
from xla_teach.runtime.thunks import KernelThunk
from xla_teach.tools.bugs.fake_data import fake_arguments

REDUCERS = """add { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT s = f32[] add(a, b) }
max { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT s = f32[] maximum(a, b) }
add_s32 { a = s32[] parameter(0)  b = s32[] parameter(1)  ROOT s = s32[] add(a, b) }
"""
CPU_COUNT = "xla_teach.backends.cpu.kernels.partitions.os.cpu_count"


def _compile_and_compare(text: str, args: list[np.ndarray] | None = None):  # type: ignore[no-untyped-def]
    """Compile ``text`` for the CPU, run it, and compare with the interpreter; the executable."""
    module = parse_hlo(text)
    args = args if args is not None else fake_arguments(module, seed=3)
    want = reference(module, args)
    executable = compile_module(module, "cpu")
    assert_same(executable.execute(args), want, what=module.name)
    return executable


def _kernels(executable) -> list[KernelThunk]:  # type: ignore[no-untyped-def]
    return [t for t in executable.entry.thunks if isinstance(t, KernelThunk)]


# ---- tree_reduction_rewriter ---------------------------------------------------------------------
def test_tree_reduction_splits_2_pow_20_plus_3_elements_with_padding() -> None:
    """2^20+3 = 64 * 16385 - 61: padded with the init value to 64 rows of 16385."""
    check_pass(TreeReductionRewriter(), f"""HloModule m
{REDUCERS}
ENTRY main {{
  x = f32[1048579] parameter(0)
  zero = f32[] constant(0)
  ROOT r = f32[] reduce(x, zero), dimensions={{0}}, to_apply=add
}}""", f"""HloModule m
{REDUCERS}
ENTRY main {{
  x = f32[1048579] parameter(0)
  reshape = f32[1048579] reshape(x)
  zero = f32[] constant(0)
  pad = f32[1048640] pad(reshape, zero), padding=0_61
  reshape.1 = f32[64,16385] reshape(pad)
  reduce = f32[64] reduce(reshape.1, zero), dimensions={{1}}, to_apply=add
  reduce.1 = f32[] reduce(reduce, zero), dimensions={{0}}, to_apply=add
  ROOT reshape.2 = f32[] reshape(reduce.1)
}}""")


def test_tree_reduction_keeps_the_output_dimension() -> None:
    """Three rows of 256*512 elements: each row becomes 64 partial maxima, then one."""
    check_pass(TreeReductionRewriter(), f"""HloModule m
{REDUCERS}
ENTRY main {{
  x = f32[3,256,512] parameter(0)
  ninf = f32[] constant(-inf)
  ROOT r = f32[3] reduce(x, ninf), dimensions={{1,2}}, to_apply=max
}}""", f"""HloModule m
{REDUCERS}
ENTRY main {{
  x = f32[3,256,512] parameter(0)
  reshape = f32[3,131072] reshape(x)
  reshape.1 = f32[3,64,2048] reshape(reshape)
  ninf = f32[] constant(-inf)
  reduce = f32[3,64] reduce(reshape.1, ninf), dimensions={{2}}, to_apply=max
  reduce.1 = f32[3] reduce(reduce, ninf), dimensions={{1}}, to_apply=max
  ROOT reshape.2 = f32[3] reshape(reduce.1)
}}""")


@pytest.mark.parametrize("dims", [(65536,), (1048579,), (196609,), (2, 70001), (5, 3, 70000)])
def test_tree_reduction_sums_integers_exactly(dims: tuple[int, ...]) -> None:
    """Integer sums do not depend on the order of additions: the rewritten module must give the
    interpreter's exact result, for sizes that 64 divides and sizes that need padding."""
    shape = ",".join(map(str, dims))
    kept = ",".join(map(str, dims[:-1]))
    original = parse_hlo(f"""HloModule m
{REDUCERS}
ENTRY main {{
  x = s32[{shape}] parameter(0)
  zero = s32[] constant(0)
  ROOT r = s32[{kept}] reduce(x, zero), dimensions={{{len(dims) - 1}}}, to_apply=add_s32
}}""")
    module = original.clone()
    assert TreeReductionRewriter().run(module)
    partial = [i for i in module.entry.instructions if i.opcode == "reduce" and i.shape.dimensions[-1:] == (64,)]
    assert len(partial) == 1, module.to_text()
    x = np.random.default_rng(0).integers(-1000, 1000, dims).astype(np.int32)
    want = HloEvaluator().evaluate_module(original, [x])
    np.testing.assert_array_equal(HloEvaluator().evaluate_module(module, [x])[0], want[0])
    np.testing.assert_array_equal(want[0], x.sum(axis=-1, dtype=np.int32))


@pytest.mark.parametrize("case", ["major-dimension", "too-small", "many-outputs", "column-major", "variadic"])
def test_tree_reduction_leaves_other_reductions_alone(case: str) -> None:
    x_shape, dims, out, extra = {
        "major-dimension": ("f32[70000,3]", "0", "f32[3]", ""),   # not the minor-most dimension
        "too-small": ("f32[4,1000]", "1", "f32[4]", ""),           # one core is fast enough
        "many-outputs": ("f32[32,65536]", "1", "f32[32]", ""),     # the outer loop parallelizes already
        "column-major": ("f32[4,65536]{0,1}", "1", "f32[4]", ""),  # minor-most in memory is dimension 0
        "variadic": ("f32[65536]", "0", "(f32[], f32[])", "variadic"),
    }[case]
    if extra:
        entry = f"""  x = {x_shape} parameter(0)
  zero = f32[] constant(0)
  ROOT r = {out} reduce(x, x, zero, zero), dimensions={{{dims}}}, to_apply=add2"""
    else:
        entry = f"""  x = {x_shape} parameter(0)
  zero = f32[] constant(0)
  ROOT r = {out} reduce(x, zero), dimensions={{{dims}}}, to_apply=add"""
    check_pass(TreeReductionRewriter(), f"""HloModule m
{REDUCERS}
add2 {{ a = f32[] parameter(0)  b = f32[] parameter(1)  c = f32[] parameter(2)  d = f32[] parameter(3)
  s = f32[] add(a, c)  t = f32[] add(b, d)  ROOT r = (f32[], f32[]) tuple(s, t) }}
ENTRY main {{
{entry}
}}""", None)


def test_tree_reduction_on_the_cpu_runs_64_partial_sums_on_all_cores() -> None:
    """End to end: the optimized HLO holds the 64-way partial reduction, its kernel is split
    across (here: four) threads, and the sum matches the interpreter's."""
    text = f"""HloModule seeds_sum
{REDUCERS}
ENTRY main {{
  x = f32[1048579] parameter(0)
  zero = f32[] constant(0)
  ROOT r = f32[] reduce(x, zero), dimensions={{0}}, to_apply=add
}}"""
    x = np.random.default_rng(1).standard_normal(1048579).astype(np.float32)
    with mock.patch(CPU_COUNT, return_value=4):
        executable = compile_module(text, "cpu")
    optimized = executable.artifacts.optimized_module.to_text()
    assert "f32[64]{0} reduce(" in optimized and "padding=0_61" in optimized, optimized
    assert max(k.partitions for k in _kernels(executable)) == 4
    got = executable.execute([x])[0]
    want = HloEvaluator().evaluate_module(parse_hlo(text), [x])[0]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-2)
    np.testing.assert_allclose(got, x.astype(np.float64).sum(), rtol=1e-5, atol=1e-2)


def test_tree_reduction_splits_a_bf16_sum_into_windows_of_32() -> None:
    """A bf16 sum of 1001 elements: padded to 1024, 32 windows of 32, then one sum of 32."""
    check_pass(TreeReductionRewriter(), """HloModule m
add { a = bf16[] parameter(0)  b = bf16[] parameter(1)  ROOT s = bf16[] add(a, b) }
ENTRY main {
  x = bf16[1001] parameter(0)
  zero = bf16[] constant(0)
  ROOT r = bf16[] reduce(x, zero), dimensions={0}, to_apply=add
}""", """HloModule m
add { a = bf16[] parameter(0)  b = bf16[] parameter(1)  ROOT s = bf16[] add(a, b) }
ENTRY main {
  x = bf16[1001] parameter(0)
  reshape = bf16[1001] reshape(x)
  zero = bf16[] constant(0)
  pad = bf16[1024] pad(reshape, zero), padding=0_23
  reshape.1 = bf16[32,32] reshape(pad)
  reduce = bf16[32] reduce(reshape.1, zero), dimensions={1}, to_apply=add
  reduce.1 = bf16[] reduce(reduce, zero), dimensions={0}, to_apply=add
  ROOT reshape.2 = bf16[] reshape(reduce.1)
}""", semantics=False)  # the interpreter's pairwise sum rounds differently: checked below


@pytest.mark.parametrize("etype", ["bf16", "f16"])
def test_narrow_float_sums_keep_growing_on_the_cpu(etype: str) -> None:
    """1001 * 0.3 in bf16: one running sum sticks at 128 (128 + 0.3 rounds back to 128); in
    windows of 32 it reaches XLA's 310. A sum over a major and a minor dimension is
    transposed first; both stay close to the exact float64 sum and to the interpreter."""
    import ml_dtypes

    dtype = ml_dtypes.bfloat16 if etype == "bf16" else np.float16
    tolerance = 0.05 if etype == "bf16" else 0.01
    reducer = f"add {{ a = {etype}[] parameter(0)  b = {etype}[] parameter(1)  ROOT s = {etype}[] add(a, b) }}"
    long_sum = f"""HloModule m
{reducer}
ENTRY main {{
  x = {etype}[1001] parameter(0)
  zero = {etype}[] constant(0)
  ROOT r = {etype}[] reduce(x, zero), dimensions={{0}}, to_apply=add
}}"""
    x = np.full(1001, 0.3, dtype=dtype)
    got = compile_module(long_sum, "cpu").execute([x])[0].astype(np.float64)
    assert abs(got - 1001 * float(x[0])) <= tolerance * 300, got
    split_dims = f"""HloModule m
{reducer}
ENTRY main {{
  x = {etype}[3000,5,7] parameter(0)
  zero = {etype}[] constant(0)
  ROOT r = {etype}[5] reduce(x, zero), dimensions={{0,2}}, to_apply=add
}}"""
    y = np.random.default_rng(0).random((3000, 5, 7)).astype(dtype)
    executable = compile_module(split_dims, "cpu")
    assert "transpose(" in executable.artifacts.optimized_module.to_text()
    got5 = executable.execute([y])[0].astype(np.float64)
    exact = y.astype(np.float64).sum(axis=(0, 2))
    np.testing.assert_allclose(got5, exact, rtol=tolerance)
    want = HloEvaluator().evaluate_module(parse_hlo(split_dims), [y])[0].astype(np.float64)
    np.testing.assert_allclose(got5, want, rtol=tolerance)


# ---- reshape-to-bitcast --------------------------------------------------------------------------
def test_reshape_to_bitcast_golden() -> None:
    """Row-major on both sides: a bitcast under the reshape's name. A column-major operand
    would need its elements moved, so that reshape stays."""
    check_pass(ReshapeToBitcast(), """HloModule m
ENTRY main {
  x = f32[2,3,20] parameter(0)
  r = f32[6,20] reshape(x)
  t = f32[20,6]{0,1} parameter(1)
  r2 = f32[120] reshape(t)
  ROOT s = (f32[6,20], f32[120]) tuple(r, r2)
}""", """HloModule m
ENTRY main {
  x = f32[2,3,20] parameter(0)
  r = f32[6,20] bitcast(x)
  t = f32[20,6]{0,1} parameter(1)
  r2 = f32[120] reshape(t)
  ROOT s = (f32[6,20], f32[120]) tuple(r, r2)
}""")


def test_reshape_to_bitcast_leaves_fused_reshapes_alone() -> None:
    """Inside a fusion a reshape is index arithmetic already."""
    check_pass(ReshapeToBitcast(), """HloModule m
fused {
  p = f32[2,6] parameter(0)
  r = f32[3,4] reshape(p)
  ROOT n = f32[3,4] negate(r)
}
ENTRY main {
  x = f32[2,6] parameter(0)
  ROOT f = f32[3,4] fusion(x), kind=kLoop, calls=fused
}""", None)


def test_bitcast_on_the_cpu_needs_no_kernel() -> None:
    """A reshape that no fusion absorbs (a sort reads it) becomes a bitcast: no copy kernel, the
    right values."""
    executable = _compile_and_compare("""HloModule m
ENTRY main {
  x = f32[4,6] parameter(0)
  r = f32[24] reshape(x)
  ROOT s = f32[24] sort(r), dimensions={0}, to_apply=lt
}
lt { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT c = pred[] compare(a, b), direction=LT }
""")
    optimized = executable.artifacts.optimized_module.to_text()
    assert "bitcast(" in optimized and " reshape(" not in optimized, optimized
    assert not any("bitcast" in k.name or "reshape" in k.name for k in _kernels(executable))


# ---- dot-strategy ---------------------------------------------------------------------------------
def _dot(etype: str, m: int, k: int, n: int) -> str:
    return f"""HloModule dot_{etype}_{m}x{k}x{n}
ENTRY main {{
  a = {etype}[{m},{k}] parameter(0)
  b = {etype}[{k},{n}] parameter(1)
  ROOT d = {etype}[{m},{n}] dot(a, b), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}
}}"""


@pytest.mark.parametrize(("etype", "m", "k", "n", "strategy"), [
    ("f32", 256, 256, 256, "blas"), ("f64", 128, 96, 64, "blas"), ("f32", 4, 3, 5, "loops"),
    ("s32", 96, 96, 96, "loops"), ("f16", 8, 8, 8, "loops")])  # f16: computed in f32 (change-op-data-type)
def test_dot_strategy_is_visible_in_the_optimized_hlo(etype: str, m: int, k: int, n: int, strategy: str) -> None:
    if strategy == "blas" and find_blas() is None:
        pytest.skip("no BLAS library found (numpy's bundled OpenBLAS is used when present)")
    executable = _compile_and_compare(_dot(etype, m, k, n))
    optimized = executable.artifacts.optimized_module.to_text()
    assert f'backend_config={{"dot_strategy":"{strategy}"}}' in optimized, optimized


def test_dot_strategy_keeps_other_config_and_an_earlier_choice() -> None:
    before = """HloModule m
ENTRY main {
  a = f32[4,3] parameter(0)
  b = f32[3,5] parameter(1)
  d = f32[4,5] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}, backend_config={"note":"x"}
  e = f32[4,5] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}, backend_config={"dot_strategy":"elemental"}
  ROOT t = (f32[4,5], f32[4,5]) tuple(d, e)
}"""
    module = check_pass(DotStrategy(), before, before.replace('{"note":"x"}', '{"note":"x","dot_strategy":"loops"}'))
    configs = [json.loads(i.backend_config) for i in module.entry.instructions if i.opcode == "dot"]
    assert configs == [{"note": "x", "dot_strategy": "loops"}, {"dot_strategy": "elemental"}]


# ---- optimization levels -------------------------------------------------------------------------
SEEDS = f"""HloModule seeds
{REDUCERS}
ENTRY main {{
  x = f32[4096] parameter(0)
  y = f32[4096] parameter(1)
  z = f32[4096] parameter(2)
  one = f32[] constant(1)
  ones = f32[4096] broadcast(one), dimensions={{}}
  yz = f32[4096] multiply(y, z)
  yz1 = f32[4096] multiply(yz, ones)
  s = f32[4096] add(x, yz1)
  r = f32[64,64] reshape(s)
  zero = f32[] constant(0)
  ROOT sum = f32[64] reduce(r, zero), dimensions={{1}}, to_apply=add
}}"""


def test_hlo_opt_level_0_skips_the_optimizations_but_computes_the_same() -> None:
    optimized = _compile_and_compare(SEEDS).artifacts.optimized_module
    assert [i.opcode for i in optimized.entry.instructions].count("fusion") == 1
    with flags.override(xla_teach_hlo_opt_level=0):
        executable = _compile_and_compare(SEEDS)
    module = executable.artifacts.optimized_module
    opcodes = [i.opcode for i in module.entry.instructions]
    assert "fusion" not in opcodes and opcodes.count("multiply") == 2, module.to_text()  # x*1 kept
    assert "bitcast" in opcodes  # reshape-to-bitcast is legalization: it runs at every level
    skipped = {r.pass_name for r in executable.recorder.records if r.skipped == "optimization level 0"}
    ran = {r.pass_name for r in executable.recorder.records if not r.skipped}
    assert {"algsimp", "fusion", "multi_output_fusion", "tree_reduction_rewriter"} <= skipped
    assert {"reshape-to-bitcast", "dot-strategy", "hlo-memory-scheduler"} <= ran


def test_backend_optimization_level_0_skips_llvm_optimizations(monkeypatch: pytest.MonkeyPatch) -> None:
    """Set through ``XLA_FLAGS``: LLVM's -O0 leaves the loops scalar (no vector types), -O3
    vectorizes them; both compute the interpreter's result."""
    vectorized = _compile_and_compare(SEEDS).artifacts.optimized_llvm_ir
    monkeypatch.setenv("XLA_FLAGS", "--xla_backend_optimization_level=0")
    artifacts = _compile_and_compare(SEEDS).artifacts
    assert "x float>" in vectorized
    assert "x float>" not in artifacts.optimized_llvm_ir
    assert artifacts.llvm_ir.count("\n") == pytest.approx(artifacts.optimized_llvm_ir.count("\n"), abs=5)


# ---- threads ----------------------------------------------------------------------------------------
LARGE_LOOP = """HloModule large_loop
ENTRY main {
  x = f32[1027,129] parameter(0)
  y = f32[1027,129] parameter(1)
  m = f32[1027,129] multiply(x, y)
  ROOT a = f32[1027,129] add(m, x)
}"""


class _RecordingPool:
    """Stands in for the runtime's thread pool and records the ranges handed to threads."""

    def __init__(self, pool) -> None:  # type: ignore[no-untyped-def]
        self.pool = pool
        self.ranges: list[tuple[int, int]] = []

    def submit(self, fn, pointer, begin, end):  # type: ignore[no-untyped-def]
        self.ranges.append((begin, end))
        return self.pool.submit(fn, pointer, begin, end)


def test_large_loop_kernels_are_split_across_threads() -> None:
    from xla_teach.runtime import thunks

    with mock.patch(CPU_COUNT, return_value=4):
        executable = compile_module(LARGE_LOOP, "cpu")
    (kernel,) = _kernels(executable)
    assert kernel.partitions == 4 and kernel.outer_size == 1027
    assert "4 partitions" in kernel.describe()
    recording = _RecordingPool(thunks.thread_pool())
    args = fake_arguments(parse_hlo(LARGE_LOOP), seed=5)
    with mock.patch.object(thunks, "thread_pool", return_value=recording), \
            mock.patch.object(thunks, "native_pool", return_value=None):  # the Python pool's route
        got = executable.execute(args)
    # Three pieces go to other threads, the first runs on the caller's; together they cover [0, 1027).
    assert recording.ranges == [(256, 513), (513, 770), (770, 1027)]
    assert_same(got, HloEvaluator().evaluate_module(parse_hlo(LARGE_LOOP), args))


def test_small_kernels_and_cpu_parallel_off_run_on_one_thread() -> None:
    with mock.patch(CPU_COUNT, return_value=4):
        small = _compile_and_compare(LARGE_LOOP.replace("1027,129", "8,16"))
        with flags.override(xla_teach_cpu_parallel=False):
            serial = _compile_and_compare(LARGE_LOOP)
    assert [k.partitions for k in _kernels(small)] == [1]
    assert [k.partitions for k in _kernels(serial)] == [1]
