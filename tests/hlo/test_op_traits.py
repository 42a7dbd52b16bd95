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
    """A list that spells out a trait's opcodes (``("while", "conditional", "call")``), or nearly
    all of them and little else, is a copy of a fact that lives in the table: it must say
    ``CONTROL_FLOW_OPCODES`` (or ``opcodes_with(...)``, less what it leaves out), so that a new op
    joins it in one place."""
    package = Path(__file__).resolve().parents[2] / "xla_teach"
    copies = []
    for path in sorted(package.rglob("*.py")):
        if path.name == "opcodes.py":
            continue
        for line, names in _literal_opcode_groups(path):
            copies += [f"{path.relative_to(package.parent)}:{line} spells out the trait '{trait}'"
                       for trait, (_, members) in TRAITS.items() if len(members) >= 3 and _copies(names, set(members))]
    assert copies == [], "\n".join(copies)


def _copies(names: frozenset[str], members: set[str]) -> bool:
    """All of the trait's members, or at least 80 % of them in a list that is 80 % the trait's."""
    shared = len(names & members)
    return shared == len(members) or (shared >= 0.8 * len(members) and shared >= 0.8 * len(names))


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


# The elementwise ops that are not plain unary or binary arithmetic take attributes or mixed
# types: each gets a module of its own here, and a new one fails until it has one.
OTHER_ELEMENTWISE = {
    "select": ("pred[4,3] p0, f32[4,3] p1, f32[4,3] p2", "f32[4,3] select(p0, p1, p2)"),
    "clamp": ("f32[4,3] p0, f32[4,3] p1, f32[4,3] p2", "f32[4,3] clamp(p0, p1, p2)"),
    "compare": ("f32[4,3] p0, f32[4,3] p1", "pred[4,3] compare(p0, p1), direction=LT"),
    "convert": ("f32[4,3] p0", "s32[4,3] convert(p0)"),
    "bitcast-convert": ("f32[4,3] p0", "s32[4,3] bitcast-convert(p0)"),
    "reduce-precision": ("f32[4,3] p0", "f32[4,3] reduce-precision(p0), exponent_bits=5, mantissa_bits=10"),
}
EVERY_ELEMENTWISE = sorted(name for name, info in OPCODES.items() if info.kind in ELEMENTWISE_KINDS)


def _other_module(opcode: str) -> tuple[HloModule, list[np.ndarray]]:
    params, root = OTHER_ELEMENTWISE[opcode]
    shapes = [p.split()[0] for p in params.split(", ")]
    lines = "\n".join(f"  p{k} = {s} parameter({k})" for k, s in enumerate(shapes))
    module = parse_hlo(f"HloModule {opcode.replace('-', '_')}\n\nENTRY e {{\n{lines}\n  ROOT r = {root}\n}}\n")
    rng = np.random.default_rng(2)
    args = [rng.random((4, 3)) < 0.5 if s.startswith("pred") else
            (rng.standard_normal((4, 3)) * 70000).astype(np.float32) for s in shapes]
    return module, args


def test_every_elementwise_op_that_is_not_plain_arithmetic_has_a_case_here() -> None:
    plain = {name for name in EVERY_ELEMENTWISE if OPCODES[name].kind in (OpKind.UNARY, OpKind.BINARY)}
    assert sorted(set(EVERY_ELEMENTWISE) - plain) == sorted(OTHER_ELEMENTWISE)


@pytest.mark.parametrize("opcode", sorted(OTHER_ELEMENTWISE))
def test_every_other_elementwise_op_has_a_cpu_kernel_and_a_cost(opcode: str) -> None:
    """Bit for bit on the CPU (each is exact: it picks, compares or converts), and cost analysis
    counts a flop per element except for the conversions, which it counts as moves."""
    from xla_teach.hlo.analysis.cost import cost_analysis

    module, args = _other_module(opcode)
    want = evaluate_module(module, args)[0]
    np.testing.assert_array_equal(compile_module(module, "cpu").execute(args)[0], want, err_msg=opcode)
    moves = opcode in ("convert", "bitcast-convert")
    assert cost_analysis(module)["flops"] == (0 if moves else 12)


def test_every_elementwise_op_has_a_gpu_kernel() -> None:
    """The GPU's emitter writes a kernel for every elementwise op (PTX text: no device needed;
    tests/backends/gpu assembles PTX with ptxas and runs it where there is a GPU)."""
    from xla_teach import flags

    missing = []
    with flags.override(xla_teach_gpu_arch="sm_80"):
        for opcode in EVERY_ELEMENTWISE:
            if opcode in OTHER_ELEMENTWISE:
                module = _other_module(opcode)[0]
            else:
                arity = OPCODES[opcode].arity or 1
                module = _one_op(opcode, _first_type(opcode, arity) or "f32", arity)
            try:
                ptx = compile_module(module, "gpu").artifacts.ptx
            except Exception as error:  # noqa: BLE001 - named below
                missing.append(f"{opcode}: {type(error).__name__}: {error}")
                continue
            if ".entry" not in ptx:
                missing.append(f"{opcode}: no kernel in the PTX")
    assert missing == [], "\n".join(missing)
