"""The ``rng-bit-generator`` kernel: Philox-4x32-10, bit for bit as the interpreter.

See :mod:`xla_teach.hlo.evaluator.random` for the algorithm and how state words
map to output elements, and :mod:`xla_teach.backends.llvm.philox` for the IR. Every
output element computes the Philox block that holds its word(s) -- blocks are
independent, so the loop has no carried state and each element is a few dozen
integer multiplies (the GPU runs one thread per element).

``rng-get-and-update-state`` (what ``rng-expander`` makes of the legacy ``rng``) reads
and advances the state the interpreter keeps in its evaluator. Compiled code keeps it
where XLA's CPU backend does, in a global of the LLVM module::

    @xla_teach_rng_state = global [2 x i64] [i64 0, i64 0]      ; {key, counter}

Its kernel copies the two words to its output and adds ``delta`` to the counter. The
interpreter starts every run at counter 0 (a fresh evaluator), so the compiled
executable does too: the entry computation's first kernel, ``rng_state_reset``, stores
``{key, 0}``. Two threads running the *same* executable at once would share the counter.
On the GPU the global lives in device memory (address space 1) and the state kernels run on
one thread (they touch two words).
"""

from __future__ import annotations

from llvmlite import ir

from xla_teach.backends.llvm.ir_array import IrIndex, delinearize, i64
from xla_teach.backends.llvm.ir_types import I64
from xla_teach.backends.llvm.kernel_context import KernelContext
from xla_teach.backends.llvm.loops import for_range
from xla_teach.backends.llvm.philox import blocks_used, emit_rng_element, split_key

RNG_STATE_GLOBAL = "xla_teach_rng_state"
RNG_KEY = 0  # the interpreter's rng_seed (HloEvaluator's default)
def emit_rng_bit_generator_kernel(ctx: KernelContext) -> tuple[int, int]:
    b = ctx.b
    state_in = ctx.operand_arrays[0]
    state_out, bits = ctx.output_arrays
    key64 = state_in.load(b, IrIndex((i64(0),), state_in.shape))
    base = state_in.load(b, IrIndex((i64(1),), state_in.shape))
    key = split_key(b, key64)
    width = bits.shape.element_type.bit_width
    count = bits.shape.element_count()
    blocks = blocks_used(count, width)
    with for_range(b, i64(count), "rng") as e:
        bits.store(b, emit_rng_element(b, base, key, e, width), delinearize(b, e, bits.shape))
    for i in range(state_in.shape.dimensions[0]):
        index = IrIndex((i64(i),), state_in.shape)
        value = b.add(base, i64(blocks)) if i == 1 else state_in.load(b, index)
        state_out.store(b, value, index)
    return 1, 1


def rng_state_global(module: ir.Module) -> ir.GlobalVariable:
    """The module's Philox state ``[2 x i64] {key, counter}``, created on first use."""
    if RNG_STATE_GLOBAL in module.globals:
        return module.globals[RNG_STATE_GLOBAL]
    state_type = ir.ArrayType(I64, 2)
    on_gpu = str(module.triple).startswith("nvptx")
    addrspace = 1 if on_gpu else 0
    state = ir.GlobalVariable(module, state_type, RNG_STATE_GLOBAL, addrspace=addrspace)
    state.type = ir.PointerType(addrspace=addrspace)  # opaque, as every pointer the emitters use
    state.initializer = ir.Constant(state_type, [RNG_KEY, 0])
    state.align = 16
    state.linkage = "internal"  # one per compiled module, also when AOT objects are linked together
    return state


def _state_words(b: ir.IRBuilder, module: ir.Module) -> tuple[ir.Value, ir.Value]:
    """Pointers to the state's key and counter words."""
    state = rng_state_global(module)
    return tuple(b.gep(state, [i64(word)], inbounds=True, source_etype=I64)  # type: ignore[return-value]
                 for word in (0, 1))


def emit_rng_get_and_update_state_kernel(ctx: KernelContext) -> tuple[int, int]:
    """``out = {key, counter}; counter += delta`` (one step, no loop)."""
    b = ctx.b
    (out,) = ctx.output_arrays
    key_word, counter_word = _state_words(b, ctx.kb.module)
    counter = b.load(counter_word, typ=I64)
    out.store(b, b.load(key_word, typ=I64), IrIndex((i64(0),), out.shape))
    out.store(b, counter, IrIndex((i64(1),), out.shape))
    delta = int(ctx.instr.attr("delta")) % 2**64
    b.store(b.add(counter, i64(delta - 2**64 if delta >= 2**63 else delta)), counter_word)  # wraps mod 2^64
    return 1, 1


def emit_rng_state_reset(b: ir.IRBuilder, module: ir.Module) -> None:
    """``state = {key, 0}``: where the interpreter starts every run."""
    key_word, counter_word = _state_words(b, module)
    b.store(i64(RNG_KEY), key_word)
    b.store(i64(0), counter_word)
