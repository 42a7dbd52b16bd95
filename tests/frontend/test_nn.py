"""xla_teach.nn against NumPy references: activations, softmax family, conv2d, pooling, dropout."""

from __future__ import annotations

import math

import numpy as np
import pytest

import xla_teach
import xla_teach.nn as nn
import xla_teach.numpy as xnp
from tests.frontend.frontend_test_utils import assert_matches, run
from xla_teach.hlo.builder.ops import make_padding

rng = np.random.default_rng(3)
X = rng.normal(size=(2, 5, 4)).astype(np.float32) * 3


def np_softmax(x, axis=-1):
    e = np.exp(x - x.max(axis, keepdims=True))
    return e / e.sum(axis, keepdims=True)


def test_activations():
    erf = np.vectorize(math.erf)
    cases = [
        (nn.relu, lambda x: np.maximum(x, 0)),
        (nn.sigmoid, lambda x: 1 / (1 + np.exp(-x))),
        (nn.gelu, lambda x: 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))),
        (lambda x: nn.gelu(x, approximate=False), lambda x: 0.5 * x * (1 + erf(x / np.sqrt(2)))),
        (nn.silu, lambda x: x / (1 + np.exp(-x))),
        (nn.softplus, lambda x: np.log1p(np.exp(x))),
        (nn.leaky_relu, lambda x: np.where(x >= 0, x, 0.01 * x)),
        (nn.elu, lambda x: np.where(x > 0, x, np.expm1(x))),
    ]
    for fn, ref in cases:
        assert_matches(fn, lambda x, ref=ref: ref(x).astype(np.float32), X, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("axis", [-1, 0, 1])
def test_softmax_family(axis):
    assert_matches(lambda x: nn.softmax(x, axis), lambda x: np_softmax(x, axis), X, rtol=1e-5, atol=1e-6)
    assert_matches(lambda x: nn.log_softmax(x, axis), lambda x: np.log(np_softmax(x, axis)), X, rtol=1e-5, atol=1e-5)
    assert_matches(lambda x: nn.logsumexp(x, axis), lambda x: np.log(np.exp(x).sum(axis)), X, rtol=1e-5, atol=1e-5)
    assert_matches(lambda x: nn.logsumexp(x, axis, keepdims=True),
                   lambda x: np.log(np.exp(x).sum(axis, keepdims=True)), X, rtol=1e-5, atol=1e-5)


def test_softmax_is_stable_for_large_inputs():
    x = np.array([1000.0, 1001.0, -np.inf], np.float32)
    np.testing.assert_allclose(run(nn.softmax, x), np_softmax(x), rtol=1e-6)
    np.testing.assert_allclose(run(nn.logsumexp, x), 1001 + np.log1p(np.exp(-1.0)), rtol=1e-6)


def conv_ref(x, w, stride, pads, dilation):
    """Direct NHWC / HWIO cross-correlation in float64."""
    x = np.pad(x.astype(np.float64), ((0, 0), tuple(pads[0]), tuple(pads[1]), (0, 0)))
    kh, kw = w.shape[:2]
    eh, ew = (kh - 1) * dilation[0] + 1, (kw - 1) * dilation[1] + 1
    oh, ow = (x.shape[1] - eh) // stride[0] + 1, (x.shape[2] - ew) // stride[1] + 1
    out = np.zeros((x.shape[0], oh, ow, w.shape[3]))
    for i in range(oh):
        for j in range(ow):
            patch = x[:, i * stride[0]:i * stride[0] + eh:dilation[0], j * stride[1]:j * stride[1] + ew:dilation[1]]
            out[:, i, j] = np.einsum("bhwc,hwco->bo", patch, w)
    return out


CONVS = [((1, 1), "VALID", (1, 1)), ((2, 1), "SAME", (1, 1)), ((1, 2), "SAME", (2, 1)), ((2, 2), "VALID", (1, 2)),
         ((1, 1), [(2, 0), (1, 1)], (1, 1))]


@pytest.mark.parametrize("stride,padding,dilation", CONVS, ids=[str(c) for c in range(len(CONVS))])
@pytest.mark.parametrize("data_format", ["NHWC", "NCHW"])
def test_conv2d(stride, padding, dilation, data_format):
    x = rng.normal(size=(2, 7, 6, 3)).astype(np.float32)
    w = rng.normal(size=(3, 2, 3, 4)).astype(np.float32)
    pads = make_padding([7, 6], [(3 - 1) * dilation[0] + 1, (2 - 1) * dilation[1] + 1], stride, padding)
    want = conv_ref(x, w, stride, pads, dilation)
    if data_format == "NCHW":
        x, w, want = x.transpose(0, 3, 1, 2), w.transpose(3, 2, 0, 1), want.transpose(0, 3, 1, 2)
    got = run(lambda x, w: nn.conv2d(x, w, stride, padding, dilation, data_format), x, w)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_depthwise_conv_with_feature_groups():
    x = rng.normal(size=(1, 5, 5, 2)).astype(np.float32)
    w = rng.normal(size=(3, 3, 1, 2)).astype(np.float32)
    got = run(lambda x, w: nn.conv2d(x, w, padding="SAME", feature_group_count=2), x, w)
    for c in range(2):
        want = conv_ref(x[..., c:c + 1], w[..., c:c + 1], (1, 1), [(1, 1), (1, 1)], (1, 1))
        np.testing.assert_allclose(got[..., c:c + 1], want, rtol=1e-4, atol=1e-5)


def test_conv2d_errors():
    with pytest.raises(ValueError, match="features"):
        run(lambda x, w: nn.conv2d(x, w), np.ones((1, 4, 4, 3), np.float32), np.ones((2, 2, 2, 1), np.float32))
    with pytest.raises(ValueError, match="data_format"):
        run(lambda x, w: nn.conv2d(x, w, data_format="HWCN"), np.ones((1, 4, 4, 1), np.float32),
            np.ones((2, 2, 1, 1), np.float32))


def test_max_and_avg_pool():
    x = rng.normal(size=(2, 6, 6, 3)).astype(np.float32)
    assert_matches(lambda x: nn.max_pool(x, 2), lambda x: x.reshape(2, 3, 2, 3, 2, 3).max(axis=(2, 4)), x)
    assert_matches(lambda x: nn.avg_pool(x, (2, 3), (2, 3)), lambda x: x.reshape(2, 3, 2, 2, 3, 3).mean(axis=(2, 4)),
                   x, atol=1e-6)
    xn = x.transpose(0, 3, 1, 2)
    assert_matches(lambda x: nn.max_pool(x, 3, 3, data_format="NCHW"),
                   lambda x: x.reshape(2, 3, 2, 3, 2, 3).max(axis=(3, 5)), xn)
    # SAME on 5x5 with 2x2 windows, stride 2: the last window holds one real row/column.
    y = x[:, :5, :5]
    same = run(lambda v: nn.max_pool(v, 2, 2, "SAME"), y)
    assert same.shape == (2, 3, 3, 3)
    np.testing.assert_allclose(same[:, 2, 2], y[:, 4, 4])
    avg = run(lambda v: nn.avg_pool(v, 2, 2, "SAME", count_include_pad=False), y)
    np.testing.assert_allclose(avg[:, 2, 2], y[:, 4, 4], rtol=1e-6)
    np.testing.assert_allclose(avg[:, 0, 0], y[:, :2, :2].mean(axis=(1, 2)), rtol=1e-5)


def test_dropout_keeps_the_expected_fraction_and_is_reproducible():
    x = np.ones(4000, np.float32)
    key = nn.PRNGKey(42)
    a = run(lambda x, k: nn.dropout(x, 0.25, k), x, key)
    assert set(np.unique(a)) == {0.0, np.float32(1 / 0.75)}
    assert abs((a == 0).mean() - 0.25) < 0.03
    np.testing.assert_array_equal(a, run(lambda x, k: nn.dropout(x, 0.25, k), x, key))
    other = run(lambda x, k: nn.dropout(x, 0.25, nn.split(k)[1]), x, key)
    assert not np.array_equal(a, other)
    np.testing.assert_array_equal(run(lambda x, k: nn.dropout(x, 0.25, k, deterministic=True), x, key), x)
    assert "rng-bit-generator" in xla_teach.jit(lambda x, k: nn.dropout(x, 0.5, k)).lower(x, key).as_text()


def test_random_uniform_and_normal_statistics():
    key = nn.PRNGKey(0)
    u = run(lambda k: nn.uniform(k, (20000,)), key)
    assert u.dtype == np.float32 and u.min() >= 0 and u.max() < 1 and abs(u.mean() - 0.5) < 0.01
    z = run(lambda k: nn.normal(k, (100, 200)), key)
    assert abs(z.mean()) < 0.02 and abs(z.std() - 1) < 0.02


def test_one_hot_in_nn():
    assert_matches(lambda v: nn.one_hot(v, 5), lambda v: np.eye(5, dtype=np.float32)[v], np.array([4, 0, 2]))


def test_dropout_rejects_bad_rate():
    with pytest.raises(ValueError, match="rate"):
        run(lambda x, k: nn.dropout(x, 1.5, k), np.ones(3, np.float32), nn.PRNGKey(0))
    with pytest.raises(ValueError, match="uint64"):
        run(lambda x: nn.dropout(x, 0.5, xnp.zeros(2)), np.ones(3, np.float32))
