"""algsimp: one golden before/after case per rule (checked on random inputs by check_pass),
the exact rules also on NaN/inf/-0.0 inputs bit for bit, and the documented non-rewrites."""

from __future__ import annotations

import numpy as np
import pytest

from tests.passes.pass_test_utils import assert_bitwise_same, check_pass
from xla_teach.hlo.evaluator import evaluate_module
from xla_teach.hlo.text.parser import parse_hlo
from xla_teach.passes.simplifiers.algebraic_simplifier import ALL_RULES, AlgebraicSimplifier

SUM = """
sum {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
"""

# name -> (before, expected after); ENTRY bodies only, "HloModule m" is added.
CASES: dict[str, tuple[str, str]] = {
    "integer_identities": ("""
ENTRY main {
  x = s32[4] parameter(0)
  zero = s32[] constant(0)
  zeros = s32[4] broadcast(zero), dimensions={}
  one = s32[] constant(1)
  ones = s32[4] broadcast(one), dimensions={}
  a = s32[4] add(zeros, x)
  m = s32[4] multiply(a, ones)
  s = s32[4] subtract(m, zeros)
  d = s32[4] divide(s, ones)
  z = s32[4] multiply(d, zeros)
  ROOT t = (s32[4], s32[4]) tuple(d, z)
}""", """
ENTRY main {
  x = s32[4] parameter(0)
  zero = s32[] constant(0)
  zeros = s32[4] broadcast(zero), dimensions={}
  ROOT t = (s32[4], s32[4]) tuple(x, zeros)
}"""),
    "integer_self_subtract_and_compare": ("""
ENTRY main {
  i = s32[4] parameter(0)
  d = s32[4] subtract(i, i)
  eq = pred[4] compare(i, i), direction=LT
  ROOT r = (s32[4], pred[4]) tuple(d, eq)
}""", """
ENTRY main {
  i = s32[4] parameter(0)
  constant = s32[] constant(0)
  broadcast = s32[4] broadcast(constant), dimensions={}
  constant.1 = pred[] constant(false)
  broadcast.1 = pred[4] broadcast(constant.1), dimensions={}
  ROOT r = (s32[4], pred[4]) tuple(broadcast, broadcast.1)
}"""),
    "divide_by_power_of_two": ("""
ENTRY main {
  x = f32[4] parameter(0)
  c = f32[] constant(4)
  b = f32[4] broadcast(c), dimensions={}
  ROOT d = f32[4] divide(x, b)
}""", """
ENTRY main {
  x = f32[4] parameter(0)
  constant = f32[] constant(0.25)
  broadcast = f32[4] broadcast(constant), dimensions={}
  ROOT multiply = f32[4] multiply(x, broadcast)
}"""),
    "involutions_and_idempotent_ops": ("""
ENTRY main {
  x = f32[4] parameter(0)
  p = pred[4] parameter(1)
  n1 = f32[4] negate(x)
  n2 = f32[4] negate(n1)
  a1 = f32[4] abs(n2)
  a2 = f32[4] abs(a1)
  mx = f32[4] maximum(a2, a2)
  q1 = pred[4] not(p)
  q2 = pred[4] not(q1)
  ROOT t = (f32[4], pred[4]) tuple(mx, q2)
}""", """
ENTRY main {
  x = f32[4] parameter(0)
  a1 = f32[4] abs(x)
  p = pred[4] parameter(1)
  ROOT t = (f32[4], pred[4]) tuple(a1, p)
}"""),
    "power_with_small_exponents": ("""
ENTRY main {
  x = f32[4] parameter(0)
  c0 = f32[] constant(0)
  c1 = f32[] constant(1)
  c2 = f32[] constant(2)
  b0 = f32[4] broadcast(c0), dimensions={}
  b1 = f32[4] broadcast(c1), dimensions={}
  b2 = f32[4] broadcast(c2), dimensions={}
  p0 = f32[4] power(x, b0)
  p1 = f32[4] power(x, b1)
  p2 = f32[4] power(x, b2)
  ROOT t = (f32[4], f32[4], f32[4]) tuple(p0, p1, p2)
}""", """
ENTRY main {
  constant = f32[] constant(1)
  broadcast = f32[4] broadcast(constant), dimensions={}
  x = f32[4] parameter(0)
  multiply = f32[4] multiply(x, x)
  ROOT t = (f32[4], f32[4], f32[4]) tuple(broadcast, x, multiply)
}"""),
    "power_minus_one": ("""
ENTRY main {
  x = f32[4] parameter(0)
  c = f32[] constant(-1)
  b = f32[4] broadcast(c), dimensions={}
  ROOT p = f32[4] power(x, b)
}""", """
ENTRY main {
  constant = f32[] constant(1)
  broadcast = f32[4] broadcast(constant), dimensions={}
  x = f32[4] parameter(0)
  ROOT divide = f32[4] divide(broadcast, x)
}"""),
    "select_with_constant_or_equal_choices": ("""
ENTRY main {
  x = f32[4] parameter(0)
  y = f32[4] parameter(1)
  t = pred[] constant(true)
  bt = pred[4] broadcast(t), dimensions={}
  s1 = f32[4] select(bt, x, y)
  f = pred[4] constant({0, 0, 0, 0})
  s2 = f32[4] select(f, x, y)
  p = pred[4] parameter(2)
  s3 = f32[4] select(p, y, y)
  ROOT r = (f32[4], f32[4], f32[4]) tuple(s1, s2, s3)
}""", """
ENTRY main {
  p = pred[4] parameter(2)
  x = f32[4] parameter(0)
  y = f32[4] parameter(1)
  ROOT r = (f32[4], f32[4], f32[4]) tuple(x, y, y)
}"""),
    "compare_of_constants": ("""
ENTRY main {
  c1 = f32[] constant(1)
  c2 = f32[] constant(2)
  b1 = f32[4] broadcast(c1), dimensions={}
  b2 = f32[4] broadcast(c2), dimensions={}
  ROOT lt = pred[4] compare(b1, b2), direction=LT
}""", """
ENTRY main {
  constant = pred[] constant(true)
  ROOT broadcast = pred[4] broadcast(constant), dimensions={}
}"""),
    "sink_broadcast_below_elementwise_ops": ("""
ENTRY main {
  a = f32[3] parameter(0)
  b = f32[3] parameter(1)
  ba = f32[2,3] broadcast(a), dimensions={1}
  bb = f32[2,3] broadcast(b), dimensions={1}
  m = f32[2,3] multiply(ba, bb)
  ROOT e = f32[2,3] exponential(m)
}""", """
ENTRY main {
  a = f32[3] parameter(0)
  b = f32[3] parameter(1)
  multiply = f32[3] multiply(a, b)
  exponential = f32[3] exponential(multiply)
  ROOT broadcast.1 = f32[2,3] broadcast(exponential), dimensions={1}
}"""),
    "no_op_data_movement": ("""
ENTRY main {
  x = f32[2,3] parameter(0)
  r = f32[2,3] reshape(x)
  t = f32[2,3] transpose(r), dimensions={0,1}
  b = f32[2,3] broadcast(t), dimensions={0,1}
  c = f32[2,3] convert(b)
  s = f32[2,3] slice(c), slice={[0:2], [0:3]}
  z = f32[] constant(0)
  p = f32[2,3] pad(s, z), padding=0_0x0_0
  cp = f32[2,3] copy(p)
  cc = f32[2,3] concatenate(cp), dimensions={0}
  ROOT rv = f32[2,3] reverse(cc), dimensions={}
}""", """
ENTRY main {
  ROOT x = f32[2,3] parameter(0)
}"""),
    "reshape_and_transpose_chains": ("""
ENTRY main {
  x = f32[2,3,4] parameter(0)
  r1 = f32[6,4] reshape(x)
  r2 = f32[24] reshape(r1)
  t1 = f32[4,2,3] transpose(x), dimensions={2,0,1}
  t2 = f32[3,4,2] transpose(t1), dimensions={2,0,1}
  t3 = f32[2,3,4] transpose(t1), dimensions={1,2,0}
  ROOT t = (f32[24], f32[3,4,2], f32[2,3,4]) tuple(r2, t2, t3)
}""", """
ENTRY main {
  x = f32[2,3,4] parameter(0)
  reshape = f32[24] reshape(x)
  transpose = f32[3,4,2] transpose(x), dimensions={1,2,0}
  ROOT t = (f32[24], f32[3,4,2], f32[2,3,4]) tuple(reshape, transpose, x)
}"""),
    "transpose_of_size_one_dims_is_a_reshape": ("""
ENTRY main {
  x = f32[1,4,1,3] parameter(0)
  ROOT t = f32[4,1,3,1] transpose(x), dimensions={1,0,3,2}
}""", """
ENTRY main {
  x = f32[1,4,1,3] parameter(0)
  ROOT reshape = f32[4,1,3,1] reshape(x)
}"""),
    "broadcast_chains": ("""
ENTRY main {
  x = f32[3] parameter(0)
  b1 = f32[2,3] broadcast(x), dimensions={1}
  b2 = f32[4,2,3] broadcast(b1), dimensions={1,2}
  s = f32[] constant(1)
  bs = f32[2,6] broadcast(s), dimensions={}
  r = f32[3,4] reshape(bs)
  ROOT t = (f32[4,2,3], f32[3,4]) tuple(b2, r)
}""", """
ENTRY main {
  x = f32[3] parameter(0)
  broadcast = f32[4,2,3] broadcast(x), dimensions={2}
  s = f32[] constant(1)
  broadcast.1 = f32[3,4] broadcast(s), dimensions={}
  ROOT t = (f32[4,2,3], f32[3,4]) tuple(broadcast, broadcast.1)
}"""),
    "slice_of_slice": ("""
ENTRY main {
  x = f32[20] parameter(0)
  s1 = f32[8] slice(x), slice={[2:18:2]}
  s2 = f32[3] slice(s1), slice={[1:8:3]}
  ROOT n = f32[3] negate(s2)
}""", """
ENTRY main {
  x = f32[20] parameter(0)
  slice = f32[3] slice(x), slice={[4:17:6]}
  ROOT n = f32[3] negate(slice)
}"""),
    "concatenate_simplifications": ("""
ENTRY main {
  a = f32[2,3] parameter(0)
  b = f32[2,5] parameter(1)
  e = f32[2,0] parameter(2)
  c = f32[2,8] concatenate(a, e, b), dimensions={1}
  s = f32[2,5] slice(c), slice={[0:2], [3:8]}
  c2 = f32[2,8] concatenate(a, e, b), dimensions={1}
  ROOT t = (f32[2,5], f32[2,8]) tuple(s, c2)
}""", """
ENTRY main {
  e = f32[2,0] parameter(2)
  b = f32[2,5] parameter(1)
  a = f32[2,3] parameter(0)
  concatenate.1 = f32[2,8] concatenate(a, b), dimensions={1}
  ROOT t = (f32[2,5], f32[2,8]) tuple(b, concatenate.1)
}"""),
    "reverse_of_reverse": ("""
ENTRY main {
  x = f32[4,3] parameter(0)
  r1 = f32[4,3] reverse(x), dimensions={0,1}
  r2 = f32[4,3] reverse(r1), dimensions={1,0}
  ROOT n = f32[4,3] negate(r2)
}""", """
ENTRY main {
  x = f32[4,3] parameter(0)
  ROOT n = f32[4,3] negate(x)
}"""),
    "reduce_over_size_one_dims_with_identity_init": (SUM + """
ENTRY main {
  x = f32[4,1,3] parameter(0)
  zero = f32[] constant(0)
  ROOT r = f32[4,3] reduce(x, zero), dimensions={1}, to_apply=sum
}""", SUM + """
ENTRY main {
  x = f32[4,1,3] parameter(0)
  ROOT reshape = f32[4,3] reshape(x)
}"""),
    "reduce_over_size_one_dims_with_any_init": ("""
mx {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] maximum(b, a)
}
ENTRY main {
  x = f32[1,3] parameter(0)
  init = f32[] parameter(1)
  ROOT r = f32[3] reduce(x, init), dimensions={0}, to_apply=mx
}""", """
mx {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] maximum(b, a)
}
ENTRY main {
  x = f32[1,3] parameter(0)
  reshape = f32[3] reshape(x)
  init = f32[] parameter(1)
  broadcast = f32[3] broadcast(init), dimensions={}
  ROOT maximum = f32[3] maximum(reshape, broadcast)
}"""),
    "reduce_over_some_size_one_dims": (SUM + """
ENTRY main {
  x = f32[4,1,5,1] parameter(0)
  zero = f32[] constant(0)
  ROOT r = f32[1] reduce(x, zero), dimensions={0,2,3}, to_apply=sum
}""", SUM + """
ENTRY main {
  x = f32[4,1,5,1] parameter(0)
  reshape = f32[4,1,5] reshape(x)
  zero = f32[] constant(0)
  ROOT reduce = f32[1] reduce(reshape, zero), dimensions={0,2}, to_apply=sum
}"""),
    "variadic_reduce_over_some_size_one_dims": ("""
argmax {
  a = f32[] parameter(0)
  i = s32[] parameter(1)
  b = f32[] parameter(2)
  j = s32[] parameter(3)
  ge = pred[] compare(a, b), direction=GE
  m = f32[] select(ge, a, b)
  k = s32[] select(ge, i, j)
  ROOT t = (f32[], s32[]) tuple(m, k)
}
ENTRY main {
  x = f32[1,6] parameter(0)
  idx = s32[1,6] iota(), iota_dimension=1
  lo = f32[] constant(-inf)
  zero = s32[] constant(0)
  ROOT r = (f32[], s32[]) reduce(x, idx, lo, zero), dimensions={0,1}, to_apply=argmax
}""", """
argmax {
  a = f32[] parameter(0)
  i = s32[] parameter(1)
  b = f32[] parameter(2)
  j = s32[] parameter(3)
  ge = pred[] compare(a, b), direction=GE
  m = f32[] select(ge, a, b)
  k = s32[] select(ge, i, j)
  ROOT t = (f32[], s32[]) tuple(m, k)
}
ENTRY main {
  x = f32[1,6] parameter(0)
  reshape = f32[6] reshape(x)
  idx = s32[1,6] iota(), iota_dimension=1
  reshape.1 = s32[6] reshape(idx)
  lo = f32[] constant(-inf)
  zero = s32[] constant(0)
  ROOT reduce = (f32[], s32[]) reduce(reshape, reshape.1, lo, zero), dimensions={0}, to_apply=argmax
}"""),
    "reduce_of_empty_array": (SUM + """
ENTRY main {
  x = f32[0,3] parameter(0)
  init = f32[] constant(1)
  ROOT r = f32[3] reduce(x, init), dimensions={0}, to_apply=sum
}""", SUM + """
ENTRY main {
  x = f32[0,3] parameter(0)
  init = f32[] constant(1)
  ROOT broadcast = f32[3] broadcast(init), dimensions={}
}"""),
    "dot_outer_product": ("""
ENTRY main {
  a = f32[4,1] parameter(0)
  b = f32[1,5] parameter(1)
  ROOT d = f32[4,5] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}""", """
ENTRY main {
  a = f32[4,1] parameter(0)
  reshape = f32[4] reshape(a)
  broadcast = f32[4,5] broadcast(reshape), dimensions={0}
  b = f32[1,5] parameter(1)
  reshape.1 = f32[5] reshape(b)
  broadcast.1 = f32[4,5] broadcast(reshape.1), dimensions={1}
  ROOT multiply = f32[4,5] multiply(broadcast, broadcast.1)
}"""),
    "batched_dot_with_size_one_contraction": ("""
ENTRY main {
  a = f32[2,1,4] parameter(0)
  b = f32[2,3,1] parameter(1)
  ROOT d = f32[2,4,3] dot(a, b), lhs_batch_dims={0}, lhs_contracting_dims={1}, rhs_batch_dims={0}, rhs_contracting_dims={2}
}""", """
ENTRY main {
  a = f32[2,1,4] parameter(0)
  reshape = f32[2,4] reshape(a)
  broadcast = f32[2,4,3] broadcast(reshape), dimensions={0,1}
  b = f32[2,3,1] parameter(1)
  reshape.1 = f32[2,3] reshape(b)
  broadcast.1 = f32[2,4,3] broadcast(reshape.1), dimensions={0,2}
  ROOT multiply = f32[2,4,3] multiply(broadcast, broadcast.1)
}"""),
    "transpose_of_matrix_product": ("""
ENTRY main {
  g = f32[6,5] parameter(0)
  x = f32[6,4] parameter(1)
  d = f32[5,4] dot(g, x), lhs_contracting_dims={0}, rhs_contracting_dims={0}, operand_precision={high,default}
  ROOT t = f32[4,5] transpose(d), dimensions={1,0}
}""", """
ENTRY main {
  g = f32[6,5] parameter(0)
  x = f32[6,4] parameter(1)
  ROOT dot = f32[4,5] dot(x, g), lhs_contracting_dims={0}, rhs_contracting_dims={0}, operand_precision={default,high}
}"""),
}

# Checked bit for bit on NaN/inf/-0.0 inputs. pow(x, -1) -> 1/x is documented as possibly one ulp
# off; these differ only in the sign of a zero result, as documented (x + 0 -> x; a dot sums from
# +0.0, so a single product -0.0 comes out +0.0 but a multiply keeps -0.0):
SIGN_OF_ZERO = ("reduce_over_size_one_dims_with_identity_init", "dot_outer_product",
                "batched_dot_with_size_one_contraction")
SPECIAL_VALUE_CASES = [name for name in CASES if name != "power_minus_one"]


def _module(body: str) -> str:
    return "HloModule m\n" + body


@pytest.mark.parametrize("name", CASES)
def test_rule(name: str) -> None:
    before, after = CASES[name]
    check_pass(AlgebraicSimplifier(), _module(before), _module(after))


@pytest.mark.parametrize("name", SPECIAL_VALUE_CASES)
def test_rules_on_special_values(name: str) -> None:
    before = parse_hlo(_module(CASES[name][0]))
    after = before.clone()
    AlgebraicSimplifier().run(after)
    assert_bitwise_same(before, after, signed_zero_ok=name in SIGN_OF_ZERO)


@pytest.mark.parametrize("body", [
    # x * 0 for floats: NaN * 0 and inf * 0 are NaN, -1 * 0 is -0.0
    """
ENTRY main {
  x = f32[4] parameter(0)
  zero = f32[] constant(0)
  zeros = f32[4] broadcast(zero), dimensions={}
  ROOT m = f32[4] multiply(x, zeros)
}""",
    # x - x and x == x for floats: inf - inf and NaN == NaN
    """
ENTRY main {
  x = f32[4] parameter(0)
  s = f32[4] subtract(x, x)
  e = pred[4] compare(x, x), direction=EQ
  ROOT t = (f32[4], pred[4]) tuple(s, e)
}""",
    # pow(x, 0.5) is not sqrt(x): pow(-0, 0.5) = +0, sqrt(-0) = -0; pow(-inf, 0.5) = inf
    """
ENTRY main {
  x = f32[4] parameter(0)
  h = f32[] constant(0.5)
  b = f32[4] broadcast(h), dimensions={}
  ROOT p = f32[4] power(x, b)
}""",
    # x / 3 -> x * (1/3) would round differently
    """
ENTRY main {
  x = f32[4] parameter(0)
  c = f32[] constant(3)
  b = f32[4] broadcast(c), dimensions={}
  ROOT d = f32[4] divide(x, b)
}""",
    # a copy that changes the layout moves data
    """
ENTRY main {
  x = f32[2,3]{1,0} parameter(0)
  ROOT c = f32[2,3]{0,1} copy(x)
}""",
    # an ordinary dot
    """
ENTRY main {
  a = f32[4,2] parameter(0)
  b = f32[2,5] parameter(1)
  ROOT d = f32[4,5] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}""",
    # transpose(dot) is left alone when the product is also used as it is (it would be computed
    # twice), and for a batched product
    """
ENTRY main {
  a = f32[4,3] parameter(0)
  b = f32[3,5] parameter(1)
  d = f32[4,5] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  t = f32[5,4] transpose(d), dimensions={1,0}
  ROOT r = (f32[4,5], f32[5,4]) tuple(d, t)
}""",
    """
ENTRY main {
  a = f32[2,4,3] parameter(0)
  b = f32[2,3,5] parameter(1)
  d = f32[2,4,5] dot(a, b), lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={1}
  ROOT t = f32[2,5,4] transpose(d), dimensions={0,2,1}
}""",
])
def test_not_rewritten(body: str) -> None:
    check_pass(AlgebraicSimplifier(), _module(body), None)


def test_x_plus_zero_differs_only_for_negative_zero_as_documented() -> None:
    before = parse_hlo(_module("""
ENTRY main {
  x = f32[3] parameter(0)
  zero = f32[] constant(0)
  zeros = f32[3] broadcast(zero), dimensions={}
  ROOT a = f32[3] add(x, zeros)
}"""))
    after = before.clone()
    assert AlgebraicSimplifier().run(after)
    x = np.array([-0.0, np.nan, -np.inf], np.float32)
    (want,), (got,) = evaluate_module(before, [x]), evaluate_module(after, [x])
    assert np.signbit(got[0]) and not np.signbit(want[0])  # -0.0 + 0.0 = +0.0, the rewrite keeps -0.0
    np.testing.assert_array_equal(got[1:], want[1:])


def test_every_rule_has_a_name_and_opcodes() -> None:
    names = [r.name for r in ALL_RULES]
    assert len(names) == len(set(names))
    assert all(r.opcodes for r in ALL_RULES)


def test_notes_name_the_rule_that_fired() -> None:
    module = parse_hlo(_module(CASES["reverse_of_reverse"][0]))
    simplifier = AlgebraicSimplifier()
    simplifier.run(module)
    assert any("reverse(reverse(x)) -> x" in n for n in simplifier.notes)


def test_the_docstring_rule_table_is_generated_from_the_rules() -> None:
    import xla_teach.passes.simplifiers.algebraic_simplifier as algsimp

    doc = algsimp.__doc__ or ""
    table = doc[doc.index("Rule table:"):]
    flat = " ".join(table.split())
    for rule in algsimp.ALL_RULES:
        assert " ".join(rule.name.split()) in flat, rule.name
    assert table.count("\n") >= len(algsimp.ALL_RULES) + 4
