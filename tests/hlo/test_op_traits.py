"""Op facts are declared once (``hlo/opcodes.py``: each row, and the TRAITS table) and checked
against what the ops do: a trait is true of every op that claims it (the interpreter is the
oracle), and every op reaches every registry it must -- shape inference, the interpreter, and
for an elementwise op the CPU's elemental emitter and cost analysis -- so a new op fails here, by
name, where it is missing. No module spells a trait's opcodes out instead of naming the trait.
(The front end's autodiff registry has its own check: tests/frontend/test_autodiff_coverage.py.)"""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest

from xla_teach.api import compile_module
from xla_teach.hlo.evaluator import HANDLERS, evaluate_module
from xla_teach.hlo.ir import HloModule
from xla_teach.hlo.opcodes import (
    ALIASING_OPCODES,
    BUFFER_NAMING_OPCODES,
    ELEMENTWISE_KINDS,
    OPCODES,
    TRAITS,
    OpKind,
    opcodes_with,
)
from xla_teach.hlo.shape import Shape
from xla_teach.hlo.shape_inference import DECLARED_SHAPE_OPCODES, INFERENCE_RULES, infer_shape
from xla_teach.hlo.text.parser import parse_hlo


def test_every_set_of_opcodes_comes_from_the_traits_and_every_trait_names_real_opcodes() -> None:
    for trait, (meaning, names) in TRAITS.items():
        assert meaning and set(names) <= set(OPCODES), (trait, set(names) - set(OPCODES))
        assert opcodes_with(trait) == frozenset(names)
    assert ALIASING_OPCODES <= BUFFER_NAMING_OPCODES  # what aliases an operand computes nothing either
    with pytest.raises(ValueError, match="unknown op trait"):
        opcodes_with("fast")


def _literal_opcode_groups(path: Path) -> list[tuple[int, frozenset[str]]]:
    """The sets, tuples and lists of three or more opcode names written out in ``path``."""
    groups = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, (ast.Set, ast.Tuple, ast.List)):
            names = {e.value for e in node.elts if isinstance(e, ast.Constant) and e.value in OPCODES}
            if len(names) >= 3:
                groups.append((node.lineno, frozenset(names)))
    return groups


def test_no_module_writes_out_a_trait_instead_of_naming_it() -> None:
    """A list that spells out every opcode of a trait (``("while", "conditional", "call")``) is a
    copy of a fact that lives in the table: it must say ``CONTROL_FLOW_OPCODES`` (or
    ``opcodes_with(...)``), so that a new op joins it in one place."""
    package = Path(__file__).resolve().parents[2] / "xla_teach"
    copies = []
    for path in sorted(package.rglob("*.py")):
        if path.name == "opcodes.py":
            continue
        for line, names in _literal_opcode_groups(path):
            copies += [f"{path.relative_to(package.parent)}:{line} spells out the trait '{trait}'"
                       for trait, (_, members) in TRAITS.items() if len(members) >= 3 and set(members) <= names]
    assert copies == [], "\n".join(copies)


def _one_op(opcode: str, dtype: str, arity: int) -> HloModule:
    params = "\n".join(f"  p{k} = {dtype}[4,3] parameter({k})" for k in range(arity))
    operands = ", ".join(f"p{k}" for k in range(arity))
    result = infer_shape(opcode, [Shape.array(dtype, (4, 3))] * arity).to_text(print_layout=False)
    text = f"HloModule {opcode.replace('-', '_')}\n\nENTRY e {{\n{params}\n  ROOT r = {result} {opcode}({operands})\n}}\n"
    return parse_hlo(text)


@pytest.mark.parametrize("trait", ["commutative", "associative"])
def test_commutative_and_associative_ops_are_so(trait: str) -> None:
    """On integers (exact, so regrouping changes nothing) and booleans where the op is bitwise."""
    rng = np.random.default_rng(0)
    for opcode in sorted(opcodes_with(trait)):
        dtype = "s32" if opcode not in ("and", "or", "xor") else "pred"
        module = _one_op(opcode, dtype, 2)
        a, b, c = (rng.integers(-50, 50, (4, 3)).astype(np.int32) if dtype == "s32" else rng.random((4, 3)) < 0.5
                   for _ in range(3))
        f = lambda x, y, m=module: evaluate_module(m, [x, y])[0]  # noqa: E731
        if trait == "commutative":
            np.testing.assert_array_equal(f(a, b), f(b, a), err_msg=opcode)
        else:
            np.testing.assert_array_equal(f(f(a, b), c), f(a, f(b, c)), err_msg=opcode)


def test_every_opcode_has_a_shape_rule_and_an_interpreter_handler() -> None:
    no_rule = sorted(set(OPCODES) - set(INFERENCE_RULES) - set(DECLARED_SHAPE_OPCODES))
    no_handler = sorted(set(OPCODES) - set(HANDLERS) - {"parameter"})  # parameters are bound, not evaluated
    assert no_rule == [] and no_handler == [], (no_rule, no_handler)


def _first_type(opcode: str, arity: int) -> str | None:
    for dtype in ("f32", "s32", "pred"):
        try:
            infer_shape(opcode, [Shape.array(dtype, (4, 3))] * arity)
            return dtype
        except Exception:  # noqa: BLE001 - not a type this op takes
            continue
    return None


ELEMENTWISE = sorted(name for name, info in OPCODES.items()
                     if info.kind in (OpKind.UNARY, OpKind.BINARY) and info.kind in ELEMENTWISE_KINDS)


@pytest.mark.parametrize("opcode", ELEMENTWISE)
def test_every_elementwise_op_has_a_cpu_kernel_that_agrees_with_the_interpreter(opcode: str) -> None:
    arity = OPCODES[opcode].arity or 1
    dtype = _first_type(opcode, arity)
    assert dtype is not None, f"{opcode}: no element type its shape rule accepts"
    module = _one_op(opcode, dtype, arity)
    rng = np.random.default_rng(1)
    args = [(rng.uniform(0.25, 2.0, (4, 3)).astype(np.float32) if dtype == "f32" else
             rng.integers(1, 9, (4, 3)).astype(np.int32) if dtype == "s32" else rng.random((4, 3)) < 0.5)
            for _ in range(arity)]
    want = evaluate_module(module, args)[0]
    got = compile_module(module, "cpu").execute(args)[0]
    if dtype == "f32":  # a few ulp: the CPU's math library against NumPy's
        np.testing.assert_allclose(got, want, rtol=64 * np.finfo(np.float32).eps, atol=0, err_msg=opcode)
    else:
        np.testing.assert_array_equal(got, want, err_msg=opcode)


@pytest.mark.parametrize("opcode", ELEMENTWISE)
def test_cost_analysis_counts_every_elementwise_op_by_its_traits(opcode: str) -> None:
    """One flop per element, or one transcendental per element for the ops the table calls
    transcendental (XLA's HloCostAnalysis counts them apart); bytes: operands and result."""
    from xla_teach.hlo.analysis.cost import cost_analysis

    arity = OPCODES[opcode].arity or 1
    dtype = _first_type(opcode, arity)
    assert dtype is not None
    module = _one_op(opcode, dtype, arity)
    cost = cost_analysis(module)
    transcendental = opcode in opcodes_with("transcendental")
    assert (cost["flops"], cost["transcendentals"]) == ((0, 12) if transcendental else (12, 0))
    root = module.entry.root
    assert cost["bytes accessed"] == sum(12 * s.shape.element_type.byte_size for s in [root, *root.operands])


def test_cost_analysis_gives_index_mapped_ops_no_flops() -> None:
    from xla_teach.hlo.analysis.cost import cost_analysis

    module = parse_hlo("HloModule m\n\nENTRY e {\n  p = f32[4,3] parameter(0)\n  t = f32[3,4] transpose(p), "
                       "dimensions={1,0}\n  r = f32[12] reshape(t)\n  ROOT s = f32[6] slice(r), slice={[0:6]}\n}\n")
    assert cost_analysis(module)["flops"] == 0
