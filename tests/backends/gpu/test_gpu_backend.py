"""The GPU backend. Everywhere: every op case, real-XLA sample and corpus module compiles to PTX
that ``ptxas`` assembles for sm_80 and sm_90; launch dimensions appear in the optimized HLO;
executing without a device says so plainly; the NVRTC route compiles. With a device (marked
``gpu``): every case runs and matches the reference interpreter."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings

# The device tests' helpers are imported here, not inside the tests, so that a renamed helper
# fails collection on every machine instead of only on one with a GPU.
from tests.backends.backend_test_utils import CORPUS, SAMPLE_PROGRAMS, assert_same, load_sample, run_both, stored
from tests.backends.cpu.test_cpu_random import _assert_matches
from tests.backends.op_cases import all_cases
from tests.hypothesis_modules import hlo_modules
from tests.passes.pass_test_utils import special_inputs
from xla_teach import flags
from xla_teach.api import compile_module
from xla_teach.backends.gpu.nvptx import assemble_with_ptxas, ptxas_path
from xla_teach.backends.gpu.runtime import GpuUnavailableError, device_available
from xla_teach.hlo.evaluator import HloEvaluator
from xla_teach.hlo.ir import HloModule
from xla_teach.tools.bugs.fake_data import fake_arguments

CASES = all_cases()
needs_ptxas = pytest.mark.skipif(ptxas_path() is None, reason="ptxas is not on PATH")
needs_gpu = pytest.mark.skipif(not device_available(), reason="no CUDA device/driver")
SEED = """HloModule seed
add { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT s = f32[] add(a, b) }
ENTRY main {
  x = f32[1024] parameter(0)
  y = f32[1024] parameter(1)
  z = f32[1024] parameter(2)
  m = f32[1024] multiply(y, z)
  s = f32[1024] add(x, m)
  zero = f32[] constant(0)
  ROOT r = f32[] reduce(s, zero), dimensions={0}, to_apply=add
}
"""


def _compile_for_sm80(module: str | HloModule):  # type: ignore[no-untyped-def]
    """Compile for sm_80 explicitly: on a machine with a GPU the default target is the device's."""
    with flags.override(xla_teach_gpu_arch="sm_80"):
        return compile_module(module, "gpu")


def _assemble(ptx: str, what: str) -> None:
    """sm_80 PTX assembles for sm_80 and (forward compatible) for sm_90."""
    for arch in ("sm_80", "sm_90"):
        ok, log = assemble_with_ptxas(ptx, arch)
        assert ok, f"{what}: ptxas -arch={arch} rejected the PTX:\n{log}"


@needs_ptxas
@pytest.mark.parametrize("text", [t for _, t in CASES], ids=[n for n, _ in CASES])
def test_op_case_ptx_assembles(text: str) -> None:
    executable = _compile_for_sm80(text)
    assert ".entry" in executable.artifacts.ptx
    _assemble(executable.artifacts.ptx, "op case")


@needs_ptxas
@pytest.mark.parametrize("path", SAMPLE_PROGRAMS + CORPUS, ids=lambda p: p.name)
def test_sample_and_corpus_ptx_assembles(path: Path) -> None:
    module = load_sample(path)[0] if path.is_dir() else path.read_text()
    _assemble(_compile_for_sm80(module).artifacts.ptx, path.name)


def test_launch_dimensions_are_in_the_optimized_hlo() -> None:
    executable = compile_module(SEED, "gpu")
    text = executable.module.to_text()
    kernels = [i for i in executable.module.entry.instructions if i.backend_config]
    assert kernels, text
    for instr in kernels:
        config = json.loads(instr.backend_config)["launch_dimensions"]
        blocks, threads = config["blocks"], config["threads_per_block"]
        assert all(b >= 1 for b in blocks) and 1 <= np.prod(threads) <= 1024
    assert "launch_dimensions" in text
    # The seed example is one fused reduction kernel.
    assert len(kernels) == 1 and kernels[0].opcode == "fusion"


def test_gpu_arch_flag_selects_the_ptx_target() -> None:
    with flags.override(xla_teach_gpu_arch="sm_90"):
        ptx = compile_module(SEED, "gpu").artifacts.ptx
    assert ".target sm_90" in ptx


@pytest.mark.skipif(device_available(), reason="a CUDA device is present")
def test_execute_without_a_device_says_so() -> None:
    executable = compile_module(SEED, "gpu")
    with pytest.raises(GpuUnavailableError, match="no CUDA device/driver"):
        executable.execute([np.zeros(1024, np.float32)] * 3)


def test_nvrtc_route_compiles_and_assembles() -> None:
    pytest.importorskip("cuda.bindings.nvrtc")
    from xla_teach.backends.gpu.cuda_c import compare_routes

    routes = compare_routes(compile_module("""HloModule m
ENTRY e {
  x = f32[64,33] parameter(0)
  y = f32[33] parameter(1)
  yb = f32[64,33] broadcast(y), dimensions={1}
  m = f32[64,33] multiply(x, yb)
  ROOT t = f32[64,33] tanh(m)
}""", "gpu"))
    assert "__global__ void" in routes.cuda_source and "tanhf" in routes.cuda_source
    assert routes.nvrtc_kernel_ptx() and routes.llvm_kernel_ptx()
    if ptxas_path():
        _assemble(routes.nvrtc_ptx, "NVRTC route")


def test_nvrtc_route_rejects_what_it_cannot_write() -> None:
    pytest.importorskip("cuda.bindings.nvrtc")
    from xla_teach.backends.gpu.cuda_c import CudaCUnsupported, compare_routes

    with pytest.raises(CudaCUnsupported, match="no fusion"):
        compare_routes(compile_module("HloModule m\nENTRY e {\n  x = f16[8] parameter(0)\n  ROOT n = f16[8] exponential(x)\n}",
                                      "gpu"))


# ---- on the device -------------------------------------------------------------------------
@pytest.mark.gpu
@needs_gpu
@pytest.mark.parametrize("name,text", CASES, ids=[n for n, _ in CASES])
def test_gpu_matches_interpreter(name: str, text: str) -> None:
    got, want = run_both(text, None, "gpu")
    # TF32 rounds the products' inputs to 10 mantissa bits (relative 2^-11), over 67 terms of ~1;
    # everything else within the rounding-error bound of its terms (``assert_same``).
    tf32 = {"rtol": 1e-2, "atol": 2e-2} if "tf32" in name else None
    assert_same(got, want, tf32, name)


@pytest.mark.gpu
@needs_gpu
@pytest.mark.parametrize("path", SAMPLE_PROGRAMS, ids=lambda p: p.name)
def test_gpu_samples_match_xla(path: Path) -> None:
    module, args, meta = load_sample(path)
    outputs = np.load(path / "outputs.npz")

    want = [stored(outputs[o["key"]], o["hlo_type"]) for o in meta["outputs"]]
    got = compile_module(module, "gpu").execute(args)
    assert_same(got, want, {"rtol": meta["tolerance"]["rtol"], "atol": meta["tolerance"]["atol"]}, path.name)


@pytest.mark.gpu
@needs_gpu
@pytest.mark.parametrize("path", CORPUS, ids=lambda p: p.name)
def test_gpu_corpus_matches_interpreter(path: Path) -> None:
    got, want = run_both(path.read_text(), None, "gpu")
    assert_same(got, want, {"rtol": 2e-4, "atol": 1e-5}, path.name)


@pytest.mark.gpu
@needs_gpu
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(hlo_modules())
def test_random_modules_gpu_matches_interpreter(module: HloModule) -> None:
    """As the CPU's differential test, except for one thing a GPU does differently by design: an
    arithmetic op with a NaN operand returns the canonical NaN (0x7fffffff) rather than the
    operand's payload and sign, so reading a float's bits (``bitcast-convert`` to an integer) may
    differ from the interpreter's (x86's) NaN propagation. Such modules are left out."""

    assume(not any(i.opcode == "bitcast-convert" and i.operand(0).shape.element_type.is_float
                   for c in module.computations for i in c.instructions))

    executable = compile_module(module, "gpu")
    for args in (fake_arguments(module, seed=1), special_inputs(module)):
        want = HloEvaluator(flush_denormals=False).evaluate_module(module, args)  # the GPU keeps denormals
        _assert_matches(executable.execute(args), want, module, args)


@pytest.mark.gpu
@needs_gpu
def test_nvrtc_route_runs_and_agrees_with_the_llvm_route() -> None:
    from xla_teach.backends.gpu.cuda_c import compare_routes, run_nvrtc_fusion

    text = """HloModule m
ENTRY e {
  x = f32[300,33] parameter(0)
  y = f32[33] parameter(1)
  yb = f32[300,33] broadcast(y), dimensions={1}
  m = f32[300,33] multiply(x, yb)
  ROOT t = f32[300,33] tanh(m)
}"""
    routes = compare_routes(compile_module(text, "gpu"))
    args = fake_arguments(routes.executable.module)  # type: ignore[attr-defined]
    llvm_out = routes.executable.execute(args)[0]  # type: ignore[attr-defined]
    np.testing.assert_allclose(run_nvrtc_fusion(routes, args), llvm_out, rtol=1e-5, atol=1e-6)


def test_elementwise_kernels_use_vector_accesses_when_aligned() -> None:
    import re

    text = """HloModule m
ENTRY e {
  x = f32[4096] parameter(0)
  y = f32[4096] parameter(1)
  m = f32[4096] multiply(x, y)
  ROOT t = f32[4096] tanh(m)
}"""
    executable = compile_module(text, "gpu")
    accesses = set(re.findall(r"(?:ld|st)\.global[.\w]*", executable.artifacts.ptx))
    assert any(".v4." in a and a.startswith("ld") for a in accesses), accesses
    assert any(".v4." in a and a.startswith("st") for a in accesses), accesses
    # Four elements per thread: 1024 threads for 4096 elements.
    config = json.loads(executable.module.entry.root.backend_config)["launch_dimensions"]
    assert np.prod(config["blocks"]) * np.prod(config["threads_per_block"]) == 1024
    # An odd size keeps one element per thread (and scalar accesses).
    odd = compile_module(text.replace("4096", "4099"), "gpu")
    assert not any(".v4." in a for a in re.findall(r"(?:ld|st)\.global[.\w]*", odd.artifacts.ptx))


NARROW_NEGATE = """HloModule narrow_negate
ENTRY main {
  x = s16[6] parameter(0)
  one = s16[] constant(1)
  ones = s16[6] broadcast(one), dimensions={}
  n = s16[6] negate(x)
  a = s16[6] abs(x)
  wide = s32[6] convert(n)
  half = s16[6] shift-right-arithmetic(n, ones)
  h = f16[6] bitcast-convert(n)
  bits = s16[6] bitcast-convert(h)
  aw = s32[6] convert(a)
  ROOT t = (s32[6], s16[6], s16[6], s32[6]) tuple(wide, half, bits, aw)
}"""


def test_ptx_has_no_16_bit_negate() -> None:
    """ptxas mis-compiles ``neg.s16`` of -32768 (see ``canonicalize_narrow_integers``): none reaches it."""
    ptx = compile_module(NARROW_NEGATE, "gpu").artifacts.ptx
    assert "neg.s16" not in ptx and "abs.s16" not in ptx, ptx
    assert "neg.s32" in ptx
    _assemble(_compile_for_sm80(NARROW_NEGATE).artifacts.ptx, "narrow negate")


@pytest.mark.gpu
@needs_gpu
def test_16_bit_negate_of_the_minimum_wraps_on_the_device() -> None:
    x = np.array([0, 1, -1, -32768, 32767, -7], np.int16)
    got, want = run_both(NARROW_NEGATE, [x], "gpu")
    assert_same(got, want, None, "narrow negate")


def test_dot_algorithm_follows_size_precision_and_the_tf32_flag() -> None:
    """Large default-precision f32 products take the TF32 tensor-core kernel, as XLA's do; highest
    precision or --xla_teach_gpu_tf32=false the f32 register-tiled one; small ones the 16x16 tiles."""
    from tests.backends.op_cases import all_cases

    def algorithm(text: str) -> str:
        executable = compile_module(text, "gpu")
        configs = [json.loads(i.backend_config)["launch_dimensions"] for i in executable.module.entry.instructions
                   if i.backend_config]
        return next(c["algorithm"] for c in configs if "algorithm" in c)

    cases = dict(all_cases())
    assert algorithm(cases["dot_tf32_tensor_cores_with_epilogue"]) == "mma_tf32_128x128"
    assert algorithm(cases["dot_register_tiled_128_with_epilogue"]) == "register_tiled_128x128_8x8"
    assert algorithm(cases["dot_register_tiled_64_batched"]) == "register_tiled_64x64_4x4"
    with flags.override(xla_teach_gpu_tf32=False):
        assert algorithm(cases["dot_tf32_tensor_cores_with_epilogue"]) == "register_tiled_128x128_8x8"
    small = cases["dot_tf32_tensor_cores_with_epilogue"].replace("2100", "100").replace("2000", "90")
    assert algorithm(small) == "tiled_16x16"
    ptx = compile_module(cases["dot_tf32_tensor_cores_with_epilogue"], "gpu").artifacts.ptx
    assert "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32" in ptx and "cvt.rna.tf32.f32" in ptx
