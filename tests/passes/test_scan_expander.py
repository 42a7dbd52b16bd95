"""scan-expander: golden before/after texts of both rewrites (a cumulative op becomes a
``reduce-window``, any other scan a ``while`` loop), each checked on the interpreter against the
``scan``; then every module of tests/hlo/scan_cases.py through the CPU backend against the
interpreter, and through the GPU backend to PTX that ptxas assembles."""

from __future__ import annotations

import re

import numpy as np
import pytest

from tests.hlo.scan_cases import CASES, ScanCase, allowed_error, assert_close, cumulative
from tests.passes.pass_test_utils import assert_bitwise_same, check_pass
from xla_teach import flags
from xla_teach.api import compile_module
from xla_teach.backends.gpu.nvptx import assemble_with_ptxas, ptxas_path
from xla_teach.hlo.evaluator import HloEvaluator
from xla_teach.hlo.text.parser import parse_hlo
from xla_teach.hlo.types import PrimitiveType
from xla_teach.passes.expanders import expanders
from xla_teach.passes.expanders.scan_expander import CUMULATIVE_OPS, ScanExpander, identity


def test_a_reversed_cumulative_max_from_a_parameter_combines_its_init_afterwards() -> None:
    """``op(c, x)`` as well as ``op(x, c)``; an init that is no constant pads with the identity
    (-inf) and is max-ed in afterwards; reversed: padding above, the final carry is element 0."""
    check_pass(ScanExpander(), """
HloModule m
region {
  x_i = f32[3] parameter(0)
  carry = f32[3] parameter(1)
  m = f32[3] maximum(carry, x_i)
  ROOT t = (f32[3], f32[3]) tuple(m, m)
}
ENTRY main {
  x = f32[5,3] parameter(0)
  init = f32[3] parameter(1)
  ROOT s = (f32[5,3], f32[3]) scan(x, init), dimensions={0}, num_carries=1, is_reverse=true, to_apply=region
}
""", """
HloModule m
scan_maximum_f32 {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT maximum = f32[] maximum(a, b)
}
ENTRY main {
  x = f32[5,3] parameter(0)
  identity = f32[] constant(-inf)
  reduce-window = f32[5,3] reduce-window(x, identity), window={size=5x1 pad=0_4x0_0}, to_apply=scan_maximum_f32
  init = f32[3] parameter(1)
  broadcast = f32[5,3] broadcast(init), dimensions={1}
  maximum.1 = f32[5,3] maximum(broadcast, reduce-window)
  slice = f32[1,3] slice(maximum.1), slice={[0:1], [0:3]}
  reshape = f32[3] reshape(slice)
  ROOT s = (f32[5,3], f32[3]) tuple(maximum.1, reshape)
}
""")


NON_COMMUTATIVE = """
HloModule m
body {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  d = f32[] subtract(b, a)
  ROOT t = (f32[], f32[]) tuple(d, d)
}
ENTRY main {
  x = f32[4] parameter(0)
  init = f32[] parameter(1)
  ROOT s = (f32[4], f32[]) scan(x, init), dimensions={0}, num_carries=1, is_reverse=true, to_apply=body
}
"""


def test_a_non_commutative_body_becomes_a_while_loop() -> None:
    """A running difference is no cumulative op: a loop counting the position down from 3."""
    check_pass(ScanExpander(), NON_COMMUTATIVE, """
HloModule m
body {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  d = f32[] subtract(b, a)
  ROOT t = (f32[], f32[]) tuple(d, d)
}
s.condition {
  state = (s32[], f32[], f32[4], f32[4]) parameter(0)
  i.1 = s32[] get-tuple-element(state), index=0
  length = s32[] constant(4)
  ROOT lt = pred[] compare(i.1, length), direction=LT
}
s.body {
  state.1 = (s32[], f32[], f32[4], f32[4]) parameter(0)
  i.2 = s32[] get-tuple-element(state.1), index=0
  one = s32[] constant(1)
  next = s32[] add(i.2, one)
  input = f32[4] get-tuple-element(state.1), index=3
  last = s32[] constant(3)
  position = s32[] subtract(last, i.2)
  dynamic-slice = f32[1] dynamic-slice(input, position), dynamic_slice_sizes={1}
  reshape = f32[] reshape(dynamic-slice)
  carry = f32[] get-tuple-element(state.1), index=1
  step = (f32[], f32[]) call(reshape, carry), to_apply=body
  get-tuple-element.1 = f32[] get-tuple-element(step), index=1
  output = f32[4] get-tuple-element(state.1), index=2
  get-tuple-element = f32[] get-tuple-element(step), index=0
  reshape.1 = f32[1] reshape(get-tuple-element)
  zero.1 = s32[] constant(0)
  dynamic-update-slice = f32[4] dynamic-update-slice(output, reshape.1, position)
  ROOT tuple.1 = (s32[], f32[], f32[4], f32[4]) tuple(next, get-tuple-element.1, dynamic-update-slice, input)
}
ENTRY main {
  i = s32[] constant(0)
  init = f32[] parameter(1)
  zero = f32[] constant(0)
  broadcast = f32[4] broadcast(zero), dimensions={}
  x = f32[4] parameter(0)
  tuple = (s32[], f32[], f32[4], f32[4]) tuple(i, init, broadcast, x)
  while = (s32[], f32[], f32[4], f32[4]) while(tuple), condition=s.condition, body=s.body
  get-tuple-element.2 = f32[4] get-tuple-element(while), index=2
  get-tuple-element.3 = f32[] get-tuple-element(while), index=1
  ROOT s = (f32[4], f32[]) tuple(get-tuple-element.2, get-tuple-element.3)
}
""")


def test_a_float_sum_keeps_its_order_unless_it_is_associative() -> None:
    """Without ``is_associative=true`` the window could add a float cumsum in another order: a loop
    it is. An integer sum gives the same in any order: a window, hint or not."""
    ordered = parse_hlo(cumulative("c", "f32", (3, 8), 1, "add", "0", associative=False))
    assert ScanExpander().run(ordered)
    assert {i.opcode for i in ordered.instructions()} >= {"while", "dynamic-slice"}
    for text in (cumulative("c", "f32", (3, 8), 1, "add", "0"), cumulative("c", "s32", (3, 8), 1, "add", "0",
                                                                          associative=False)):
        module = parse_hlo(text)
        assert ScanExpander().run(module)
        assert "reduce-window" in {i.opcode for i in module.instructions()}
        assert "while" not in {i.opcode for i in module.instructions()}


def _cumulative_kinds() -> list[tuple[str, str]]:
    """Each type with each cumulative op it has (bitwise ops on integers and pred, arithmetic not on pred)."""
    kinds = []
    for etype in ("pred", "s8", "u16", "s32", "u64", "f32", "bf16"):
        for op in sorted(CUMULATIVE_OPS):
            if not (etype[0] in "fb" and op in ("and", "or", "xor") or etype == "pred" and op in ("add", "multiply")):
                kinds.append((etype, op))
    return kinds


def _literal(value: object) -> str:
    return str(value).lower()  # True -> true, -inf, 255...


@pytest.mark.parametrize(("etype", "op"), _cumulative_kinds())
def test_every_cumulative_op_on_special_values_bit_for_bit(etype: str, op: str) -> None:
    """Integer extremes, NaN, infinities, signed zeros; the init the identity (it pads the window),
    another constant (it pads for max, min, and, or; it is combined in for the rest) and a
    parameter (combined in). Bit for bit wherever the grouping cannot change the result: integers,
    max and min; for a float sum or product, forward from the identity, which the window adds in
    the scan's own order (the other float cases are within rounding: tests/hlo/scan_cases.py)."""
    ptype = PrimitiveType.from_name(etype)
    any_order = not ptype.is_float or op in ("maximum", "minimum")
    zero = identity(op, ptype)
    other = "7" if etype != "pred" else "false" if bool(zero) else "true"
    for init in (_literal(zero), other):
        for reverse in (False, True):
            before = parse_hlo(cumulative("c", etype, (4, 9), 1, op, init, reverse=reverse))
            after = before.clone()
            assert ScanExpander().run(after)
            assert {i.opcode for i in after.instructions()} >= {"reduce-window", "slice"}
            if any_order or (not reverse and init == _literal(zero)):
                assert_bitwise_same(before, after)
    text = re.sub(r"  k = .* constant\(.*\)\n  init = (\S+) broadcast\(k\), dimensions=\{\}",
                  r"  init = \1 parameter(1)", cumulative("c", etype, (4, 9), 0, op, "0" if etype != "pred" else "true"))
    with_parameter = parse_hlo(text)
    after = with_parameter.clone()
    assert ScanExpander().run(after)
    assert {i.opcode for i in after.instructions()} >= {"reduce-window", "broadcast", op}
    if any_order:
        assert_bitwise_same(with_parameter, after)


def test_the_expanders_run_it_and_leave_no_scan() -> None:
    assert any(isinstance(p, ScanExpander) for p in expanders())
    optimized = compile_module(NON_COMMUTATIVE, "cpu").module
    assert not any(i.opcode in ("scan", "call") for i in optimized.instructions())  # the body was inlined


# ---- the backends ----------------------------------------------------------------------------
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_the_cpu_backend_computes_what_the_interpreter_computes(case: ScanCase) -> None:
    executable = compile_module(case.text, "cpu")
    assert not any(i.opcode == "scan" for i in executable.module.instructions())
    for seed in range(2):
        args = case.args(np.random.default_rng(seed))
        want = HloEvaluator().evaluate_module(parse_hlo(case.text), args)
        got = executable.execute(args)
        assert_close(got, want, allowed_error(case, args, want), f"{case.name} (seed {seed}): cpu vs interpreter")


@pytest.mark.parametrize("name", ["cumsum_rows", "cummax_columns_reversed", "cumsum_from_a_parameter", "affine_rows",
                                  "no_carries"])
def test_column_major_operands_and_results_keep_their_layouts(name: str) -> None:
    """Every array of the module laid out column-major ({0,1}): what replaces the scan, the loop
    state and the stored outputs are laid out as their readers expect (else they read garbage)."""
    case = next(c for c in CASES if c.name == name)
    text = re.sub(r"(\w+\[\d+,\d+\])(?!\{)", r"\1{0,1}", case.text)
    assert "{0,1}" in text
    args = case.args(np.random.default_rng(3))
    want = HloEvaluator().evaluate_module(parse_hlo(text), args)
    got = compile_module(text, "cpu").execute(args)
    assert_close(got, want, allowed_error(case, args, want), f"{name}, column-major")


def test_the_cpu_runs_a_cumulative_scan_as_its_one_pass_scan_kernel() -> None:
    from xla_teach.backends.cpu.kernels.scan import scan_dimension

    case = next(c for c in CASES if c.name == "cumsum_rows")
    optimized = compile_module(case.text, "cpu").module
    windows = [i for c in optimized.computations for i in c.instructions if i.opcode == "reduce-window"]
    assert windows and all(scan_dimension(w) == (1, False) for w in windows)


@pytest.mark.skipif(ptxas_path() is None, reason="ptxas is not on PATH")
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_the_gpu_backend_compiles_it_to_ptx_that_assembles(case: ScanCase) -> None:
    with flags.override(xla_teach_gpu_arch="sm_80"):
        executable = compile_module(case.text, "gpu")
    assert not any(i.opcode == "scan" for i in executable.module.instructions())
    ptx = executable.artifacts.ptx
    assert ".entry" in ptx or case.name == "empty"
    ok, log = assemble_with_ptxas(ptx, "sm_80")
    assert ok, f"{case.name}: ptxas rejected the PTX:\n{log}"
