"""Shape inference, part 2: reductions, windows, dot/convolution, gather/scatter,
control flow and the special ops (examples from the operation-semantics reference)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.hlo.inference_helpers import S, comp, error, infer, window
from xla_teach.hlo.attributes import ConvDimensionNumbers, PaddingDim


# ---------------------------------------------------------------------------------------
# Reductions and windows
# ---------------------------------------------------------------------------------------
def test_reduce() -> None:
    attrs = {"dimensions": (0,), "to_apply": comp("add_f32")}
    assert infer("reduce", ["f32[4,3]", "f32[]"], attrs) == "f32[3]"
    assert infer("reduce", ["f32[4,3]", "f32[]"], {**attrs, "dimensions": (0, 1)}) == "f32[]"


def test_variadic_reduce_gives_a_tuple() -> None:
    attrs = {"dimensions": (1,), "to_apply": comp("argmax")}
    assert infer("reduce", ["f32[4,3]", "s32[4,3]", "f32[]", "s32[]"], attrs) == "(f32[4], s32[4])"


def test_reduce_checks_the_reducer_signature() -> None:
    message = error("reduce", ["f32[4]", "f32[]"], {"dimensions": (0,), "to_apply": comp("add_three")})
    assert "%add_three" in message and "takes 3 parameter(s)" in message
    message = error("reduce", ["f32[4]", "f32[]"], {"dimensions": (0,), "to_apply": comp("add_to_s32")})
    assert "must return f32[]" in message
    message = error("reduce", ["s32[4]", "s32[]"], {"dimensions": (0,), "to_apply": comp("add_f32")})
    assert "parameter 0 is f32[]" in message and "s32[]" in message
    assert "init value 0 must be a scalar" in error("reduce", ["f32[4]", "f32[4]"],
                                                    {"dimensions": (0,), "to_apply": comp("add_f32")})
    assert "out of range" in error("reduce", ["f32[4]", "f32[]"], {"dimensions": (1,), "to_apply": comp("add_f32")})


@pytest.mark.parametrize("operand, win, result", [
    ("f32[8]", "size=2 stride=3 rhs_dilate=2", "f32[2]"),  # operation-semantics example
    ("f32[1,6,6,2]", "size=1x2x2x1 stride=1x2x2x1", "f32[1,3,3,2]"),
    ("f32[4]", "size=2 lhs_dilate=2", "f32[6]"),  # dilated base: 7 cells
    ("f32[5]", "size=3 pad=1_1", "f32[5]"),
    ("f32[5]", "size=3 stride=2 pad=-1_0", "f32[1]"),
    ("f32[2]", "size=3", "f32[0]"),
])
def test_reduce_window_output_sizes(operand: str, win: str, result: str) -> None:
    attrs = {"window": window(win), "to_apply": comp("add_f32")}
    assert infer("reduce-window", [operand, "f32[]"], attrs) == result


def test_reduce_window_errors() -> None:
    attrs = {"window": window("size=2x2"), "to_apply": comp("add_f32")}
    assert "window has 2 dimensions" in error("reduce-window", ["f32[4]", "f32[]"], attrs)
    attrs = {"window": window("size=2 stride=0"), "to_apply": comp("add_f32")}
    assert "non-positive" in error("reduce-window", ["f32[4]", "f32[]"], attrs)


def test_select_and_scatter() -> None:
    attrs = {"window": window("size=2x2 stride=2x2"), "select": comp("ge_f32"), "scatter": comp("add_f32")}
    assert infer("select-and-scatter", ["f32[4,6]", "f32[2,3]", "f32[]"], attrs) == "f32[4,6]"
    assert "window output dimensions [2,3]" in error("select-and-scatter", ["f32[4,6]", "f32[3,3]", "f32[]"], attrs)
    bad = {**attrs, "select": comp("add_f32")}
    assert "must return pred[]" in error("select-and-scatter", ["f32[4,6]", "f32[2,3]", "f32[]"], bad)


def test_sort_and_topk() -> None:
    assert infer("sort", ["f32[3,5]"], {"dimensions": (1,), "to_apply": comp("ge_f32")}) == "f32[3,5]"
    pair = {"dimensions": (0,), "to_apply": comp("lt_pairs")}
    assert infer("sort", ["f32[5]", "s32[5]"], pair) == "(f32[5], s32[5])"
    assert "takes 4 parameter(s)" in error("sort", ["f32[5]"], pair)
    assert infer("topk", ["f32[3,10]"], {"k": 2}) == "(f32[3,2], s32[3,2])"
    assert "k=11" in error("topk", ["f32[3,10]"], {"k": 11})


# ---------------------------------------------------------------------------------------
# dot and convolution
# ---------------------------------------------------------------------------------------
def dot_attrs(lc: tuple, rc: tuple, lb: tuple = (), rb: tuple = ()) -> dict:
    return {"lhs_contracting_dims": lc, "rhs_contracting_dims": rc, "lhs_batch_dims": lb, "rhs_batch_dims": rb}


def test_dot() -> None:
    assert infer("dot", ["f32[2,3]", "f32[3,4]"], dot_attrs((1,), (0,))) == "f32[2,4]"
    assert infer("dot", ["f32[5,2,3]", "f32[5,3,4]"], dot_attrs((2,), (1,), (0,), (0,))) == "f32[5,2,4]"
    assert infer("dot", ["f32[3,2]", "f32[4,3]"], dot_attrs((0,), (1,))) == "f32[2,4]"
    assert infer("dot", ["f32[2]", "f32[3]"], dot_attrs((), ())) == "f32[2,3]"  # outer product
    assert infer("dot", ["f32[3]", "f32[3]"], dot_attrs((0,), (0,))) == "f32[]"
    # batch dims first, then lhs free, then rhs free (batch not leading in the operands)
    assert infer("dot", ["f32[2,7,3]", "f32[3,7,4]"], dot_attrs((2,), (0,), (1,), (1,))) == "f32[7,2,4]"


def test_dot_errors_and_preferred_types() -> None:
    message = error("dot", ["f32[2,3]", "f32[4,5]"], dot_attrs((1,), (0,)))
    assert "contracting dimension sizes differ" in message and "f32[2,3]" in message and "f32[4,5]" in message
    assert infer("dot", ["s8[2,3]", "s8[3,4]"], dot_attrs((1,), (0,)), result_element_type="s32") == "s32[2,4]"
    assert infer("dot", ["bf16[2,3]", "bf16[3,4]"], dot_attrs((1,), (0,)), declared_shape=S("f32[2,4]")) \
        == "f32[2,4]"
    assert "narrower" in error("dot", ["s32[2,3]", "s32[3,4]"], dot_attrs((1,), (0,)), result_element_type="s8")
    assert "different element types" in error("dot", ["s32[2,3]", "f32[3,4]"], dot_attrs((1,), (0,)))


def conv_attrs(labels: str, win: str, groups: int = 1, batch_groups: int = 1) -> dict:
    return {"window": window(win), "dim_labels": ConvDimensionNumbers.from_text(labels),
            "feature_group_count": groups, "batch_group_count": batch_groups}


def test_convolution_nhwc_with_stride_and_padding() -> None:
    attrs = conv_attrs("b01f_01io->b01f", "size=3x3 stride=2x2 pad=1_0x1_0")
    assert infer("convolution", ["f32[1,6,6,2]", "f32[3,3,2,4]"], attrs) == "f32[1,3,3,4]"


def test_convolution_nchw_and_dilations() -> None:
    attrs = conv_attrs("bf01_oi01->bf01", "size=3x3 stride=2x2 pad=1_1x1_1")
    assert infer("convolution", ["f32[1,1,5,5]", "f32[1,1,3,3]"], attrs) == "f32[1,1,3,3]"
    attrs = conv_attrs("bf01_oi01->bf01", "size=3x3 lhs_dilate=2x2 rhs_dilate=1x2")
    # base 4 -> 7 cells; window 3 (rhs_dilate 1) -> 5, window 3 (rhs_dilate 2) -> 5 wide -> 3
    assert infer("convolution", ["f32[2,3,4,4]", "f32[8,3,3,3]"], attrs) == "f32[2,8,5,3]"


def test_convolution_feature_groups() -> None:
    depthwise = conv_attrs("b01f_01io->b01f", "size=3x3", groups=6)
    assert infer("convolution", ["f32[1,8,8,6]", "f32[3,3,1,6]"], depthwise) == "f32[1,6,6,6]"
    message = error("convolution", ["f32[1,8,8,6]", "f32[3,3,2,6]"], depthwise)
    assert "feature_group_count (6)" in message and "f32[1,8,8,6]" in message
    grouped = conv_attrs("b01f_01io->b01f", "size=1x1", groups=2)
    assert "multiple of feature_group_count" in error("convolution", ["f32[1,4,4,6]", "f32[1,1,3,5]"], grouped)


def test_convolution_batch_groups() -> None:
    attrs = conv_attrs("b01f_01io->b01f", "size=3x3", batch_groups=2)
    assert infer("convolution", ["f32[4,5,5,3]", "f32[3,3,3,8]"], attrs) == "f32[2,3,3,8]"
    assert "batch_group_count" in error("convolution", ["f32[3,5,5,3]", "f32[3,3,3,8]"], attrs)


def test_convolution_window_must_match_kernel() -> None:
    attrs = conv_attrs("b01f_01io->b01f", "size=2x2")
    assert "kernel's size 3" in error("convolution", ["f32[1,6,6,2]", "f32[3,3,2,4]"], attrs)


# ---------------------------------------------------------------------------------------
# gather and scatter
# ---------------------------------------------------------------------------------------
def gather_attrs(offset: tuple, collapsed: tuple, start_map: tuple, ivd: int, sizes: tuple, **extra: tuple) -> dict:
    return {"offset_dims": offset, "collapsed_slice_dims": collapsed, "start_index_map": start_map,
            "index_vector_dim": ivd, "slice_sizes": sizes, **extra}


def test_gather_rows_like_jnp_take() -> None:
    attrs = gather_attrs((1,), (0,), (0,), 1, (1, 6))
    assert infer("gather", ["f32[8,6]", "s32[5,1]"], attrs) == "f32[5,6]"
    assert infer("gather", ["f32[8,6]", "s32[5]"], attrs) == "f32[5,6]"  # implicit trailing index dim
    # the sample dumps keep the collapsed dim: offset_dims={1,2}
    attrs = gather_attrs((1, 2), (), (0,), 1, (1, 6))
    assert infer("gather", ["f32[8,6]", "s32[5,1]"], attrs) == "f32[5,1,6]"


def test_gather_interleaves_offset_and_batch_dims() -> None:
    attrs = gather_attrs((0, 2), (0,), (0, 2), 1, (1, 4, 2))
    assert infer("gather", ["f32[3,4,5]", "s32[7,2]"], attrs) == "f32[4,7,2]"


def test_gather_with_batching_dims() -> None:
    attrs = gather_attrs((), (1,), (1,), 2, (1, 1), operand_batching_dims=(0,), start_indices_batching_dims=(0,))
    assert infer("gather", ["f32[8,3]", "s32[8,2,1]"], attrs) == "f32[8,2]"


def test_gather_errors() -> None:
    message = error("gather", ["f32[8,6]", "s32[5,1]"], gather_attrs((1,), (0,), (0,), 1, (1, 7)))
    assert "not within [0, 6]" in message
    assert "slice size 0 or 1" in error("gather", ["f32[8,6]", "s32[5,1]"], gather_attrs((1,), (0,), (0,), 1, (2, 6)))
    assert "start_index_map has 2" in error("gather", ["f32[8,6]", "s32[5,1]"],
                                             gather_attrs((1,), (0,), (0, 1), 1, (1, 6)))
    assert "integer" in error("gather", ["f32[8,6]", "f32[5,1]"], gather_attrs((1,), (0,), (0,), 1, (1, 6)))


def scatter_attrs(window_dims: tuple, inserted: tuple, to_operand: tuple, ivd: int, reducer: str = "add_f32") -> dict:
    return {"update_window_dims": window_dims, "inserted_window_dims": inserted,
            "scatter_dims_to_operand_dims": to_operand, "index_vector_dim": ivd, "to_apply": comp(reducer)}


def test_scatter_rows() -> None:
    attrs = scatter_attrs((1,), (0,), (0,), 1)
    assert infer("scatter", ["f32[8,6]", "s32[5,1]", "f32[5,6]"], attrs) == "f32[8,6]"
    assert infer("scatter", ["f32[8,6]", "s32[5]", "f32[5,3]"], attrs) == "f32[8,6]"  # smaller windows ok


def test_variadic_scatter_gives_a_tuple() -> None:
    attrs = scatter_attrs((), (0,), (0,), 1, reducer="argmax")
    assert infer("scatter", ["f32[8]", "s32[8]", "s32[3,1]", "f32[3]", "s32[3]"], attrs) == "(f32[8], s32[8])"


def test_scatter_errors() -> None:
    attrs = scatter_attrs((1,), (0,), (0,), 1)
    assert "larger than operand dimension 1" in error("scatter", ["f32[8,6]", "s32[5,1]", "f32[5,7]"], attrs)
    assert "batch dims of indices" in error("scatter", ["f32[8,6]", "s32[5,1]", "f32[4,6]"], attrs)
    assert "cover the 2 operand dimensions" in error("scatter", ["f32[8,6]", "s32[5,1]", "f32[5,6]"],
                                                     scatter_attrs((1,), (), (0,), 1))
    assert "odd number" in error("scatter", ["f32[8,6]", "s32[5,1]"], attrs)


# ---------------------------------------------------------------------------------------
# Tuples, calls and control flow
# ---------------------------------------------------------------------------------------
def test_tuple_and_get_tuple_element() -> None:
    assert infer("tuple", ["f32[2]", "(s32[], pred[])"]) == "(f32[2], (s32[], pred[]))"
    assert infer("tuple", []) == "()"
    assert infer("get-tuple-element", ["(f32[2], s32[])"], {"index": 1}) == "s32[]"
    assert "out of range" in error("get-tuple-element", ["(f32[2], s32[])"], {"index": 2})
    assert "not a tuple" in error("get-tuple-element", ["f32[2]"], {"index": 0})


def test_call_map_fusion() -> None:
    assert infer("call", ["f32[3]"], {"to_apply": comp("double")}) == "f32[3]"
    assert "parameter 0 is f32[3]" in error("call", ["f32[4]"], {"to_apply": comp("double")})
    assert infer("fusion", ["f32[3]"], {"kind": "kLoop", "calls": comp("to_s32")}) == "s32[3]"
    assert "kind=kFoo" in error("fusion", ["f32[3]"], {"kind": "kFoo", "calls": comp("to_s32")})
    assert infer("map", ["f32[2,3]"], {"dimensions": (0, 1), "to_apply": comp("negate_s")}) == "f32[2,3]"
    assert "all dimensions" in error("map", ["f32[2,3]"], {"dimensions": (0,), "to_apply": comp("negate_s")})


def test_while() -> None:
    attrs = {"condition": comp("cond"), "body": comp("body")}
    assert infer("while", ["(s32[], f32[3])"], attrs) == "(s32[], f32[3])"
    message = error("while", ["(s32[], f32[3])"], {**attrs, "body": comp("bad_body")})
    assert "must return the loop state (s32[], f32[3])" in message
    assert "must return pred[]" in error("while", ["(s32[], f32[3])"], {**attrs, "condition": comp("body")})
    assert "parameter 0" in error("while", ["(s32[], f32[4])"], attrs)


def test_conditional_pred_and_index_forms() -> None:
    pred_form = {"true_computation": comp("double"), "false_computation": comp("double")}
    assert infer("conditional", ["pred[]", "f32[3]", "f32[3]"], pred_form) == "f32[3]"
    index_form = {"branch_computations": (comp("double"), comp("double"), comp("double"))}
    assert infer("conditional", ["s32[]", "f32[3]", "f32[3]", "f32[3]"], index_form) == "f32[3]"
    assert "selector must be s32[]" in error("conditional", ["pred[]", "f32[3]", "f32[3]", "f32[3]"], index_form)
    mixed = {"branch_computations": (comp("double"), comp("to_s32"))}
    assert "branch 1" in error("conditional", ["s32[]", "f32[3]", "f32[3]"], mixed)


def test_special_ops() -> None:
    assert infer("opt-barrier", ["(f32[2], s32[])"]) == "(f32[2], s32[])"
    assert infer("all-reduce", ["f32[4]"], {"to_apply": comp("add_f32")}) == "f32[4]"
    assert infer("all-reduce", ["f32[4]", "f32[2]"], {"to_apply": comp("add_f32")}) == "(f32[4], f32[2])"
    assert infer("replica-id", []) == "u32[]"
    assert infer("partition-id", []) == "u32[]"
    assert infer("rng-get-and-update-state", [], {"delta": 7}) == "u64[2]"
    assert "delta=-1 must be an integer" in error("rng-get-and-update-state", [], {"delta": -1})
    assert "operand" in error("rng-get-and-update-state", ["u64[2]"], {"delta": 1})
    assert infer("after-all", ["token[]", "token[]"]) == "token[]"
    assert infer("after-all", []) == "token[]"
    assert "must be a token" in error("after-all", ["f32[]"])
    assert infer("collective-permute", ["f32[4]"], {"source_target_pairs": "{{0,1}}"}) == "f32[4]"
    assert infer("all-gather", ["f32[2,3]"], {"dimensions": (0,)}, declared_shape=S("f32[8,3]")) == "f32[8,3]"
    assert "gathered along" in error("all-gather", ["f32[2,3]"], {"dimensions": (0,)}, declared_shape=S("f32[8,4]"))


def test_random_numbers() -> None:
    attrs = {"algorithm": "rng_three_fry"}
    assert infer("rng-bit-generator", ["u64[2]"], attrs, result_element_type="u32", result_dims=(4, 4)) \
        == "(u64[2], u32[4,4])"
    assert infer("rng-bit-generator", ["u64[3]"], {}, declared_shape=S("(u64[3], u8[7])")) == "(u64[3], u8[7])"
    assert "u64[2]" in error("rng-bit-generator", ["u64[3]"], attrs, result_element_type="u32", result_dims=(4,))
    assert "unsigned" in error("rng-bit-generator", ["u64[2]"], attrs, result_element_type="f32", result_dims=(4,))
    rng = {"distribution": "rng_uniform"}
    assert infer("rng", ["f32[]", "f32[]"], rng, declared_shape=S("f32[3]")) == "f32[3]"
    assert "f32 scalar" in error("rng", ["f32[2]", "f32[]"], rng, declared_shape=S("f32[3]"))


def test_leaves() -> None:
    assert infer("iota", [], {"iota_dimension": 1}, declared_shape=S("s32[2,3]")) == "s32[2,3]"
    assert "iota_dimension=2" in error("iota", [], {"iota_dimension": 2}, declared_shape=S("s32[2,3]"))
    literal = {"literal": np.zeros((2, 3), np.float32)}
    assert infer("constant", [], literal, declared_shape=S("f32[2,3]")) == "f32[2,3]"
    assert "does not match" in error("constant", [], literal, declared_shape=S("f32[3,2]"))
    assert "does not match" in error("constant", [], literal, declared_shape=S("f64[2,3]"))


def test_arity_and_tokens_are_checked() -> None:
    assert "takes 2 operand(s) but got 1" in error("add", ["f32[2]"])
    assert "token" in error("negate", ["token[]"])


# ---------------------------------------------------------------------------------------
# Output-size formulas against brute force
# ---------------------------------------------------------------------------------------
def _padded_cells(n: int, low: int, high: int, interior: int) -> list[str] | None:
    """The padded 1-D array spelled out ('x' data, '.' padding); None if it would be negative.
    Positive edge padding is added first, then negative padding removes cells."""
    cells: list[str] = []
    for i in range(n):
        cells += ["."] * interior if i else []
        cells.append("x")
    cells = ["."] * max(low, 0) + cells + ["."] * max(high, 0)
    remove_front, remove_back = max(-low, 0), max(-high, 0)
    if remove_front + remove_back > len(cells):
        return None
    return cells[remove_front:len(cells) - remove_back]


@settings(max_examples=150, deadline=None)
@given(n=st.integers(0, 6), low=st.integers(-3, 3), high=st.integers(-3, 3), interior=st.integers(0, 2))
def test_pad_size_matches_brute_force(n: int, low: int, high: int, interior: int) -> None:
    cells = _padded_cells(n, low, high, interior)
    attrs = {"padding": (PaddingDim(low, high, interior),)}
    if cells is None:
        assert "negative size" in error("pad", [f"f32[{n}]", "f32[]"], attrs)
    else:
        assert infer("pad", [f"f32[{n}]", "f32[]"], attrs) == f"f32[{len(cells)}]"


@settings(max_examples=150, deadline=None)
@given(n=st.integers(1, 6), size=st.integers(1, 3), stride=st.integers(1, 3), low=st.integers(0, 2),
       high=st.integers(0, 2), base_dilation=st.integers(1, 3), window_dilation=st.integers(1, 2))
def test_window_size_matches_brute_force(n: int, size: int, stride: int, low: int, high: int,
                                         base_dilation: int, window_dilation: int) -> None:
    cells = _padded_cells(n, low, high, base_dilation - 1)
    assert cells is not None
    span = (size - 1) * window_dilation + 1
    positions = [p for p in range(0, len(cells), stride) if p + span <= len(cells)]
    win = (f"size={size} stride={stride} pad={low}_{high} lhs_dilate={base_dilation} "
           f"rhs_dilate={window_dilation}")
    attrs = {"window": window(win), "to_apply": comp("add_f32")}
    assert infer("reduce-window", [f"f32[{n}]", "f32[]"], attrs) == f"f32[{len(positions)}]"


def test_select_between_tuples_is_rejected_as_in_xla() -> None:
    message = error("select", ["pred[]", "(f32[2], s32[])", "(f32[2], s32[])"])
    assert "(f32[2], s32[])" in message and "tuple-select" in message
