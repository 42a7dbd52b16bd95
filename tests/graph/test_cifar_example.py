"""The CIFAR-10 CNN as a graph (xla_teach/graph/cifar_example.py, nn_kernels.py): the
convolution and pooling kernels, eager and XLA, against xla_teach's own autodiff; the whole
hand-written training step against ``value_and_grad`` of the same model written with
``xla_teach.nn``; one cluster holding every convolution, the host ops left out.

Comparisons are in float64, where each result is a sum of at most a few thousand products of
terms of size ~1: two correct orders of summation differ by under ~1e-12, and a wrong gradient
by far more."""

from __future__ import annotations

import numpy as np
import pytest

import xla_teach
from xla_teach import nn
from xla_teach.graph import Session
from xla_teach.graph import nn_kernels as k
from xla_teach.graph.cifar_example import PARAMS, STEP_FETCHES, build_cifar_step, feeds

F64 = {"rtol": 1e-10, "atol": 1e-11}


def _interpreted(fn, *args):  # type: ignore[no-untyped-def]
    return xla_teach.jit(fn, backend="interpreter")(*args)


@pytest.mark.parametrize("padding", ["SAME", "VALID"])
@pytest.mark.parametrize("stride", [1, 2])
def test_convolution_kernels_and_gradients_match_autodiff(padding: str, stride: int) -> None:
    rng = np.random.default_rng(stride)
    x, w = rng.standard_normal((2, 9, 8, 3)), rng.standard_normal((3, 3, 3, 4))
    strides = (1, stride, stride, 1)

    def conv(x, w):  # type: ignore[no-untyped-def]
        return nn.conv2d(x, w, stride=stride, padding=padding)

    y = k.conv2d_eager(x, w, strides, padding)
    np.testing.assert_allclose(y, _interpreted(conv, x, w), **F64)
    dy = rng.standard_normal(y.shape)
    gx, gw = _interpreted(lambda x, w, dy: xla_teach.vjp(conv, x, w)[1](dy), x, w, dy)
    np.testing.assert_allclose(k.conv2d_backprop_input_eager(w, dy, x.shape, strides, padding), gx, **F64)
    np.testing.assert_allclose(k.conv2d_backprop_filter_eager(x, dy, w.shape, strides, padding), gw, **F64)
    # the XLA kernels, as a cluster would trace them
    np.testing.assert_allclose(_interpreted(lambda w, dy: k._backprop_input_xla(w, dy, x.shape, strides, padding),
                                            w, dy), gx, **F64)
    np.testing.assert_allclose(_interpreted(lambda x, dy: k._backprop_filter_xla(x, dy, w.shape, strides, padding),
                                            x, dy), gw, **F64)


@pytest.mark.parametrize("padding", ["SAME", "VALID"])
@pytest.mark.parametrize("stride", [1, 2])
def test_max_pool_and_its_gradient_route_ties_to_the_first_maximum(padding: str, stride: int) -> None:
    rng = np.random.default_rng(3)
    x = np.maximum(rng.standard_normal((2, 7, 6, 3)), 0)  # ReLU outputs: windows of tied zeros
    strides, ksize = (1, stride, stride, 1), (1, 2, 2, 1)
    y = k.max_pool_eager(x, ksize, strides, padding)
    np.testing.assert_array_equal(y, _interpreted(lambda v: nn.max_pool(v, 2, stride, padding), x))
    dy = rng.standard_normal(y.shape)
    want = _interpreted(lambda v, d: xla_teach.vjp(lambda v: nn.max_pool(v, 2, stride, padding), v)[1](d)[0], x, dy)
    got = k.max_pool_grad_eager(x, y, dy, ksize, strides, padding)
    np.testing.assert_allclose(got, want, **F64)
    tied = (x == 0).reshape(-1)
    assert tied.sum() > 20 and np.count_nonzero(got.reshape(-1)[tied]) < tied.sum()  # ties got one share, not all


def _oracle_step(values: dict[str, np.ndarray], batch: int) -> tuple[dict[str, np.ndarray], float]:
    """The same model and RMSprop step, gradients by xla_teach's autodiff (the interpreter)."""
    import xla_teach.numpy as xnp

    def loss(p, images, labels):  # type: ignore[no-untyped-def]
        h = images
        for layer in ("conv1", "conv2", "pool", "conv3", "conv4", "pool"):
            h = nn.max_pool(h, 2, 2) if layer == "pool" else \
                nn.relu(nn.conv2d(h, p[f"{layer}/kernel"], padding="SAME") + p[f"{layer}/bias"])
        h = nn.relu(xnp.reshape(h, (batch, -1)) @ p["dense1/kernel"] + p["dense1/bias"])
        logits = h @ p["dense2/kernel"] + p["dense2/bias"]
        return -xnp.mean(xnp.sum(nn.one_hot(labels, 10, dtype=np.float64) * nn.log_softmax(logits), axis=1))

    def step(p, ms, images, labels):  # type: ignore[no-untyped-def]
        value, g = xla_teach.value_and_grad(loss)(p, images, labels)
        new_ms = {n: ms[n] * 0.9 + g[n] * g[n] * (1 - 0.9) for n in p}
        return {n: p[n] - g[n] * 1e-4 / (xnp.sqrt(new_ms[n]) + 1e-7) for n in p}, new_ms, value

    params = {n: values[n] for n in PARAMS}
    ms = {n: values[f"ms/{n}"] for n in PARAMS}
    new_p, new_ms, value = _interpreted(step, params, ms, values["images"], values["labels"])
    return {**{f"new/{n}": new_p[n] for n in PARAMS}, **{f"new_ms/{n}": new_ms[n] for n in PARAMS}}, float(value)


@pytest.mark.parametrize("auto_jit", [-1, 2])
def test_the_hand_written_step_is_value_and_grad_of_the_model(auto_jit: int) -> None:
    batch = 2
    values = feeds(batch, dtype=np.float64)
    values["ms/conv1/kernel"] += 1e-3  # mean squares away from zero: the update depends on g, not only its sign
    session = Session(build_cifar_step(batch, dtype=np.float64),
                      tf_xla_flags=f"--tf_xla_auto_jit={auto_jit} --tf_xla_cpu_global_jit")
    got = dict(zip(STEP_FETCHES, session.run(STEP_FETCHES, values), strict=True))
    want, loss = _oracle_step(values, batch)
    assert abs(float(got["loss"]) - loss) < 1e-12
    for name, w in want.items():
        np.testing.assert_allclose(got[name], w, err_msg=name, **F64)


def test_one_cluster_holds_every_convolution_and_the_host_ops_stay_out() -> None:
    session = Session(build_cifar_step(4), tf_xla_flags="--tf_xla_auto_jit=2 --tf_xla_cpu_global_jit")
    clustering = session.plan(STEP_FETCHES).clustering
    assert list(clustering.clusters) == ["cluster_0"]
    left_out = {n for n, why in clustering.explanations.items() if not why.startswith("Placeholder")}
    assert left_out == {"logged", "loss_summary"}
