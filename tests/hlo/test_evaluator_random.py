"""rng-bit-generator (xla_teach's Philox-4x32-10 definition) and the legacy rng op."""

from __future__ import annotations

import numpy as np
import pytest

from tests.hlo.evaluator_util import run_hlo
from xla_teach.hlo.evaluator import HloEvaluator
from xla_teach.hlo.evaluator.random import philox4x32
from xla_teach.hlo.text.parser import parse_hlo
from xla_teach.hlo.verifier import verify_module

MASK = 0xFFFFFFFF


def philox_reference(key: tuple[int, int], counter: tuple[int, int, int, int]) -> list[int]:
    """Philox-4x32-10 on Python ints, written from the paper's round function."""
    k0, k1 = key
    c0, c1, c2, c3 = counter
    for _ in range(10):
        p0, p1 = 0xD2511F53 * c0, 0xCD9E8D57 * c2
        c0, c1, c2, c3 = (p1 >> 32) ^ c1 ^ k0, p1 & MASK, (p0 >> 32) ^ c3 ^ k1, p0 & MASK
        k0, k1 = (k0 + 0x9E3779B9) & MASK, (k1 + 0xBB67AE85) & MASK
    return [c0, c1, c2, c3]


def reference_stream(key64: int, base: int, words: int) -> list[int]:
    """The documented word stream: block i uses counter base + i (128-bit), 4 words each."""
    stream: list[int] = []
    block = 0
    while len(stream) < words:
        counter = base + block
        stream += philox_reference((key64 & MASK, key64 >> 32),
                                   (counter & MASK, (counter >> 32) & MASK, counter >> 64, 0))
        block += 1
    return stream[:words]


@pytest.mark.parametrize(("key", "counter", "expected"), [
    ((0, 0), (0, 0, 0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    ((0xA4093822, 0x299F31D0), (0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344),
     (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1)),
])
def test_philox_known_answer_vectors(key: tuple[int, int], counter: tuple[int, int, int, int],
                                     expected: tuple[int, int, int, int]) -> None:
    assert tuple(philox_reference(key, counter)) == expected
    words = philox4x32(np.array(counter, np.uint32).reshape(4, 1), key)
    assert tuple(int(w) for w in words[:, 0]) == expected


def rbg(state: np.ndarray, out_shape: str, algorithm: str = "rng_default") -> tuple[np.ndarray, np.ndarray]:
    state_shape = f"u64[{state.size}]"
    text = f"""HloModule t
ENTRY e {{
  s = {state_shape} parameter(0)
  ROOT r = ({state_shape}, {out_shape}) rng-bit-generator(s), algorithm={algorithm}
}}
"""
    return run_hlo(text, state)


def test_rng_bit_generator_u32_stream_and_state() -> None:
    state = np.array([0x0123456789ABCDEF, 41], np.uint64)
    new_state, bits = rbg(state, "u32[3,3]")
    expected = reference_stream(0x0123456789ABCDEF, 41, 9)
    np.testing.assert_array_equal(bits.reshape(-1), np.array(expected, np.uint32))
    np.testing.assert_array_equal(new_state, np.array([0x0123456789ABCDEF, 41 + 3], np.uint64))  # 3 blocks


def test_rng_bit_generator_u64_low_word_first_and_counter_carry() -> None:
    base = 2**64 - 1  # the second block's counter carries into the third word
    state = np.array([7, base, 99], np.uint64)
    new_state, bits = rbg(state, "u64[3]", "rng_philox")
    words = reference_stream(7, base, 6)
    expected = [words[2 * i] | (words[2 * i + 1] << 32) for i in range(3)]
    np.testing.assert_array_equal(bits, np.array(expected, np.uint64))
    np.testing.assert_array_equal(new_state, np.array([7, 1, 99], np.uint64))  # base + 2 blocks, wrapped


def test_rng_bit_generator_narrow_types_take_low_bits() -> None:
    state = np.array([3, 0], np.uint64)
    _, bits = rbg(state, "u8[5]", "rng_three_fry")
    np.testing.assert_array_equal(bits, np.array([w & 0xFF for w in reference_stream(3, 0, 5)], np.uint8))
    _, signed = rbg(state, "s16[5]")
    np.testing.assert_array_equal(signed, np.array([w & 0xFFFF for w in reference_stream(3, 0, 5)],
                                                   np.uint32).astype(np.uint16).view(np.int16))


def test_legacy_rng_ranges() -> None:
    text = """HloModule t
ENTRY e {
  a = f32[] constant(2)
  b = f32[] constant(3)
  u = f32[1000] rng(a, b), distribution=rng_uniform
  lo = s32[] constant(-5)
  hi = s32[] constant(5)
  i = s32[1000] rng(lo, hi), distribution=rng_uniform
  mu = f32[] constant(1)
  sigma = f32[] constant(2)
  n = f32[4000] rng(mu, sigma), distribution=rng_normal
  ROOT t = (f32[1000], s32[1000], f32[4000]) tuple(u, i, n)
}
"""
    uniform, integers, normal = run_hlo(text)
    assert uniform.min() >= 2 and uniform.max() < 3
    assert integers.min() == -5 and integers.max() == 4
    assert abs(normal.mean() - 1) < 0.15 and abs(normal.std() - 2) < 0.15


def test_rng_get_and_update_state_reads_then_advances_the_legacy_stream() -> None:
    """It returns {rng_seed, counter} -- the rng-bit-generator state that draws exactly what the next
    legacy rng draws -- then moves the counter on by delta blocks (wrapping modulo 2^64)."""
    text = """HloModule t
ENTRY e {
  s1 = u64[2] rng-get-and-update-state(), delta=5
  s2 = u64[2] rng-get-and-update-state(), delta=18446744073709551614, control-predecessors={s1}
  s3 = u64[2] rng-get-and-update-state(), delta=0, control-predecessors={s2}
  g = (u64[2], u64[3]) rng-bit-generator(s3), algorithm=rng_philox
  bits = u64[3] get-tuple-element(g), index=1
  lo = s32[] constant(0)
  hi = s32[] constant(1000)
  r = s32[3] rng(lo, hi), distribution=rng_uniform, control-predecessors={s3}
  ROOT t = (u64[2], u64[2], u64[2], u64[3], s32[3]) tuple(s1, s2, s3, bits, r)
}
"""
    module = parse_hlo(text)
    evaluator = HloEvaluator(rng_seed=0xABCDEF)
    s1, s2, s3, bits, drawn = evaluator.evaluate_module(module, [])
    np.testing.assert_array_equal(s1, np.array([0xABCDEF, 0], np.uint64))
    np.testing.assert_array_equal(s2, np.array([0xABCDEF, 5], np.uint64))
    np.testing.assert_array_equal(s3, np.array([0xABCDEF, 3], np.uint64))  # 5 + 2^64 - 2, wrapped
    words = reference_stream(0xABCDEF, 3, 6)
    np.testing.assert_array_equal(bits, np.array([words[2 * i] | (words[2 * i + 1] << 32) for i in range(3)],
                                                 np.uint64))
    # rng(0, 1000) of s32 is `bits % 1000`: the same words, as s3 did not advance the counter.
    np.testing.assert_array_equal(drawn, (bits % np.uint64(1000)).astype(np.int32))
    assert evaluator.rng_counter == 3 + 2  # the rng used ceil(3 * 2 / 4) = 2 blocks


def test_rng_get_and_update_state_prints_and_parses_back() -> None:
    text = """HloModule t
ENTRY e {
  s = u64[2] rng-get-and-update-state(), delta=12
  ROOT r = u64[2] rng-get-and-update-state(), delta=1, control-predecessors={s}
}
"""
    module = parse_hlo(text)
    verify_module(module)
    printed = module.to_text()
    assert "%s = u64[2]{0} rng-get-and-update-state(), delta=12" in printed
    assert parse_hlo(printed).to_text() == printed
    assert module.entry.root.attr("delta") == 1 and module.entry.root.has_side_effect()


def test_rng_get_and_update_state_without_delta_is_rejected() -> None:
    with pytest.raises(Exception, match=r"delta"):
        verify_module(parse_hlo("""HloModule t
ENTRY e {
  ROOT s = u64[2] rng-get-and-update-state()
}
"""))
