"""The element-wise emitters the vector emitter uses give, on ``<8 x float>`` / ``<4 x double>``,
bit for bit what they give one element at a time (the scalar code is the oracle: it is checked
against NumPy and XLA elsewhere)."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest
from llvmlite import ir

from xla_teach.backends.cpu.jit import CpuJit
from xla_teach.backends.llvm import elemental_ops as ops
from xla_teach.backends.llvm.vector_emitter import VECTOR_BINARY, VECTOR_UNARY
from xla_teach.hlo.types import PrimitiveType

_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)


def _compiled(opcode: str, element: ir.Type, lanes: int) -> tuple[CpuJit, object]:
    """``void f(T *x, T *y, T *out)``: ``lanes`` results of ``opcode`` at once."""
    module = ir.Module()
    ptr = ir.PointerType(element)
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [ptr, ptr, ptr]), "f")
    b = ir.IRBuilder(fn.append_basic_block())
    ty = element if lanes == 1 else ir.VectorType(element, lanes)
    x, y = (b.load(b.bitcast(a, ty.as_pointer())) for a in fn.args[:2])
    x.align = y.align = 4
    ptype = PrimitiveType.F32 if element == ir.FloatType() else PrimitiveType.F64
    if opcode in VECTOR_BINARY:
        result = ops.emit_binary(b, opcode, x, y, ptype)
    else:
        result = ops.emit_unary(b, opcode, x, ptype)
    b.store(result, b.bitcast(fn.args[2], ty.as_pointer())).align = 4
    b.ret_void()
    jit = CpuJit(str(module))
    return jit, _FN(jit.function_address("f"))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("opcode", sorted(VECTOR_UNARY | VECTOR_BINARY))
def test_vector_results_are_the_scalar_results(opcode: str, dtype: type) -> None:
    element, lanes = (ir.FloatType(), 8) if dtype is np.float32 else (ir.DoubleType(), 4)
    tiny = 1e-40 if dtype is np.float32 else 1e-310
    special = np.array([0, -0.0, 1, -1, np.inf, -np.inf, np.nan, tiny, 88.7, -103, 0.5, -0.5, 1e30, -1e30, 3, 700],
                       dtype)
    rng = np.random.default_rng(len(opcode))
    n = 512
    x = np.concatenate([special, rng.standard_normal(n) * rng.choice([1, 10, 100], n)]).astype(dtype)[:n]
    y = np.concatenate([special[::-1], rng.standard_normal(n) * 3]).astype(dtype)[:n]
    vector_jit, vector = _compiled(opcode, element, lanes)
    scalar_jit, scalar = _compiled(opcode, element, 1)
    got, want = np.zeros(n, dtype), np.zeros(n, dtype)
    step = x.itemsize
    for i in range(0, n, lanes):
        vector(x.ctypes.data + i * step, y.ctypes.data + i * step, got.ctypes.data + i * step)
    for i in range(n):
        scalar(x.ctypes.data + i * step, y.ctypes.data + i * step, want.ctypes.data + i * step)
    bits = np.uint32 if dtype is np.float32 else np.uint64
    same = (got.view(bits) == want.view(bits)) | (np.isnan(got) & np.isnan(want))
    assert same.all(), f"{opcode}: lanes differ at {np.flatnonzero(~same)[:5]} ({x[~same][:3]}, {y[~same][:3]})"
