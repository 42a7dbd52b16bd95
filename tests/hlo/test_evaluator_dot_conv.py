"""dot and convolution (xla-operation-semantics.md §8)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from tests.hlo.evaluator_util import BF16, run_hlo, shape_text


def dot(lhs: np.ndarray, rhs: np.ndarray, result: str, dims: str) -> np.ndarray:
    text = f"""HloModule t
ENTRY e {{
  a = {shape_text(lhs.dtype, lhs.shape)} parameter(0)
  b = {shape_text(rhs.dtype, rhs.shape)} parameter(1)
  ROOT r = {result} dot(a, b), {dims}
}}
"""
    return run_hlo(text, lhs, rhs)


def test_matrix_product() -> None:
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(4, 5)).astype(np.float32), rng.normal(size=(5, 3)).astype(np.float32)
    result = dot(a, b, "f32[4,3]", "lhs_contracting_dims={1}, rhs_contracting_dims={0}")
    np.testing.assert_allclose(result, a.astype(np.float64) @ b, rtol=1e-5)


def test_batch_dims_then_lhs_free_then_rhs_free() -> None:
    rng = np.random.default_rng(1)
    a = rng.integers(-5, 5, size=(3, 2, 4)).astype(np.int32)  # [k, batch, m]
    b = rng.integers(-5, 5, size=(2, 6, 3)).astype(np.int32)  # [batch, n, k]
    result = dot(a, b, "s32[2,4,6]",
                 "lhs_batch_dims={1}, lhs_contracting_dims={0}, rhs_batch_dims={0}, rhs_contracting_dims={2}")
    expected = np.zeros((2, 4, 6), np.int64)
    for batch, m, n in itertools.product(range(2), range(4), range(6)):
        expected[batch, m, n] = sum(int(a[k, batch, m]) * int(b[batch, n, k]) for k in range(3))
    np.testing.assert_array_equal(result, expected)


def test_outer_product_and_vector_dot() -> None:
    x, y = np.array([1, 2], np.float32), np.array([3, 4, 5], np.float32)
    np.testing.assert_array_equal(dot(x, y, "f32[2,3]", "lhs_contracting_dims={}, rhs_contracting_dims={}"),
                                  np.outer(x, y))
    assert dot(y, y, "f32[]", "lhs_contracting_dims={0}, rhs_contracting_dims={0}") == 50


def wrap_signed(value: int, bits: int) -> int:
    value %= 2**bits
    return value - 2**bits if value >= 2 ** (bits - 1) else value


def test_integer_dot_widens_and_wraps() -> None:
    a = np.full((1, 4), 100, np.int8)
    b = np.full((4, 1), 100, np.int8)
    matmul = "lhs_contracting_dims={1}, rhs_contracting_dims={0}"
    assert dot(a, b, "s32[1,1]", matmul)[0, 0] == 40000  # widened before multiplying
    assert dot(a, b, "s8[1,1]", matmul)[0, 0] == wrap_signed(40000, 8)
    big = np.full((1, 2), 2**31 - 1, np.int32)
    assert dot(big, big.T.copy(), "s32[1,1]", matmul)[0, 0] == wrap_signed(2 * (2**31 - 1) ** 2, 32)
    u = np.full((1, 3), 2**63, np.uint64)
    assert dot(u, np.ones((3, 1), np.uint64), "u64[1,1]", matmul)[0, 0] == 2**63


def test_bf16_dot_accumulates_in_f32() -> None:
    # 256 ones + 1: a bf16 accumulator would get stuck at 256.
    a = np.ones((1, 300), BF16)
    result = dot(a, a.T.copy(), "bf16[1,1]", "lhs_contracting_dims={1}, rhs_contracting_dims={0}")
    assert float(result[0, 0]) == 300.0  # 300 is a bf16 value
    wide = dot(a, a.T.copy(), "f32[1,1]", "lhs_contracting_dims={1}, rhs_contracting_dims={0}")
    assert wide.dtype == np.float32 and wide[0, 0] == 300


# ---- convolution ----------------------------------------------------------------------
Ints = tuple[int, ...]
Pads = tuple[tuple[int, int], ...]


def reference_conv(x: np.ndarray, k: np.ndarray, strides: Ints, pads: Pads, lhs_dil: Ints, rhs_dil: Ints,
                   fgc: int = 1, bgc: int = 1) -> np.ndarray:
    """NCHW x OIHW -> NCHW, straight from the definition (one output, one tap at a time)."""
    n, c = x.shape[:2]
    o, i_per_group = k.shape[:2]
    spatial = x.shape[2:]
    ksizes = k.shape[2:]
    out_spatial = []
    for size, ks, s, (lo, hi), ld, rd in zip(spatial, ksizes, strides, pads, lhs_dil, rhs_dil, strict=True):
        padded = (size - 1) * ld + 1 + lo + hi
        out_spatial.append(max(0, (padded - ((ks - 1) * rd + 1)) // s + 1))
    out = np.zeros((n // bgc, o, *out_spatial), np.float64)
    for b, oc in itertools.product(range(n // bgc), range(o)):
        fg = oc // (o // fgc)
        bg = oc // (o // bgc)
        for pos in itertools.product(*(range(d) for d in out_spatial)):
            total = 0.0
            for ic in range(i_per_group):
                for tap in itertools.product(*(range(d) for d in ksizes)):
                    coords = []
                    for d in range(len(spatial)):
                        p = pos[d] * strides[d] + tap[d] * rhs_dil[d] - pads[d][0]
                        if p < 0 or p % lhs_dil[d] or p // lhs_dil[d] >= spatial[d]:
                            break
                        coords.append(p // lhs_dil[d])
                    else:
                        batch = bg * (n // bgc) + b
                        total += x[(batch, fg * i_per_group + ic, *coords)] * k[(oc, ic, *tap)]
            out[(b, oc, *pos)] = total
    return out


def conv(x: np.ndarray, k: np.ndarray, out_shape: tuple[int, ...], window: str, labels: str,
         extra: str = "") -> np.ndarray:
    text = f"""HloModule t
ENTRY e {{
  x = {shape_text(x.dtype, x.shape)} parameter(0)
  k = {shape_text(k.dtype, k.shape)} parameter(1)
  ROOT r = {shape_text(x.dtype, out_shape)} convolution(x, k), window={{{window}}}, dim_labels={labels}{extra}
}}
"""
    return run_hlo(text, x, k)


def test_measured_stride_two_pad_one_case() -> None:
    x = np.ones((1, 5, 5, 1), np.float32)
    k = np.ones((3, 3, 1, 1), np.float32)
    result = conv(x, k, (1, 3, 3, 1), "size=3x3 stride=2x2 pad=1_1x1_1", "b01f_01io->b01f")
    np.testing.assert_array_equal(result[0, :, :, 0], [[4, 6, 4], [6, 9, 6], [4, 6, 4]])


def _window_text(ksizes: Ints, strides: Ints, pads: Pads, lhs_dil: Ints, rhs_dil: Ints) -> str:
    return (f"size={'x'.join(map(str, ksizes))} stride={'x'.join(map(str, strides))} "
            f"pad={'x'.join(f'{lo}_{hi}' for lo, hi in pads)} lhs_dilate={'x'.join(map(str, lhs_dil))} "
            f"rhs_dilate={'x'.join(map(str, rhs_dil))}")


CONV_CASES = [
    # x shape (NCHW), kernel (OIHW), strides, pads, lhs_dilate, rhs_dilate, feature groups, batch groups
    ((2, 3, 5, 4), (4, 3, 2, 3), (1, 1), ((0, 0), (0, 0)), (1, 1), (1, 1), 1, 1),
    ((1, 2, 6, 5), (3, 2, 3, 2), (2, 1), ((1, 2), (0, 1)), (1, 1), (2, 1), 1, 1),
    ((1, 2, 4, 4), (2, 2, 3, 3), (1, 2), ((2, 2), (1, -1)), (2, 2), (1, 1), 1, 1),
    ((2, 4, 5, 5), (6, 2, 2, 2), (1, 1), ((1, 1), (1, 1)), (1, 1), (1, 1), 2, 1),
    ((2, 4, 5, 5), (4, 1, 3, 3), (1, 1), ((1, 1), (1, 1)), (1, 1), (1, 1), 4, 1),
    ((4, 3, 4, 4), (6, 3, 2, 2), (1, 1), ((0, 0), (0, 0)), (1, 1), (1, 1), 1, 2),
    ((2, 2, 3, 3), (4, 2, 2, 2), (1, 1), ((0, 0), (0, 0)), (1, 1), (1, 1), 1, 2),
]


@pytest.mark.parametrize(("xs", "ks", "strides", "pads", "lhs_dil", "rhs_dil", "fgc", "bgc"), CONV_CASES)
def test_convolution_matches_reference(xs: Ints, ks: Ints, strides: Ints, pads: Pads, lhs_dil: Ints, rhs_dil: Ints,
                                       fgc: int, bgc: int) -> None:
    rng = np.random.default_rng(7)
    x = rng.integers(-3, 4, size=xs).astype(np.float32)
    k = rng.integers(-3, 4, size=ks).astype(np.float32)
    expected = reference_conv(x, k, strides, pads, lhs_dil, rhs_dil, fgc, bgc)
    extra = (f", feature_group_count={fgc}" if fgc > 1 else "") + (f", batch_group_count={bgc}" if bgc > 1 else "")
    window = _window_text(ks[2:], strides, pads, lhs_dil, rhs_dil)
    result = conv(x, k, expected.shape, window, "bf01_oi01->bf01", extra)
    np.testing.assert_array_equal(result, expected)
    # The same convolution in NHWC / HWIO / NHWC layout.
    result = conv(x.transpose(0, 2, 3, 1).copy(), k.transpose(2, 3, 1, 0).copy(), expected.transpose(0, 2, 3, 1).shape,
                  window, "b01f_01io->b01f", extra)
    np.testing.assert_array_equal(result, expected.transpose(0, 2, 3, 1))


def test_one_dimensional_convolution_with_odd_labels_and_reversal() -> None:
    x = np.array([[[1, 2, 3, 4]]], np.float32)  # labels "fb0": feature, batch, spatial
    k = np.array([[[1, 10]]], np.float32)  # "0io" needs shape [2,1,1]
    k = k.reshape(2, 1, 1)
    result = conv(x, k, (1, 1, 3), "size=2", "fb0_0io->bf0")
    np.testing.assert_array_equal(result, [[[21, 32, 43]]])
    reversed_result = conv(x, k, (1, 1, 3), "size=2 rhs_reversal=1", "fb0_0io->bf0")
    np.testing.assert_array_equal(reversed_result, [[[12, 23, 34]]])


def test_integer_convolution() -> None:
    x = np.full((1, 1, 3), 100, np.int8)
    k = np.full((1, 1, 3), 100, np.int8)
    assert conv(x, k, (1, 1, 1), "size=3", "bf0_oi0->bf0")[0, 0, 0] == wrap_signed(30000, 8)


def test_dot_result_type_differs_from_operands() -> None:
    a = np.array([[1 + 2**-10, 1]], np.float32)
    b = np.array([[1], [2**-9]], np.float32)
    # Accumulated in f32 (1 + 2**-10 + 2**-9) and rounded once to bf16 -> 1.0 (nearest).
    result = dot(a, b, "bf16[1,1]", "lhs_contracting_dims={1}, rhs_contracting_dims={0}")
    assert result.dtype == BF16 and float(result[0, 0]) == float(np.float32(1 + 2**-10 + 2**-9).astype(BF16))
    s8 = np.array([[-128, 127]], np.int8)
    wide = dot(s8, np.array([[2], [2]], np.int8), "f32[1,1]", "lhs_contracting_dims={1}, rhs_contracting_dims={0}")
    assert wide[0, 0] == -2.0


def test_empty_contraction_gives_zeros() -> None:
    a, b = np.zeros((2, 0), np.float32), np.zeros((0, 3), np.float32)
    np.testing.assert_array_equal(dot(a, b, "f32[2,3]", "lhs_contracting_dims={1}, rhs_contracting_dims={0}"),
                                  np.zeros((2, 3)))
    empty_rows = dot(np.zeros((0, 4), np.int8), np.ones((4, 2), np.int8), "s32[0,2]",
                     "lhs_contracting_dims={1}, rhs_contracting_dims={0}")
    assert empty_rows.shape == (0, 2) and empty_rows.dtype == np.int32


@pytest.mark.parametrize("window", ["size=2 pad=1_0", "size=2 pad=0_1", "size=3 pad=1_1 lhs_dilate=2"])
def test_padding_and_dilation_holes_take_no_part_in_the_products(window: str) -> None:
    """XLA skips the cells padding and lhs dilation add: a NaN or inf weight over one adds
    nothing (the interpreter multiplied them by 0, giving NaN); the CPU kernel agrees."""
    from xla_teach.api import execute

    text = ("HloModule c\nENTRY e {\n  x = f32[1,1,2] parameter(0)\n  w = f32[1,1,%d] parameter(1)\n"
            "  ROOT c = f32[1,1,%d] convolution(x, w), window={%s}, dim_labels=bf0_oi0->bf0\n}\n")
    size = int(window.split()[0].split("=")[1])
    out = {"size=2 pad=1_0": 2, "size=2 pad=0_1": 2, "size=3 pad=1_1 lhs_dilate=2": 3}[window]
    module = text % (size, out, window)
    x = np.array([[[1, 2]]], np.float32)
    w = np.full((1, 1, size), np.nan, np.float32)
    w[0, 0, size // 2] = 1.0  # NaN everywhere but the middle tap
    (interpreted,) = execute(module, [x, w], "interpreter")
    (compiled,) = execute(module, [x, w], "cpu")
    np.testing.assert_array_equal(np.isnan(interpreted), np.isnan(compiled))
    np.testing.assert_array_equal(np.nan_to_num(interpreted), np.nan_to_num(compiled))
    if window == "size=2 pad=1_0":
        np.testing.assert_array_equal(interpreted, [[[1, np.nan]]])  # XLA 0.10.2 CPU's answer
