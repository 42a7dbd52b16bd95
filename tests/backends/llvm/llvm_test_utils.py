"""Test helpers for LLVM-level code: build a module, optimize it, JIT it, run kernels on numpy arrays.

The llvmlite 0.50 APIs used here (checked against its installed source):

* ``llvm.Target.from_default_triple().create_target_machine(cpu, features, opt, jit=True)``, with
  ``llvm.get_host_cpu_name()`` and ``llvm.get_host_cpu_features().flatten()`` for the host;
* the new pass manager: ``pto = llvm.create_pipeline_tuning_options(speed_level=3)``,
  ``pb = llvm.create_pass_builder(tm, pto)``, ``pb.getModulePassManager().run(module_ref, pb)``;
* MCJIT: ``llvm.create_mcjit_compiler(module_ref, tm)``, ``engine.finalize_object()``,
  ``engine.get_function_address(name)``.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from functools import cache

import llvmlite.binding as llvm
import numpy as np
from llvmlite import ir

Emitter = Callable[..., ir.Value]  # emit_xxx(builder, *scalars) -> scalar
I64 = ir.IntType(64)
PTR = ir.PointerType()
_IR_TYPES = {np.dtype(np.float32): ir.FloatType(), np.dtype(np.float64): ir.DoubleType()}


@cache
def host_target_machine(opt: int = 3) -> llvm.TargetMachine:
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    target = llvm.Target.from_default_triple()
    return target.create_target_machine(cpu=llvm.get_host_cpu_name(), features=llvm.get_host_cpu_features().flatten(),
                                        opt=opt, jit=True)


def build_map_kernel(emit: Emitter, dtype: np.dtype, arity: int = 1, name: str = "kernel") -> ir.Module:
    """``void kernel(ptr out, ptr in0[, ptr in1], i64 n)``: ``out[i] = emit(in0[i][, in1[i]])``."""
    fty = _IR_TYPES[np.dtype(dtype)]
    module = ir.Module(name=f"{name}_module")
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [PTR] * (1 + arity) + [I64]), name=name)
    for arg in fn.args[:-1]:
        arg.add_attribute("noalias")
    out, *ins, n = fn.args
    entry, header, body, done = (fn.append_basic_block(s) for s in ("entry", "header", "body", "done"))
    b = ir.IRBuilder(entry)
    b.branch(header)
    b.position_at_end(header)
    i = b.phi(I64, name="i")
    i.add_incoming(ir.Constant(I64, 0), entry)
    b.cbranch(b.icmp_signed("<", i, n), body, done)
    b.position_at_end(body)
    args = [b.load(b.gep(p, [i], inbounds=True, source_etype=fty), typ=fty) for p in ins]
    b.store(emit(b, *args), b.gep(out, [i], inbounds=True, source_etype=fty))
    i.add_incoming(b.add(i, ir.Constant(I64, 1), flags=["nsw"]), b.block)
    b.branch(header)
    b.position_at_end(done)
    b.ret_void()
    return module


def parse_and_optimize(module: ir.Module, tm: llvm.TargetMachine, level: int = 3) -> llvm.ModuleRef:
    """Parse llvmlite IR text, verify it, and run the default ``-O<level>`` pipeline for ``tm``."""
    module.triple = tm.triple
    module.data_layout = str(tm.target_data)
    ref = llvm.parse_assembly(str(module))
    ref.verify()
    if level:
        pto = llvm.create_pipeline_tuning_options(speed_level=level)
        pb = llvm.create_pass_builder(tm, pto)
        pb.getModulePassManager().run(ref, pb)
    return ref


class JitKernel:
    """A JIT-compiled map kernel callable on numpy arrays (keeps its engine alive)."""

    def __init__(self, emit: Emitter, dtype: np.dtype, arity: int = 1, opt: int = 3) -> None:
        self.dtype, self.arity = np.dtype(dtype), arity
        tm = host_target_machine()
        self.ir_module = build_map_kernel(emit, self.dtype, arity)
        self.module_ref = parse_and_optimize(self.ir_module, tm, opt)
        self.engine = llvm.create_mcjit_compiler(self.module_ref, tm)
        self.engine.finalize_object()
        addr = self.engine.get_function_address("kernel")
        self._fn = ctypes.CFUNCTYPE(None, *([ctypes.c_void_p] * (1 + arity)), ctypes.c_int64)(addr)

    def __call__(self, *inputs: np.ndarray) -> np.ndarray:
        assert len(inputs) == self.arity
        arrays = [np.ascontiguousarray(x, dtype=self.dtype) for x in inputs]
        arrays = np.broadcast_arrays(*arrays)
        arrays = [np.ascontiguousarray(a) for a in arrays]
        out = np.empty(arrays[0].shape, self.dtype)
        self._fn(out.ctypes.data, *(a.ctypes.data for a in arrays), out.size)
        return out


_KERNELS: dict[tuple[Emitter, np.dtype, int], JitKernel] = {}


def jit_map(emit: Emitter, dtype: np.dtype | type, arity: int = 1) -> JitKernel:
    """A cached :class:`JitKernel` for ``emit`` (one compile per emitter and dtype per session)."""
    key = (emit, np.dtype(dtype), arity)
    if key not in _KERNELS:
        _KERNELS[key] = JitKernel(emit, np.dtype(dtype), arity)
    return _KERNELS[key]


# ---------------------------------------------------------------------------------------------
# Accuracy measurement
# ---------------------------------------------------------------------------------------------
def ulp_error(got: np.ndarray, ref: np.ndarray, dtype: np.dtype | type) -> np.ndarray:
    """``|got - ref|`` in units in the last place of ``ref`` *in dtype*; ``ref`` in wider precision.

    The ulp of ``ref`` is ``2^(floor(log2|ref|) - (p - 1))``, and the subnormal spacing below the
    smallest normal.  A NaN matches a NaN (error 0) and nothing else (error inf); an infinite
    result where the reference is finite counts as ``±2^(emax+1)`` so that rounding up to inf at
    the overflow threshold costs about one ulp instead of infinity.
    """
    info = np.finfo(dtype)
    ref = np.asarray(ref)
    wide = ref.dtype
    got_w = np.asarray(got).astype(wide)
    with np.errstate(over="ignore"):
        rounded = ref.astype(dtype).astype(wide)  # the reference as dtype: inf beyond the overflow threshold
    _, e = np.frexp(ref)
    ulp = np.ldexp(np.ones_like(ref), np.maximum(e - 1, info.minexp) - info.nmant)
    with np.errstate(over="ignore"):
        big = np.ldexp(np.ones_like(ref), info.maxexp)
    finite_got = np.where(np.isinf(got_w), np.sign(got_w) * big, got_w)
    with np.errstate(invalid="ignore", over="ignore"):
        err = np.abs(finite_got - ref) / ulp
    nan_ref, nan_got = np.isnan(ref), np.isnan(got_w)
    err = np.where(nan_ref | nan_got, np.where(nan_ref & nan_got, 0.0, np.inf), err)
    err = np.where(np.isinf(rounded), np.where(got_w == rounded, 0.0, np.inf), err)
    return err.astype(np.float64)


def random_floats(rng: np.random.Generator, dtype: np.dtype | type, n: int, lo: float | None = None,
                  hi: float | None = None) -> np.ndarray:
    """``n`` samples: uniform on ``[lo, hi]`` if given, else uniform over the *bit patterns* of all
    finite floats (so every binade, subnormals included, is equally represented), both signs."""
    dtype = np.dtype(dtype)
    if lo is not None and hi is not None:
        return rng.uniform(lo, hi, n).astype(dtype)
    if dtype == np.float32:
        bits = rng.integers(0, 0x7F800000, n, dtype=np.uint32)
        x = bits.view(np.float32)
    else:
        bits = rng.integers(0, 0x7FF0000000000000, n, dtype=np.uint64)
        x = bits.view(np.float64)
    return np.where(rng.random(n) < 0.5, -x, x).astype(dtype)


def max_ulp(got: np.ndarray, ref: np.ndarray, dtype: np.dtype | type, x: np.ndarray | None = None) -> float:
    """The worst ulp error; on failure the assertion message names the worst input."""
    err = ulp_error(got, ref, dtype)
    worst = int(np.argmax(err))
    if x is not None:
        max_ulp.last_worst = (x.flat[worst], got.flat[worst], ref.flat[worst])  # type: ignore[attr-defined]
    return float(err.flat[worst])
