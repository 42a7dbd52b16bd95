"""The verifier: real XLA dumps pass; each kind of broken module is reported clearly."""

from __future__ import annotations

import glob
import re
from pathlib import Path

import numpy as np
import pytest

from xla_teach.hlo.errors import VerificationError
from xla_teach.hlo.ir import HloComputation, HloInstruction, HloModule
from xla_teach.hlo.shape import Shape
from xla_teach.hlo.text.parser import parse_hlo
from xla_teach.hlo.verifier import MAX_REPORTED, verify_computation, verify_module

GOOD = """\
HloModule good

add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}

ENTRY main {
  x = f32[4,3] parameter(0)
  zero = f32[] constant(0)
  r = f32[3] reduce(x, zero), dimensions={0}, to_apply=add
  ROOT t = (f32[4,3], f32[3]) tuple(x, r)
}
"""

SAMPLES = sorted(glob.glob(str(Path(__file__).parents[1] / "data" / "xla_samples" / "*" / "*_optimizations.txt")))


def problems_of(module: HloModule) -> list[str]:
    with pytest.raises(VerificationError) as info:
        verify_module(module)
    return list(info.value.problems)


def only_problem(module: HloModule) -> str:
    found = problems_of(module)
    assert len(found) == 1, found
    return found[0]


def test_good_module_passes() -> None:
    verify_module(parse_hlo(GOOD))


@pytest.mark.skipif(not SAMPLES, reason="no XLA sample dumps on this machine")
def test_real_xla_dumps_pass() -> None:
    for path in SAMPLES:
        with open(path) as f:
            verify_module(parse_hlo(f.read()))


# ---------------------------------------------------------------------------------------
# Shapes
# ---------------------------------------------------------------------------------------
def test_declared_vs_inferred_shape() -> None:
    module = parse_hlo("""
HloModule m
ENTRY main {
  x = f32[4,8] parameter(0)
  v = f32[] constant(0)
  ROOT pad.1 = f32[6,17] pad(x, v), padding=1_1x0_1_1
}""")
    assert only_problem(module) == ("%main: pad %pad.1: declared f32[6,17] but inferred f32[6,16] "
                                    "from operands f32[4,8], f32[]")


def test_error_message_lists_first_problem_first() -> None:
    module = parse_hlo("""
HloModule m
ENTRY main {
  x = f32[4] parameter(0)
  a = f32[5] negate(x)
  b = s32[4] negate(x)
  ROOT c = f32[4] add(x, x)
}""")
    with pytest.raises(VerificationError) as info:
        verify_module(module)
    text = str(info.value)
    assert text.startswith("module 'm' failed verification (2 problems):")
    assert text.index("%a") < text.index("%b")
    assert "declared s32[4] but inferred f32[4] from operands f32[4]" in text


def test_many_problems_are_truncated() -> None:
    lines = "\n".join(f"  n{i} = f32[5] negate(x)" for i in range(MAX_REPORTED + 3))
    module = parse_hlo(f"HloModule m\nENTRY main {{\n  x = f32[4] parameter(0)\n{lines}\n  ROOT r = f32[4] copy(x)\n}}")
    with pytest.raises(VerificationError) as info:
        verify_module(module)
    assert len(info.value.problems) == MAX_REPORTED + 3
    assert "... and 3 more" in str(info.value)


def test_shape_error_messages_name_the_op_and_operands() -> None:
    module = parse_hlo("""
HloModule m
ENTRY main {
  x = f32[2,3] parameter(0)
  y = f32[3] parameter(1)
  ROOT s = f32[2,3] add(x, y)
}""")
    assert only_problem(module) == ("%main: add %s: operand shapes f32[2,3] and f32[3] are incompatible "
                                    "(elementwise ops need identical dimensions)")


def test_constant_literal_must_match() -> None:
    module = parse_hlo("HloModule m\nENTRY main {\n  ROOT c = f32[2] constant({1, 2})\n}")
    module.entry.root.attrs["literal"] = np.array([1, 2], np.int32)
    assert "literal int32[2] does not match the declared shape f32[2]" in only_problem(module)


# ---------------------------------------------------------------------------------------
# Called computations
# ---------------------------------------------------------------------------------------
def test_reducer_signature() -> None:
    module = parse_hlo(GOOD.replace("a = f32[] parameter(0)", "a = s32[] parameter(0)").replace(
        "ROOT s = f32[] add(a, b)", "ROOT s = s32[] add(a, a)"))
    problem = only_problem(module)
    assert problem.startswith("%main: reduce %r: to_apply=%add (s32[], f32[]) -> s32[]: parameter 0 is s32[]")


WHILE = """
HloModule m
cond {
  s = s32[] parameter(0)
  n = s32[] constant(4)
  ROOT c = pred[] compare(s, n), direction=LT
}
body {
  s = s32[] parameter(0)
  ROOT b = s32[] negate(s)
}
ENTRY main {
  i = s32[] parameter(0)
  ROOT w = s32[] while(i), condition=cond, body=body
}"""


def test_while_condition_must_return_pred_and_body_its_state() -> None:
    verify_module(parse_hlo(WHILE))
    bad_cond = WHILE.replace("ROOT c = pred[] compare(s, n), direction=LT", "ROOT c = s32[] add(s, n)")
    assert "condition=%cond (s32[]) -> s32[] must return pred[]" in only_problem(parse_hlo(bad_cond))
    bad_body = WHILE.replace("ROOT b = s32[] negate(s)", "ROOT b = f32[] convert(s)")
    assert "body=%body (s32[]) -> f32[] must return the loop state s32[]" in only_problem(parse_hlo(bad_body))


def test_call_and_fusion_arguments() -> None:
    module = parse_hlo("""
HloModule m
f {
  p = f32[3] parameter(0)
  ROOT n = f32[3] negate(p)
}
ENTRY main {
  x = f32[4] parameter(0)
  c = f32[3] call(x), to_apply=f
  ROOT fu = f32[3] fusion(x), kind=kLoop, calls=f
}""")
    found = problems_of(module)
    assert len(found) == 2
    assert "call %c: to_apply=%f (f32[3]) -> f32[3]: parameter 0 is f32[3] but the argument is f32[4]" in found[0]
    assert "fusion %fu: calls=%f" in found[1]


def test_compare_direction_fusion_kind_and_tuple_index() -> None:
    module = parse_hlo("""
HloModule m
f {
  p = f32[] parameter(0)
  ROOT n = f32[] negate(p)
}
ENTRY main {
  x = f32[] parameter(0)
  c = pred[] compare(x, x), direction=XX
  fu = f32[] fusion(x), kind=kWrong, calls=f
  t = (f32[], f32[]) tuple(x, x)
  g = f32[] get-tuple-element(t), index=2
  ROOT r = (pred[], f32[], f32[]) tuple(c, fu, g)
}""")
    found = problems_of(module)
    assert "direction=XX is not one of EQ, NE, LT, LE, GT, GE" in found[0]
    assert "kind=kWrong is not one of kLoop" in found[1]
    assert "index=2 is out of range for the 2-element tuple (f32[], f32[])" in found[2]


def test_operand_precision_values_and_count() -> None:
    module = parse_hlo("""
HloModule m
ENTRY main {
  a = f32[2,2] parameter(0)
  d = f32[2,2] dot(a, a), lhs_contracting_dims={1}, rhs_contracting_dims={0}, operand_precision={bogus,default}
  ROOT e = f32[2,2] dot(a, d), lhs_contracting_dims={1}, rhs_contracting_dims={0}, operand_precision={highest}
}""")
    found = problems_of(module)
    assert "unknown operand_precision bogus (known: default, high, highest, packed_nibble)" in found[0]
    assert "operand_precision has 1 entries for 2 operands" in found[1]


@pytest.mark.parametrize("attribute,good,bad", [
    ("replica_groups", ["{}", "{{0,1},{2,3}}", "[2,2]<=[4]", "[2,2]<=[2,2]T(1,0)"], "xyz"),
    ("source_target_pairs", ["{{0,0}}", "{{0,1},{1,0}}"], "abc"),
])
def test_replica_groups_and_pairs_must_read_as_groups(attribute: str, good: list[str], bad: str) -> None:
    add = "add { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT s = f32[] add(a, b) }"
    op = "all-reduce(p), to_apply=add" if attribute == "replica_groups" else "collective-permute(p)"

    def module(value: str) -> HloModule:
        return parse_hlo(f"HloModule m\n{add}\nENTRY e {{\n  p = f32[2] parameter(0)\n"
                         f"  ROOT r = f32[2] {op}, {attribute}={value}\n}}")

    for value in good:
        verify_module(module(value))
    (problem,) = problems_of(module(bad))
    assert f"{attribute}={bad} is not a list of groups like" in problem


# ---------------------------------------------------------------------------------------
# Instructions: arity and attributes
# ---------------------------------------------------------------------------------------
def small_module() -> tuple[HloModule, HloComputation, HloInstruction]:
    module = parse_hlo("HloModule m\nENTRY main {\n  x = f32[3] parameter(0)\n  ROOT n = f32[3] negate(x)\n}")
    return module, module.entry, module.entry.parameter(0)


def test_operand_count() -> None:
    module, comp, x = small_module()
    comp.add_instruction(HloInstruction("add", x.shape, [x]), "bad_add")
    assert only_problem(module) == "%main: add %bad_add: takes 2 operand(s) but has 1"


def test_required_attribute_missing_and_wrong_types() -> None:
    module, comp, x = small_module()
    comp.add_instruction(HloInstruction("broadcast", Shape.array("f32", (2, 3)), [x]), "b1")
    comp.add_instruction(HloInstruction("broadcast", Shape.array("f32", (2, 3)), [x], {"dimensions": [1]}), "b2")
    comp.add_instruction(HloInstruction("reverse", x.shape, [x], {"dimensions": (0,), "dimension": 1}), "r")
    found = problems_of(module)
    assert found[0] == "%main: broadcast %b1: the required attribute 'dimensions' is missing"
    assert found[1] == "%main: broadcast %b2: attribute 'dimensions' must be a tuple of ints, got list [1]"
    assert found[2] == "%main: reverse %r: unknown attribute 'dimension' for reverse"


# ---------------------------------------------------------------------------------------
# Computation and module structure
# ---------------------------------------------------------------------------------------
def test_operand_from_another_computation() -> None:
    module = parse_hlo(GOOD)
    foreign = module.computation("add").parameter(0)
    entry = module.entry
    entry.add_instruction(HloInstruction("negate", foreign.shape, [foreign]), "stray")
    found = problems_of(module)
    assert "%main: operand 0 of %stray, %a, belongs to add, not this computation" in found


def test_missing_root_and_parameter_gaps() -> None:
    module = HloModule("m")
    comp = HloComputation("main")
    module.add_computation(comp, is_entry=True)
    comp.add_instruction(HloInstruction("parameter", Shape.scalar("f32"), attrs={"parameter_number": 0}), "p0")
    comp.add_instruction(HloInstruction("parameter", Shape.scalar("f32"), attrs={"parameter_number": 2}), "p2")
    found = problems_of(module)
    assert found[0] == "%main: the computation has no root"
    assert found[1] == "%main: parameters must be numbered 0..1 without gaps or repeats, got [0, 2]"


def test_entry_must_exist() -> None:
    module = parse_hlo(GOOD)
    module.entry_computation = None
    assert problems_of(module)[0] == "the module has no ENTRY computation"


def test_called_computation_must_belong_to_the_module() -> None:
    module = parse_hlo(GOOD)
    other = parse_hlo(GOOD)
    module.entry.instruction("r").attrs["to_apply"] = other.computation("add")
    assert "%main: %r calls %add, which is not a computation of this module" in problems_of(module)


def test_names_must_be_unique() -> None:
    module = parse_hlo(GOOD)
    module.entry.instruction("zero").name = "x"
    assert "instruction names: the name 'x' is used more than once" in problems_of(module)


def test_cycles_are_found() -> None:
    module = parse_hlo("""
HloModule m
ENTRY main {
  x = f32[3] parameter(0)
  a = f32[3] negate(x)
  b = f32[3] negate(a)
  ROOT c = f32[3] copy(b)
}""")
    a, b = module.entry.instruction("a"), module.entry.instruction("b")
    a.replace_operand_with(0, b)
    assert any("the graph has a cycle: %a -> %b -> %a" in p or "the graph has a cycle: %b -> %a -> %b" in p
               for p in problems_of(module))


def test_recursion_is_found() -> None:
    module = parse_hlo("""
HloModule m
f {
  p = f32[] parameter(0)
  ROOT n = f32[] negate(p)
}
ENTRY main {
  x = f32[] parameter(0)
  ROOT c = f32[] call(x), to_apply=f
}""")
    f = module.computation("f")
    p = f.parameter(0)
    f.add_instruction(HloInstruction("call", p.shape, [p], {"to_apply": f}), "self_call")
    assert "computations call each other recursively: %f -> %f" in problems_of(module)


def test_user_links_must_be_consistent() -> None:
    module, comp, x = small_module()
    x._users.clear()
    assert only_problem(module) == "%main: %x is an operand of %n but does not list it as a user"


def test_verify_computation_alone() -> None:
    verify_computation(parse_hlo(GOOD).computation("add"))
    comp = parse_hlo(GOOD).computation("add")
    comp.instruction("s").shape = Shape.scalar("f64")
    with pytest.raises(VerificationError, match="computation 'add' failed verification"):
        verify_computation(comp)


@pytest.mark.parametrize(("layout", "problem"), [
    ("{(f32[3]{0})->f32[4]{0}}", "parameter 0 is f32[3] but ENTRY parameter 0 is f32[4]"),
    ("{(f32[4]{0})->s32[4]{0}}", "the result is s32[4] but the ENTRY root is f32[4]"),
    ("{(f32[4]{0}, f32[4]{0})->f32[4]{0}}", "lists 2 parameters but ENTRY %e has 1"),
])
def test_entry_computation_layout_must_describe_the_entry(layout: str, problem: str) -> None:
    """As XLA's verifier: the header's shapes must match the ENTRY's (layouts aside)."""
    body = "\nENTRY e { p = f32[4] parameter(0) ROOT n = f32[4] negate(p) }"
    verify_module(parse_hlo("HloModule m, entry_computation_layout={(f32[4]{0})->f32[4]{0}}" + body))
    with pytest.raises(VerificationError, match=re.escape(problem)):
        verify_module(parse_hlo("HloModule m, entry_computation_layout=" + layout + body))


def test_entry_computation_layout_may_choose_other_layouts() -> None:
    module = parse_hlo("""HloModule m, entry_computation_layout={(f32[2,3]{0,1})->f32[2,3]{1,0}}
ENTRY e { p = f32[2,3] parameter(0) ROOT n = f32[2,3] negate(p) }""")
    verify_module(module)
    assert "entry_computation_layout={(f32[2,3]{0,1})->f32[2,3]{1,0}}" in module.to_text()


def _four_device_module(parameter: str, root: str) -> str:
    """A module for 4 devices whose ENTRY takes ``x`` and ends in ``root`` (an ``add`` reducer is there)."""
    return f"""HloModule m, num_partitions=4

add {{
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}}

ENTRY e {{
  x = {parameter} parameter(0)
  ROOT r = {root}
}}
"""


@pytest.mark.parametrize("attrs, message", [
    ("replica_groups={{0,1},{2}}", "does not cover devices 0..3"),
    ("replica_groups={{0,1},{1,2,3}}", "does not cover devices 0..3"),
    ("replica_groups={{0,1,2,3,4}}", "does not cover devices 0..3"),
])
def test_collectives_must_name_every_device_once(attrs: str, message: str) -> None:
    """As XLA's verifier: in a module for 4 devices, replica groups cover devices 0..3 once each."""
    text = _four_device_module("f32[8]", f"f32[8] all-reduce(x), {attrs}, to_apply=add")
    with pytest.raises(VerificationError, match=message):
        verify_module(parse_hlo(text))
    verify_module(parse_hlo(text.replace(attrs, "replica_groups={{0,1},{2,3}}")))  # the same, right


@pytest.mark.parametrize("pairs, message", [
    ("{{0,1},{0,2}}", "sends from device\\(s\\) \\[0\\] more than once"),
    ("{{0,1},{2,1}}", "sends to device\\(s\\) \\[1\\] more than once"),
    ("{{0,1},{3,4}}", "names device\\(s\\) \\[4\\]"),
])
def test_a_permute_sends_from_and_to_each_device_once_and_only_to_devices_that_exist(pairs: str, message: str) -> None:
    text = f"""HloModule m, num_partitions=4

ENTRY e {{
  x = f32[8] parameter(0)
  ROOT r = f32[8] collective-permute(x), source_target_pairs={pairs}
}}
"""
    with pytest.raises(VerificationError, match=message):
        verify_module(parse_hlo(text))
    verify_module(parse_hlo(text.replace(pairs, "{{0,1},{1,2},{2,3},{3,0}}")))


@pytest.mark.parametrize("op, good, bad, message", [
    ("f32[4,8] all-gather(x), dimensions={1}", "replica_groups={{0,1},{2,3}}", "replica_groups={{0,1,2,3}}",
     r"all-gather over groups of 4: its result's dimension 1 should be 16, not 8"),
    ("f32[4,2] reduce-scatter(x), dimensions={1}, to_apply=add", "replica_groups={{0,1},{2,3}}",
     "replica_groups={{0,1,2,3}}", r"reduce-scatter over groups of 4: its operand's dimension 1 should be 8, not 4"),
    ("f32[4,4] all-to-all(x), dimensions={0}", "replica_groups={{0,1},{2,3}}", "replica_groups={{0,1,2},{3}}",
     r"all-to-all needs replica groups of one size; these have \[1, 3\] members"),
    ("f32[4,8] all-gather(x), dimensions={1}", "replica_groups={{0,1},{2,3}}", "replica_groups={{0,1,2},{3}}",
     r"all-gather needs replica groups of one size"),
])
def test_a_collectives_result_shape_follows_from_its_group_size(op: str, good: str, bad: str, message: str) -> None:
    """As XLA's verifier: an all-gather's result is its operand times the group size along its
    dimension, a reduce-scatter's operand is its result times the group size, an all-to-all's
    groups are of one size (its dimension split into a piece per member)."""
    text = _four_device_module("f32[4,4]", f"{op}, {bad}")
    with pytest.raises(VerificationError, match=message):
        verify_module(parse_hlo(text))
    verify_module(parse_hlo(text.replace(bad, good)))
