"""Parameter/output aliasing (``input_output_alias``): the typed config and its text, the
verifier's checks, buffer assignment giving an output its donated parameter's buffer (or
refusing, with a reason), and the CPU runtime writing the output into the caller's array --
checked against the interpreter, and by measuring that no output buffer is allocated."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

from tests.passes.pass_test_utils import random_inputs
from xla_teach.api import compile_module
from xla_teach.hlo.errors import VerificationError
from xla_teach.hlo.evaluator import evaluate_module
from xla_teach.hlo.input_output_alias import HloInputOutputAliasConfig
from xla_teach.hlo.text.lexer import HloParseError
from xla_teach.hlo.text.parser import parse_hlo
from xla_teach.hlo.verifier import verify_module
from xla_teach.passes.scheduling.buffer_assignment import ModuleBufferAssignment
from xla_teach.passes.scheduling.hlo_memory_scheduler import HloMemoryScheduler

STEP = """HloModule step, input_output_alias={ {0}: (0, {}, may-alias), {1}: (1, {}, must-alias) }

ENTRY main {
  w = f32[64] parameter(0)
  m = f32[64] parameter(1)
  g = f32[64] parameter(2)
  half = f32[] constant(0.5)
  halves = f32[64] broadcast(half), dimensions={}
  m2 = f32[64] multiply(m, halves)
  m3 = f32[64] add(m2, g)
  w2 = f32[64] subtract(w, m3)
  ROOT out = (f32[64], f32[64]) tuple(w2, m3)
}
"""


# ---- the config and its text ----------------------------------------------------------------------------
def test_text_round_trip_is_identical_and_typed() -> None:
    module = parse_hlo(STEP)
    header = module.to_text().splitlines()[0]
    assert header.startswith("HloModule step, input_output_alias={ {0}: (0, {}, may-alias), "
                             "{1}: (1, {}, must-alias) }, entry_computation_layout=")
    assert parse_hlo(module.to_text()).to_text() == module.to_text()
    config = module.input_output_alias
    assert [(out, a.parameter_number, a.parameter_index, a.kind) for out, a in config.items()] == [
        ((0,), 0, (), "may-alias"), ((1,), 1, (), "must-alias")]
    assert config.get_aliased_output(1) == (1,) and config.get_aliased_output(2) is None
    assert module.clone().input_output_alias == config
    assert module.clone().input_output_alias is not config  # clones do not share the config


def test_config_built_in_code_prints_as_xla_does() -> None:
    config = HloInputOutputAliasConfig()
    config.set_up_alias((1, 0), 2, (0,), "must-alias")
    config.set_up_alias((0,), 0)
    assert config.to_text() == "{ {0}: (0, {}, may-alias), {1,0}: (2, {0}, must-alias) }"
    assert HloInputOutputAliasConfig.parse(config.to_text()) == config
    with pytest.raises(ValueError, match="already aliased"):
        config.set_up_alias((0,), 1)
    # the kind may be left out (may-alias), as XLA's parser allows
    assert HloInputOutputAliasConfig.parse("{{}:(3,{})}").to_text() == "{ {}: (3, {}, may-alias) }"


@pytest.mark.parametrize("bad, message", [
    ("{ {0}: (0, {}, maybe) }", "may-alias or must-alias"),
    ("{ {0}: (0 {}) }", "expected ','"),
    ("{ {0}: (0, {}), {0}: (1, {}) }", "already aliased"),
])
def test_bad_alias_text_is_a_parse_error_at_the_spot(bad: str, message: str) -> None:
    text = STEP.replace("{ {0}: (0, {}, may-alias), {1}: (1, {}, must-alias) }", bad)
    with pytest.raises(HloParseError, match=message) as err:
        parse_hlo(text)
    assert err.value.line == 1 and "bad input_output_alias" in str(err.value)


# ---- the verifier ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("alias, message", [
    ("{ {0}: (2, {}, may-alias) }", None),  # g and w2 are both f32[64]: fine
    ("{ {2}: (0, {}, may-alias) }", r"result \(f32\[64\], f32\[64\]\) has no output \{2\}"),
    ("{ {0}: (7, {}, may-alias) }", "has no parameter 7"),
    ("{ {0}: (0, {1}, may-alias) }", r"of shape f32\[64\] has no index \{1\}"),
    ("{ {}: (0, {}, may-alias) }", r"only arrays can alias, but output \{\} is \(f32\[64\], f32\[64\]\)"),
    ("{ {0}: (0, {}, may-alias), {1}: (0, {}, may-alias) }", r"parameter 0 \{\} already holds output \{0\}"),
])
def test_verifier_checks_the_alias_config(alias: str, message: str | None) -> None:
    module = parse_hlo(STEP.replace("{ {0}: (0, {}, may-alias), {1}: (1, {}, must-alias) }", alias))
    if message is None:
        verify_module(module)
        return
    with pytest.raises(VerificationError, match=message):
        verify_module(module)


def test_verifier_rejects_aliasing_shapes_that_differ() -> None:
    text = """HloModule m, input_output_alias={ {}: (0, {}, may-alias) }

ENTRY main {
  x = f32[8] parameter(0)
  ROOT s = f32[4] slice(x), slice={[0:4]}
}
"""
    with pytest.raises(VerificationError, match=r"output \{\} is f32\[4\]\{0\} but parameter 0 %x\{\} is "
                                                r"f32\[8\]\{0\}; aliased shapes must be equal"):
        verify_module(parse_hlo(text))


# ---- buffer assignment ----------------------------------------------------------------------------------
def _assign(text: str):  # type: ignore[no-untyped-def]
    module = parse_hlo(text)
    HloMemoryScheduler().run(module)
    return module, ModuleBufferAssignment(module).entry


def test_buffer_assignment_gives_the_output_the_parameters_slice() -> None:
    module, ba = _assign(STEP)
    entry = module.entry
    for out_index, param in (((0,), "w"), ((1,), "m")):
        out_slice = ba.slice(entry.root, out_index)
        param_slice = ba.slice(entry.instruction(param))
        assert out_slice == param_slice and out_slice.allocation.kind == "parameter"
        assert out_slice.allocation.output_index == out_index
    assert not [a for a in ba.allocations if a.kind == "output"]
    assert [a.shared for a in ba.output_aliases] == [True, True]
    assert ba.alias_bytes() == 2 * 64 * 4
    text = ba.to_text()
    assert "parameter 0, shape |f32[64]{0}| at ShapeIndex {}, maybe-live-out (output {0}):" in text
    assert "Aliased: output {1} <- parameter 1 {} (must-alias): shares the parameter's buffer" in text


def test_no_alias_when_the_parameter_is_read_after_the_output_is_written() -> None:
    """n = negate(a) is the output aliased to a, but m = multiply(a, b) still reads a later."""
    text = """HloModule m, is_scheduled=true, input_output_alias={ {0}: (0, {}, may-alias) }

ENTRY e {
  a = f32[4] parameter(0)
  b = f32[4] parameter(1)
  n = f32[4] negate(b)
  m = f32[4] multiply(a, b)
  ROOT t = (f32[4], f32[4]) tuple(m, n)
}
"""
    module = parse_hlo(text.replace("tuple(m, n)", "tuple(n, m)"))
    ba = ModuleBufferAssignment(module).entry
    (alias,) = ba.output_aliases
    assert not alias.shared and alias.reason == "m reads a at step 3, after n writes the output at step 2"
    assert ba.slice(module.entry.root, (0,)).allocation.kind == "output"
    # m itself may overwrite a: it is a's last reader, elementwise, and reads it once
    module = parse_hlo(text)
    ba = ModuleBufferAssignment(module).entry
    assert ba.output_aliases[0].shared
    assert ba.slice(module.entry.root, (0,)) == ba.slice(module.entry.instruction("a"))


# ---- the CPU runtime ------------------------------------------------------------------------------------
def test_donated_run_matches_the_interpreter_and_updates_the_callers_arrays() -> None:
    module = parse_hlo(STEP)
    args = random_inputs(module, seed=3)
    expected = evaluate_module(module, args)
    executable = compile_module(module, "cpu")
    w, m, g = (np.array(a) for a in args)
    w2, m3 = executable.execute([w, m, g])
    for got, want in zip((w2, m3), expected, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-6)
    assert np.shares_memory(w2, w) and np.shares_memory(m3, m)  # written where the arguments were
    np.testing.assert_array_equal(g, args[2])  # not donated: untouched


def _add_module(alias: str) -> str:
    return f"""HloModule add{alias}

ENTRY e {{
  x = f32[65536] parameter(0)
  y = f32[65536] parameter(1)
  ROOT s = f32[65536] add(x, y)
}}
"""


def _peak_traced_bytes(executable, args) -> tuple[int, list[np.ndarray]]:  # type: ignore[no-untyped-def]
    executable.execute([np.array(a) for a in args])  # warm up (first-run allocations)
    tracemalloc.start()
    try:
        out = executable.execute(args)
        return tracemalloc.get_traced_memory()[1], out
    finally:
        tracemalloc.stop()


def test_donated_run_allocates_no_buffer_for_the_output() -> None:
    """256 KiB output: without donation a 256 KiB output buffer is allocated per run; with it,
    (almost) nothing is -- the kernel writes into x."""
    nbytes = 65536 * 4
    plain = compile_module(_add_module(""), "cpu")
    donated = compile_module(_add_module(", input_output_alias={ {}: (0, {}, may-alias) }"), "cpu")
    assert [a.size for a in plain.entry.output_allocations] == [nbytes]
    assert donated.entry.output_allocations == []
    x, y = np.full(65536, 2, np.float32), np.ones(65536, np.float32)
    peak_plain, (out_plain,) = _peak_traced_bytes(plain, [x, y])
    peak_donated, (out_donated,) = _peak_traced_bytes(donated, [x, y])
    assert peak_plain >= nbytes > 16 * peak_donated
    np.testing.assert_array_equal(out_plain, 3)
    assert np.shares_memory(out_donated, x)
    np.testing.assert_array_equal(x, 3)


def test_read_only_or_shared_arguments_are_copied_not_overwritten() -> None:
    donated = compile_module(_add_module(", input_output_alias={ {}: (0, {}, may-alias) }"), "cpu")
    x = np.ones(65536, np.float32)
    x.flags.writeable = False
    (out,) = donated.execute([x, x])
    assert not np.shares_memory(out, x)
    np.testing.assert_array_equal(out, 2)
    np.testing.assert_array_equal(x, 1)
    y = np.ones(65536, np.float32)
    (out,) = donated.execute([y, y])  # the same array for both parameters: x must not change under y
    np.testing.assert_array_equal(out, 2)


def test_must_alias_that_cannot_share_is_copied_into_the_parameter() -> None:
    """The output is another parameter (y): buffer assignment cannot place it in x's buffer, so
    the runtime copies it there at the end (must-alias); the other output still reads old x."""
    text = """HloModule m, input_output_alias={ {0}: (0, {}, must-alias) }

ENTRY e {
  x = f32[4] parameter(0)
  y = f32[4] parameter(1)
  n = f32[4] negate(x)
  ROOT t = (f32[4], f32[4]) tuple(y, n)
}
"""
    module = parse_hlo(text)
    executable = compile_module(module, "cpu")
    (alias,) = executable.buffer_assignment.entry.output_aliases
    assert not alias.shared and "it is parameter y" in alias.reason
    x, y = np.arange(4, dtype=np.float32), np.full(4, 7, np.float32)
    first, second = executable.execute([x, y])
    np.testing.assert_array_equal(first, 7)
    np.testing.assert_array_equal(second, -np.arange(4, dtype=np.float32))
    assert np.shares_memory(first, x) and not np.shares_memory(first, y)
