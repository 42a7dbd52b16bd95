"""Model-size programs written with xla_teach's front end, as a model library would write them.

Each function returns ``(step, args)``: a training step (forward, ``value_and_grad``, an optimizer
update) and arguments of the given size. They are what the explorer's browser tests, the
benchmarks and the course's capstone compile: programs of hundreds to thousands of instructions
with named scopes, not toy graphs.

    from examples.models import gpt_step
    step, args = gpt_step(layers=2)
    compiled = xla_teach.jit(step).lower(*args).compile()

* :func:`gpt_step` -- a GPT-style decoder: token embedding tied to the output layer, pre-norm
  blocks of causal multi-head attention and a GELU MLP, mean cross-entropy, SGD;
* :func:`cnn_step` -- a CIFAR-10-shaped CNN (two pairs of 3x3 convolutions, each followed by
  max-pooling, then two dense layers), softmax cross-entropy, RMSprop;
* :func:`rnn_step` -- an LSTM run over the sequence with ``scan``, its last state classified,
  gradients through the loop, Adam.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

import xla_teach as xt
import xla_teach.numpy as xnp
from xla_teach import nn

Step = Callable[..., Any]


def _normal(rng: np.random.Generator, *shape: int, scale: float) -> np.ndarray:
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def _layer_norm(x: Any, gain: Any) -> Any:
    mean = xnp.mean(x, axis=-1, keepdims=True)
    var = xnp.mean((x - mean) ** 2, axis=-1, keepdims=True)
    return (x - mean) / xnp.sqrt(var + 1e-5) * gain


def _cross_entropy(logits: Any, labels: Any, classes: int) -> Any:
    return -xnp.mean(xnp.sum(nn.log_softmax(logits, axis=-1) * nn.one_hot(labels, classes), axis=-1))


# ---- a GPT-style decoder -----------------------------------------------------------------------
def gpt_step(layers: int = 2, width: int = 128, heads: int = 4, seq: int = 64, batch: int = 4,
             vocab: int = 512, seed: int = 0) -> tuple[Step, list[Any]]:
    """One SGD step of a decoder-only transformer; ``args`` are ``(params, tokens, targets)``."""
    head = width // heads
    causal = np.tril(np.ones((seq, seq), bool))

    def attention(p: dict, x: Any) -> Any:
        q, k, v = (xnp.reshape(x @ p[w], (batch, seq, heads, head)) for w in ("wq", "wk", "wv"))
        scores = xnp.einsum("bqhd,bkhd->bhqk", q, k) / np.float32(np.sqrt(head))
        probs = nn.softmax(xnp.where(causal, scores, np.float32(-1e9)), axis=-1)
        return xnp.reshape(xnp.einsum("bhqk,bkhd->bqhd", probs, v), (batch, seq, width)) @ p["wo"]

    def loss(params: dict, tokens: Any, targets: Any) -> Any:
        with xt.named_scope("embed"):
            x = xnp.take(params["embed"], tokens, axis=0)
        for i, p in enumerate(params["blocks"]):
            with xt.named_scope(f"block{i}"):
                with xt.named_scope("attention"):
                    x = x + attention(p, _layer_norm(x, p["ln1"]))
                with xt.named_scope("mlp"):
                    x = x + nn.gelu(_layer_norm(x, p["ln2"]) @ p["w1"]) @ p["w2"]
        with xt.named_scope("head"):
            logits = _layer_norm(x, params["ln_f"]) @ params["embed"].T
            return _cross_entropy(logits, targets, vocab)

    def step(params: dict, tokens: Any, targets: Any) -> Any:
        value, grads = xt.value_and_grad(loss)(params, tokens, targets)
        return value, _tree_map(lambda w, g: w - 0.1 * g, params, grads)

    rng = np.random.default_rng(seed)
    blocks = [{"ln1": np.ones(width, np.float32), "ln2": np.ones(width, np.float32),
               **{w: _normal(rng, width, width, scale=width**-0.5) for w in ("wq", "wk", "wv", "wo")},
               "w1": _normal(rng, width, 4 * width, scale=width**-0.5),
               "w2": _normal(rng, 4 * width, width, scale=(4 * width) ** -0.5)} for _ in range(layers)]
    params = {"embed": _normal(rng, vocab, width, scale=0.02), "blocks": blocks, "ln_f": np.ones(width, np.float32)}
    tokens = rng.integers(0, vocab, (batch, seq)).astype(np.int32)
    targets = rng.integers(0, vocab, (batch, seq)).astype(np.int32)
    return step, [params, tokens, targets]


# ---- a CIFAR-10-shaped CNN ---------------------------------------------------------------------
def cnn_step(batch: int = 32, image: int = 32, seed: int = 0) -> tuple[Step, list[Any]]:
    """One RMSprop step of conv-conv-pool-conv-conv-pool-dense-dense; ``args`` are
    ``(params, mean_squares, images, labels)``."""

    def loss(p: dict, images: Any, labels: Any) -> Any:
        x = images
        for block in (1, 2):
            with xt.named_scope(f"conv_block{block}"):
                for i in (1, 2):
                    with xt.named_scope(f"conv{i}"):
                        x = nn.relu(nn.conv2d(x, p[f"c{block}{i}"], padding="SAME") + p[f"c{block}{i}_b"])
                x = nn.max_pool(x, 2)
        with xt.named_scope("dense1"):
            x = nn.relu(xnp.reshape(x, (batch, -1)) @ p["d1"] + p["d1_b"])
        with xt.named_scope("dense2"):
            return _cross_entropy(x @ p["d2"] + p["d2_b"], labels, 10)

    def step(params: dict, mean_squares: dict, images: Any, labels: Any) -> Any:
        value, grads = xt.value_and_grad(loss)(params, images, labels)
        with xt.named_scope("rmsprop"):
            squares = _tree_map(lambda s, g: 0.9 * s + 0.1 * g * g, mean_squares, grads)
            new = _tree_map(lambda w, g, s: w - 1e-3 * g / (xnp.sqrt(s) + 1e-7), params, grads, squares)
        return value, new, squares

    rng = np.random.default_rng(seed)
    channels = {11: (3, 32), 12: (32, 32), 21: (32, 64), 22: (64, 64)}
    params: dict[str, np.ndarray] = {}
    for key, (cin, cout) in channels.items():
        params[f"c{key}"] = _normal(rng, 3, 3, cin, cout, scale=(9 * cin) ** -0.5)
        params[f"c{key}_b"] = np.zeros(cout, np.float32)
    flat = (image // 4) ** 2 * 64
    params.update(d1=_normal(rng, flat, 256, scale=flat**-0.5), d1_b=np.zeros(256, np.float32),
                  d2=_normal(rng, 256, 10, scale=256**-0.5), d2_b=np.zeros(10, np.float32))
    mean_squares = {k: np.zeros_like(v) for k, v in params.items()}
    images = rng.standard_normal((batch, image, image, 3)).astype(np.float32)
    labels = rng.integers(0, 10, batch).astype(np.int32)
    return step, [params, mean_squares, images, labels]


# ---- an LSTM over a sequence, with scan --------------------------------------------------------
def rnn_step(seq: int = 32, batch: int = 16, features: int = 32, hidden: int = 64, classes: int = 10,
             seed: int = 0) -> tuple[Step, list[Any]]:
    """One Adam step of an LSTM classifier; ``args`` are ``(params, adam_m, adam_v, xs, labels)``
    with ``xs`` of shape ``[seq, batch, features]``."""

    def loss(p: dict, xs: Any, labels: Any) -> Any:
        def cell(carry: tuple[Any, Any], x: Any) -> tuple[tuple[Any, Any], Any]:
            h, c = carry
            with xt.named_scope("lstm_cell"):
                gates = x @ p["wx"] + h @ p["wh"] + p["b"]
                i, f, g, o = (gates[:, k * hidden:(k + 1) * hidden] for k in range(4))
                c = nn.sigmoid(f) * c + nn.sigmoid(i) * xnp.tanh(g)
                h = nn.sigmoid(o) * xnp.tanh(c)
            return (h, c), h

        zeros = xnp.zeros((batch, hidden), np.float32)
        (h, _), _ = xnp.scan(cell, (zeros, zeros), xs)
        with xt.named_scope("classifier"):
            return _cross_entropy(h @ p["out"], labels, classes)

    def step(params: dict, m: dict, v: dict, xs: Any, labels: Any) -> Any:
        value, grads = xt.value_and_grad(loss)(params, xs, labels)
        with xt.named_scope("adam"):
            m = _tree_map(lambda a, g: 0.9 * a + 0.1 * g, m, grads)
            v = _tree_map(lambda a, g: 0.999 * a + 0.001 * g * g, v, grads)
            new = _tree_map(lambda w, a, b: w - 1e-3 * a / (xnp.sqrt(b) + 1e-8), params, m, v)
        return value, new, m, v

    rng = np.random.default_rng(seed)
    params = {"wx": _normal(rng, features, 4 * hidden, scale=features**-0.5),
              "wh": _normal(rng, hidden, 4 * hidden, scale=hidden**-0.5),
              "b": np.zeros(4 * hidden, np.float32), "out": _normal(rng, hidden, classes, scale=hidden**-0.5)}
    zeros = {k: np.zeros_like(w) for k, w in params.items()}
    xs = rng.standard_normal((seq, batch, features)).astype(np.float32)
    labels = rng.integers(0, classes, batch).astype(np.int32)
    return step, [params, zeros, dict(zeros), xs, labels]


def _tree_map(fn: Callable[..., Any], tree: Any, *rest: Any) -> Any:
    """``fn`` over the leaves of nested dicts and lists of the same structure."""
    if isinstance(tree, dict):
        return {k: _tree_map(fn, tree[k], *(r[k] for r in rest)) for k in tree}
    if isinstance(tree, list):
        return [_tree_map(fn, t, *(r[i] for r in rest)) for i, t in enumerate(tree)]
    return fn(tree, *rest)


MODELS = {"gpt": gpt_step, "cnn": cnn_step, "rnn": rnn_step}
