"""GPU loop kernels: one thread per output element.

Thread ``t = blockIdx.x * blockDim.x + threadIdx.x`` computes the element at
*physical* position ``t`` of the output, so neighbouring threads write
neighbouring addresses (coalesced stores); a bounds check skips the threads of
the last block that fall past the end::

    t = global thread id
    if t < n:
        index = logical index of physical position t
        out[t] = <fused expression at index>
"""

from __future__ import annotations

from xla_teach.backends.cpu.kernels.context import KernelContext
from xla_teach.backends.cpu.kernels.loop import element_values
from xla_teach.backends.gpu.kernel_builder import LaunchDimensions, linear_launch
from xla_teach.backends.llvm.elemental_emitter import delinearize_physical
from xla_teach.backends.llvm.ir_array import IrIndex, i64
from xla_teach.backends.llvm.loops import if_then


def emit_gpu_loop_kernel(ctx: KernelContext) -> LaunchDimensions:
    hero = ctx.hero()
    elements = list(hero.operands) if hero.opcode == "tuple" else [hero]
    outputs = ctx.output_arrays
    shape = outputs[0].shape
    n = shape.element_count()
    launch = linear_launch(max(n, 1))
    if n == 0:
        return launch
    em = ctx.emitter()
    b = ctx.b
    tid = ctx.kb.global_thread_id()
    with if_then(b, b.icmp_unsigned("<", tid, i64(n)), "in_bounds"):
        index = delinearize_physical(b, tid, shape) if shape.rank else IrIndex.scalar(shape)
        values = element_values(em, elements, IrIndex(index.dims, shape))
        for value, out in zip(values, outputs, strict=True):
            same_layout = out.shape.minor_to_major() == shape.minor_to_major()
            out.store(b, value, IrIndex(index.dims, out.shape, index.linear if same_layout else None))
    return launch


def emit_single_thread(ctx: KernelContext, emit) -> LaunchDimensions:  # type: ignore[no-untyped-def]
    """Run a sequential emitter (scatter, sort, ...) on one GPU thread."""
    emit(ctx)
    return LaunchDimensions((1, 1, 1), (1, 1, 1))
