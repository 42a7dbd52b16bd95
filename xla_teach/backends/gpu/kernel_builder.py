"""GPU kernels in LLVM IR: the ``ptx_kernel`` function, thread indices, shared memory, shuffles.

A GPU kernel runs the same function on many threads. Each thread learns who it
is from special registers (``%tid.x``, ``%ctaid.x``, ``%ntid.x``), read in LLVM
IR through ``llvm.nvvm.read.ptx.sreg.*`` intrinsics. Threads of a block share
fast on-chip memory (LLVM address space 3) and meet at barriers; threads of a
warp (32 lanes) exchange registers with ``shfl.sync``.

Kernel arguments are the device pointers of the buffer slices the kernel
touches (operands, then results), marked ``noalias`` when buffer assignment
proves no other argument overlaps them.
"""

from __future__ import annotations

from dataclasses import dataclass

from llvmlite import ir

from xla_teach.backends.llvm.ir_array import IrArray, i64
from xla_teach.backends.llvm.ir_types import I32, I64, PTR
from xla_teach.backends.llvm.kernel_support import overlapping, ptx_name
from xla_teach.hlo.shape import Shape
from xla_teach.passes.scheduling.buffer_assignment import BufferSlice

WARP_SIZE = 32
SHARED = 3  # LLVM address space of __shared__ memory


@dataclass(frozen=True)
class LaunchDimensions:
    blocks: tuple[int, int, int]
    threads: tuple[int, int, int]
    shared_bytes: int = 0  # static shared memory of the kernel (shown; nothing to pass at launch)
    algorithm: str = ""  # which form of a kernel was chosen (a dot's tiling), shown in the HLO

    def as_config(self) -> dict[str, object]:
        config: dict[str, object] = {"blocks": list(self.blocks), "threads_per_block": list(self.threads),
                                     "shared_memory_bytes": self.shared_bytes}
        if self.algorithm:
            config["algorithm"] = self.algorithm
        return config


def linear_launch(elements: int, threads: int = 256) -> LaunchDimensions:
    """Enough blocks of ``threads`` threads for one thread per element."""
    blocks = max(1, -(-elements // threads))
    return LaunchDimensions((blocks, 1, 1), (threads, 1, 1))


class GpuKernelBuilder:
    def __init__(self, module: ir.Module, name: str, arg_shapes: list[Shape], slices: list[BufferSlice]) -> None:
        self.module = module
        self.name = ptx_name(name)
        fnty = ir.FunctionType(ir.VoidType(), [PTR] * len(arg_shapes))
        self.function = ir.Function(module, fnty, self.name)
        self.function.calling_convention = "ptx_kernel"
        for arg, aliased, s in zip(self.function.args, overlapping(slices), slices, strict=True):
            if not aliased:
                arg.add_attribute("noalias")
            if s.offset % 16 == 0:  # allocations are 256-byte aligned on the device
                arg.attributes.align = 16
        self.b = ir.IRBuilder(self.function.append_basic_block("entry"))
        self.arrays = [IrArray(arg, shape, f"arg{i}") for i, (arg, shape)
                       in enumerate(zip(self.function.args, arg_shapes, strict=True))]
        self.exit_block: ir.Block | None = None

    # ---- special registers ------------------------------------------------------------
    def _sreg(self, name: str) -> ir.Value:
        fn = self.module.declare_intrinsic(f"llvm.nvvm.read.ptx.sreg.{name}", fnty=ir.FunctionType(I32, []))
        return self.b.zext(self.b.call(fn, []), I64)

    def thread_x(self) -> ir.Value:
        return self._sreg("tid.x")

    def thread_y(self) -> ir.Value:
        return self._sreg("tid.y")

    def block_x(self) -> ir.Value:
        return self._sreg("ctaid.x")

    def block_y(self) -> ir.Value:
        return self._sreg("ctaid.y")

    def block_z(self) -> ir.Value:
        return self._sreg("ctaid.z")

    def threads_per_block(self) -> ir.Value:
        return self._sreg("ntid.x")

    def global_thread_id(self) -> ir.Value:
        b = self.b
        return b.add(b.mul(self.block_x(), self.threads_per_block()), self.thread_x())

    # ---- synchronization and shared memory ----------------------------------------------
    def barrier(self) -> None:
        fn = self.module.declare_intrinsic("llvm.nvvm.barrier0", fnty=ir.FunctionType(ir.VoidType(), []))
        self.b.call(fn, [])

    def shared_array(self, element: ir.Type, count: int, name: str) -> ir.GlobalVariable:
        array_type = ir.ArrayType(element, count)
        var = ir.GlobalVariable(self.module, array_type, f"{self.name}_{name}", addrspace=SHARED)
        var.linkage = "internal"
        var.initializer = ir.Constant(array_type, ir.Undefined)
        var.align = 16
        return var

    def shared_address(self, var: ir.GlobalVariable, index: ir.Value, element: ir.Type) -> ir.Value:
        # (no source_etype: llvmlite computes the result type of a typed global's GEP from the indices)
        return self.b.gep(var, [i64(0), index], inbounds=True)

    def shuffle_down(self, value: ir.Value, offset: int) -> ir.Value:
        """``value`` of the lane ``offset`` above this one (any compute type)."""
        b = self.b
        fnty = ir.FunctionType(I32, [I32, I32, I32, I32])
        shfl = self.module.declare_intrinsic("llvm.nvvm.shfl.sync.down.i32", fnty=fnty)
        mask, clamp = ir.Constant(I32, -1), ir.Constant(I32, WARP_SIZE - 1)

        def shuffle32(word: ir.Value) -> ir.Value:
            return b.call(shfl, [mask, word, ir.Constant(I32, offset), clamp])

        ty = value.type
        if isinstance(ty, ir.FloatType):
            return b.bitcast(shuffle32(b.bitcast(value, I32)), ty)
        if isinstance(ty, ir.DoubleType) or (isinstance(ty, ir.IntType) and ty.width == 64):
            wide = b.bitcast(value, I64) if isinstance(ty, ir.DoubleType) else value
            lo = shuffle32(b.trunc(wide, I32))
            hi = shuffle32(b.trunc(b.lshr(wide, i64(32)), I32))
            joined = b.or_(b.zext(lo, I64), b.shl(b.zext(hi, I64), i64(32)))
            return b.bitcast(joined, ty) if isinstance(ty, ir.DoubleType) else joined
        if isinstance(ty, ir.IntType) and ty.width < 32:
            return b.trunc(shuffle32(b.zext(value, I32)), ty)
        return shuffle32(value)

    def launch_bounds(self, max_threads: int, min_blocks_per_multiprocessor: int) -> None:
        """CUDA's ``__launch_bounds__``: ptxas keeps registers few enough that
        ``min_blocks_per_multiprocessor`` blocks of ``max_threads`` fit on one multiprocessor."""
        annotations = self.module.add_named_metadata("nvvm.annotations")
        for key, value in (("maxntidx", max_threads), ("minctasm", min_blocks_per_multiprocessor)):
            annotations.add(self.module.add_metadata([self.function, ir.MetaDataString(self.module, key),
                                                      ir.Constant(I32, value)]))

    def finish(self) -> None:
        self.b.ret_void()
