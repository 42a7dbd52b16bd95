"""The CPU runtime library: functions compiled once per process, called by every module's kernels."""

from __future__ import annotations

import ctypes

import numpy as np
from llvmlite import ir

from xla_teach.api import compile_module
from xla_teach.backends.cpu import runtime_library
from xla_teach.backends.llvm.ir_types import I64, PTR
from xla_teach.hlo.evaluator import HloEvaluator
from xla_teach.hlo.text.parser import parse_hlo

CONV = """
HloModule conv
ENTRY main {{
  x = f32[{n},{s},{s},{c}] parameter(0)
  w = f32[3,3,{c},{f}] parameter(1)
  ROOT y = f32[{n},{s},{s},{f}] convolution(x, w), window={{size=3x3 pad=1_1x1_1}}, dim_labels=b01f_01io->b01f
}}
"""


def test_a_library_function_is_built_once_and_called_from_any_module() -> None:
    built = []
    signature = ir.FunctionType(ir.VoidType(), [PTR, I64])

    def build(fn: ir.Function) -> None:  # *p = v * 3
        built.append(fn.name)
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        p, v = fn.args
        b.store(b.mul(v, ir.Constant(I64, 3)), p)
        b.ret_void()

    name = "xla_teach_test_triple"
    first, second = ir.Module("a"), ir.Module("b")
    declared = runtime_library.library_function(first, name, signature, build)
    runtime_library.library_function(second, name, signature, build)
    assert built == [name]  # compiled for the first module only
    assert declared.is_declaration and name in {f.name for f in runtime_library.compiled_functions()}
    address = runtime_library.compiled(name, signature, build).address
    out = ctypes.c_int64(0)
    ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64)(address)(ctypes.addressof(out), 14)
    assert out.value == 42


def test_convolutions_of_other_sizes_share_one_compiled_function() -> None:
    rng = np.random.default_rng(1)
    for n, s, c, f in ((2, 7, 3, 5), (1, 9, 16, 8), (3, 5, 33, 2)):  # 33 features: no constant-size copy
        text = CONV.format(n=n, s=s, c=c, f=f)
        exe = compile_module(text, "cpu")
        ir_text = exe.artifacts.llvm_ir
        assert 'declare void @"xla_teach_conv_im2col_f32_2d"' in ir_text and "patches" not in ir_text
        args = [rng.standard_normal((n, s, s, c)).astype(np.float32),
                rng.standard_normal((3, 3, c, f)).astype(np.float32)]
        (got,) = exe.execute(args)
        (want,) = HloEvaluator().evaluate_module(parse_hlo(text), args)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    names = [fn.name for fn in runtime_library.compiled_functions()]
    assert names.count("xla_teach_conv_im2col_f32_2d") == 1


def test_a_dump_holds_the_library_functions_the_module_calls(tmp_path) -> None:  # noqa: ANN001
    from xla_teach import flags

    with flags.override(xla_dump_to=str(tmp_path)):
        compile_module(CONV.format(n=1, s=5, c=2, f=3), "cpu")
    (before,) = tmp_path.glob("module_*.runtime-library.xla_teach_conv_im2col_f32_2d.ir-no-opt.ll")
    (after,) = tmp_path.glob("module_*.runtime-library.xla_teach_conv_im2col_f32_2d.ir-with-opt.ll")
    assert 'define void @"xla_teach_conv_im2col_f32_2d"' in before.read_text()
    assert "scipy_cblas_sgemm64_" in after.read_text()  # the blocks' products


def test_a_blas_dot_flushes_its_result_through_the_library_function() -> None:
    """Each BLAS call is followed by a call to the shared flush loop, not by a loop of its own;
    the flush still turns OpenBLAS's denormal results into zeros while the run flushes them."""
    from xla_teach import flags

    text = ("HloModule m\nENTRY e {\n  x = f64[64,64] parameter(0)\n  y = f64[64,64] parameter(1)\n"
            "  ROOT r = f64[64,64] dot(x, y), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}\n")
    exe = compile_module(text, "cpu")
    ir_text = exe.artifacts.llvm_ir
    assert 'declare void @"xla_teach_flush_denormals_f64"' in ir_text and "ftz.vec" not in ir_text
    a = np.full((64, 64), 1e-160)
    b = np.eye(64) * 1e-160  # each result 1e-320: a denormal double
    (got,) = exe.execute([a, b])
    assert np.all(got == 0.0)
    with flags.override(xla_teach_flush_denormals=False):
        (kept,) = compile_module(text, "cpu").execute([a, b])
    assert np.all(kept == a @ b) and np.all(kept > 0)
