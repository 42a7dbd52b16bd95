"""topk-decomposer: golden before/after texts, each checked on the interpreter against the
original ``topk`` -- including ties (lower index first), NaN, infinities and signed zeros."""

from __future__ import annotations

import numpy as np
import pytest

from tests.passes.pass_test_utils import assert_bitwise_same, check_pass
from xla_teach.hlo.evaluator import evaluate_module
from xla_teach.hlo.text.parser import parse_hlo
from xla_teach.passes.expanders.topk_decomposer import TopkDecomposer


def test_smallest_integers_share_one_comparator() -> None:
    check_pass(TopkDecomposer(), """
HloModule m
ENTRY main {
  x = s32[7] parameter(0)
  a = (s32[3], s32[3]) topk(x), k=3, largest=false
  b = (s32[1], s32[1]) topk(x), k=1, largest=false
  ROOT t = ((s32[3], s32[3]), (s32[1], s32[1])) tuple(a, b)
}
""", """
HloModule m
topk_compare_lt_s32 {
  lhs = s32[] parameter(0)
  rhs = s32[] parameter(1)
  lhs_index = s32[] parameter(2)
  rhs_index = s32[] parameter(3)
  ROOT lt = pred[] compare(lhs, rhs), direction=LT
}
ENTRY main {
  x = s32[7] parameter(0)
  iota = s32[7] iota(), iota_dimension=0
  sort = (s32[7], s32[7]) sort(x, iota), dimensions={0}, is_stable=true, to_apply=topk_compare_lt_s32
  get-tuple-element = s32[7] get-tuple-element(sort), index=0
  slice = s32[3] slice(get-tuple-element), slice={[0:3]}
  get-tuple-element.1 = s32[7] get-tuple-element(sort), index=1
  slice.1 = s32[3] slice(get-tuple-element.1), slice={[0:3]}
  a = (s32[3], s32[3]) tuple(slice, slice.1)
  iota.1 = s32[7] iota(), iota_dimension=0
  sort.1 = (s32[7], s32[7]) sort(x, iota.1), dimensions={0}, is_stable=true, to_apply=topk_compare_lt_s32
  get-tuple-element.2 = s32[7] get-tuple-element(sort.1), index=0
  slice.2 = s32[1] slice(get-tuple-element.2), slice={[0:1]}
  get-tuple-element.3 = s32[7] get-tuple-element(sort.1), index=1
  slice.3 = s32[1] slice(get-tuple-element.3), slice={[0:1]}
  b = (s32[1], s32[1]) tuple(slice.2, slice.3)
  ROOT t = ((s32[3], s32[3]), (s32[1], s32[1])) tuple(a, b)
}
""")


def test_no_topk_is_no_change() -> None:
    check_pass(TopkDecomposer(), """
HloModule m
ENTRY main {
  x = f32[4] parameter(0)
  ROOT n = f32[4] negate(x)
}
""", None)


TIES = """
HloModule m
ENTRY main {
  x = TYPE[3,40] parameter(0)
  ROOT t = (TYPE[3,K], s32[3,K]) topk(x), k=K, largest=LARGEST
}
"""


@pytest.mark.parametrize("etype", ["s8", "u16", "s64", "f16", "bf16", "f32"])
@pytest.mark.parametrize("largest", ["true", "false"])
@pytest.mark.parametrize("k", [0, 7, 40])
def test_ties_keep_the_lower_index_first(etype: str, largest: str, k: int) -> None:
    """Only five distinct values in a row of 40: almost every element ties with others."""
    text = TIES.replace("TYPE", etype).replace("LARGEST", largest).replace("K", str(k))
    original = parse_hlo(text)
    module = original.clone()
    assert TopkDecomposer().run(module)
    assert not any(i.opcode == "topk" for i in module.instructions())
    values = np.random.default_rng(k).integers(0, 5, (3, 40))
    args = [values.astype(original.entry.parameter(0).shape.element_type.dtype)]
    want, got = evaluate_module(original, args), evaluate_module(module, args)
    for w, g in zip(want, got, strict=True):
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))


@pytest.mark.parametrize("largest", ["true", "false"])
def test_nan_infinities_and_signed_zeros_order_totally(largest: str) -> None:
    before = parse_hlo(TIES.replace("TYPE", "f32").replace("LARGEST", largest).replace("K", "9"))
    after = before.clone()
    TopkDecomposer().run(after)
    assert_bitwise_same(before, after)
