"""Parser and printer: XLA's syntax in, the same text out, clear errors for bad text."""

from __future__ import annotations

import numpy as np
import pytest

from xla_teach.hlo.shape import Shape
from xla_teach.hlo.text.parser import HloParseError, parse_hlo, parse_shape

AXPY_LONG = """\
HloModule axpy_sum, entry_computation_layout={(f32[], f32[4,3]{1,0}, f32[4,3]{1,0})->(f32[4,3]{1,0}, f32[3]{0})}

%sum (lhs: f32[], rhs: f32[]) -> f32[] {
  %lhs = f32[] parameter(0)
  %rhs = f32[] parameter(1)
  ROOT %add.0 = f32[] add(f32[] %lhs, f32[] %rhs)
}

ENTRY %main (alpha: f32[], x: f32[4,3], y: f32[4,3]) -> (f32[4,3], f32[3]) {
  %alpha = f32[] parameter(0), metadata={op_name="alpha"}
  %x = f32[4,3]{1,0} parameter(1)
  %y = f32[4,3]{1,0} parameter(2)
  %alpha_b = f32[4,3]{1,0} broadcast(f32[] %alpha), dimensions={}
  %ax = f32[4,3]{1,0} multiply(%alpha_b, %x), metadata={op_type="Mul" op_name="axpy/mul" source_file="demo.py" source_line=7}
  %axpy = f32[4,3]{1,0} add(%ax, %y)
  %zero = f32[] constant(0)
  %colsum = f32[3]{0} reduce(%axpy, %zero), dimensions={0}, to_apply=%sum
  ROOT %out = (f32[4,3]{1,0}, f32[3]{0}) tuple(%axpy, %colsum)
}
"""

LOOP_SHORT = """\
HloModule loop_and_branch

cond {
  s = (s32[], f32[3]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(4)
  ROOT keep_going = pred[] compare(i, n), direction=LT
}

body {
  s = (s32[], f32[3]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  v = f32[3] get-tuple-element(s), index=1
  one = s32[] constant(1)
  i_next = s32[] add(i, one)
  two = f32[] constant(2)
  two_b = f32[3] broadcast(two), dimensions={}
  v_next = f32[3] multiply(v, two_b)
  ROOT s_next = (s32[], f32[3]) tuple(i_next, v_next)
}

neg_branch {
  p = f32[3] parameter(0)
  ROOT r = f32[3] negate(p)
}

id_branch {
  p = f32[3] parameter(0)
  ROOT r = f32[3] copy(p)
}

ENTRY main {
  v0 = f32[3] parameter(0)
  k = s32[] parameter(1)
  zero = s32[] constant(0)
  init = (s32[], f32[3]) tuple(zero, v0)
  loop = (s32[], f32[3]) while(init), condition=cond, body=body
  v4 = f32[3] get-tuple-element(loop), index=1
  ROOT picked = f32[3] conditional(k, v4, v4), branch_computations={neg_branch, id_branch}
}
"""

WINDOWS = """\
HloModule conv_and_friends, replica_count=1

%max (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %m = f32[] maximum(%a, %b)
}

ENTRY %main (img: f32[1,6,6,2], k: f32[3,3,2,4]) -> (f32[1,3,3,4], f32[1,3,3,2], f32[1,4,4,2]) {
  %img = f32[1,6,6,2]{3,2,1,0} parameter(0)
  %k = f32[3,3,2,4]{3,2,1,0} parameter(1)
  %conv = f32[1,3,3,4]{3,2,1,0} convolution(%img, %k), window={size=3x3 stride=2x2 pad=1_0x1_0}, dim_labels=b01f_01io->b01f
  %ninf = f32[] constant(-inf)
  %pool = f32[1,3,3,2]{3,2,1,0} reduce-window(%img, %ninf), window={size=1x2x2x1 stride=1x2x2x1}, to_apply=%max
  %sl = f32[1,4,4,2]{3,2,1,0} slice(%img), slice={[0:1], [1:5], [1:5], [0:2]}
  ROOT %t = (f32[1,3,3,4]{3,2,1,0}, f32[1,3,3,2]{3,2,1,0}, f32[1,4,4,2]{3,2,1,0}) tuple(%conv, %pool, %sl)
}
"""


def _is_fixed_point(text: str) -> str:
    """print(parse(text)) must parse and print back to itself."""
    printed = parse_hlo(text).to_text()
    assert parse_hlo(printed).to_text() == printed
    return printed


def test_long_form_with_old_operand_shapes_and_metadata() -> None:
    module = parse_hlo(AXPY_LONG)
    assert module.name == "axpy_sum"
    assert module.entry.name == "main"
    assert [c.name for c in module.computations] == ["sum", "main"]
    ax = module.entry.instruction("ax")
    assert ax.metadata is not None and ax.metadata.get("source_line") == 7
    assert module.entry.instruction("colsum").to_apply is module.computation("sum")
    printed = _is_fixed_point(AXPY_LONG)
    assert "add(%lhs, %rhs)" in printed  # operand shapes dropped as current XLA prints
    assert 'metadata={op_type="Mul" op_name="axpy/mul" source_file="demo.py" source_line=7}' in printed


def test_short_form_while_and_index_conditional() -> None:
    module = parse_hlo(LOOP_SHORT)
    picked = module.entry.root
    assert picked.opcode == "conditional"
    assert [c.name for c in picked.branch_computations()] == ["neg_branch", "id_branch"]
    # A name reused in another computation is renamed with a .N suffix, as XLA does.
    names = [i.name for i in module.instructions()]
    assert len(names) == len(set(names))
    assert module.computation("body").parameter(0).name == "s.1"
    short = module.to_text(long_form=False)
    assert "\nENTRY main {\n" in short and "%" not in short
    assert parse_hlo(short).to_text(long_form=False) == short
    _is_fixed_point(LOOP_SHORT)


def test_windows_slices_and_dim_labels_round_trip() -> None:
    printed = _is_fixed_point(WINDOWS)
    assert "window={size=3x3 stride=2x2 pad=1_0x1_0}, dim_labels=b01f_01io->b01f" in printed
    assert "slice={[0:1], [1:5], [1:5], [0:2]}" in printed
    assert "HloModule conv_and_friends, entry_computation_layout=" in printed
    assert printed.splitlines()[0].endswith("replica_count=1")


def test_topk_prints_largest_as_xla_does() -> None:
    """XLA always prints ``largest=`` after ``k=``, even at its default ``true``; the builder's
    topk sets it, and text that leaves it out still prints back without it."""
    from xla_teach import XlaBuilder
    from xla_teach.hlo.shape import Shape

    text = """HloModule m
ENTRY main {
  x = f32[3,8] parameter(0)
  ROOT t = (f32[3,2], s32[3,2]) topk(x), k=2, largest=true
}"""
    assert "topk(%x), k=2, largest=true\n" in _is_fixed_point(text)
    b = XlaBuilder("m")
    built = b.build(b.top_k(b.parameter(0, Shape.array("f32", (3, 8))), 2)).to_text()
    assert "k=2, largest=true\n" in built
    assert "topk(%x), k=2\n" in _is_fixed_point(text.replace(", largest=true", ""))


def test_topk_reads_is_stable_as_jax_0_11_writes_it() -> None:
    text = """HloModule m
ENTRY main {
  x = f32[3,8] parameter(0)
  ROOT t = (f32[3,2], s32[3,2]) topk(x), k=2, largest=true, is_stable=true
}"""
    assert "topk(%x), k=2, largest=true, is_stable=true\n" in _is_fixed_point(text)


def test_scan_reads_and_prints_as_jax_0_11_writes_it() -> None:
    text = """HloModule m
region_0.1 {
  cumsum.3 = f32[5]{0} parameter(0)
  cumsum.4 = f32[5]{0} parameter(1)
  cumsum.5 = f32[5]{0} add(cumsum.3, cumsum.4)
  ROOT tuple.1 = (f32[5]{0}, f32[5]{0}) tuple(cumsum.5, cumsum.5)
}
ENTRY main {
  Arg_0.2 = f32[5,1]{1,0} parameter(0)
  constant.1 = f32[] constant(0)
  broadcast.1 = f32[5]{0} broadcast(constant.1), dimensions={}
  cumsum.9 = (f32[5,1]{1,0}, f32[5]{0}) scan(Arg_0.2, broadcast.1), dimensions={1}, num_carries=1, is_associative=true, to_apply=region_0.1
  ROOT cumsum.10 = f32[5,1]{1,0} get-tuple-element(cumsum.9), index=0
}"""
    assert ("scan(%Arg_0.2, %broadcast.1), dimensions={1}, num_carries=1, is_associative=true, "
            "to_apply=%region_0.1\n") in _is_fixed_point(text)


def test_compare_order_total_is_the_total_order_jax_0_11_sorts_by() -> None:
    """JAX 0.11's sort comparators say ``order=TOTAL``: NaN sorts last (above +inf), -0 before +0.
    Oracle: NumPy's sort of the same floats (which puts NaN last; -0 and +0 are equal there, so
    the signs are checked on their own)."""
    from xla_teach.api import execute

    text = """HloModule m
less {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT lt = pred[] compare(a, b), direction=LT, order=TOTAL
}
ENTRY main {
  x = f32[6] parameter(0)
  ROOT s = f32[6] sort(x), dimensions={0}, to_apply=less
}"""
    assert "direction=LT, type=TOTALORDER" in parse_hlo(text).to_text()
    x = np.array([np.nan, 3.0, 0.0, -np.inf, -0.0, 1.0], np.float32)
    for backend in ("interpreter", "cpu"):
        got = execute(text, [x], backend)[0]
        np.testing.assert_array_equal(got, np.sort(x))
        assert list(np.signbit(got[1:3])) == [True, False]
    with pytest.raises(HloParseError, match="contradicts type=FLOAT"):
        parse_hlo(text.replace("order=TOTAL", "order=TOTAL, type=FLOAT"))
    with pytest.raises(HloParseError, match="must be TOTAL or PARTIAL"):
        parse_hlo(text.replace("order=TOTAL", "order=WEAK"))


def test_an_operand_hash_index_is_that_element_of_a_tuple() -> None:
    """JAX 0.11's text writes a call's results as ``%c#0``, ``%c#1``: the parser makes one
    get-tuple-element per tuple and index, placed before its first user, and the module runs as the
    explicit form does (oracle: the same module written with get-tuple-elements)."""
    from xla_teach.api import execute

    short = """HloModule m
f {
  a = f32[3] parameter(0)
  n = f32[3] negate(a)
  ROOT t = (f32[3], f32[3]) tuple(a, n)
}
ENTRY main {
  x = f32[3] parameter(0)
  c = (f32[3], f32[3]) call(x), to_apply=f
  s = f32[3] subtract(%c#0, %c#1)
  ROOT m = f32[3] multiply(s, c#1)
}"""
    explicit = short.replace("subtract(%c#0, %c#1)", "subtract(c0, c1)").replace("multiply(s, c#1)", "multiply(s, c1)")
    explicit = explicit.replace("  s = ", "  c0 = f32[3] get-tuple-element(c), index=0\n"
                                          "  c1 = f32[3] get-tuple-element(c), index=1\n  s = ")
    module = parse_hlo(short)
    elements = [i for i in module.entry.instructions if i.opcode == "get-tuple-element"]
    assert [i.attr("index") for i in elements] == [0, 1]
    names = [i.name for i in module.entry.instructions]
    assert names.index(elements[1].name) < names.index("s")
    x = np.array([1.0, -2.0, 3.0], np.float32)
    np.testing.assert_array_equal(execute(short, [x], "interpreter")[0], execute(explicit, [x], "interpreter")[0])
    with pytest.raises(HloParseError, match=r"'c#2': 'c' is \(f32\[3\]\{0\}, f32\[3\]\{0\}\), which has no tuple element 2"):
        parse_hlo(short.replace("%c#1)", "%c#2)"))


@pytest.mark.parametrize(
    ("literal", "shape", "expected"),
    [
        ("{ { 1, 2 }, { 3, 4 } }", "f32[2,2]", np.array([[1, 2], [3, 4]], np.float32)),
        ("{1, 0, 1}", "pred[3]", np.array([True, False, True])),
        ("{true, false}", "pred[2]", np.array([True, False])),
        ("{ {}, {} }", "f32[2,0]", np.zeros((2, 0), np.float32)),
        ("{inf, -inf, 0.1}", "f32[3]", np.array([np.inf, -np.inf, 0.1], np.float32)),
        ("-128", "s8[]", np.array(-128, np.int8)),
        ("18446744073709551615", "u64[]", np.array(2**64 - 1, np.uint64)),
        ("3.141", "bf16[]", None),
    ],
)
def test_constant_literals(literal: str, shape: str, expected: np.ndarray | None) -> None:
    text = f"HloModule m\nENTRY e {{\n  ROOT c = {shape} constant({literal})\n}}\n"
    value = parse_hlo(text).entry.root.literal
    assert value.shape == parse_shape(shape).dimensions
    if expected is not None:
        np.testing.assert_array_equal(value, expected)
        assert value.dtype == expected.dtype
    _is_fixed_point(text)


def test_nan_literals_keep_sign_and_payload() -> None:
    text = "HloModule m\nENTRY e {\n  ROOT c = f32[3] constant({nan, -nan, nan(0x1)})\n}\n"
    value = parse_hlo(text).entry.root.literal
    bits = value.view(np.uint32)
    assert bits[0] == 0x7FC00000 and bits[1] == 0xFFC00000 and bits[2] == 0x7F800001
    assert "constant({nan, -nan, nan(0x1)})" in _is_fixed_point(text)


def test_float_constants_print_shortest_round_trip_form() -> None:
    text = "HloModule m\nENTRY e {\n  ROOT c = f32[4] constant({0.1, 1e+10, 3.40282347e+38, 16777216})\n}\n"
    assert "constant({0.1, 1e+10, 3.40282347e+38, 16777216})" in _is_fixed_point(text)


def test_elided_large_constant_prints_elided() -> None:
    text = "HloModule m\nENTRY e {\n  ROOT c = f32[12] constant({...})\n}\n"
    module = parse_hlo(text)
    assert module.entry.root.attrs["literal_elided"]
    assert "constant({...})" in module.to_text()


def test_large_constants_can_be_elided_when_printing() -> None:
    values = ", ".join(str(i) for i in range(11))
    text = f"HloModule m\nENTRY e {{\n  ROOT c = s32[11] constant({{{values}}})\n}}\n"
    module = parse_hlo(text)
    assert values in module.to_text()
    assert "constant({...})" in module.to_text(print_large_constants=False)


def test_layouts_tuples_and_dynamic_shapes() -> None:
    assert parse_shape("f32[2,3]").to_text() == "f32[2,3]{1,0}"
    assert parse_shape("f32[2,3]{0,1}").layout.minor_to_major == (0, 1)
    assert parse_shape("f32[]").to_text() == "f32[]"
    assert parse_shape("(f32[2], (s32[], pred[]))").tuple_shapes[1].tuple_shapes[1] == Shape.scalar("pred")
    assert parse_shape("f32[<=10]").to_text() == "f32[<=10]{0}"
    assert parse_shape("f32[8,128]{1,0:T(8,128)}").to_text() == "f32[8,128]{1,0:T(8,128)}"
    six = parse_shape("(f32[], f32[], f32[], f32[], f32[], f32[2])")
    assert six.to_text() == "(f32[], f32[], f32[], f32[], f32[], /*index=5*/f32[2]{0})"
    assert parse_shape(six.to_text()) == six


def test_unknown_attributes_and_generic_ones_are_kept_verbatim() -> None:
    text = (
        "HloModule m, is_scheduled=true, input_output_alias={ {}: (0, {}, may-alias) }\n\n"
        "ENTRY %e (p: f32[2]) -> f32[2] {\n"
        "  %p = f32[2]{0} parameter(0)\n"
        '  ROOT %n = f32[2]{0} negate(%p), sharding={replicated}, frontend_attributes={a="1",b="x y"}, '
        'origin={{"x"}}, backend_config={"k":{"n":"10"},"s":"}"}\n'
        "}\n\n"
    )
    module = parse_hlo(text)
    root = module.entry.root
    assert root.raw_attrs == {"origin": '{{"x"}}'}
    assert root.frontend_attributes == {"a": "1", "b": "x y"}
    assert root.backend_config == '{"k":{"n":"10"},"s":"}"}'
    assert module.is_scheduled
    assert module.to_text().replace(", entry_computation_layout={(f32[2]{0})->f32[2]{0}}", "") == text


def test_control_predecessors_and_comments() -> None:
    text = """HloModule m
// a line comment
ENTRY e {
  a = f32[] parameter(0) /* a block comment */
  b = f32[] negate(a)
  ROOT c = f32[] exponential(a), control-predecessors={b}
}
"""
    module = parse_hlo(text)
    assert [p.name for p in module.entry.root.control_predecessors] == ["b"]
    assert "control-predecessors={%b}" in _is_fixed_point(text)


def test_missing_entry_and_root_default_to_last() -> None:
    module = parse_hlo("HloModule m\nf {\n  a = f32[] parameter(0)\n  b = f32[] negate(a)\n}\n")
    assert module.entry.name == "f"
    assert module.entry.root.name == "b"


# ---------------------------------------------------------------------------------------
# Errors: line, column, the line itself and a caret
# ---------------------------------------------------------------------------------------
def _error(text: str) -> HloParseError:
    with pytest.raises(HloParseError) as info:
        parse_hlo(text)
    return info.value


def test_error_points_at_the_unknown_operand() -> None:
    err = _error("HloModule m\nENTRY e {\n  a = f32[] parameter(0)\n  ROOT b = f32[] add(a, q)\n}\n")
    assert (err.line, err.column) == (4, 25)
    assert "operand 'q' is not defined" in str(err)
    assert "    ROOT b = f32[] add(a, q)\n" + " " * 28 + "^" in str(err)


@pytest.mark.parametrize(
    ("text", "fragment", "line", "column"),
    [
        ("HloModle m", "expected 'HloModule'", 1, 1),
        ("HloModule m\nENTRY e {\n  a = f32[] paramter(0)\n}", "unknown HLO opcode 'paramter'", 3, 13),
        ("HloModule m\nENTRY e {\n  a = f33[] parameter(0)\n}", "'f33' is not an element type", 3, 7),
        ("HloModule m\nENTRY e {\n  a = f32[2] parameter(0)\n  b = f32[2] add(a a)\n}", "expected ','", 4, 20),
        ("HloModule m\nENTRY e {\n  a = f32[2] constant({1, 2, 3})\n}", "3 elements in dimension 0", 3, 23),
        ("HloModule m\nENTRY e {\n  a = f32[2] parameter(0)\n  b = f32[2] broadcast(a)\n}",
         "needs the attribute 'dimensions'", 4, 14),
        ("HloModule m\nENTRY e {\n  a = f32[2] parameter(0)\n  b = f32[2] broadcast(a), dimensions={x}\n}",
         "bad value for attribute 'dimensions'", 4, 39),
        ("HloModule m\nENTRY e {\n  a = f32[2] parameter(0)\n  b = f32[2] negate(a), dimensions={0}\n}",
         "negate does not take this attribute", 4, 36),
        ("HloModule m\nENTRY e {\n  a = f32[2] parameter(0)\n  b = f32[2] add(a)\n}", "takes 2 operand(s)", 4, 14),
        ("HloModule m\nENTRY e {\n  a = s8[] constant(300)\n}", "300 does not fit in s8", 3, 21),
        ("HloModule m\nENTRY e {\n  a = f32[] parameter(0)\n  b = f32[] call(a), to_apply=nope\n}",
         "computation 'nope' is not defined", 4, 31),
        ("HloModule m\nENTRY e {\n  a = f32[] parameter(0)\n", "is not closed", 4, 1),
        ("HloModule m\nENTRY e (a: f32[]) -> s32[] {\n  ROOT a = f32[] parameter(0)\n}",
         "returns s32[] but its root 'a' is f32[]", 2, 9),
        ('HloModule m\nENTRY e {\n  a = f32[] parameter(0), metadata={op_name="x}\n}', "unterminated string", 3, 45),
    ],
)
def test_parse_errors(text: str, fragment: str, line: int, column: int) -> None:
    err = _error(text)
    assert fragment in str(err)
    assert (err.line, err.column) == (line, column), str(err)
    assert err.source_line == text.splitlines()[line - 1] if line <= len(text.splitlines()) else True
    assert str(err).rstrip().endswith("^")
