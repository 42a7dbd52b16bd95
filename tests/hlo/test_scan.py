"""``scan`` (XLA's kScan; JAX 0.11 writes cumsum, cumprod, cummax... with it): the interpreter
against real XLA on every module of tests/hlo/scan_cases.py, the worked example's numbers, shape
inference's errors, and the parser's."""

from __future__ import annotations

import numpy as np
import pytest

from tests.hlo.inference_helpers import S, error
from tests.hlo.scan_cases import AFFINE, CASES, EMPTY, ScanCase, allowed_error, assert_close
from tests.hlo.xla_oracle import run_on_xla
from xla_teach.hlo.errors import VerificationError
from xla_teach.hlo.evaluator import HloEvaluator, evaluate_module
from xla_teach.hlo.ir import HloComputation
from xla_teach.hlo.shape import Shape
from xla_teach.hlo.shape_inference import infer_shape
from xla_teach.hlo.text.parser import HloParseError, parse_hlo
from xla_teach.hlo.verifier import verify_module


# ---- what it computes ---------------------------------------------------------------------------
def test_the_worked_example_forward_and_reversed() -> None:
    """body(a, b) = (2a + b, b - 10) over x = [1, 2, 3, 4] from 100 (the numbers XLA gives)."""
    x, init = np.array([1, 2, 3, 4], np.float32), np.float32(100)
    outputs, carry = evaluate_module(parse_hlo(AFFINE.replace("ATTRS", "")), [x, init])
    np.testing.assert_array_equal(outputs, [102, 94, 86, 78])
    assert carry == 60
    outputs, carry = evaluate_module(parse_hlo(AFFINE.replace("ATTRS", ", is_reverse=true")), [x, init])
    np.testing.assert_array_equal(outputs, [72, 84, 96, 108])  # step i still stored at position i
    assert carry == 60


@pytest.mark.parametrize("case", [c for c in CASES if c.on_xla], ids=lambda c: c.name)
def test_the_interpreter_computes_what_xla_computes(case: ScanCase) -> None:
    for seed in range(2):
        args = case.args(np.random.default_rng(seed))
        want = HloEvaluator().evaluate_module(parse_hlo(case.text), args)
        got = run_on_xla(case.text, args)
        assert_close(want, got, allowed_error(case, args, want), f"{case.name} (seed {seed}): interpreter vs XLA")


def test_a_scan_of_no_steps_gives_empty_outputs_and_its_inits() -> None:
    """Length 0 (XLA 0.10.2 rejects it in its own expander): nothing runs."""
    init = np.array([3, 4], np.float32)
    outputs, carry = evaluate_module(parse_hlo(EMPTY), [np.zeros((2, 0), np.float32), init])
    assert outputs.shape == (2, 0) and outputs.dtype == np.float32
    np.testing.assert_array_equal(carry, init)


# ---- shapes -------------------------------------------------------------------------------------
def _body(params: list[str], results: list[str] | None) -> HloComputation:
    """A computation taking ``params`` that returns the tuple of ``results`` (each the parameter
    of that index when it has that shape, else zeros of that shape); ``None``: its parameter 0."""
    lines = [f"  p{k} = {p} parameter({k})" for k, p in enumerate(params)]
    if results is None:
        return parse_hlo("HloModule b\nENTRY body {\n" + "\n".join(lines) + "\n}\n").entry
    names = []
    for k, r in enumerate(results):
        if k < len(params) and params[k] == r:
            names.append(f"p{k}")
        else:
            lines += [f"  z{k} = {r.split('[')[0]}[] constant(0)", f"  c{k} = {r} broadcast(z{k}), dimensions={{}}"]
            names.append(f"c{k}")
    root = f"  ROOT t = ({', '.join(results)}) tuple({', '.join(names)})"
    text = "HloModule b\nENTRY body {\n" + "\n".join(lines) + "\n" + root + "\n}\n"
    return parse_hlo(text).entry


def _scan(operands: list[str], body: HloComputation, d: int = 0, carries: int = 1, **declared: str) -> str:
    attrs = {"dimensions": (d,), "num_carries": carries, "to_apply": body}
    shape = S(declared["declared"]) if declared else None
    return infer_shape("scan", [S(o) for o in operands], attrs, declared_shape=shape).to_text(print_layout=False)


def test_shape_stacks_the_outputs_along_the_dimension_and_keeps_the_carries() -> None:
    body = _body(["f32[2]", "s32[]"], ["pred[2,5]", "s32[]"])
    assert _scan(["f32[2,7]", "s32[]"], body, d=1) == "(pred[2,7,5], s32[])"
    no_carry = _body(["f32[2]"], ["f32[2]"])
    assert _scan(["f32[7,2]"], no_carry, carries=0) == "(f32[7,2])"
    carry_only = _body(["f32[]"], ["f32[]", "f32[]"])
    assert _scan(["f32[]"], carry_only, declared="(f32[3], f32[])") == "(f32[3], f32[])"


@pytest.mark.parametrize(("operands", "params", "results", "attrs", "fragment"), [
    (["f32[4]", "f32[]"], ["f32[]", "f32[]"], ["f32[]", "f32[]"], {"num_carries": 3},
     "num_carries=3 must be between 0 and the 2 operand(s)"),
    (["f32[4]", "f32[]"], ["f32[]", "f32[]"], ["f32[]", "f32[]"], {"dimensions": (0, 0)},
     "must name exactly one dimension"),
    (["f32[4]", "f32[]"], ["f32[]", "f32[]"], ["f32[]", "f32[]"], {"dimensions": (1,)},
     "dimensions={1} is out of range for input 0 f32[4]"),
    (["f32[4]", "f32[3]", "f32[]"], ["f32[]", "f32[]", "f32[]"], ["f32[]", "f32[]"], {},
     "the inputs must have the same length along the scan dimension 0, got f32[4], f32[3]"),
    (["f32[4]", "f32[]"], ["f32[]", "f32[]", "f32[]"], ["f32[]", "f32[]"], {},
     "has 1 input(s) and 1 carry(ies) (num_carries=1) but to_apply=%body (f32[], f32[], f32[]) -> (f32[], f32[]) "
     "takes 3 parameter(s), one per operand"),
    (["f32[4]", "f32[]"], ["f32[]", "s32[]"], ["f32[]", "f32[]"], {},
     "parameter 1 is s32[] but the argument is f32[]"),
    (["f32[4]", "f32[]"], ["f32[]", "f32[]"], ["f32[]", "s32[]"], {},
     "returns carry 0 as s32[], but its initial value is f32[]"),
    (["f32[4]", "f32[]"], ["f32[]", "f32[]"], None, {}, "must return a tuple (outputs..., new carries...)"),
    (["f32[2,4]", "f32[2]"], ["f32[2]", "f32[2]"], ["f32[]", "f32[2]"], {"dimensions": (1,)},
     "output 0 of to_apply=%body (f32[2], f32[2]) -> (f32[], f32[2]) is f32[]: the scan dimension 1 cannot be"),
    (["f32[]"], ["f32[]"], ["f32[]"], {}, "needs at least one input or one output"),
    (["f32[]"], ["f32[]"], ["f32[]", "f32[]"], {}, "a scan without inputs takes its length from its declared result"),
])
def test_shape_errors_name_the_op_and_the_shapes(operands: list[str], params: list[str], results: list[str] | None,
                                                 attrs: dict[str, object], fragment: str) -> None:
    full = {"dimensions": (0,), "num_carries": 1, "to_apply": _body(params, results), **attrs}
    message = error("scan", operands, full)
    assert message.startswith("scan: ") and fragment in message, message


def test_the_verifier_checks_the_declared_result() -> None:
    text = AFFINE.replace("ATTRS", "").replace("ROOT r = (f32[4], f32[])", "ROOT r = (f32[5], f32[])")
    with pytest.raises(VerificationError, match=r"declared \(f32\[5\], f32\[\]\) but inferred \(f32\[4\], f32\[\]\)"):
        verify_module(parse_hlo(text))


def test_a_wrong_number_of_operands_is_a_clear_verifier_error() -> None:
    text = AFFINE.replace("ATTRS", "").replace("scan(x, i)", "scan(x, i, i)")
    with pytest.raises(VerificationError) as caught:
        verify_module(parse_hlo(text))
    assert ("scan %r: has 2 input(s) and 1 carry(ies) (num_carries=1) but to_apply=%body (f32[], f32[]) -> "
            "(f32[], f32[]) takes 2 parameter(s), one per operand") in str(caught.value)


# ---- text ---------------------------------------------------------------------------------------
def test_it_prints_its_attributes_in_xlas_order_and_reads_them_back() -> None:
    text = AFFINE.replace("ATTRS", ", is_reverse=true, is_associative=true")
    printed = parse_hlo(text).to_text()
    assert "scan(%x, %i), dimensions={0}, num_carries=1, is_reverse=true, is_associative=true, to_apply=%body" \
        in printed
    assert parse_hlo(printed).to_text() == printed
    plain = parse_hlo(AFFINE.replace("ATTRS", ", is_reverse=false")).to_text()  # defaults are left out
    assert "num_carries=1, to_apply=%body" in plain


@pytest.mark.parametrize(("change", "fragment"), [
    (("num_carries=1", "num_carries=one"), "bad value for attribute 'num_carries' of scan"),
    (("num_carries=1", "num_carries=1, is_reverse=maybe"), "bad value for attribute 'is_reverse' of scan"),
    (("num_carries=1", "num_carries=1, is_stable=true"), "scan does not take this attribute"),
    ((", num_carries=1", ""), "scan needs the attribute 'num_carries'"),
    (("dimensions={0}, ", ""), "scan needs the attribute 'dimensions'"),
])
def test_bad_attributes_are_parse_errors(change: tuple[str, str], fragment: str) -> None:
    with pytest.raises(HloParseError, match=fragment.replace("(", r"\(")):
        parse_hlo(AFFINE.replace("ATTRS", "").replace(*change))


def test_the_builder_makes_a_scan_with_and_without_inputs() -> None:
    from xla_teach import XlaBuilder

    b = XlaBuilder("m")
    step = b.create_sub_builder("step")
    total = step.parameter(0, Shape.array("f32", (2,)), "x_i") + step.parameter(1, Shape.array("f32", (2,)), "c")
    body = step.build_computation(step.tuple([total, total]))
    x = b.parameter(0, Shape.array("f32", (2, 5)), "x")
    scan = b.scan([x], [b.broadcast(b.constant(np.float32(0)), (2,))], body, 1, is_associative=True)
    assert scan.shape.to_text(print_layout=False) == "(f32[2,5], f32[2])"
    count = b.create_sub_builder("count")
    c = count.parameter(0, Shape.scalar("s32"), "c")
    counting = count.build_computation(count.tuple([c, c + 1]))
    steps = b.scan([], [b.constant(np.int32(5))], counting, 0, length=3)
    assert steps.shape.to_text(print_layout=False) == "(s32[3], s32[])"
    module = b.build(b.tuple([scan, steps]))
    verify_module(module)
    got = evaluate_module(module, [np.arange(10, dtype=np.float32).reshape(2, 5)])
    np.testing.assert_array_equal(got[0], np.cumsum(np.arange(10).reshape(2, 5), axis=1))
    np.testing.assert_array_equal(got[2], [5, 6, 7])
    assert got[3] == 8
