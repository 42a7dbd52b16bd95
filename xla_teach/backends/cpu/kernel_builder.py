"""The CPU kernel ABI and a builder for kernel functions.

Every kernel is one LLVM function, named after the HLO instruction it
implements, with the instruction's HLO text in a comment above it::

    ; %multiply_add_fusion = f32[1024]{0} fusion(%x, %y, %z), kind=kLoop, ...
    define void @multiply_add_fusion(ptr %buffers, i64 %begin, i64 %end) {
      ; loads buffer pointers, calls the inner function
    }
    define internal void @multiply_add_fusion.wrapped(ptr noalias %x, ptr noalias %y, ..., i64 %begin, i64 %end)

``buffers`` is an array of pointers, one per buffer slice the kernel touches
(operands first, then results). ``[begin, end)`` is the part of the outermost
loop this call computes, so the runtime can split a kernel across threads. The
inner ``.wrapped`` function receives typed pointers marked ``noalias`` when
buffer assignment proves no other argument overlaps them -- the information
LLVM needs to vectorize -- and is inlined into the outer one.
"""

from __future__ import annotations

from llvmlite import ir

from xla_teach.backends.llvm.ir_array import IrArray
from xla_teach.backends.llvm.ir_types import I64, PTR
from xla_teach.backends.llvm.kernel_support import llvm_name, overlapping
from xla_teach.hlo.shape import Shape
from xla_teach.passes.scheduling.buffer_assignment import BufferSlice


class KernelBuilder:
    """Creates ``@name`` (ABI entry) and ``@name.wrapped`` (typed body) in ``module``."""

    def __init__(self, module: ir.Module, name: str, arg_shapes: list[Shape], slices: list[BufferSlice],
                 comment: str = "") -> None:
        self.module = module
        self.name = llvm_name(name)
        self.arg_shapes = arg_shapes
        outer_type = ir.FunctionType(ir.VoidType(), [PTR, I64, I64])
        self.outer = ir.Function(module, outer_type, self.name)
        # A slice that appears twice (an elementwise op running in place reads and writes the same
        # buffer) becomes ONE argument: LLVM then sees load p[i] / store p[i] through one pointer
        # and vectorizes, where two possibly-aliasing pointers would need a run-time check.
        unique: list[int] = []
        arg_of: list[int] = []
        for i, s in enumerate(slices):
            for k, j in enumerate(unique):
                o = slices[j]
                if o.allocation is s.allocation and (o.offset, o.size) == (s.offset, s.size):
                    arg_of.append(k)
                    break
            else:
                unique.append(i)
                arg_of.append(len(unique) - 1)
        inner_type = ir.FunctionType(ir.VoidType(), [PTR] * len(unique) + [I64, I64])
        self.inner = ir.Function(module, inner_type, f"{self.name}.wrapped")
        self.inner.linkage = "internal"
        self.inner.attributes.add("alwaysinline")
        self.inner.attributes.add("nounwind")
        self.outer.attributes.add("nounwind")
        aliased = overlapping([slices[j] for j in unique])
        for arg, alias in zip(self.inner.args[: len(unique)], aliased, strict=True):
            if not alias:
                arg.add_attribute("noalias")
        self.comment = comment
        # Outer: unpack the pointer table and call the body.
        ob = ir.IRBuilder(self.outer.append_basic_block("entry"))
        table, begin, end = self.outer.args
        pointers = []
        for i in unique:
            slot = ob.gep(table, [ir.Constant(I64, i)], inbounds=True, source_etype=PTR)
            pointers.append(ob.load(slot, typ=PTR))
        ob.call(self.inner, pointers + [begin, end])
        ob.ret_void()
        # Inner body: the caller emits into self.b.
        self.b = ir.IRBuilder(self.inner.append_basic_block("entry"))
        self.begin, self.end = self.inner.args[-2], self.inner.args[-1]
        self.arrays = [IrArray(self.inner.args[arg_of[i]], shape, f"arg{i}") for i, shape in enumerate(arg_shapes)]

    def finish(self) -> None:
        self.b.ret_void()


DYNAMIC_DENORMALS = '"denormal-fp-math"="dynamic,dynamic"'


def declare_dynamic_denormal_mode(module: ir.Module) -> None:
    """Tell LLVM that the kernels may run with denormals flushed, or not.

    LLVM otherwise assumes IEEE denormals and folds, for example, a test of a float's bits for
    zero into ``x == 0.0`` -- which is not the same test once the run flushes denormals (see
    ``runtime/denormals.py``). The string attribute ``"denormal-fp-math"="dynamic,dynamic"`` on
    every function defined in the module turns such folds off. (llvmlite's builder knows only
    LLVM's keyword attributes, so the string goes into the attribute set directly.)
    """
    for fn in module.functions:
        if not fn.is_declaration:
            set.add(fn.attributes, DYNAMIC_DENORMALS)
