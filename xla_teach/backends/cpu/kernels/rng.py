"""The ``rng-bit-generator`` kernel: Philox-4x32-10, bit for bit as the interpreter.

See :mod:`xla_teach.hlo.evaluator.random` for the algorithm and how state words
map to output elements. Every output element computes the Philox block that
holds its word(s) -- blocks are independent, so the loop has no carried state
and each element is a few dozen integer multiplies.

``rng-get-and-update-state`` (what ``rng-expander`` makes of the legacy ``rng``) reads
and advances the state the interpreter keeps in its evaluator. Compiled code keeps it
where XLA's CPU backend does, in a global of the LLVM module::

    @xla_teach_rng_state = global [2 x i64] [i64 0, i64 0]      ; {key, counter}

Its kernel copies the two words to its output and adds ``delta`` to the counter. The
interpreter starts every run at counter 0 (a fresh evaluator), so the compiled
executable does too: the entry computation's first kernel, ``rng_state_reset``, stores
``{key, 0}``. Two threads running the *same* executable at once would share the counter.
On the GPU the global lives in device memory (address space 1) and both kernels run on
one thread.
"""

from __future__ import annotations

from llvmlite import ir

from xla_teach.backends.cpu.kernels.context import KernelContext
from xla_teach.backends.llvm.ir_array import IrIndex, delinearize, i64
from xla_teach.backends.llvm.ir_types import I32, I64
from xla_teach.backends.llvm.loops import for_range

RNG_STATE_GLOBAL = "xla_teach_rng_state"
RNG_KEY = 0  # the interpreter's rng_seed (HloEvaluator's default)
PHILOX_M0, PHILOX_M1 = 0xD2511F53, 0xCD9E8D57
PHILOX_W0, PHILOX_W1 = 0x9E3779B9, 0xBB67AE85


def emit_philox(b: ir.IRBuilder, counter: list[ir.Value], key: list[ir.Value]) -> list[ir.Value]:
    """Ten Philox-4x32 rounds on i32 words."""
    c0, c1, c2, c3 = counter
    k0, k1 = key

    def mulhilo(a: int, x: ir.Value) -> tuple[ir.Value, ir.Value]:
        product = b.mul(ir.Constant(I64, a), b.zext(x, I64))
        return b.trunc(b.lshr(product, ir.Constant(I64, 32)), I32), b.trunc(product, I32)

    for _ in range(10):
        hi0, lo0 = mulhilo(PHILOX_M0, c0)
        hi1, lo1 = mulhilo(PHILOX_M1, c2)
        c0, c1, c2, c3 = b.xor(b.xor(hi1, c1), k0), lo1, b.xor(b.xor(hi0, c3), k1), lo0
        k0 = b.add(k0, ir.Constant(I32, PHILOX_W0))
        k1 = b.add(k1, ir.Constant(I32, PHILOX_W1))
    return [c0, c1, c2, c3]


def emit_rng_bit_generator_kernel(ctx: KernelContext) -> tuple[int, int]:
    b = ctx.b
    state_in = ctx.operand_arrays[0]
    state_out, bits = ctx.output_arrays
    key64 = state_in.load(b, IrIndex((i64(0),), state_in.shape))
    base = state_in.load(b, IrIndex((i64(1),), state_in.shape))
    key = [b.trunc(key64, I32), b.trunc(b.lshr(key64, ir.Constant(I64, 32)), I32)]
    width = bits.shape.element_type.bit_width
    words_per_element = 2 if width == 64 else 1
    count = bits.shape.element_count()
    blocks = (count * words_per_element + 3) // 4

    def word(w: ir.Value) -> ir.Value:
        block = b.udiv(w, i64(4))
        lane = b.urem(w, i64(4))
        counter = b.add(base, block)
        carry = b.zext(b.icmp_unsigned("<", counter, base), I32)
        out = emit_philox(b, [b.trunc(counter, I32), b.trunc(b.lshr(counter, i64(32)), I32), carry,
                              ir.Constant(I32, 0)], key)
        result = out[3]
        for k in (2, 1, 0):
            result = b.select(b.icmp_unsigned("==", lane, i64(k)), out[k], result)
        return result

    with for_range(b, i64(count), "rng") as e:
        if words_per_element == 2:
            lo = b.zext(word(b.mul(e, i64(2))), I64)
            hi = b.zext(word(b.add(b.mul(e, i64(2)), i64(1))), I64)
            value = b.or_(lo, b.shl(hi, i64(32)))
        else:
            w32 = word(e)
            value = w32 if width == 32 else b.trunc(w32, ir.IntType(width))
        bits.store(b, value, delinearize(b, e, bits.shape))
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
