"""Tuple-shaped constants, ``(f32[2], s32[]) constant(( {1, 2}, 3 ))``, end to end.

Oracles: XLA's text form (``LiteralBase::PrintWithoutShapeOneline``: ``"( "``, elements joined
by ``", "``, ``" )"``), the arrays written in the test (the literal's values), the
interpreter (for the CPU and GPU backends and for the splitter's rewrite), and the parse
error's position in the text.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from tests.passes.pass_test_utils import check_pass
from xla_teach import flags
from xla_teach.api import compile_module
from xla_teach.backends.gpu.nvptx import assemble_with_ptxas, ptxas_path
from xla_teach.hlo.errors import ShapeError, VerificationError
from xla_teach.hlo.evaluator import evaluate_module
from xla_teach.hlo.text.parser import HloParseError, parse_hlo
from xla_teach.hlo.verifier import verify_module
from xla_teach.passes.expanders import TupleConstantSplitter
from xla_teach.passes.simplifiers.constant_folding import ConstantFolding
from xla_teach.passes.simplifiers.cse import CommonSubexpressionElimination
from xla_teach.tools.cli import main
from xla_teach.tools.render import hlo_to_dot

BF16 = np.dtype(ml_dtypes.bfloat16)


def _module(shape: str, literal: str) -> str:
    return f"HloModule m\n\nENTRY %main () -> {shape} {{\n  ROOT %c = {shape} constant({literal})\n}}\n"


def _printed_literal(text: str) -> str:
    line = next(line for line in text.splitlines() if " constant(" in line)
    return line[line.index("constant(") + len("constant("):-1]


# ---- parse and print ---------------------------------------------------------------------
@pytest.mark.parametrize(("shape", "written", "printed"), [
    ("(f32[2]{0}, s32[])", "({1, 2}, 3)", "( {1, 2}, 3 )"),
    ("(f32[2]{0}, s32[])", "( {1, 2}, 3 )", "( {1, 2}, 3 )"),
    ("(f32[2]{0}, s32[])", "(\n{1, 2},\n3\n)", "( {1, 2}, 3 )"),  # XLA's multi-line ToString
    ("()", "()", "(  )"),
    ("()", "(  )", "(  )"),
    ("(f32[])", "(1.5)", "( 1.5 )"),
    ("((s32[], ()), pred[2]{0})", "((-7, ()), {true, 0})", "( ( -7, (  ) ), {1, 0} )"),
    ("(pred[], bf16[3]{0}, f32[2,2]{1,0})", "(false, {inf, -inf, nan}, {{1, 2}, {3, 4}})",
     "( false, {inf, -inf, nan}, { { 1, 2 }, { 3, 4 } } )"),
    ("(f32[0]{0}, u8[])", "({}, 255)", "( {}, 255 )"),
])
def test_tuple_literal_prints_as_xla_and_round_trips(shape: str, written: str, printed: str) -> None:
    module = parse_hlo(_module(shape, written))
    verify_module(module)
    text = module.to_text()
    assert _printed_literal(text) == printed
    again = parse_hlo(text)
    verify_module(again)
    assert again.to_text() == text


def test_literal_is_a_nested_tuple_of_numpy_arrays() -> None:
    module = parse_hlo(_module("(f32[2]{0}, (s32[], bf16[2]{0}), ())", "({1.5, -nan}, (3, {3.141, -0}), ())"))
    value = module.entry.root.literal
    assert isinstance(value, tuple) and len(value) == 3 and value[2] == ()
    floats, (three, halves), _ = value
    assert floats.dtype == np.float32 and floats[0] == 1.5 and np.isnan(floats[1]) and np.signbit(floats[1])
    assert three.dtype == np.int32 and three.shape == () and three == 3
    assert halves.dtype == BF16
    np.testing.assert_array_equal(halves.astype(np.float32), np.array([3.140625, -0.0], np.float32))
    assert np.signbit(halves[1].astype(np.float32))


def test_dumps_elide_tuple_constants_and_the_parser_reads_zeros() -> None:
    text = _module("(f32[2]{0}, s32[])", "({1, 2}, 3)")
    module = parse_hlo(text)
    assert _printed_literal(module.to_text(print_large_constants=False)) == "{...}"  # XLA: "or tuples"
    elided = parse_hlo(module.to_text(print_large_constants=False))
    verify_module(elided)
    zeros, zero = elided.entry.root.literal
    np.testing.assert_array_equal(zeros, np.zeros(2, np.float32))
    assert zero.dtype == np.int32 and zero == 0
    assert _printed_literal(elided.to_text()) == "{...}"  # stays elided


# ---- parse errors: line, column, caret ---------------------------------------------------
@pytest.mark.parametrize(("literal", "at", "fragment"), [
    ("({1, 2})", ")", "tuple literal has 1 elements, shape (f32[2], s32[]) needs 2"),
    ("({1, 2}, 3, 4)", "4", "more than 2 elements"),
    ("({1, 2}, 3.5)", "3.5", "'3.5' is not a valid s32 value"),
    ("({1, 2, 3}, 3)", "{", "3 elements in dimension 0"),
    ("{1, 2}", "{", "expected '('"),
    ("({1, 2} 3)", "3", "expected ','"),
])
def test_tuple_literal_errors_point_into_the_literal(literal: str, at: str, fragment: str) -> None:
    text = f"HloModule m\nENTRY e {{\n  c = (f32[2], s32[]) constant({literal})\n}}\n"
    with pytest.raises(HloParseError) as info:
        parse_hlo(text)
    err = info.value
    line = text.splitlines()[2]
    column = line.index("constant(") + len("constant(") + literal.rindex(at) + 1
    assert fragment in str(err)
    assert (err.line, err.column) == (3, column), str(err)
    assert err.source_line == line and str(err).rstrip().endswith("^")


def test_tuple_constant_with_a_token_is_refused() -> None:
    with pytest.raises(HloParseError, match="not supported"):
        parse_hlo("HloModule m\nENTRY e {\n  ROOT c = (f32[], token[]) constant((1, 2))\n}\n")


def test_verifier_names_a_mismatched_tuple_literal() -> None:
    module = parse_hlo(_module("(f32[2]{0}, s32[])", "({1, 2}, 3)"))
    constant = module.entry.root
    constant.attrs["literal"] = (np.zeros(2, np.float32), np.zeros(3, np.int32))
    with pytest.raises((VerificationError, ShapeError), match="tuple literal element 1"):
        verify_module(module)
    constant.attrs["literal"] = (np.zeros(2, np.float32),)
    with pytest.raises((VerificationError, ShapeError), match="1 elements but the shape"):
        verify_module(module)


# ---- interpreter and backends ------------------------------------------------------------
USES = """HloModule uses

ENTRY main {
  x = f32[3] parameter(0)
  c = (f32[3], (s32[], pred[2]), ()) constant(( {1.5, -inf, nan}, ( 7, {1, 0} ), (  ) ))
  c.f = f32[3] get-tuple-element(c), index=0
  sum = f32[3] add(x, c.f)
  c.inner = (s32[], pred[2]) get-tuple-element(c), index=1
  c.mask = pred[2] get-tuple-element(c.inner), index=1
  back = (s32[], pred[2]) constant(( -3, {0, 1} ))
  ROOT out = (f32[3], pred[2], (s32[], pred[2]), (s32[], pred[2])) tuple(sum, c.mask, c.inner, back)
}
"""
X = np.array([1.0, 2.0, -4.0], np.float32)


def _expected() -> list[np.ndarray]:
    """The literal values written in USES, taken apart by hand."""
    return [X + np.array([1.5, -np.inf, np.nan], np.float32), np.array([True, False]),
            np.array(7, np.int32), np.array([True, False]), np.array(-3, np.int32), np.array([False, True])]


def _assert_same(got: list[np.ndarray], want: list[np.ndarray]) -> None:
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_array_equal(g, w)  # NaN equals NaN here


def test_interpreter_returns_the_tuple_value() -> None:
    _assert_same(evaluate_module(parse_hlo(USES), [X]), _expected())
    nested = parse_hlo(_module("(f32[2]{0}, (s32[], ()))", "({1, 2}, (3, ()))"))
    _assert_same(evaluate_module(nested, []), [np.array([1, 2], np.float32), np.array(3, np.int32)])


@pytest.mark.parametrize("opt_level", [0, 2])
def test_cpu_matches_the_interpreter(opt_level: int) -> None:
    with flags.override(xla_teach_hlo_opt_level=opt_level):
        executable = compile_module(USES, "cpu")
    _assert_same(executable.execute([X]), evaluate_module(parse_hlo(USES), [X]))
    assert not any(i.opcode == "constant" and i.shape.is_tuple for i in executable.module.instructions())


def test_cpu_places_an_unsplit_tuple_constant_leaf_by_leaf() -> None:
    """Without the splitter, buffer assignment gives each array leaf its own constant buffer."""
    with flags.override(xla_disable_hlo_passes="tuple-constant-splitter"):
        executable = compile_module(USES, "cpu")
    assert any(i.opcode == "constant" and i.shape.is_tuple for i in executable.module.instructions())
    _assert_same(executable.execute([X]), _expected())


def test_gpu_compiles_to_ptx() -> None:
    executable = compile_module(USES, "gpu")
    assert ".entry" in executable.artifacts.ptx
    assert not any(i.opcode == "constant" and i.shape.is_tuple for i in executable.module.instructions())
    if ptxas_path() is not None:
        ok, log = assemble_with_ptxas(executable.artifacts.ptx, "sm_80")
        assert ok, log


# ---- the splitter ------------------------------------------------------------------------
def test_splitter_recurses_and_keeps_the_name() -> None:
    check_pass(TupleConstantSplitter(), """
HloModule m
ENTRY main {
  c = ((f32[2], ()), s32[]) constant(( ( {1, 2}, (  ) ), 3 ))
  ROOT r = ((f32[2], ()), s32[]) copy(c)
}
""", """
HloModule m
ENTRY main {
  constant = f32[2] constant({1, 2})
  tuple = () tuple()
  tuple.1 = (f32[2], ()) tuple(constant, tuple)
  constant.1 = s32[] constant(3)
  c = ((f32[2], ()), s32[]) tuple(tuple.1, constant.1)
  ROOT r = ((f32[2], ()), s32[]) copy(c)
}
""")


def test_splitter_keeps_an_elided_constant_elided() -> None:
    module = check_pass(TupleConstantSplitter(), """
HloModule m
ENTRY main {
  ROOT c = (f32[20], s32[]) constant({...})
}
""", """
HloModule m
ENTRY main {
  constant = f32[20] constant({...})
  constant.1 = s32[] constant({...})
  ROOT c = (f32[20], s32[]) tuple(constant, constant.1)
}
""")
    assert all(i.attrs.get("literal_elided") for i in module.entry.instructions if i.opcode == "constant")


def test_splitter_leaves_array_constants_alone() -> None:
    check_pass(TupleConstantSplitter(), _module("f32[2]{0}", "{1, 2}"), None)


# ---- other passes read tuple literals before the splitter runs (or when it is disabled) ----
def test_cse_merges_equal_tuple_constants_only() -> None:
    check_pass(CommonSubexpressionElimination(), """
HloModule m
ENTRY main {
  c = (f32[2], s32[]) constant(( {1, 2}, 3 ))
  d = (f32[2], s32[]) constant(( {1, 2}, 3 ))
  e = (f32[2], s32[]) constant(( {1, 2}, 4 ))
  ROOT t = ((f32[2], s32[]), (f32[2], s32[]), (f32[2], s32[])) tuple(c, d, e)
}
""", """
HloModule m
ENTRY main {
  c = (f32[2], s32[]) constant(( {1, 2}, 3 ))
  e = (f32[2], s32[]) constant(( {1, 2}, 4 ))
  ROOT t = ((f32[2], s32[]), (f32[2], s32[]), (f32[2], s32[])) tuple(c, c, e)
}
""")


def test_constant_folding_reads_an_element_of_a_tuple_constant() -> None:
    check_pass(ConstantFolding(), """
HloModule m
ENTRY main {
  x = f32[2] parameter(0)
  c = (f32[2], s32[]) constant(( {1, 2}, 3 ))
  g = f32[2] get-tuple-element(c), index=0
  n = f32[2] negate(g)
  ROOT a = f32[2] add(x, n)
}
""", """
HloModule m
ENTRY main {
  x = f32[2] parameter(0)
  constant.1 = f32[2] constant({-1, -2})
  ROOT a = f32[2] add(x, constant.1)
}
""")


# ---- tools -------------------------------------------------------------------------------
def test_render_shows_the_tuple_literal(tmp_path) -> None:  # type: ignore[no-untyped-def]
    dot = hlo_to_dot(parse_hlo(USES))
    assert "( {1.5, -inf, nan}, ( 7, {1, 0} ), (  ) )" in dot
    src = tmp_path / "uses.txt"
    src.write_text(USES)
    for out in ("uses.dot", "optimized.dot"):
        extra = ["--optimized"] if out.startswith("optimized") else []
        assert main(["render", str(src), *extra, "-o", str(tmp_path / out)]) == 0
        assert "digraph" in (tmp_path / out).read_text()


def test_dumps_of_a_module_with_a_tuple_constant_parse_back(tmp_path) -> None:  # type: ignore[no-untyped-def]
    with flags.override(xla_dump_to=str(tmp_path / "full"), xla_dump_hlo_pass_re=".*", xla_dump_large_constants=True,
                        xla_dump_hlo_as_text=True, xla_dump_hlo_as_dot=True, xla_dump_hlo_as_html=True):
        compile_module(USES, "cpu")
    texts = sorted((tmp_path / "full").glob("*.txt"))
    before = [p for p in texts if p.name.endswith("before_optimizations.txt")]
    assert len(before) == 1 and "constant(( {1.5, -inf, nan}, ( 7, {1, 0} ), (  ) ))" in before[0].read_text()
    assert any(".after_tuple-constant-splitter." in p.name for p in texts)
    hlo_texts = [p for p in texts if p.read_text().startswith("HloModule")]
    assert before[0] in hlo_texts
    for path in hlo_texts:
        module = parse_hlo(path.read_text())
        assert module.to_text() == path.read_text(), path.name
    assert list((tmp_path / "full").glob("*.dot")) and list((tmp_path / "full").glob("*.html"))
    # Default dumps elide every tuple constant, as XLA's do ("do not show large constants or tuples").
    with flags.override(xla_dump_to=str(tmp_path / "default")):
        compile_module(USES, "cpu")
    (default,) = (tmp_path / "default").glob("*before_optimizations.txt")
    assert "(f32[3]{0}, (s32[], pred[2]{0}), ()) constant({...})" in default.read_text()
