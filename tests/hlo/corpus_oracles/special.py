"""Oracle for ``special_ops``, including an independent Philox-4x32-10 written with Python
integers from the algorithm's definition (Salmon et al., SC'11); ``tests/hlo/test_corpus.py``
checks it against the Random123 known-answer vectors before trusting it."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from tests.hlo.corpus_oracles.common import F32, Oracle, normal

MASK32 = 0xFFFFFFFF


def philox4x32_10(counter: Sequence[int], key: Sequence[int]) -> list[int]:
    """Ten Philox rounds of a 4-word counter under a 2-word key; returns 4 words."""
    c0, c1, c2, c3 = counter
    k0, k1 = key
    for _ in range(10):
        p0, p1 = 0xD2511F53 * c0, 0xCD9E8D57 * c2
        c0, c1, c2, c3 = (p1 >> 32) ^ c1 ^ k0, p1 & MASK32, (p0 >> 32) ^ c3 ^ k1, p0 & MASK32
        k0, k1 = (k0 + 0x9E3779B9) & MASK32, (k1 + 0xBB67AE85) & MASK32
    return [c0, c1, c2, c3]


def rng_bit_generator(state: Sequence[int], dtype: type, count: int) -> tuple[np.ndarray, np.ndarray]:
    """xla_teach's rng-bit-generator: block i uses the 128-bit counter state[1] + i; words
    are consumed in order, one per element of up to 32 bits (its low bits), two per 64-bit
    element (low word first)."""
    key, base = int(state[0]), int(state[1])
    bits = np.dtype(dtype).itemsize * 8
    words_needed = count * (2 if bits == 64 else 1)
    blocks = -(-words_needed // 4)
    words: list[int] = []
    for i in range(blocks):
        counter = base + i  # up to 65 bits: the carry lands in the third word
        words += philox4x32_10([counter & MASK32, (counter >> 32) & MASK32, counter >> 64, 0],
                               [key & MASK32, key >> 32])
    if bits == 64:
        elements = [words[2 * e] | (words[2 * e + 1] << 32) for e in range(count)]
    else:
        elements = [w & ((1 << bits) - 1) for w in words[:count]]
    new_state = np.array([key, (base + blocks) % 2**64], np.uint64)
    return new_state, np.array(elements, dtype)


def special_ops_inputs(rng: np.random.Generator, run: int) -> list[np.ndarray]:
    state = np.array([0x0123456789ABCDEF, 2**32 - 1], np.uint64) if run == 0 else np.array([7, 3], np.uint64)
    return [normal(rng, 4), normal(rng, 4), state]


def special_ops_expected(args: Sequence[np.ndarray]) -> dict[str, np.ndarray]:
    x, y, state = args
    fused = (x.astype(np.float64) * y + np.exp(y.astype(np.float64))).astype(F32)
    rng_state, rng_bits = rng_bit_generator(state, np.uint32, 6)
    wrap = [42, 2**64 - 1]
    wide_state, wide_bits = rng_bit_generator(wrap, np.uint64, 3)
    return {
        "barrier.first": fused, "barrier.second": y, "identity": x, "both.state": state, "summed": x,
        "partition": np.array(0, np.uint32), "replica": np.array(0, np.uint32),
        "rng.state": rng_state, "rng.bits": rng_bits.reshape(2, 3), "wide.state": wide_state, "wide.bits": wide_bits,
        "narrow.bits": rng_bit_generator(wrap, np.uint8, 5)[1],
    }


ORACLES = {"special_ops": Oracle(special_ops_inputs, special_ops_expected, runs=2)}
