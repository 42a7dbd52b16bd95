"""Shape inference, part 1: the rule table, elementwise ops and data movement."""

from __future__ import annotations

import pytest

from tests.hlo.inference_helpers import S, error, infer
from xla_teach.hlo.attributes import PaddingDim, SliceDim
from xla_teach.hlo.opcodes import OPCODES
from xla_teach.hlo.shape_inference import INFERENCE_RULES, needs_declared_shape
from xla_teach.hlo.shape_inference.elementwise import UNARY_TYPE_RULES


# ---------------------------------------------------------------------------------------
# The table
# ---------------------------------------------------------------------------------------
def test_every_opcode_has_a_rule() -> None:
    assert set(INFERENCE_RULES) == set(OPCODES)


def test_declared_opcodes_need_the_declared_shape() -> None:
    assert needs_declared_shape("parameter") and needs_declared_shape("reshape")
    assert not needs_declared_shape("add")
    message = error("parameter", [])
    assert "declared_shape" in message
    assert infer("parameter", [], declared_shape=S("f32[2]")) == "f32[2]"
    assert infer("custom-call", ["f32[2]"], {"custom_call_target": "foo"}, declared_shape=S("(s32[], f32[9])")) \
        == "(s32[], f32[9])"


# ---------------------------------------------------------------------------------------
# Elementwise
# ---------------------------------------------------------------------------------------
def test_binary_same_shapes() -> None:
    assert infer("add", ["f32[2,3]", "f32[2,3]"]) == "f32[2,3]"
    assert infer("and", ["pred[4]", "pred[4]"]) == "pred[4]"
    assert infer("shift-left", ["u8[4]", "u8[4]"]) == "u8[4]"


def test_binary_dimension_mismatch_message() -> None:
    message = error("add", ["f32[2,3]", "f32[3]"])
    assert message == ("add: operand shapes f32[2,3] and f32[3] are incompatible "
                       "(elementwise ops need identical dimensions)")


def test_binary_element_type_mismatch() -> None:
    message = error("multiply", ["f32[2]", "s32[2]"])
    assert "f32[2]" in message and "s32[2]" in message and "element types" in message


@pytest.mark.parametrize("opcode, shapes", [
    ("and", ["f32[2]", "f32[2]"]),
    ("xor", ["bf16[2]", "bf16[2]"]),
    ("shift-left", ["f32[2]", "f32[2]"]),
    ("shift-right-logical", ["pred[2]", "pred[2]"]),
    ("atan2", ["s32[2]", "s32[2]"]),
])
def test_binary_type_rules(opcode: str, shapes: list[str]) -> None:
    message = error(opcode, shapes)
    assert "is not allowed" in message and shapes[0] in message


@pytest.mark.parametrize("opcode", sorted(UNARY_TYPE_RULES))
def test_unary_on_floats(opcode: str) -> None:
    if opcode in ("not", "popcnt", "count-leading-zeros"):
        assert "needs" in error(opcode, ["f32[3]"])
    elif opcode == "is-finite":
        assert infer(opcode, ["f32[3]"]) == "pred[3]"
    else:
        assert infer(opcode, ["f32[3]"]) == "f32[3]"


@pytest.mark.parametrize("opcode, operand, ok", [
    ("exponential", "s32[2]", False), ("floor", "s32[2]", False), ("abs", "u32[2]", False),
    ("abs", "s32[2]", True), ("sign", "s8[2]", True), ("negate", "pred[2]", False), ("negate", "u8[2]", True),
    ("not", "pred[2]", True), ("not", "s32[2]", True), ("popcnt", "u16[2]", True),
    ("count-leading-zeros", "s64[2]", True), ("is-finite", "s32[2]", False), ("tanh", "bf16[2]", True),
])
def test_unary_type_rules(opcode: str, operand: str, ok: bool) -> None:
    if ok:
        assert infer(opcode, [operand]) == operand
    else:
        message = error(opcode, [operand])
        assert operand in message and "not allowed" in message


def test_compare() -> None:
    assert infer("compare", ["f32[2,3]", "f32[2,3]"], {"direction": "LT"}) == "pred[2,3]"
    assert infer("compare", ["u8[2]", "u8[2]"], {"direction": "EQ", "type": "UNSIGNED"}) == "pred[2]"
    assert infer("compare", ["f32[2]", "f32[2]"], {"direction": "EQ", "type": "TOTALORDER"}) == "pred[2]"
    assert "direction=XX" in error("compare", ["f32[2]", "f32[2]"], {"direction": "XX"})
    assert "TOTALORDER" in error("compare", ["s32[2]", "s32[2]"], {"direction": "LT", "type": "TOTALORDER"})
    assert "required" in error("compare", ["s32[2]", "s32[2]"], {})


def test_select() -> None:
    assert infer("select", ["pred[2,3]", "f32[2,3]", "f32[2,3]"]) == "f32[2,3]"
    assert infer("select", ["pred[]", "f32[2,3]", "f32[2,3]"]) == "f32[2,3]"
    assert "tuple-select" in error("select", ["pred[]", "(f32[2], s32[])", "(f32[2], s32[])"])
    assert "pred[3]" in error("select", ["pred[3]", "f32[2]", "f32[2]"])
    assert "pred array" in error("select", ["s32[2]", "f32[2]", "f32[2]"])
    assert "same shape" in error("select", ["pred[2]", "f32[2]", "s32[2]"])


def test_clamp() -> None:
    assert infer("clamp", ["f32[]", "f32[4]", "f32[]"]) == "f32[4]"
    assert infer("clamp", ["s32[4]", "s32[4]", "s32[]"]) == "s32[4]"
    assert "min f32[3]" in error("clamp", ["f32[3]", "f32[4]", "f32[]"])
    assert "element types" in error("clamp", ["f32[]", "s32[4]", "s32[]"])


def test_convert_needs_the_result_type() -> None:
    assert infer("convert", ["f32[2,3]"], result_element_type="s8") == "s8[2,3]"
    assert infer("convert", ["f32[2,3]"], declared_shape=S("bf16[2,3]")) == "bf16[2,3]"
    assert "result_element_type" in error("convert", ["f32[2]"])


@pytest.mark.parametrize("operand, new_type, result", [
    ("f32[2]", "s32", "s32[2]"),
    ("f32[2]", "u16", "u16[2,2]"),
    ("u16[2,2]", "f32", "f32[2]"),
    ("f64[3]", "u8", "u8[3,8]"),
    ("u8[4]", "f32", "f32[]"),
    ("s64[]", "f32", "f32[2]"),
])
def test_bitcast_convert_width_changes(operand: str, new_type: str, result: str) -> None:
    assert infer("bitcast-convert", [operand], result_element_type=new_type) == result


def test_bitcast_convert_errors() -> None:
    assert "ratio 2" in error("bitcast-convert", ["u16[2,3]"], result_element_type="f32")
    assert "pred" in error("bitcast-convert", ["pred[2]"], result_element_type="s8")
    assert "ratio 2" in error("bitcast-convert", ["u16[]"], result_element_type="f32")


def test_reduce_precision() -> None:
    attrs = {"exponent_bits": 5, "mantissa_bits": 10}
    assert infer("reduce-precision", ["f32[4]"], attrs) == "f32[4]"
    assert "not allowed" in error("reduce-precision", ["s32[4]"], attrs)
    assert "exponent_bits=0" in error("reduce-precision", ["f32[4]"], {"exponent_bits": 0, "mantissa_bits": 3})


# ---------------------------------------------------------------------------------------
# Data movement
# ---------------------------------------------------------------------------------------
def test_broadcast() -> None:
    assert infer("broadcast", ["f32[3]"], {"dimensions": (1,)}, result_dims=(2, 3)) == "f32[2,3]"
    assert infer("broadcast", ["f32[]"], {"dimensions": ()}, declared_shape=S("f32[4,5]")) == "f32[4,5]"
    assert "sizes must be equal" in error("broadcast", ["f32[3]"], {"dimensions": (0,)}, result_dims=(2, 3))
    assert "result_dims" in error("broadcast", ["f32[3]"], {"dimensions": (0,)})
    assert "out of range" in error("broadcast", ["f32[3]"], {"dimensions": (2,)}, result_dims=(2, 3))


def test_reshape() -> None:
    assert infer("reshape", ["f32[2,3]"], result_dims=(3, 2)) == "f32[3,2]"
    assert infer("reshape", ["f32[]"], result_dims=(1, 1)) == "f32[1,1]"
    assert infer("reshape", ["f32[1,1]"], result_dims=()) == "f32[]"
    message = error("reshape", ["f32[2,3]"], result_dims=(4, 2))
    assert "6 elements" in message and "8 elements" in message


def test_transpose() -> None:
    assert infer("transpose", ["f32[2,3,4]"], {"dimensions": (2, 0, 1)}) == "f32[4,2,3]"
    assert "permutation" in error("transpose", ["f32[2,3]"], {"dimensions": (0, 0)})


def test_slice() -> None:
    spec = (SliceDim(0, 8, 2), SliceDim(1, 4, 2))
    assert infer("slice", ["f32[8,5]"], {"slice": spec}) == "f32[4,2]"
    assert infer("slice", ["f32[8]"], {"slice": (SliceDim(3, 3),)}) == "f32[0]"
    assert "out of bounds" in error("slice", ["f32[8]"], {"slice": (SliceDim(0, 9),)})
    assert "out of bounds" in error("slice", ["f32[8]"], {"slice": (SliceDim(5, 4),)})
    assert "rank 2" in error("slice", ["f32[8,5]"], {"slice": (SliceDim(0, 1),)})


def test_dynamic_slice_and_update() -> None:
    sizes = {"dynamic_slice_sizes": (2, 2)}
    assert infer("dynamic-slice", ["f32[4,5]", "s32[]", "s32[]"], sizes) == "f32[2,2]"
    assert "2 scalar start indices" in error("dynamic-slice", ["f32[4,5]", "s32[]"], sizes)
    assert "integer scalar" in error("dynamic-slice", ["f32[4,5]", "s32[2]", "s32[]"], sizes)
    assert "not within [0, 5]" in error("dynamic-slice", ["f32[4,5]", "s32[]", "s32[]"],
                                        {"dynamic_slice_sizes": (2, 6)})
    assert infer("dynamic-update-slice", ["f32[4,5]", "f32[2,5]", "u32[]", "u32[]"]) == "f32[4,5]"
    assert "fit inside" in error("dynamic-update-slice", ["f32[4,5]", "f32[2,6]", "s32[]", "s32[]"])


def test_concatenate() -> None:
    assert infer("concatenate", ["f32[2,3]", "f32[4,3]", "f32[1,3]"], {"dimensions": (0,)}) == "f32[7,3]"
    assert "differ outside dimension 0" in error("concatenate", ["f32[2,3]", "f32[2,4]"], {"dimensions": (0,)})
    assert "scalars" in error("concatenate", ["f32[]", "f32[]"], {"dimensions": (0,)})


def test_pad_with_interior_and_negative_padding() -> None:
    attrs = {"padding": (PaddingDim(1, 1), PaddingDim(0, 1, 1))}
    assert infer("pad", ["f32[4,8]", "f32[]"], attrs) == "f32[6,16]"
    # 3 rows, -1_-1_1: interior gives 5, the negative edges remove 2.
    assert infer("pad", ["f32[3]", "f32[]"], {"padding": (PaddingDim(-1, -1, 1),)}) == "f32[3]"
    assert infer("pad", ["f32[0]", "f32[]"], {"padding": (PaddingDim(1, 2, 5),)}) == "f32[3]"
    assert "must not be negative" in error("pad", ["f32[3]", "f32[]"], {"padding": (PaddingDim(0, 0, -1),)})
    assert "negative size" in error("pad", ["f32[3]", "f32[]"], {"padding": (PaddingDim(-2, -2),)})
    assert "padding value" in error("pad", ["f32[3]", "s32[]"], {"padding": (PaddingDim(),)})


def test_reverse_copy_bitcast() -> None:
    assert infer("reverse", ["f32[2,3]"], {"dimensions": (0, 1)}) == "f32[2,3]"
    assert "repeats" in error("reverse", ["f32[2,3]"], {"dimensions": (1, 1)})
    assert infer("copy", ["(f32[2], s32[])"]) == "(f32[2], s32[])"
    assert infer("bitcast", ["f32[2,3]"], declared_shape=S("f32[6]")) == "f32[6]"
    assert "changes the size" in error("bitcast", ["f32[2,3]"], declared_shape=S("f32[7]"))
