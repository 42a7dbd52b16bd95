"""compile_module pauses Python's cyclic garbage collector while it compiles, and leaves it as it
found it (on, or off when the caller had turned it off)."""

from __future__ import annotations

import gc

import numpy as np
import pytest

from xla_teach import flags
from xla_teach.api import compile_module
from xla_teach.backends.options import CompileOptions
from xla_teach.hlo.text.lexer import HloParseError

HLO = "HloModule m\nENTRY e {\n  x = f32[4] parameter(0)\n  ROOT y = f32[4] add(x, x)\n}\n"


def _compile_watching_gc() -> tuple[list[bool], object]:
    seen: list[bool] = []
    options = CompileOptions.from_flags(flags.current())
    options.pass_options.listeners.append(lambda record: seen.append(gc.isenabled()))
    return seen, compile_module(HLO, "cpu", options)


def test_the_collector_is_paused_during_a_compile_and_back_on_after() -> None:
    assert gc.isenabled()
    seen, exe = _compile_watching_gc()
    assert seen and not any(seen)  # every pass ran with the collector off
    assert gc.isenabled()
    (out,) = exe.execute([np.arange(4, dtype=np.float32)])
    np.testing.assert_array_equal(out, [0, 2, 4, 6])


def test_a_caller_that_turned_it_off_finds_it_off() -> None:
    gc.disable()
    try:
        _compile_watching_gc()
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_a_failing_compile_turns_it_back_on() -> None:
    with pytest.raises(HloParseError):
        compile_module("HloModule broken\nENTRY e {\n  ROOT y = f32[4] add(x, x)\n}\n", "cpu")
    assert gc.isenabled()
