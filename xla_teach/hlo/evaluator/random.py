"""Random numbers: ``rng-bit-generator`` and the legacy ``rng``.

XLA's random streams are backend- and version-specific (§13 of the semantics), so
xla_teach defines ONE algorithm, used for every ``algorithm=`` value (``rng_default``,
``rng_three_fry``, ``rng_philox``), which every xla_teach backend must reproduce bit for
bit:

**Philox-4x32-10** (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11)
maps a 128-bit counter ``(c0, c1, c2, c3)`` and a 64-bit key ``(k0, k1)`` (32-bit words)
to four 32-bit output words with ten rounds of::

    hi0:lo0 = 0xD2511F53 * c0        hi1:lo1 = 0xCD9E8D57 * c2      (32x32 -> 64 bits)
    (c0, c1, c2, c3) = (hi1 ^ c1 ^ k0, lo1, hi0 ^ c3 ^ k1, lo0)
    (k0, k1) += (0x9E3779B9, 0xBB67AE85)                           (mod 2**32, after each round)

**rng-bit-generator(state) -> (new_state, bits)**, state ``u64[2]`` or ``u64[3]``:

* ``state[0]`` is the key: its low 32 bits are ``k0``, its high 32 bits ``k1``;
* ``state[1]`` is the counter base ``b``; block ``i`` (i = 0, 1, ...) uses the 128-bit
  counter ``b + i`` with words ``(low32, high32, carry, 0)`` -- i.e. ``(b_lo, b_hi, 0, 0)``
  plus ``i`` as a 128-bit number; ``state[2]`` (if present) is ignored and kept;
* the output words form one stream: block 0's words 0..3, block 1's words 0..3, ...;
* output elements, in row-major order, take words from the stream: a 32-bit element takes
  one word, a 64-bit element two consecutive words (the first is the low half), an 8- or
  16-bit element the low bits of one word;
* ``new_state = (state[0], b + blocks_used mod 2**64[, state[2]])`` with
  ``blocks_used = ceil(words_used / 4)``.

**rng(a, b), distribution=...** is the old stateful op; the evaluator draws it from its own
Philox stream (key ``rng_seed``, a counter that advances with each use). ``rng_uniform``
gives ``a + (b - a) * u`` with u uniform in [0, 1) for floats and ``a + w mod (b - a)`` for
integers; ``rng_normal`` gives mean a, standard deviation b (Box-Muller). This stream is
xla_teach's own and is *not* meant to match XLA's.

**rng-get-and-update-state(), delta=N** exposes that hidden stream, as XLA's
``kRngGetAndUpdateState`` does: it returns ``u64[2] {rng_seed, counter}`` -- exactly the
``rng-bit-generator`` state that draws what the next ``rng`` would draw -- and advances the
counter by ``N`` blocks. ``rng-expander`` rewrites every ``rng`` into it.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from xla_teach.hlo.evaluator.numeric import F64, convert_array, is_float, to_float_dtype
from xla_teach.hlo.evaluator.registry import Value, register

if TYPE_CHECKING:
    from xla_teach.hlo.evaluator.core import HloEvaluator
    from xla_teach.hlo.ir import HloInstruction

PHILOX_M0, PHILOX_M1 = 0xD2511F53, 0xCD9E8D57
PHILOX_W0, PHILOX_W1 = 0x9E3779B9, 0xBB67AE85
PHILOX_ROUNDS = 10
_MASK32 = np.uint64(0xFFFFFFFF)


def philox4x32(counters: np.ndarray, key: tuple[int, int]) -> np.ndarray:
    """Philox-4x32-10 of ``counters`` (uint32 ``[4, n]``) under ``key = (k0, k1)``;
    returns uint32 ``[4, n]``. Computed in uint64 so 32x32-bit products are exact."""
    c0, c1, c2, c3 = (counters[i].astype(np.uint64) for i in range(4))
    k0, k1 = key[0] & 0xFFFFFFFF, key[1] & 0xFFFFFFFF
    for _ in range(PHILOX_ROUNDS):
        product0 = np.uint64(PHILOX_M0) * c0
        product1 = np.uint64(PHILOX_M1) * c2
        hi0, lo0 = product0 >> np.uint64(32), product0 & _MASK32
        hi1, lo1 = product1 >> np.uint64(32), product1 & _MASK32
        c0, c1, c2, c3 = hi1 ^ c1 ^ np.uint64(k0), lo1, hi0 ^ c3 ^ np.uint64(k1), lo0
        k0, k1 = (k0 + PHILOX_W0) & 0xFFFFFFFF, (k1 + PHILOX_W1) & 0xFFFFFFFF
    return np.stack([c0, c1, c2, c3]).astype(np.uint32)


def philox_stream(key: int, counter_base: int, word_count: int) -> tuple[np.ndarray, int]:
    """(the first ``word_count`` words of the stream for a 64-bit key and counter base,
    the number of 4-word blocks used)."""
    blocks = math.ceil(word_count / 4)
    block = np.arange(blocks, dtype=np.uint64)
    counter = np.uint64(counter_base) + block  # wraps modulo 2**64 ...
    carry = (counter < np.uint64(counter_base)).astype(np.uint64)  # ... into the third word
    counters = np.stack([counter & _MASK32, counter >> np.uint64(32), carry, np.zeros_like(block)])
    words = philox4x32(counters.astype(np.uint32), (key & 0xFFFFFFFF, (key >> 32) & 0xFFFFFFFF))
    return words.T.reshape(-1)[:word_count], blocks  # block-major: block 0's words first


def bits_to_elements(words: np.ndarray, dtype: np.dtype, count: int) -> np.ndarray:
    """Assemble ``count`` integer elements of ``dtype`` from the word stream."""
    if dtype.itemsize == 8:
        pairs = words[: 2 * count].astype(np.uint64).reshape(count, 2)
        return (pairs[:, 0] | (pairs[:, 1] << np.uint64(32))).view(dtype)
    low_bits = words[:count].astype(np.dtype(f"u{dtype.itemsize}"))  # keeps the low bits
    return low_bits.view(dtype)


@register("rng-bit-generator")
def handle_rng_bit_generator(ev: HloEvaluator, instr: HloInstruction, operands: list[Value]) -> Value:
    state = operands[0]
    out_shape = instr.shape.tuple_shapes[1]
    dtype = out_shape.dtype
    if dtype.kind not in "iu":
        raise TypeError(f"rng-bit-generator produces integers, not {dtype}")
    count = out_shape.element_count()
    words_per_element = 2 if dtype.itemsize == 8 else 1
    key, base = int(state[0]), int(state[1])
    words, blocks = philox_stream(key, base, count * words_per_element)
    new_state = state.copy()
    new_state[1] = np.uint64((base + blocks) % 2**64)
    return new_state, bits_to_elements(words, dtype, count).reshape(out_shape.dimensions)


@register("rng-get-and-update-state")
def handle_rng_get_and_update_state(ev: HloEvaluator, instr: HloInstruction, operands: list[Value]) -> Value:
    state = np.array([ev.rng_key % 2**64, ev.rng_counter], dtype=np.uint64)
    ev.rng_counter = (ev.rng_counter + int(instr.attr("delta"))) % 2**64
    return state


def _uniform01(ev: HloEvaluator, count: int) -> np.ndarray:
    """``count`` f64 values uniform in [0, 1) with 53 random bits each (two words)."""
    words, blocks = philox_stream(ev.rng_key, ev.rng_counter, 2 * count)
    ev.rng_counter = (ev.rng_counter + blocks) % 2**64
    pairs = words.astype(np.uint64).reshape(count, 2)
    bits53 = ((pairs[:, 1] << np.uint64(32)) | pairs[:, 0]) >> np.uint64(11)
    return bits53.astype(F64) * 2.0**-53


@register("rng")
def handle_rng(ev: HloEvaluator, instr: HloInstruction, operands: list[Value]) -> Value:
    a, b = operands
    shape = instr.shape
    dtype = shape.dtype
    count = shape.element_count()
    distribution = str(instr.attr("distribution"))
    if distribution == "rng_uniform":
        if is_float(dtype):
            low, high = float(a), float(b)
            values = low + (high - low) * _uniform01(ev, count)
            return to_float_dtype(np.minimum(values, np.nextafter(high, low)), dtype).reshape(shape.dimensions)
        low, span = int(a), max(int(b) - int(a), 1)
        words, blocks = philox_stream(ev.rng_key, ev.rng_counter, 2 * count)
        ev.rng_counter = (ev.rng_counter + blocks) % 2**64
        draws = [low + int(w) % span for w in bits_to_elements(words, np.dtype(np.uint64), count)]
        return convert_array(np.array(draws, dtype=np.int64), dtype).reshape(shape.dimensions)
    if distribution == "rng_normal":
        if not is_float(dtype):
            raise TypeError(f"rng_normal needs a float type, not {dtype}")
        u1, u2 = _uniform01(ev, count), _uniform01(ev, count)
        normal = np.sqrt(-2.0 * np.log1p(-u1)) * np.cos(2.0 * np.pi * u2)  # log1p(-u1): u1 may be 0
        return to_float_dtype(float(a) + float(b) * normal, dtype).reshape(shape.dimensions)
    raise ValueError(f"unknown rng distribution '{distribution}'")
