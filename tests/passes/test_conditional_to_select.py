"""conditional-to-select: conditionals inside reducers/comparators/mapped functions become
selects (golden text), with the same results on the interpreter -- predicate and branch-index
forms (out-of-range indices included), tuple results, nested conditionals -- while conditionals
elsewhere, or with side effects or loops in a branch, are kept. The CPU and GPU backends then
compile reducers written with a conditional."""

from __future__ import annotations

import numpy as np
import pytest

from tests.passes.pass_test_utils import assert_same_results, check_pass
from xla_teach.api import compile_module
from xla_teach.hlo.evaluator import evaluate_module
from xla_teach.hlo.text.parser import parse_hlo
from xla_teach.passes.expanders.conditional_to_select import ConditionalToSelect

BRANCH_INDEX_MAP = """
HloModule m
neg { p = f32[] parameter(0)  ROOT n = f32[] negate(p) }
double { p = f32[] parameter(0)  ROOT d = f32[] add(p, p) }
square { p = f32[] parameter(0)  ROOT s = f32[] multiply(p, p) }
pick {
  x = f32[] parameter(0)
  i = s32[] parameter(1)
  ROOT c = f32[] conditional(i, x, x, x), branch_computations={neg, double, square}
}
ENTRY main {
  x = f32[7] parameter(0)
  i = s32[7] parameter(1)
  ROOT m = f32[7] map(x, i), dimensions={0}, to_apply=pick
}
"""

TUPLE_RESULT_SORT = """
HloModule m
by_key {
  p = (f32[], f32[]) parameter(0)
  a = f32[] get-tuple-element(p), index=0
  b = f32[] get-tuple-element(p), index=1
  ROOT t = (f32[], f32[]) tuple(a, b)
}
swapped {
  p = (f32[], f32[]) parameter(0)
  a = f32[] get-tuple-element(p), index=0
  b = f32[] get-tuple-element(p), index=1
  ROOT t = (f32[], f32[]) tuple(b, a)
}
less {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ia = s32[] parameter(2)
  ib = s32[] parameter(3)
  descending = pred[] compare(ia, ib), direction=LT
  t = (f32[], f32[]) tuple(a, b)
  c = (f32[], f32[]) conditional(descending, t, t), true_computation=by_key, false_computation=swapped
  l = f32[] get-tuple-element(c), index=0
  r = f32[] get-tuple-element(c), index=1
  ROOT lt = pred[] compare(l, r), direction=LT
}
ENTRY main {
  x = f32[9] parameter(0)
  i = s32[9] iota(), iota_dimension=0
  ROOT s = (f32[9], s32[9]) sort(x, i), dimensions={0}, to_apply=less
}
"""


def test_golden_branch_index_form_in_a_mapped_function() -> None:
    """(The predicate form's golden text is the pass docstring's example, checked by
    tests/passes/test_pass_docstrings.py.)"""
    check_pass(ConditionalToSelect(), """
HloModule m
neg { p = f32[] parameter(0)  ROOT n = f32[] negate(p) }
keep { ROOT v = f32[] parameter(0) }
pick {
  x = f32[] parameter(0)
  i = s32[] parameter(1)
  ROOT c = f32[] conditional(i, x, x), branch_computations={neg, keep}
}
ENTRY main {
  x = f32[5] parameter(0)
  i = s32[5] parameter(1)
  ROOT m = f32[5] map(x, i), dimensions={0}, to_apply=pick
}
""", """
HloModule m
neg { p = f32[] parameter(0)  ROOT n = f32[] negate(p) }
keep { ROOT v = f32[] parameter(0) }
pick {
  i = s32[] parameter(1)
  constant = s32[] constant(0)
  compare = pred[] compare(i, constant), direction=EQ
  x = f32[] parameter(0)
  call = f32[] call(x), to_apply=neg
  call.1 = f32[] call(x), to_apply=keep
  ROOT c = f32[] select(compare, call, call.1)
}
ENTRY main {
  x = f32[5] parameter(0)
  i = s32[5] parameter(1)
  ROOT m = f32[5] map(x, i), dimensions={0}, to_apply=pick
}
""")


def test_branch_index_form_picks_the_last_branch_when_out_of_range() -> None:
    before = parse_hlo(BRANCH_INDEX_MAP)
    after = before.clone()
    assert ConditionalToSelect().run(after)
    pick = after.computation("pick")
    assert [i.opcode for i in pick.instructions].count("select") == 2
    assert "conditional" not in [i.opcode for i in pick.instructions]
    x = np.array([1.5, -2.0, 3.0, 4.0, -5.0, 6.0, 0.5], np.float32)
    i = np.array([0, 1, 2, -1, 3, 99, 1], np.int32)
    got = evaluate_module(after, [x, i])[0]
    np.testing.assert_array_equal(got, evaluate_module(before, [x, i])[0])
    np.testing.assert_array_equal(got, [-1.5, -4.0, 9.0, 16.0, 25.0, 36.0, 1.0])


def test_tuple_results_are_selected_element_by_element() -> None:
    before = parse_hlo(TUPLE_RESULT_SORT)
    after = before.clone()
    assert ConditionalToSelect().run(after)
    assert_same_results(before, after)


def test_conditionals_outside_embedded_computations_are_kept() -> None:
    check_pass(ConditionalToSelect(), """
HloModule m
neg { p = f32[4] parameter(0)  ROOT n = f32[4] negate(p) }
keep { ROOT p = f32[4] parameter(0) }
ENTRY main {
  b = pred[] parameter(0)
  x = f32[4] parameter(1)
  ROOT c = f32[4] conditional(b, x, x), true_computation=neg, false_computation=keep
}
""", None)


@pytest.mark.parametrize("branch_body", [
    "ROOT r = f32[] rng(p, p), distribution=rng_uniform",
    "one = f32[] constant(1)\n  w = f32[] while(p), condition=never, body=step\n  ROOT r = f32[] add(w, one)",
])
def test_branches_with_side_effects_or_loops_are_kept(branch_body: str) -> None:
    pass_ = ConditionalToSelect()
    check_pass(pass_, f"""
HloModule m
never {{ p = f32[] parameter(0)  ROOT f = pred[] constant(false) }}
step {{ p = f32[] parameter(0)  ROOT n = f32[] negate(p) }}
odd {{
  p = f32[] parameter(0)
  {branch_body}
}}
keep {{ ROOT v = f32[] parameter(0) }}
reducer {{
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  gt = pred[] compare(a, b), direction=GT
  ROOT c = f32[] conditional(gt, a, b), true_computation=odd, false_computation=keep
}}
ENTRY main {{
  x = f32[5] parameter(0)
  init = f32[] constant(0)
  ROOT r = f32[] reduce(x, init), dimensions={{0}}, to_apply=reducer
}}
""", None, semantics=False)
    assert any("kept" in note for note in pass_.notes)


@pytest.mark.parametrize("backend", ["cpu", "gpu"])
@pytest.mark.parametrize("text", [BRANCH_INDEX_MAP, TUPLE_RESULT_SORT], ids=["map_branch_index", "sort_tuple"])
def test_backends_compile_embedded_conditionals(text: str, backend: str) -> None:
    module = parse_hlo(text)
    executable = compile_module(module, backend)  # used to fail: no elemental generator for conditional
    if backend == "gpu":
        assert ".entry" in executable.artifacts.ptx
        return
    rng = np.random.default_rng(0)
    args = [rng.standard_normal(p.shape.dimensions).astype(np.float32) if p.shape.element_type.is_float
            else rng.integers(-2, 5, p.shape.dimensions).astype(np.int32)
            for p in module.entry.parameter_instructions]
    got = executable.execute(args)
    want = evaluate_module(module, args)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g, w)
