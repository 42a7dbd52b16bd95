"""Bad HLO text gives an HloParseError pointing into the module text, never an internal error."""

from __future__ import annotations

import pytest

from xla_teach.hlo.text.parser import HloParseError, parse_hlo, parse_shape


def _module(root: str) -> str:
    """A module whose line 5 is ``root`` (line 4 defines ``p = f32[2]``)."""
    return f"HloModule m\n\nENTRY e {{\n  p = f32[2] parameter(0)\n  {root}\n}}\n"


def _error(text: str) -> HloParseError:
    with pytest.raises(HloParseError) as info:
        parse_hlo(text)
    return info.value


def _check(err: HloParseError, text: str, fragment: str, at: str) -> None:
    """``fragment`` is in the message and the caret is under the last ``at`` on line 5."""
    line = text.splitlines()[4]
    assert fragment in str(err), str(err)
    assert (err.line, err.column) == (5, line.rindex(at) + 1), str(err)
    assert err.source_line == line
    assert str(err).rstrip().endswith("^")


# ---------------------------------------------------------------------------------------
# metadata={...} and frontend_attributes={...}: errors point into the module text
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("attribute", "fragment", "at"),
    [
        ("metadata={op_name=}", "expected an attribute value but found '}'", "}"),
        ("frontend_attributes={a}", "expected '=' but found '}'", "}"),
        ('metadata={bogus_field="x"}', "unknown metadata field 'bogus_field' (known fields: op_type, op_name",
         "bogus_field"),
        ("metadata={source_line=abc}", "metadata field 'source_line' must be an integer, not 'abc'", "abc"),
        ('metadata={source_line="7"}', "metadata field 'source_line' must be an integer", '"7"'),
        ('metadata={op_name="a" op_name="b"}', "metadata field 'op_name' is given twice", "op_name"),
    ],
)
def test_metadata_and_frontend_attribute_errors(attribute: str, fragment: str, at: str) -> None:
    text = _module(f"ROOT r = f32[2] negate(p), {attribute}")
    _check(_error(text), text, fragment, at)


def test_known_metadata_fields_are_kept() -> None:
    text = _module('ROOT r = f32[2] negate(p), metadata={op_type="Neg" op_name="f/neg" source_file="f.py" '
                   "source_line=3 source_end_line=4 source_column=1 source_end_column=9 stack_frame_id=2}")
    metadata = parse_hlo(text).entry.root.metadata
    assert metadata is not None
    assert metadata.get("source_line") == 3 and metadata.get("stack_frame_id") == 2
    assert metadata.op_name == "f/neg"


# ---------------------------------------------------------------------------------------
# Deep nesting, huge ranks and dimension sizes
# ---------------------------------------------------------------------------------------
def test_deeply_nested_tuple_shape_is_a_parse_error() -> None:
    text = _module("ROOT q = " + "(" * 1000 + "f32[]" + ")" * 1000 + " parameter(1)")
    err = _error(text)
    assert "tuple shape nested too deeply (more than 100 levels)" in str(err)
    # The caret is under the 101st '('.
    assert (err.line, err.column) == (5, len("  ROOT q = ") + 101)


def test_tuple_nesting_up_to_the_limit_parses() -> None:
    shape = "(" * 100 + "f32[]" + ")" * 100
    literal = "(" * 100 + "1" + ")" * 100
    module = parse_hlo(f"HloModule m\nENTRY e {{\n  ROOT c = {shape} constant({literal})\n}}\n")
    assert parse_hlo(module.to_text()).entry.root.shape == module.entry.root.shape


def test_deep_nesting_in_signatures_and_literals_is_a_parse_error() -> None:
    deep = "(" * 1000 + "f32[]" + ")" * 1000
    with pytest.raises(HloParseError, match="nested too deeply"):
        parse_shape(deep)
    with pytest.raises(HloParseError, match="nested too deeply"):
        parse_hlo(f"HloModule m\nENTRY e (a: {deep}) -> f32[] {{\n  ROOT c = f32[] constant(1)\n}}\n")
    # Literal nesting follows the shape, so extra braces or parentheses stop at the first one too many.
    literal_start = len("  ROOT c = f32[1] constant(") + 1
    err = _error(_module("ROOT c = f32[1] constant(" + "{" * 1000 + "1" + "}" * 1000 + ")"))
    assert "expected a literal value but found '{'" in str(err)
    assert (err.line, err.column) == (5, literal_start + 1)  # the second '{'
    err = _error(_module("ROOT c = f32[1] constant(" + "(" * 1000 + "1" + ")" * 1000 + ")"))
    assert "expected '{'" in str(err)
    assert (err.line, err.column) == (5, literal_start)


def test_rank_above_64_is_a_parse_error() -> None:
    text = _module("ROOT c = f32[" + ",".join(["1"] * 65) + "] constant({...})")
    _check(_error(text), text, "too many dimensions: at most 64 are supported", "f32[")
    parse_shape("f32[" + ",".join(["1"] * 64) + "]")  # 64 is fine


@pytest.mark.parametrize(
    ("shape", "fragment", "at"),
    [
        ("f32[99999999999999999999]", "dimension size out of range: 99999999999999999999 does not fit in int64",
         "9999"),
        ("f32[9999999999,9999999999]", "dimension sizes out of range: f32[9999999999,9999999999] has more than "
         "2^63-1 elements", "f32["),
    ],
)
def test_absurd_dimension_sizes_are_parse_errors(shape: str, fragment: str, at: str) -> None:
    text = _module(f"ROOT c = {shape} parameter(1)")
    err = _error(text)
    line = text.splitlines()[4]
    assert fragment in str(err), str(err)
    assert (err.line, err.column) == (5, line.index(at) + 1), str(err)


# ---------------------------------------------------------------------------------------
# Integers inside attribute values, and bad layouts
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("root", "fragment", "at"),
    [
        ("ROOT r = f32[2] reduce-window(p, p), window={size=a}, to_apply=add",
         "expected an integer in window size, got 'a'", "{"),
        ("ROOT r = f32[2] reduce-window(p, p), window={size=2 pad=0_b}, to_apply=add",
         "expected an integer in window pad, got 'b'", "{"),
        ("ROOT r = f32[2] pad(p, p), padding=a_b", "expected an integer in padding, got 'a'", "a_b"),
        ("ROOT r = f32[2] broadcast(p), dimensions={x}", "expected an integer in the list, got 'x'", "{"),
        ("ROOT r = f32[] custom-call(p), custom_call_target=abc", "expected a string but found 'abc'", "abc"),
    ],
)
def test_bad_integers_and_strings_in_attributes(root: str, fragment: str, at: str) -> None:
    text = _module(root)
    err = _error(text)
    assert "invalid literal for int()" not in str(err)
    _check(err, text, fragment, at)


@pytest.mark.parametrize(
    ("shape", "fragment"),
    [
        ("f32[4]{-1}", "layout {-1} is not a permutation of the 1 dimensions"),
        ("f32[4,4]{2,0}", "layout {2,0} is not a permutation of the 2 dimensions"),
        ("f32[4,4]{0}", "layout {0} is not a permutation of the 2 dimensions"),
    ],
)
def test_bad_layouts(shape: str, fragment: str) -> None:
    text = _module(f"ROOT r = {shape} parameter(1)")
    _check(_error(text), text, fragment, "f32[")


def test_a_module_with_elided_constants_says_so_instead_of_running_on_zeros() -> None:
    from xla_teach.api import compile_module, execute
    from xla_teach.hlo.errors import MissingConstantsError

    text = "HloModule m\nENTRY e {\n  c = f32[20] constant({...})\n  ROOT n = f32[20] negate(c)\n}\n"
    module = parse_hlo(text)  # parsing and printing still work: a reader may only want to look
    assert "constant({...})" in module.to_text()
    for backend in ("interpreter", "cpu"):
        with pytest.raises(MissingConstantsError, match=r"constant\(s\) c \(f32\[20\]\{0\}\) were printed as \{\.\.\.\}"):
            execute(text, [], backend)
    with pytest.raises(MissingConstantsError, match="--xla_dump_large_constants"):
        compile_module(module, "cpu")
