"""GPU ``rng-bit-generator``: one thread per output element.

Philox is counter-based (:mod:`xla_teach.backends.llvm.philox`): element ``e`` is a pure
function of ``(key, base counter, e)``, so thread ``t`` computes element ``t`` with no
communication at all, and thread 0 also writes the new state ``{key, base + blocks}``::

    t = global thread id
    if t < n:  bits[t] = philox_word(key, base, t)
    if t == 0: state_out = {key, base + blocks_used(n)}
"""

from __future__ import annotations

from xla_teach.backends.gpu.kernel_builder import LaunchDimensions, linear_launch
from xla_teach.backends.llvm.ir_array import IrIndex, delinearize, i64
from xla_teach.backends.llvm.kernel_context import KernelContext
from xla_teach.backends.llvm.loops import if_then
from xla_teach.backends.llvm.philox import blocks_used, emit_rng_element, split_key


def emit_gpu_rng_bit_generator_kernel(ctx: KernelContext) -> LaunchDimensions:
    b = ctx.b
    state_in = ctx.operand_arrays[0]
    state_out, bits = ctx.output_arrays
    width = bits.shape.element_type.bit_width
    count = bits.shape.element_count()
    launch = linear_launch(max(count, 1))
    tid = ctx.kb.global_thread_id()
    key64 = state_in.load(b, IrIndex((i64(0),), state_in.shape))
    base = state_in.load(b, IrIndex((i64(1),), state_in.shape))
    with if_then(b, b.icmp_unsigned("<", tid, i64(count)), "rng.element"):
        value = emit_rng_element(b, base, split_key(b, key64), tid, width)
        bits.store(b, value, delinearize(b, tid, bits.shape))
    with if_then(b, b.icmp_unsigned("==", tid, i64(0)), "rng.state"):
        for i in range(state_in.shape.dimensions[0]):
            index = IrIndex((i64(i),), state_in.shape)
            word = b.add(base, i64(blocks_used(count, width))) if i == 1 else state_in.load(b, index)
            state_out.store(b, word, index)
    return launch
