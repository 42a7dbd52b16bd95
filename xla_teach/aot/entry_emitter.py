"""The one C-callable entry function of an AOT-compiled module, emitted in LLVM IR.

At run time a JIT-compiled executable is driven from Python: a thunk per kernel,
buffers bound to NumPy arrays. An object file has no Python, so the driving loop
itself is emitted as LLVM IR, next to the kernels::

    define void @mlp(ptr %x, ptr %w, ptr %result0, ptr %temp) {
      %table = alloca [3 x ptr]                 ; the kernel ABI's pointer table
      ; kernel dot.1: its buffer slices, as addresses into x / w / result0 / temp / constants
      store ptr %x, ptr %table ...
      call void @dot.1(ptr %table, i64 0, i64 8)   ; the whole outer loop, one thread
      ...
      call void @llvm.memcpy(...)               ; only when a result is a parameter or constant
      ret void
    }

Each allocation of the entry's buffer assignment gets its base address from:
a parameter -> the caller's argument pointer; an output -> the caller's result
pointer; the temp arena -> the caller's ``temp`` buffer; a constant -> a private
global baked into the object (as tfcompile bakes graph constants in).
"""

from __future__ import annotations

from llvmlite import ir

from xla_teach.backends.cpu.ir_emitter import KernelPlan, SequencePlan
from xla_teach.backends.llvm.ir_types import I8, I64, PTR
from xla_teach.hlo.literal import literal_at
from xla_teach.passes.scheduling.buffer_assignment import Allocation, BufferSlice
from xla_teach.runtime.buffers import to_physical


def _constant_global(module: ir.Module, alloc: Allocation) -> ir.GlobalVariable:
    value = alloc.values[0][0]
    data = to_physical(literal_at(value.instruction.literal, value.index), value.shape).tobytes()
    array_type = ir.ArrayType(I8, len(data))
    var = ir.GlobalVariable(module, array_type, f"aot.constant.{alloc.index}")
    var.global_constant = True
    var.linkage = "private"
    var.initializer = ir.Constant(array_type, bytearray(data))
    var.align = 64
    return var


def emit_entry_function(module: ir.Module, name: str, plan: SequencePlan) -> ir.Function:
    """Add ``void name(ptr arg0, ..., ptr result0, ..., ptr temp)`` running ``plan``'s kernels."""
    ba = plan.assignment
    comp = plan.computation
    num_params = len(comp.parameter_instructions)
    root_leaves = comp.root.shape.leaf_indices()
    fn_type = ir.FunctionType(ir.VoidType(), [PTR] * (num_params + len(root_leaves) + 1))
    fn = ir.Function(module, fn_type, name)
    fn.attributes.add("nounwind")
    params, results, temp = fn.args[:num_params], fn.args[num_params:-1], fn.args[-1]
    b = ir.IRBuilder(fn.append_basic_block("entry"))

    bases: dict[int, ir.Value] = {}
    for alloc in ba.allocations:
        if alloc.kind == "parameter":
            bases[alloc.index] = params[alloc.parameter_number]  # type: ignore[index]
        elif alloc.kind == "output":
            bases[alloc.index] = results[root_leaves.index(alloc.output_index)]  # type: ignore[arg-type]
        elif alloc.kind == "temp":
            bases[alloc.index] = temp
        elif alloc.kind == "constant":
            bases[alloc.index] = _constant_global(module, alloc)

    def address(s: BufferSlice) -> ir.Value:
        base = bases[s.allocation.index]
        return b.gep(base, [ir.Constant(I64, s.offset)], inbounds=True, source_etype=I8) if s.offset else base

    kernels = [step for step in plan.steps if isinstance(step, KernelPlan)]
    width = max([len(k.slices) for k in kernels] + [1])
    table = b.alloca(PTR, size=ir.Constant(I64, width), name="table")
    for kernel in kernels:
        for i, s in enumerate(kernel.slices):
            slot = b.gep(table, [ir.Constant(I64, i)], inbounds=True, source_etype=PTR)
            b.store(address(s), slot)
        callee = module.get_global(kernel.name)
        b.call(callee, [table, ir.Constant(I64, 0), ir.Constant(I64, kernel.outer_size)])

    memcpy = module.declare_intrinsic("llvm.memcpy", [PTR, PTR, I64])
    for n, index in enumerate(root_leaves):
        s = ba.slice(comp.root, index)
        alloc = s.allocation
        if alloc.kind == "output" and alloc.output_index == index:
            continue  # the kernels wrote this result in place
        b.call(memcpy, [results[n], address(s), ir.Constant(I64, s.size), ir.Constant(ir.IntType(1), 0)])
    b.ret_void()
    return fn
