"""GPU loop kernels: one thread per output element.

Thread ``t = blockIdx.x * blockDim.x + threadIdx.x`` computes the element at
*physical* position ``t`` of the output (or the 4 elements from ``4t`` when
16-byte vector accesses are possible), so neighbouring threads write
neighbouring addresses (coalesced stores); a bounds check skips the threads of
the last block that fall past the end::

    t = global thread id
    if t < n:
        index = logical index of physical position t
        out[t] = <fused expression at index>
"""

from __future__ import annotations

from xla_teach.backends.gpu.kernel_builder import LaunchDimensions, linear_launch
from xla_teach.backends.llvm.elemental_emitter import delinearize_physical
from xla_teach.backends.llvm.ir_array import IrIndex, i64
from xla_teach.backends.llvm.kernel_context import KernelContext, element_values
from xla_teach.backends.llvm.loops import if_then

VECTOR_WIDTH = 4  # elements per thread when accesses can be 16-byte vectors


def _vector_width(ctx: KernelContext, n: int) -> int:
    """4 when every output is 4 bytes wide and ``n`` splits evenly; then each thread handles 4
    neighbouring elements and LLVM's load/store vectorizer makes ``ld.global.v4``/``st.global.v4``
    of the accesses that are contiguous (the kernel's pointers are marked ``align 16``)."""
    if n % VECTOR_WIDTH or n < VECTOR_WIDTH * 256:
        return 1
    if any(out.shape.element_type.byte_size != 4 for out in ctx.output_arrays):
        return 1
    return VECTOR_WIDTH


def emit_gpu_loop_kernel(ctx: KernelContext) -> LaunchDimensions:
    hero = ctx.hero()
    elements = list(hero.operands) if hero.opcode == "tuple" else [hero]
    outputs = ctx.output_arrays
    shape = outputs[0].shape
    n = shape.element_count()
    width = _vector_width(ctx, n)
    launch = linear_launch(max(n // width, 1))
    if n == 0:
        return launch
    em = ctx.emitter()
    b = ctx.b
    tid = ctx.kb.global_thread_id()
    with if_then(b, b.icmp_unsigned("<", tid, i64(n // width)), "in_bounds"):
        for k in range(width):
            position = b.add(b.mul(tid, i64(width)), i64(k)) if width > 1 else tid
            index = delinearize_physical(b, position, shape) if shape.rank else IrIndex.scalar(shape)
            values = element_values(em, elements, index)
            for value, out in zip(values, outputs, strict=True):
                same_layout = out.shape.minor_to_major() == shape.minor_to_major()
                out.store(b, value, IrIndex(index.dims, out.shape, index.linear if same_layout else None))
    return launch


def emit_single_thread(ctx: KernelContext, emit) -> LaunchDimensions:  # type: ignore[no-untyped-def]
    """Run a sequential emitter (scatter, sort, ...) on one GPU thread."""
    emit(ctx)
    return LaunchDimensions((1, 1, 1), (1, 1, 1))
