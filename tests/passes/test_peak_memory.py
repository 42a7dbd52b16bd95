"""The peak-memory figure of buffer assignment, and ``Compiled.memory_analysis`` built on it,
against small examples computed by hand."""

from __future__ import annotations

import numpy as np

import xla_teach
from xla_teach.hlo.text.parser import parse_hlo
from xla_teach.passes.scheduling.buffer_assignment import ModuleBufferAssignment
from xla_teach.passes.scheduling.heap_simulator import peak_live_bytes

# Scheduled as written. Sizes: p, a, c 64 bytes; b 128 bytes. a is the only temporary (read by c,
# twice, so c cannot overwrite it); b and c are outputs.
SCHEDULED = """HloModule m, is_scheduled=true

ENTRY e {
  p = f32[16] parameter(0)
  a = f32[16] exponential(p)
  b = f32[32] concatenate(p, p), dimensions={0}
  c = f32[16] multiply(a, a)
  ROOT r = (f32[32], f32[16]) tuple(b, c)
}
"""


def test_peak_live_bytes_by_hand() -> None:
    """Live bytes per step (p lives for the whole run, outputs from their step to the end):
    step 0 p: 64; 1 a: 64+64 = 128; 2 b: 128+128 = 256; 3 c: 256+64 = 320 (a still read here);
    4 tuple: a is dead, 64+128+64 = 256. Peak 320 at step 3."""
    ba = ModuleBufferAssignment(parse_hlo(SCHEDULED)).entry
    assert (ba.peak_bytes, ba.peak_step) == (320, 3)
    assert ba.temp_bytes == 64  # the arena holds a alone
    assert "Peak live bytes: 320 (at step 3, c; parameters, constants, outputs and live temporaries)" \
        in ba.to_text().splitlines()


def test_peak_counts_a_donated_output_once() -> None:
    """c aliased to p: c takes p's bytes, so step 3 holds p(=c) 64 + a 64 + b 128 = 256, and the
    whole run never needs more."""
    text = SCHEDULED.replace("is_scheduled=true", "is_scheduled=true, input_output_alias={ {1}: (0, {}, may-alias) }")
    ba = ModuleBufferAssignment(parse_hlo(text)).entry
    assert ba.output_aliases[0].shared
    assert (ba.peak_bytes, ba.peak_step) == (256, 2)


def test_peak_of_intervals() -> None:
    # (size, first step, last step): 10 over 0-1, 5 over 1-3, 7 over 2-2 -> 15 at 1, 12 at 2
    assert peak_live_bytes([(10, 0, 1), (5, 1, 3), (7, 2, 2)]) == (15, 1)
    assert peak_live_bytes([]) == (0, 0)


def test_memory_analysis_uses_buffer_assignment_on_the_cpu() -> None:
    """w - g over f32[1024]: arguments 8192 bytes, output 4096. Donating w, the output is written
    into w (alias 4096) and the run never holds more than the two arguments: peak 8192; without
    donation the output is extra: peak 12288. No temporaries either way."""
    w, g = np.ones(1024, np.float32), np.ones(1024, np.float32)
    plain = xla_teach.jit(lambda w, g: w - g, backend="cpu").lower(w, g).compile().memory_analysis()
    donated = xla_teach.jit(lambda w, g: w - g, backend="cpu", donate_argnums=0).lower(w, g).compile()
    stats = donated.memory_analysis()
    assert stats.from_buffer_assignment and plain.from_buffer_assignment
    assert (stats.argument_size_in_bytes, stats.output_size_in_bytes) == (8192, 4096)
    assert (stats.alias_size_in_bytes, stats.temp_size_in_bytes, stats.peak_memory_in_bytes) == (4096, 0, 8192)
    assert (plain.alias_size_in_bytes, plain.temp_size_in_bytes, plain.peak_memory_in_bytes) == (0, 0, 12288)


def test_memory_analysis_temp_is_the_arena_not_the_naive_sum() -> None:
    """Four chained f32[32,32] dots (4096 bytes each): a = x@w, b = a@w, c = b@w, out = c@w. The
    naive figure counts a, b and c (12288); a is dead when c is written, so the arena holds two
    (8192). Peak: the two arguments (8192) plus two live 4096-byte values at any step = 16384."""
    x, w = np.ones((32, 32), np.float32), np.ones((32, 32), np.float32)
    compiled = xla_teach.jit(lambda x, w: x @ w @ w @ w @ w, backend="cpu").lower(x, w).compile()
    stats = compiled.memory_analysis()
    assert stats.temp_size_upper_bound_in_bytes == 12288
    assert stats.temp_size_in_bytes == compiled.executable.buffer_assignment.temp_bytes() == 8192
    assert stats.peak_memory_in_bytes == 16384


def test_memory_analysis_on_the_interpreter_is_an_upper_bound() -> None:
    x, w = np.ones((32, 32), np.float32), np.ones((32, 32), np.float32)
    stats = xla_teach.jit(lambda x, w: x @ w @ w @ w @ w, backend="interpreter").lower(x, w).compile() \
        .memory_analysis()
    assert not stats.from_buffer_assignment
    assert stats.temp_size_in_bytes == stats.temp_size_upper_bound_in_bytes == 12288
    assert stats.peak_memory_in_bytes == 8192 + 4096 + 12288
