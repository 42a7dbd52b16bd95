"""Unit tests of the IR itself: operand/user links, post-order, replace-all-uses, removal, cloning
and XLA's unique naming. (Everything else uses these; here they are checked on their own.)"""

from __future__ import annotations

import numpy as np
import pytest

from xla_teach.hlo.evaluator import HloEvaluator
from xla_teach.hlo.ir import HloComputation, HloInstruction, HloModule, NameUniquer
from xla_teach.hlo.shape import Shape
from xla_teach.hlo.text.parser import parse_hlo
from xla_teach.hlo.types import PrimitiveType

F32_4 = Shape.array(PrimitiveType.F32, (4,))

TEXT = """HloModule m, entry_computation_layout={(f32[4]{0}, f32[4]{0})->f32[4]{0}}

ENTRY %main (a: f32[4], b: f32[4]) -> f32[4] {
  %a = f32[4]{0} parameter(0)
  %b = f32[4]{0} parameter(1)
  %mul = f32[4]{0} multiply(%a, %b)
  %add = f32[4]{0} add(%mul, %a)
  ROOT %sub = f32[4]{0} subtract(%add, %mul)
}
"""


def _links_consistent(comp: HloComputation) -> None:
    """Every operand edge has the matching user edge and vice versa."""
    for instr in comp.instructions:
        for op in instr.operands:
            assert instr in op.users, f"{instr.name} reads {op.name} but is not among its users"
        for user in instr.users:
            assert instr in user.operands, f"{user.name} is a user of {instr.name} but does not read it"


def test_operand_and_user_links() -> None:
    module = parse_hlo(TEXT)
    comp = module.entry
    _links_consistent(comp)
    mul, a = comp.instruction("mul"), comp.instruction("a")
    assert [u.name for u in mul.users] == ["add", "sub"]
    assert [u.name for u in a.users] == ["mul", "add"]
    # An instruction that reads the same operand twice is one user, not two.
    twice = comp.add_instruction(HloInstruction("add", F32_4, [a, a]), "twice")
    assert a.users.count(twice) == 1
    assert twice.operand_count == 2


def test_post_order_puts_operands_first_and_visits_everything() -> None:
    comp = parse_hlo(TEXT).entry
    order = comp.post_order()
    assert sorted(i.name for i in order) == sorted(i.name for i in comp.instructions)
    position = {i.name: n for n, i in enumerate(order)}
    for instr in comp.instructions:
        for op in instr.operands:
            assert position[op.name] < position[instr.name]
    assert order[-1] is comp.root


def test_post_order_honours_control_predecessors() -> None:
    comp = parse_hlo(TEXT).entry
    mul, b = comp.instruction("mul"), comp.instruction("b")
    late = comp.add_instruction(HloInstruction("negate", F32_4, [b]), "late")
    mul.control_predecessors.append(late)
    position = {i.name: n for n, i in enumerate(comp.post_order())}
    assert position["late"] < position["mul"]


def test_replace_all_uses_rewires_users_and_root() -> None:
    module = parse_hlo(TEXT)
    comp = module.entry
    args = [np.arange(4, dtype=np.float32), np.full(4, 3, np.float32)]
    mul = comp.instruction("mul")
    b = comp.instruction("b")
    # mul -> b everywhere: result becomes (b + a) - b.
    mul.replace_all_uses_with(b)
    assert mul.users == ()
    _links_consistent(comp)
    comp.remove_instruction(mul)
    assert "mul" not in [i.name for i in comp.instructions]
    (result,) = HloEvaluator().evaluate_module(module, args)
    np.testing.assert_allclose(result, (args[1] + args[0]) - args[1])
    # Replacing the root moves the root.
    root = comp.root
    neg = comp.add_instruction(HloInstruction("negate", F32_4, [root]), "neg")
    root.replace_all_uses_with(neg)
    assert comp.root is neg


def test_remove_instruction_refuses_used_and_root() -> None:
    comp = parse_hlo(TEXT).entry
    with pytest.raises(ValueError, match="still used by add, sub"):
        comp.remove_instruction(comp.instruction("mul"))
    with pytest.raises(ValueError, match="root"):
        comp.remove_instruction(comp.root)


def test_replace_instruction_removes_the_old_one() -> None:
    module = parse_hlo(TEXT)
    comp = module.entry
    add = comp.instruction("add")
    new = HloInstruction("maximum", F32_4, list(add.operands))
    comp.replace_instruction(add, new)
    assert new.parent is comp and add.parent is None
    assert comp.instruction("sub").operand(0) is new
    _links_consistent(comp)


def test_clone_is_deep_and_prints_identically() -> None:
    module = parse_hlo(TEXT)
    clone = module.clone()
    assert clone.to_text() == module.to_text()
    originals = {id(i) for i in module.instructions()}
    assert not any(id(i) in originals for i in clone.instructions())
    # Changing the clone leaves the original alone.
    clone.entry.instruction("add").opcode = "maximum"
    assert "maximum" not in module.to_text()


def test_name_uniquer_follows_xla() -> None:
    uniquer = NameUniquer()
    assert [uniquer.get_unique_name("add") for _ in range(3)] == ["add", "add.1", "add.2"]
    assert uniquer.get_unique_name("add.1") == "add.3"  # taken: the next free suffix
    assert uniquer.get_unique_name("mul.7") == "mul.7"  # a free suffix is kept
    assert uniquer.get_unique_name("mul") == "mul"
    assert uniquer.get_unique_name("bad name!") == "bad_name_"
    assert uniquer.get_unique_name("1x") == "_1x"


def test_added_instructions_get_module_unique_stable_names() -> None:
    module = parse_hlo(TEXT)
    comp = module.entry
    a = comp.instruction("a")
    names = [comp.add_instruction(HloInstruction("negate", F32_4, [a])).name for _ in range(3)]
    assert names == ["negate", "negate.1", "negate.2"]
    other = HloComputation("helper")
    p = other.add_parameter(F32_4)
    other.root_instruction = other.add_instruction(HloInstruction("negate", F32_4, [p]))
    module.add_computation(other)
    assert other.root.name == "negate.3"  # unique across the whole module
    # Printing twice gives the same text: names are stable.
    assert module.to_text() == module.to_text()


def test_an_instruction_belongs_to_one_computation() -> None:
    module = HloModule("m")
    comp = HloComputation("c")
    module.add_computation(comp, is_entry=True)
    p = comp.add_parameter(F32_4)
    with pytest.raises(ValueError, match="already belongs"):
        HloComputation("d").add_instruction(p)


CYCLES = {
    "self": "  ROOT r = f32[2] negate(p), control-predecessors={r}",
    "two": "  a = f32[2] negate(p), control-predecessors={b}\n  ROOT b = f32[2] negate(a)",
}


@pytest.mark.parametrize("name", CYCLES)
def test_a_cycle_is_an_error_not_an_endless_walk(name: str) -> None:
    """Regression: a control-predecessor cycle made post_order (and so printing, cloning and
    compiling) loop forever while its stack grew without bound."""
    from xla_teach.api import compile_module
    from xla_teach.hlo.errors import VerificationError

    text = f"HloModule m\nENTRY e {{\n  p = f32[2] parameter(0)\n{CYCLES[name]}\n}}\n"
    module = parse_hlo(text)
    for action in (module.entry.post_order, module.to_text, module.clone, lambda: compile_module(text, "cpu")):
        with pytest.raises(VerificationError, match="cycle"):
            action()


def test_replace_instruction_refuses_another_shape_as_xla_does() -> None:
    module = parse_hlo("HloModule m\nENTRY e {\n  p = f32[4] parameter(0)\n  n = f32[4] negate(p)\n"
                       "  ROOT a = f32[4] abs(n)\n}\n")
    comp = module.entry
    n, root = comp.instruction("n"), comp.root
    wider = HloInstruction("broadcast", Shape.array(PrimitiveType.F32, (5,)), [comp.instruction("p")],
                           {"dimensions": (0,)})
    with pytest.raises(ValueError, match="cannot replace n .* shapes differ"):
        comp.replace_instruction(n, wider)
    assert root.operand(0) is n  # nothing changed
    same = HloInstruction("exponential", n.shape, [comp.instruction("p")])
    comp.replace_instruction(n, same)
    assert root.operand(0) is same and "n" not in {i.name for i in comp.instructions}


def test_replace_instruction_removes_what_became_unused_and_keeps_the_layout() -> None:
    """As XLA's ReplaceInstruction: reshape(reshape(x)) -> reshape(x) leaves no inner reshape,
    and a replacement that already exists in another layout is read through a copy."""
    module = parse_hlo("HloModule m\nENTRY e {\n  p = f32[2,3]{1,0} parameter(0)\n"
                       "  r1 = f32[3,2]{1,0} reshape(p)\n  r2 = f32[6]{0} reshape(r1)\n"
                       "  ROOT n = f32[6]{0} negate(r2)\n}\n")
    comp = module.entry
    direct = HloInstruction("reshape", comp.instruction("r2").shape, [comp.instruction("p")])
    assert comp.replace_instruction(comp.instruction("r2"), direct) is direct
    assert [i.name for i in comp.instructions if i.opcode == "reshape"] == [direct.name]  # r1 went with r2
    module = parse_hlo("HloModule m\nENTRY e {\n  p = f32[2,3]{0,1} parameter(0)\n"
                       "  n = f32[2,3]{1,0} negate(p)\n  ROOT a = f32[2,3]{1,0} abs(n)\n}\n")
    comp = module.entry
    kept = comp.replace_instruction(comp.instruction("n"), comp.instruction("p"))
    assert kept.opcode == "copy" and kept.shape == comp.root.shape and comp.root.operand(0) is kept
    assert comp.instruction("p").shape.layout != kept.shape.layout
