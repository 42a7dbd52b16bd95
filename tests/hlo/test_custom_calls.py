"""The custom-call target registry and the interpreter's custom-call handler."""

from __future__ import annotations

import numpy as np
import pytest

from tests.hlo.evaluator_util import run_hlo
from xla_teach.hlo.custom_calls import (
    UnknownCustomCallTargetError,
    get_custom_call_target,
    register_custom_call_target,
    registered_custom_call_targets,
    unregister_custom_call_target,
)
from xla_teach.hlo.evaluator import EvaluationError


def test_custom_calls() -> None:
    @register_custom_call_target("test.scale_and_swap")
    def scale_and_swap(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return b * 2, a

    try:
        text = """HloModule t
ENTRY e {
  a = f32[2] parameter(0)
  b = s32[] parameter(1)
  id = f32[2] custom-call(a), custom_call_target="xla_teach.identity"
  ROOT r = (s32[], f32[2]) custom-call(id, b), custom_call_target="test.scale_and_swap"
}
"""
        scaled, original = run_hlo(text, np.array([1, 2], np.float32), np.int32(21))
        assert scaled.dtype == np.int32 and scaled == 42
        np.testing.assert_array_equal(original, [1, 2])
    finally:
        unregister_custom_call_target("test.scale_and_swap")


def test_unknown_custom_call_target_lists_registered_ones() -> None:
    with pytest.raises(UnknownCustomCallTargetError, match="xla_teach.identity"):
        get_custom_call_target("no.such.target")
    text = """HloModule t
ENTRY e {
  a = f32[2] parameter(0)
  ROOT r = f32[2] custom-call(a), custom_call_target="no.such.target"
}
"""
    with pytest.raises(EvaluationError, match="no.such.target"):
        run_hlo(text, np.zeros(2, np.float32))


def test_registering_a_taken_name_needs_replace() -> None:
    with pytest.raises(ValueError, match="already registered"):
        register_custom_call_target("xla_teach.identity", lambda x: x)


def test_builtin_print_returns_its_operand(capsys: pytest.CaptureFixture[str]) -> None:
    assert {"xla_teach.identity", "xla_teach.print"} <= set(registered_custom_call_targets())
    text = """HloModule t
ENTRY e {
  a = s32[2] parameter(0)
  ROOT r = s32[2] custom-call(a), custom_call_target="xla_teach.print", custom_call_has_side_effect=true
}
"""
    np.testing.assert_array_equal(run_hlo(text, np.array([3, 4], np.int32)), [3, 4])
    assert "[3 4]" in capsys.readouterr().out


def test_function_form_and_replace() -> None:
    register_custom_call_target("test.twice", lambda x: 2 * x)
    try:
        register_custom_call_target("test.twice", lambda x: 3 * x, replace=True)
        assert get_custom_call_target("test.twice")(np.int32(2)) == 6
    finally:
        unregister_custom_call_target("test.twice")
