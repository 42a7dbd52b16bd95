"""XlaBuilder: every method builds a verifiable module; golden text for a few; errors."""

from __future__ import annotations

import numpy as np
import pytest

from xla_teach.hlo.attributes import OpMetadata
from xla_teach.hlo.builder import XlaBuilder, XlaOp, make_padding
from xla_teach.hlo.errors import ShapeError
from xla_teach.hlo.ir import HloComputation, HloModule
from xla_teach.hlo.opcodes import OPCODES
from xla_teach.hlo.shape import Shape
from xla_teach.hlo.text.parser import parse_hlo
from xla_teach.hlo.verifier import verify_module

F32 = Shape.scalar("f32")
S32 = Shape.scalar("s32")


def f32(*dims: int) -> Shape:
    return Shape.array("f32", dims)


def text(op: XlaOp) -> str:
    return op.shape.to_text(print_layout=False)


def short(module: HloModule) -> str:
    return module.to_text(long_form=False)


def assert_round_trips(module: HloModule) -> None:
    printed = module.to_text()
    assert parse_hlo(printed).to_text() == printed


# ---------------------------------------------------------------------------------------
# Golden text
# ---------------------------------------------------------------------------------------
AXPY_GOLDEN = """\
HloModule axpy, entry_computation_layout={(f32[], f32[4]{0}, f32[4]{0})->(f32[4]{0}, f32[])}

%add_f32 (lhs: f32[], rhs: f32[]) -> f32[] {
  %lhs = f32[] parameter(0)
  %rhs = f32[] parameter(1)
  ROOT %add.1 = f32[] add(%lhs, %rhs)
}

ENTRY %main (alpha: f32[], x: f32[4], y: f32[4]) -> (f32[4], f32[]) {
  %alpha = f32[] parameter(0)
  %broadcast = f32[4]{0} broadcast(%alpha), dimensions={}
  %x = f32[4]{0} parameter(1)
  %multiply = f32[4]{0} multiply(%broadcast, %x)
  %y = f32[4]{0} parameter(2)
  %add = f32[4]{0} add(%multiply, %y)
  %constant = f32[] constant(0)
  %reduce = f32[] reduce(%add, %constant), dimensions={0}, to_apply=%add_f32
  ROOT %tuple = (f32[4]{0}, f32[]) tuple(%add, %reduce)
}

"""


def test_axpy_golden() -> None:
    b = XlaBuilder("axpy")
    alpha = b.parameter(0, F32, "alpha")
    x = b.parameter(1, f32(4), "x")
    y = b.parameter(2, f32(4), "y")
    axpy = alpha * x + y
    total = b.reduce(axpy, b.constant(np.float32(0)), b.create_scalar_computation("add", "f32"), (0,))
    module = b.build(b.tuple([axpy, total]))
    assert module.to_text() == AXPY_GOLDEN
    assert_round_trips(module)


LOOP_GOLDEN = """\
HloModule loop, entry_computation_layout={(f32[3]{0})->f32[3]{0}}

cond {
  s = (s32[], f32[3]{0}) parameter(0)
  get-tuple-element = s32[] get-tuple-element(s), index=0
  constant = s32[] constant(4)
  ROOT compare = pred[] compare(get-tuple-element, constant), direction=LT
}

body {
  s.1 = (s32[], f32[3]{0}) parameter(0)
  get-tuple-element.1 = s32[] get-tuple-element(s.1), index=0
  constant.1 = s32[] constant(1)
  add = s32[] add(get-tuple-element.1, constant.1)
  get-tuple-element.2 = f32[3]{0} get-tuple-element(s.1), index=1
  constant.2 = f32[] constant(2)
  broadcast = f32[3]{0} broadcast(constant.2), dimensions={}
  multiply = f32[3]{0} multiply(get-tuple-element.2, broadcast)
  ROOT tuple = (s32[], f32[3]{0}) tuple(add, multiply)
}

ENTRY main {
  constant.3 = s32[] constant(0)
  x = f32[3]{0} parameter(0)
  tuple.1 = (s32[], f32[3]{0}) tuple(constant.3, x)
  while = (s32[], f32[3]{0}) while(tuple.1), condition=cond, body=body
  ROOT get-tuple-element.3 = f32[3]{0} get-tuple-element(while), index=1
}

"""


def build_loop() -> HloModule:
    state = Shape.make_tuple([S32, f32(3)])
    b = XlaBuilder("loop")
    x = b.parameter(0, f32(3), "x")
    cb = b.create_sub_builder("cond")
    s = cb.parameter(0, state, "s")
    cb.lt(cb.get_tuple_element(s, 0), 4)
    bb = b.create_sub_builder("body")
    s = bb.parameter(0, state, "s")
    i, v = bb.get_tuple_element(s, 0), bb.get_tuple_element(s, 1)
    bb.tuple([i + 1, v * 2.0])
    loop = b.while_loop(cb.build_computation(), bb.build_computation(), b.tuple([b.constant(0), x]))
    return b.build(b.get_tuple_element(loop, 1))


def test_while_loop_golden_callees_first() -> None:
    module = build_loop()
    assert short(module) == LOOP_GOLDEN
    assert_round_trips(module)


def test_conditional_golden() -> None:
    b = XlaBuilder("branchy")
    k = b.parameter(0, S32, "k")
    v = b.parameter(1, f32(2), "v")
    neg = b.create_sub_builder("neg")
    neg.neg(neg.parameter(0, f32(2), "p"))
    ident = b.create_sub_builder("id")
    ident.copy(ident.parameter(0, f32(2), "p"))
    module = b.build(b.indexed_conditional(k, [neg.build_computation(), ident.build_computation()], [v, v]))
    assert short(module).splitlines()[-3] == (
        "  ROOT conditional = f32[2]{0} conditional(k, v, v), branch_computations={neg, id}")


# ---------------------------------------------------------------------------------------
# Every opcode has a builder method
# ---------------------------------------------------------------------------------------
def build_everything() -> HloModule:
    """One module using every builder method (and so every opcode but fusion)."""
    b = XlaBuilder("everything")
    x = b.parameter(0, f32(2, 3), "x")
    n = b.parameter(1, Shape.array("s32", (2, 3)), "n")
    add = b.create_scalar_computation("add", "f32")
    outs: list[XlaOp] = []
    for unary in ("abs", "neg", "sign", "floor", "ceil", "round", "round_nearest_even", "exp", "expm1", "log",
                  "log1p", "logistic", "sqrt", "rsqrt", "cbrt", "sin", "cos", "tan", "tanh", "erf", "is_finite"):
        outs.append(getattr(b, unary)(x))
    for unary in ("not_", "population_count", "clz"):
        outs.append(getattr(b, unary)(n))
    for binary in ("add", "sub", "mul", "div", "rem", "max", "min", "pow", "atan2"):
        outs.append(getattr(b, binary)(x, x))
    for binary in ("and_", "or_", "xor", "shift_left", "shift_right_arithmetic", "shift_right_logical"):
        outs.append(getattr(b, binary)(n, n))
    outs.append(b.compare(x, x, "LT", "TOTALORDER"))
    outs.append(b.select(b.gt(x, 0.0), x, 0.0))
    outs.append(b.clamp(0.0, x, 1.0))
    outs.append(b.convert_element_type(x, "s32"))
    outs.append(b.bitcast_convert_type(x, "u16"))
    outs.append(b.reduce_precision(x, 5, 10))
    outs.append(b.broadcast(x, (4,)))
    outs.append(b.broadcast_in_dim(x, (2, 5, 3), (0, 2)))
    outs.append(b.reshape(x, (3, 2)))
    outs.append(b.transpose(x, (1, 0)))
    outs.append(b.slice(x, (0, 0), (2, 3), (1, 2)))
    outs.append(b.slice_in_dim(x, 1, 3, 1, 1))
    outs.append(b.dynamic_slice(x, [0, b.constant(1)], (2, 2)))
    outs.append(b.dynamic_update_slice(x, b.constant(np.ones((1, 3), np.float32)), [1, 0]))
    outs.append(b.concat_in_dim([x, x], 0))
    outs.append(b.pad(x, b.constant(np.float32(0)), [(1, 1, 0), (0, -1, 1)]))
    outs.append(b.pad_in_dim(x, b.constant(np.float32(0)), 0, 1, 2))
    outs.append(b.rev(x, (0,)))
    outs.append(b.copy(x))
    outs.append(b.bitcast(x, f32(6)))
    outs.append(b.iota(Shape.array("s32", (2, 3)), 1))
    outs.append(b.reduce(x, b.constant(np.float32(0)), add, (1,)))
    outs.append(b.reduce_window(x, b.constant(np.float32(0)), add, (2, 2), (1, 1), "SAME"))
    outs.append(b.select_and_scatter(x, b.create_scalar_comparator("GE", ["f32"]), (1, 3), (1, 3), "VALID",
                                     b.constant(np.ones((2, 1), np.float32)), b.constant(np.float32(0)), add))
    outs.append(b.dot(x, b.transpose(x, (1, 0))))
    outs.append(b.dot_general(x, x, (1,), (1,), (0,), (0,)))
    outs.append(b.conv_general_dilated(b.reshape(x, (1, 2, 3, 1)), b.constant(np.ones((2, 2, 1, 4), np.float32)),
                                       (1, 1), "SAME"))
    outs.append(b.gather(x, b.constant(np.array([[1], [0]], np.int32)), (1,), (0,), (0,), 1, (1, 3)))
    outs.append(b.scatter(x, b.constant(np.array([[1]], np.int32)), b.constant(np.ones((1, 3), np.float32)), add,
                          (1,), (0,), (0,), 1))
    outs.append(b.sort([x, n], b.create_scalar_comparator("LT", ["f32", "s32"]), is_stable=True))
    outs.append(b.top_k(x, 2))
    outs.append(b.get_tuple_element(b.tuple([x, n]), 1))
    callee = b.create_sub_builder("twice")
    p = callee.parameter(0, f32(2, 3), "p")
    outs.append(b.call(callee.build_computation(p + p), [x]))
    outs.append(b.map([x, x], b.create_scalar_computation("maximum", "f32")))
    outs.append(b.conditional(b.constant(True), x, identity_branch(b, x.shape), x, identity_branch(b, x.shape)))
    outs.append(b.optimization_barrier(b.tuple([x, n])))
    outs.append(b.all_reduce(x, add))
    outs.append(b.all_gather(x, 0, 1))
    outs.append(b.reduce_scatter(x, add, 0, 1))
    outs.append(b.all_to_all(x, 0))
    outs.append(b.collective_permute(x, [(0, 0)]))
    outs.append(b.collective_broadcast(x))
    outs.append(b.async_done(b.all_reduce_start(x, add)))
    outs.append(b.async_done(b.all_gather_start(x, 0, 1)))
    outs.append(b.async_done(b.collective_permute_start(x, [(0, 0)])))
    outs.append(b.replica_id())
    outs.append(b.partition_id())
    outs.append(b.after_all([b.create_token(), b.create_token()]))
    outs.append(b.rng_bit_generator("rng_philox", b.constant(np.zeros(2, np.uint64)), Shape.array("u32", (4,))))
    outs.append(b.rng_uniform(b.constant(np.float32(0)), b.constant(np.float32(1)), f32(3)))
    outs.append(b.rng_get_and_update_state(4))
    outs.append(b.custom_call("xla_teach.identity", [x], f32(2, 3)))
    outs.append(b.while_loop(never_condition(b, x.shape), identity_branch(b, x.shape), x))
    step = b.create_sub_builder("cumulative_sum")
    total = step.parameter(0, f32(2), "x_i") + step.parameter(1, f32(2), "carry")
    outs.append(b.scan([x], [b.broadcast(b.constant(np.float32(0)), (2,))], step.build_computation(
        step.tuple([total, total])), 1, is_associative=True))
    return b.build(b.tuple(outs))


def identity_branch(b: XlaBuilder, shape: Shape) -> HloComputation:
    sub = b.create_sub_builder("identity")
    return sub.build_computation(sub.copy(sub.parameter(0, shape, "p")))


def never_condition(b: XlaBuilder, shape: Shape) -> HloComputation:
    cond = b.create_sub_builder("never")
    cond.parameter(0, shape, "s")
    return cond.build_computation(cond.constant(False))


def test_every_opcode_can_be_built_and_verifies() -> None:
    module = build_everything()
    verify_module(module)
    used = {instr.opcode for instr in module.instructions()}
    assert used == set(OPCODES) - {"fusion"}
    assert_round_trips(module)


# ---------------------------------------------------------------------------------------
# Shapes of individual methods
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("make, expected", [
    (lambda b, x: b.broadcast(x, (4, 5)), "f32[4,5,2,3]"),
    (lambda b, x: b.broadcast_in_dim(b.reshape(x, (2, 1, 3)), (2, 7, 3), (0, 1, 2)), "f32[2,7,3]"),
    (lambda b, x: b.slice(x, (0, 1), (2, 3)), "f32[2,2]"),
    (lambda b, x: b.pad(x, b.constant(np.float32(0)), [(0, 0, 1), (-1, -1, 0)]), "f32[3,1]"),
    (lambda b, x: b.dot_general(x, x, (0,), (0,)), "f32[3,3]"),
    (lambda b, x: b.convert_element_type(x, "bf16"), "bf16[2,3]"),
    (lambda b, x: b.bitcast_convert_type(b.bitcast_convert_type(x, "u8"), "f32"), "f32[2,3]"),
    (lambda b, x: b.reduce_window(x, b.constant(np.float32(0)), b.create_scalar_computation("add", "f32"),
                                  (2, 2), (2, 2), "SAME"), "f32[1,2]"),
    (lambda b, x: b.reduce_window(x, b.constant(np.float32(0)), b.create_scalar_computation("add", "f32"),
                                  (1, 2), (1, 1), [(0, 0), (1, 1)], (1, 2), (1, 2)), "f32[2,5]"),
    (lambda b, x: b.top_k(x, 2), "(f32[2,2], s32[2,2])"),
    (lambda b, x: b.dot(x, b.constant(np.ones(3, np.float32)), preferred_element_type="f64"), "f64[2]"),
    (lambda b, x: b.iota(Shape.array("u8", (4,))), "u8[4]"),
])
def test_method_shapes(make: object, expected: str) -> None:
    b = XlaBuilder("m")
    x = b.parameter(0, f32(2, 3), "x")
    op = make(b, x)  # type: ignore[operator]
    assert text(op) == expected
    verify_module(b.build(op))


def test_variadic_reduce_argmax() -> None:
    b = XlaBuilder("argmax")
    x = b.parameter(0, f32(4, 3), "x")
    idx = b.iota(Shape.array("s32", (4, 3)), 0)
    r = b.create_sub_builder("argmax_reducer")
    v0, i0 = r.parameter(0, F32, "v0"), r.parameter(1, S32, "i0")
    v1, i1 = r.parameter(2, F32, "v1"), r.parameter(3, S32, "i1")
    keep = r.ge(v0, v1)
    r.tuple([r.select(keep, v0, v1), r.select(keep, i0, i1)])
    result = b.reduce([x, idx], [b.constant(-np.inf, "f32"), b.constant(0)], r.build_computation(), (0,))
    assert text(result) == "(f32[3], s32[3])"
    verify_module(b.build())


def test_make_padding_same_and_valid() -> None:
    assert make_padding([5], [3], [2], "SAME") == [(1, 1)]
    assert make_padding([4], [2], [1], "SAME") == [(0, 1)]
    assert make_padding([4, 4], [2, 2], [1, 1], "VALID") == [(0, 0), (0, 0)]
    assert make_padding([4], [2], [1], [(3, 4)]) == [(3, 4)]


# ---------------------------------------------------------------------------------------
# Implicit broadcasting and Python scalars
# ---------------------------------------------------------------------------------------
def test_scalar_and_array_insert_a_broadcast() -> None:
    b = XlaBuilder("m")
    x = b.parameter(0, f32(2, 3), "x")
    s = b.parameter(1, F32, "s")
    y = b.sub(s, x)
    assert text(y) == "f32[2,3]"
    lhs = y.instruction.operand(0)
    assert lhs.opcode == "broadcast" and lhs.attr("dimensions") == ()


def test_broadcast_dimensions_expand_rank() -> None:
    b = XlaBuilder("m")
    x = b.parameter(0, f32(2, 3), "x")
    row = b.parameter(1, f32(3), "row")
    col = b.parameter(2, f32(2), "col")
    assert text(b.add(x, row, broadcast_dimensions=(1,))) == "f32[2,3]"
    y = b.mul(col, x, broadcast_dimensions=(0,))
    assert y.instruction.operand(0).attr("dimensions") == (0,)
    verify_module(b.build())


def test_degenerate_dimensions_stretch() -> None:
    b = XlaBuilder("m")
    a = b.parameter(0, f32(2, 1), "a")
    c = b.parameter(1, f32(1, 3), "c")
    assert text(a + c) == "f32[2,3]"
    verify_module(b.build())


def test_python_scalars_become_constants_of_the_other_type() -> None:
    b = XlaBuilder("m")
    x = b.parameter(0, Shape.array("bf16", (2,)), "x")
    y = 2 * x - 1.5
    constants = [i for i in b.computation.instructions if i.opcode == "constant"]
    assert [c.shape.to_text() for c in constants] == ["bf16[]", "bf16[]"]
    assert text(-y / x) == "bf16[2]"


def test_incompatible_binary_shapes_raise() -> None:
    b = XlaBuilder("m")
    x = b.parameter(0, f32(2, 3), "x")
    y = b.parameter(1, f32(3), "y")
    with pytest.raises(ShapeError) as info:
        b.add(x, y)
    assert str(info.value) == ("add: operand shapes f32[2,3] and f32[3] are incompatible "
                               "(elementwise ops need identical dimensions)")
    with pytest.raises(ShapeError, match="broadcast_dimensions"):
        b.add(x, y, broadcast_dimensions=(0, 1))


# ---------------------------------------------------------------------------------------
# Constants, names, metadata
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("value, dtype, expected", [
    (np.float32(1), None, "f32[]"),
    (1.5, None, "f32[]"),
    (3, None, "s32[]"),
    (True, None, "pred[]"),
    (np.arange(4.0), None, "f64[4]"),
    ([[1, 2], [3, 4]], None, "s32[2,2]"),
    (1.0, "bf16", "bf16[]"),
    (7, np.uint8, "u8[]"),
])
def test_constant_types(value: object, dtype: object, expected: str) -> None:
    b = XlaBuilder("m")
    op = b.constant(value, dtype)
    assert text(op) == expected
    assert op.instruction.literal.dtype == op.shape.dtype


def test_names_default_to_opcode_or_keyword() -> None:
    b = XlaBuilder("m")
    x = b.parameter(0, f32(2), "x")
    a1, a2 = b.add(x, x), b.add(x, x)
    named = b.neg(x, name="minus_x")
    assert (a1.name, a2.name, named.name) == ("add", "add.1", "minus_x")


def test_metadata_context_and_setter() -> None:
    b = XlaBuilder("m")
    x = b.parameter(0, f32(2), "x")
    with b.op_metadata(op_name="jit(f)/neg", source_line=7):
        y = b.neg(x)
    z = b.exp(y)
    b.set_op_metadata(OpMetadata({"op_type": "Tanh"}))
    w = b.tanh(z)
    b.clear_op_metadata()
    module = b.build(w)
    assert y.instruction.metadata is not None and y.instruction.metadata.fields == {"op_name": "jit(f)/neg",
                                                                                    "source_line": 7}
    assert z.instruction.metadata is None
    assert 'negate(%x), metadata={op_name="jit(f)/neg" source_line=7}' in module.to_text()
    assert 'tanh(%exponential), metadata={op_type="Tanh"}' in module.to_text()


# ---------------------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------------------
def test_op_from_another_builder_is_rejected() -> None:
    b1, b2 = XlaBuilder("one"), XlaBuilder("two")
    x1 = b1.parameter(0, f32(2), "x")
    x2 = b2.parameter(0, f32(2), "x")
    with pytest.raises(ShapeError) as info:
        b2.add(x1, x2)
    assert "was built by builder 'one', not by 'two'" in str(info.value)
    sub = b1.create_sub_builder("sub")
    with pytest.raises(ShapeError, match="built by builder 'one', not by 'sub'"):
        sub.neg(x1)


def test_shape_errors_name_the_op_and_operands() -> None:
    b = XlaBuilder("m")
    x = b.parameter(0, f32(2, 3), "x")
    with pytest.raises(ShapeError) as info:
        b.dot(x, x)
    assert str(info.value).startswith("dot: contracting dimension sizes differ")
    assert "f32[2,3]" in str(info.value)
    with pytest.raises(ShapeError, match=r"^reshape %r: cannot reshape f32\[2,3\]"):
        b.reshape(x, (5,), name="r")
    with pytest.raises(ShapeError, match="is not built yet"):
        b.reduce(x, b.constant(np.float32(0)), b.create_sub_builder("unfinished").computation, (0,))


def test_builder_lifecycle_errors() -> None:
    b = XlaBuilder("m")
    x = b.parameter(0, f32(2), "x")
    with pytest.raises(ShapeError, match="parameter number 0"):
        b.parameter(0, f32(2))
    sub = b.create_sub_builder("sub")
    with pytest.raises(ValueError, match="build_computation"):
        sub.build()
    with pytest.raises(ValueError, match="call build"):
        b.build_computation()
    b.build(x)
    with pytest.raises(ShapeError, match="already built"):
        b.neg(x)


def test_unused_sub_computations_are_dropped() -> None:
    b = XlaBuilder("m")
    x = b.parameter(0, f32(2), "x")
    b.create_scalar_computation("add", "f32")
    b.create_sub_builder("never_built").parameter(0, F32)
    module = b.build(b.neg(x))
    assert [c.name for c in module.computations] == ["main"]
