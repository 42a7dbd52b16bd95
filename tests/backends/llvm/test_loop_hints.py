"""Loop hints for LLVM (not unrolled, not vectorized, interleaved) and vector loops written by hand."""

from __future__ import annotations

import ctypes
import re

import llvmlite.binding as llvm
import numpy as np
import pytest
from llvmlite import ir

from xla_teach.backends.cpu.jit import CpuJit, initialize_llvm
from xla_teach.backends.llvm.ir_array import i64
from xla_teach.backends.llvm.ir_types import F32, I64, PTR
from xla_teach.backends.llvm.loops import (
    LIGHT_BODY,
    for_range,
    load_lanes,
    resolve_loop_hints,
    splat,
    store_lanes,
    vector_loop,
)


def _loop_hints(text: str) -> list[set[str]]:
    """For each ``!llvm.loop`` in the module text: the hint strings its loop ID lists."""
    nodes = dict(re.findall(r"^(!\d+) = (.*)$", text, flags=re.M))
    hints = []
    for loop_id in re.findall(r"!llvm.loop (!\d+)", text):
        members = re.findall(r"!\d+", nodes[loop_id])[1:]  # (the first names the loop itself)
        hints.append({re.search(r'"([^"]+)"', nodes[m]).group(1) for m in members})
    return hints


def _sum_loop(work_per_element: int, **hints: bool) -> str:
    """``double f(ptr x)``: sum of ``x[i] * x[i] * ...`` over 512 elements, under ``hints``."""
    module = ir.Module("m")
    fn = ir.Function(module, ir.FunctionType(F32, [PTR]), "f")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    acc = b.alloca(F32)
    b.store(ir.Constant(F32, 0.0), acc)
    with for_range(b, i64(512), "i", **hints) as i:
        x = b.load(b.gep(fn.args[0], [i], source_etype=F32), typ=F32)
        value = x
        for _ in range(work_per_element):
            value = b.fmul(value, x)
        b.store(b.fadd(b.load(acc), value), acc)
    b.ret(b.load(acc))
    return resolve_loop_hints(str(module))


@pytest.mark.parametrize("hints,want", [
    ({"unroll": False}, {"llvm.loop.unroll.disable"}),
    ({"vectorize": False}, {"llvm.loop.unroll.disable", "llvm.loop.vectorize.enable"}),
    ({"unroll": False, "interleave": True}, {"llvm.loop.unroll.disable", "llvm.loop.interleave.count"}),
])
def test_each_hint_becomes_llvm_loop_metadata(hints: dict[str, bool], want: set[str]) -> None:
    text = _sum_loop(1, **hints)
    assert _loop_hints(text) == [want]
    initialize_llvm()
    llvm.parse_assembly(text).verify()  # a well-formed loop ID, accepted by LLVM


def test_a_heavy_body_is_not_interleaved() -> None:
    """Past LIGHT_BODY instructions a body hides its accumulator's latency: only not unrolled."""
    assert _loop_hints(_sum_loop(LIGHT_BODY, unroll=False, interleave=True)) == [{"llvm.loop.unroll.disable"}]


@pytest.mark.parametrize("count", [0, 5, 8, 19, 64])
def test_vector_loop_covers_every_element_once(count: int) -> None:
    """``x[i] = x[i] * 3 + i`` for ``count`` elements: whole vectors, then the rest one by one."""
    module = ir.Module("m")
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [PTR, I64]), "scale")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    x, n = fn.args

    def body(i: ir.Value, lanes: int) -> None:
        index = b.sitofp(i, F32) if lanes == 1 else b.fadd(
            splat(b.sitofp(i, F32), lanes, b),
            ir.Constant(ir.VectorType(F32, lanes), [float(k) for k in range(lanes)]))
        value = b.fadd(b.fmul(load_lanes(b, x, i, F32, lanes), splat(ir.Constant(F32, 3.0), lanes)), index)
        store_lanes(b, value, x, i, F32)

    vector_loop(b, n, F32, "scale", body)
    b.ret_void()
    jit = CpuJit(resolve_loop_hints(str(module)))
    data = np.arange(70, dtype=np.float32)
    want = data.copy()
    want[:count] = data[:count] * 3 + np.arange(count)
    ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64)(jit.function_address("scale"))(data.ctypes.data, count)
    np.testing.assert_array_equal(data, want)
