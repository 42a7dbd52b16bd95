"""Wrongly typed builder arguments give a ShapeError naming the method and the argument,
never an AttributeError/TypeError from deep inside (``builder_arguments.py``)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from xla_teach import XlaBuilder
from xla_teach.hlo.errors import ShapeError
from xla_teach.hlo.shape import Shape


def _builder() -> tuple[XlaBuilder, object]:
    b = XlaBuilder("m")
    return b, b.parameter(0, Shape.array("f32", (3,)), "x")


CASES: dict[str, tuple[Callable, str]] = {
    "list for an op": (lambda b, x: b.dot(x, [1.0, 2.0, 3.0]), "dot: argument 'rhs' must be an XlaOp"),
    "int for an op": (lambda b, x: b.exp(3), "exp: argument 'operand' must be an XlaOp"),
    "op for a sequence": (lambda b, x: b.tuple(x), "tuple: argument 'elements' must be a sequence of XlaOps"),
    "list item": (lambda b, x: b.tuple([x, 2]), "tuple: argument 'elements'[1] must be an XlaOp, got int"),
    "int for dims": (lambda b, x: b.reshape(x, 3), "reshape: bad argument: 'int' object is not iterable"),
    "letters for dims": (lambda b, x: b.transpose(x, "a"), "transpose: bad argument: invalid literal"),
    "missing argument": (lambda b, x: b.add(x), "add: missing a required argument: 'rhs'"),
    "unknown keyword": (lambda b, x: b.negate(x, nam="n"), "negate: got an unexpected keyword argument 'nam'"),
    "tuple for a shape": (lambda b, x: b.parameter(1, (2, 3)), "parameter: the shape must be a Shape"),
    "pad dimension out of range": (lambda b, x: b.pad_in_dim(x, b.constant(np.float32(0)), 5, 1, 1),
                                   "pad: pad_in_dim: dimension 5 is out of range for rank 1"),
    "short padding entry": (lambda b, x: b.pad(x, b.constant(np.float32(0)), [(1,)]),
                            "pad: a padding entry is (low, high) or (low, high, interior), got (1,)"),
    "no such element type": (lambda b, x: b.convert_element_type(x, object),
                             "convert_element_type: bad argument: an element type must be"),
    # values an integer type cannot hold are refused, not truncated or wrapped
    "fraction as s32": (lambda b, x: b.add(b.convert_element_type(x, "s32"), 1.5),
                        "add: 1.5 is not exactly representable as s32"),
    "too big for s32": (lambda b, x: b.add(b.convert_element_type(x, "s32"), 2**40),
                        "add: 1099511627776 is not exactly representable as s32"),
    "fraction constant": (lambda b, x: b.constant(1.5, "s32"), "constant: 1.5 is not exactly representable as s32"),
    "NaN constant": (lambda b, x: b.constant(float("nan"), "u8"), "constant: nan is not exactly representable as u8"),
    "fraction index": (lambda b, x: b.dynamic_slice(x, [0.5], [1]),
                       "dynamic-slice: 0.5 is not exactly representable as s32"),
}


def test_exact_and_float_scalars_still_work() -> None:
    b, x = _builder()
    i = b.convert_element_type(x, np.int32)  # a NumPy dtype names the element type too
    assert b.add(i, 3).shape.to_text() == "s32[3]{0}"
    assert b.constant(7, "u8").shape.to_text() == "u8[]"
    assert float(b.constant(0.1, "f32").instruction.literal) == float(np.float32(0.1))  # floats round


def test_shape_dimensions_must_be_integers() -> None:
    for dims in ((1.5,), "23"):
        with pytest.raises(ValueError, match="must be a sequence of integers"):
            Shape.array("f32", dims)


@pytest.mark.parametrize("case", CASES)
def test_wrong_argument_types_are_explained(case: str) -> None:
    call, message = CASES[case]
    b, x = _builder()
    with pytest.raises(ShapeError) as info:
        call(b, x)
    assert str(info.value).startswith(message), str(info.value)


def test_signature_is_shown_for_bad_values() -> None:
    b, x = _builder()
    with pytest.raises(ShapeError, match=r"signature: broadcast\(self, operand: XlaOp, broadcast_sizes: "
                                         r"Sequence\[int\]") as info:
        b.broadcast(x, 5)
    assert "f32[3]" in str(info.value)  # the operand's shape
    assert isinstance(info.value.__cause__, TypeError)  # the original error stays in the traceback


def test_correct_calls_still_build_and_run() -> None:
    b, x = _builder()
    y = b.reshape(b.broadcast(x, (2,)), (6,))
    module = b.build(b.tuple([y, b.negate(x, name="neg")]))
    from xla_teach import execute

    got = execute(module, [np.arange(3, dtype=np.float32)], backend="interpreter")
    np.testing.assert_array_equal(got[0], np.tile(np.arange(3, dtype=np.float32), 2))
    np.testing.assert_array_equal(got[1], -np.arange(3, dtype=np.float32))


def test_finishing_the_wrong_builder_is_a_shape_error() -> None:
    b, x = _builder()
    with pytest.raises(ShapeError, match="call build()"):
        b.build_computation(x)
    sub = b.create_sub_builder("sub")
    sub.parameter(0, Shape.scalar("f32"))
    with pytest.raises(ShapeError, match="call build_computation()"):
        sub.build()
