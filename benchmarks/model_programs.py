"""Whole training steps at the size of real models, written in JAX the ordinary way, for
``benchmarks/xla_comparison.py``: each ``make(jax, jnp, rng)`` returns ``(step, args)``, where
``step`` is one SGD/RMSprop step (``value_and_grad`` of the loss, then the update) and ``args``
its arguments (pytrees of parameters, then the batch).

    gpt_2l       a GPT-style decoder, 2 blocks, width 256, sequence 128, batch 8, vocabulary 2048
    gpt_8l       the same, 8 blocks, width 384, 6 heads, batch 4, vocabulary 4096
    cnn          the CIFAR-10 Keras CNN of XLA's auto-clustering tutorial: 4 convolutions, 2
                 poolings, 2 dense layers, RMSprop, batch 32 of 32x32x3
    lstm         an LSTM over 64 steps (lax.scan), batch 32, input 128, hidden 256
    mixer        two MLP-Mixer blocks: 64 patches of 256 channels, batch 16

No program here was written to suit either compiler: these are the layers every tutorial writes.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np


def _w(rng: np.random.Generator, *shape: int, scale: float = 0.02) -> np.ndarray:
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def gpt(layers: int, width: int, seq: int, batch: int, vocab: int, heads: int):  # type: ignore[no-untyped-def]
    """The GPT step the tests keep (``tests/data/jax_models/generate.py``'s ``gpt_step``: token
    and tied output embedding, pre-norm blocks of causal attention and a GELU MLP, SGD), at
    these sizes."""
    def make(jax: Any, jnp: Any, rng: np.random.Generator):  # type: ignore[no-untyped-def]
        sys.path.insert(0, str(Path(__file__).parents[1] / "tests" / "data" / "jax_models"))
        from generate import gpt_step

        step, args = gpt_step(layers, width, seq, batch, vocab, heads)
        return step, list(args)

    return make


def cnn(jax: Any, jnp: Any, rng: np.random.Generator):  # type: ignore[no-untyped-def]
    """Conv(32)-Conv(32)-Pool-Conv(64)-Conv(64)-Pool-Dense(512)-Dense(10), ReLU, RMSprop."""
    shapes = {"c1": (3, 3, 3, 32), "c2": (3, 3, 32, 32), "c3": (3, 3, 32, 64), "c4": (3, 3, 64, 64),
              "d1": (8 * 8 * 64, 512), "d2": (512, 10)}
    params = {k: _w(rng, *s, scale=0.05) for k, s in shapes.items()}
    params.update({f"b{k}": np.zeros(s[-1], np.float32) for k, s in shapes.items()})
    # RMSprop's running mean of squared gradients, as after a few steps (from zeros, the first
    # update is 3e-3 * sign(g): a gradient that is 0 up to rounding flips it, on either compiler)
    squares = {k: np.full_like(v, 1e-4) for k, v in params.items()}

    def conv(x, w, b):  # type: ignore[no-untyped-def]
        y = jax.lax.conv_general_dilated(x, w, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))
        return jax.nn.relu(y + b)

    def pool(x):  # type: ignore[no-untyped-def]
        return jax.lax.reduce_window(x, -jnp.inf, jax.lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")

    def loss(p, x, y):  # type: ignore[no-untyped-def]
        h = pool(conv(conv(x, p["c1"], p["bc1"]), p["c2"], p["bc2"]))
        h = pool(conv(conv(h, p["c3"], p["bc3"]), p["c4"], p["bc4"]))
        h = jax.nn.relu(h.reshape(h.shape[0], -1) @ p["d1"] + p["bd1"])
        return -jnp.mean(jnp.sum(jax.nn.log_softmax(h @ p["d2"] + p["bd2"]) * y, -1))

    def step(p, s, x, y):  # type: ignore[no-untyped-def]
        value, g = jax.value_and_grad(loss)(p, x, y)
        s = jax.tree.map(lambda s, g: 0.9 * s + 0.1 * g * g, s, g)
        p = jax.tree.map(lambda p, g, s: p - 1e-3 * g / (jnp.sqrt(s) + 1e-7), p, g, s)
        return value, p, s

    x = rng.standard_normal((32, 32, 32, 3)).astype(np.float32)
    y = np.eye(10, dtype=np.float32)[rng.integers(0, 10, 32)]
    return step, [params, squares, x, y]


def lstm(jax: Any, jnp: Any, rng: np.random.Generator):  # type: ignore[no-untyped-def]
    steps, batch, inputs, hidden, classes = 64, 32, 128, 256, 10
    params = {"wx": _w(rng, inputs, 4 * hidden, scale=0.05), "wh": _w(rng, hidden, 4 * hidden, scale=0.05),
              "b": np.zeros(4 * hidden, np.float32), "out": _w(rng, hidden, classes, scale=0.05)}

    def loss(p, xs, y):  # type: ignore[no-untyped-def]
        def cell(carry, x):  # type: ignore[no-untyped-def]
            h, c = carry
            i, f, g, o = jnp.split(x @ p["wx"] + h @ p["wh"] + p["b"], 4, -1)
            c = jax.nn.sigmoid(f) * c + jax.nn.sigmoid(i) * jnp.tanh(g)
            h = jax.nn.sigmoid(o) * jnp.tanh(c)
            return (h, c), None

        zeros = jnp.zeros((batch, hidden), jnp.float32)
        (h, _), _ = jax.lax.scan(cell, (zeros, zeros), xs)
        return -jnp.mean(jnp.sum(jax.nn.log_softmax(h @ p["out"]) * y, -1))

    def step(p, xs, y):  # type: ignore[no-untyped-def]
        value, g = jax.value_and_grad(loss)(p, xs, y)
        return value, jax.tree.map(lambda a, g: a - 0.1 * g, p, g)

    xs = rng.standard_normal((steps, batch, inputs)).astype(np.float32)
    y = np.eye(classes, dtype=np.float32)[rng.integers(0, classes, batch)]
    return step, [params, xs, y]


def mixer(jax: Any, jnp: Any, rng: np.random.Generator):  # type: ignore[no-untyped-def]
    batch, patches, channels, token_hidden, channel_hidden, classes = 16, 64, 256, 256, 1024, 10
    blocks = [{"ln1": np.ones(channels, np.float32), "ln2": np.ones(channels, np.float32),
               "t1": _w(rng, patches, token_hidden), "t2": _w(rng, token_hidden, patches),
               "c1": _w(rng, channels, channel_hidden), "c2": _w(rng, channel_hidden, channels)} for _ in range(2)]
    params = {"blocks": blocks, "head": _w(rng, channels, classes)}

    def norm(x, g):  # type: ignore[no-untyped-def]
        mean = x.mean(-1, keepdims=True)
        return (x - mean) * jax.lax.rsqrt(((x - mean) ** 2).mean(-1, keepdims=True) + 1e-6) * g

    def loss(p, x, y):  # type: ignore[no-untyped-def]
        for blk in p["blocks"]:
            t = jnp.swapaxes(norm(x, blk["ln1"]), 1, 2)  # mix along the patches
            x = x + jnp.swapaxes(jax.nn.gelu(t @ blk["t1"]) @ blk["t2"], 1, 2)
            x = x + jax.nn.gelu(norm(x, blk["ln2"]) @ blk["c1"]) @ blk["c2"]
        return -jnp.mean(jnp.sum(jax.nn.log_softmax(x.mean(1) @ p["head"]) * y, -1))

    def step(p, x, y):  # type: ignore[no-untyped-def]
        value, g = jax.value_and_grad(loss)(p, x, y)
        return value, jax.tree.map(lambda a, g: a - 0.1 * g, p, g)

    x = rng.standard_normal((batch, patches, channels)).astype(np.float32)
    y = np.eye(classes, dtype=np.float32)[rng.integers(0, classes, batch)]
    return step, [params, x, y]


MODELS = {
    "gpt_2l": gpt(layers=2, width=256, seq=128, batch=8, vocab=2048, heads=4),
    "gpt_8l": gpt(layers=8, width=384, seq=128, batch=4, vocab=4096, heads=6),
    "cnn": cnn,
    "lstm": lstm,
    "mixer": mixer,
}
