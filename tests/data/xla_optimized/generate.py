"""Write XLA CPU's optimized HLO of ordinary JAX programs, with inputs and XLA's outputs.

    .venv/bin/pip install -e ".[bench]" && .venv/bin/python tests/data/xla_optimized/generate.py

Each program NAME gets NAME.txt (``jax.jit(f).lower(*args).compile().as_text()``: what XLA's
CPU compiler ran, with its fusions, custom-calls and layouts) and NAME.npz (arg0..argN-1, the
inputs; out0..outM-1, XLA's results). tests/hlo/test_xla_optimized_modules.py runs them on the
interpreter and the CPU backend. Besides single ops and small programs: one step of each common
optimizer (SGD, momentum, Adam, AdamW, RMSprop, Adagrad) on a 784 -> 10 softmax regression -- XLA
fuses the updates of small parameters with its own wrapped reductions -- and the gradients of
common layers (dense, layer norm, causal attention, embedding; the CNN step has a convolution).
"""

from __future__ import annotations

from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

HERE = Path(__file__).resolve().parent
rng = np.random.default_rng(0)
x = rng.standard_normal((4, 16)).astype(np.float32)
img = rng.standard_normal((2, 8, 8, 3)).astype(np.float32)
conv_w = (rng.standard_normal((3, 3, 3, 4)) * 0.3).astype(np.float32)
dense_w = (rng.standard_normal((64, 5)) * 0.1).astype(np.float32)
labels = np.eye(5, dtype=np.float32)[[1, 3]]


def cnn_loss(w, d, img, labels):
    h = jax.lax.conv_general_dilated(img, w, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))
    h = jax.nn.relu(h)
    h = jax.lax.reduce_window(h, -jnp.inf, jax.lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")
    logits = h.reshape(h.shape[0], -1) @ d
    return -jnp.mean(jnp.sum(jax.nn.log_softmax(logits) * labels, axis=-1))


def cnn_step(w, d, img, labels):
    gw, gd = jax.grad(cnn_loss, argnums=(0, 1))(w, d, img, labels)
    return w - 0.1 * gw, d - 0.1 * gd


def adam(p, g, m, v):
    m = 0.9 * m + 0.1 * g
    v = 0.999 * v + 0.001 * g * g
    return p - 0.001 * (m / 0.1) / (jnp.sqrt(v / 0.001) + 1e-8), m, v


def sgd_scatter(table, ids, grads):
    return table.at[ids].add(-0.1 * grads)


# ---- optimizers on a softmax regression (784 -> 10), and layers with their gradients -----------
digits = rng.standard_normal((32, 784)).astype(np.float32)
onehot = np.eye(10, dtype=np.float32)[rng.integers(0, 10, 32)]
w784, b10 = (rng.standard_normal((784, 10)) * 0.01).astype(np.float32), np.zeros(10, np.float32)


def regression_grads(w, b, x, y):
    def loss(w, b):
        return -jnp.mean(jnp.sum(jax.nn.log_softmax(x @ w + b) * y, axis=1))
    return jax.grad(loss, argnums=(0, 1))(w, b)


def optimizer_step(kind):  # type: ignore[no-untyped-def]
    """One step of ``kind`` on (w, b) with its state (two moment buffers per parameter, some unused)."""
    def step(w, b, mw, mb, vw, vb, x, y):  # the data as arguments: XLA elides large constants
        gw, gb = regression_grads(w, b, x, y)
        out = []
        for p, g, m, v in ((w, gw, mw, vw), (b, gb, mb, vb)):
            if kind == "sgd":
                out += [p - 0.1 * g, m, v]
            elif kind == "momentum":
                m = 0.9 * m + g
                out += [p - 0.01 * m, m, v]
            elif kind in ("adam", "adamw"):
                m, v = 0.9 * m + 0.1 * g, 0.999 * v + 0.001 * g * g
                update = (m / (1 - 0.9**3)) / (jnp.sqrt(v / (1 - 0.999**3)) + 1e-8)
                decay = 0.01 * p if kind == "adamw" else 0.0
                out += [p - 1e-3 * (update + decay), m, v]
            elif kind == "rmsprop":
                v = 0.9 * v + 0.1 * g * g
                out += [p - 1e-3 * g / (jnp.sqrt(v) + 1e-7), m, v]
            elif kind == "adagrad":
                v = v + g * g
                out += [p - 0.1 * g / (jnp.sqrt(v) + 1e-10), m, v]
        return tuple(out)
    state = (w784, b10, w784 * 0.1, b10 + 0.01, np.abs(w784) * 0.01, b10 + 0.001, digits, onehot)
    return step, state


seq_x = rng.standard_normal((2, 8, 16)).astype(np.float32)
dense_w2, dense_b2 = (rng.standard_normal((16, 32)) * 0.2).astype(np.float32), np.zeros(32, np.float32)
attn_w = (rng.standard_normal((4, 16, 16)) * 0.2).astype(np.float32)
table = rng.standard_normal((50, 16)).astype(np.float32)
ids = rng.integers(0, 50, (2, 8)).astype(np.int32)


def dense_grad(x, w, b):
    return jax.grad(lambda x, w, b: jnp.sum(jax.nn.relu(x @ w + b) ** 2), argnums=(0, 1, 2))(x, w, b)


def layernorm_grad(x, g):
    def f(x, g):
        mean = x.mean(-1, keepdims=True)
        var = ((x - mean) ** 2).mean(-1, keepdims=True)
        return jnp.sum(((x - mean) * jax.lax.rsqrt(var + 1e-5) * g) ** 2)
    return jax.grad(f, argnums=(0, 1))(x, g)


def attention_grad(x, w, causal):
    def f(x, w):
        q, k, v, o = x @ w[0], x @ w[1], x @ w[2], w[3]
        q, k, v = (t.reshape(2, 8, 2, 8) for t in (q, k, v))
        scores = jnp.einsum("bqhd,bkhd->bhqk", q, k) / np.sqrt(8.0)
        probs = jax.nn.softmax(jnp.where(causal, scores, -1e9), -1)
        return jnp.sum((jnp.einsum("bhqk,bkhd->bqhd", probs, v).reshape(2, 8, 16) @ o) ** 2)
    return jax.grad(f, argnums=(0, 1))(x, w)


def embedding_grad(table, ids):
    return jax.grad(lambda t: jnp.sum(jnp.tanh(t[ids]) ** 2))(table)


PROGRAMS = {
    **{f"regression_{kind}_step": optimizer_step(kind) for kind in ("sgd", "momentum", "adam", "adamw", "rmsprop",
                                                                     "adagrad")},
    "dense_grad": (dense_grad, (seq_x, dense_w2, dense_b2)),
    "layernorm_grad": (layernorm_grad, (seq_x, np.ones(16, np.float32))),
    "attention_grad": (attention_grad, (seq_x, attn_w, np.tril(np.ones((8, 8), bool)))),
    "embedding_grad": (embedding_grad, (table, ids)),
    "argsort": (lambda x: jnp.argsort(x, axis=-1), (x,)),
    "sort_key_value": (lambda x: jax.lax.sort((x, jnp.arange(16, dtype=jnp.int32)[None].repeat(4, 0)), num_keys=1), (x,)),
    "top_k": (lambda x: jax.lax.top_k(x, 3), (x,)),
    "top_k_ties_and_nan": (lambda x: jax.lax.top_k(x, 5), (np.array([[1, np.nan, 3, 3, -np.inf, -0.0, 0.0, 2]], np.float32),)),
    "scatter_add": (lambda x: jnp.zeros(10, jnp.float32).at[jnp.array([1, 3, 3])].add(x[0, :3]), (x,)),
    "sgd_scatter_add": (sgd_scatter, (x, np.array([0, 2, 2], np.int32), x[:3])),
    "adam_step": (adam, (x, x * 0.5, x * 0.1, np.abs(x) * 0.01)),
    "maxpool_grad": (lambda x: jax.grad(lambda y: jax.lax.reduce_window(y, -jnp.inf, jax.lax.max, (1, 2), (1, 2), "VALID").sum())(x), (x,)),
    "cnn_train_step": (cnn_step, (conv_w, dense_w, img, labels)),
    "einsum_batch_1": (lambda a, b: jnp.einsum("bmk,bkn->bmn", a, b), (x[:1, None, :4], x[1:2, :4, None].repeat(2, -1))),
    "cumsum": (lambda x: jnp.cumsum(x, axis=-1), (x,)),
    "gelu_erf": (lambda x: jax.nn.gelu(x, approximate=False), (x,)),
    "fori_loop": (lambda x: jax.lax.fori_loop(0, 5, lambda i, y: 0.5 * (y + x / y), jnp.ones_like(x) + x * x), (x,)),
}


def main() -> None:
    for name, (f, args) in PROGRAMS.items():
        args = tuple(np.asarray(a) for a in args)
        text = jax.jit(f).lower(*args).compile().as_text()
        out = jax.jit(f)(*args)
        outs = jax.tree.leaves(out)
        (HERE / f"{name}.txt").write_text(text)
        np.savez(HERE / f"{name}.npz", **{f"arg{i}": a for i, a in enumerate(args)},
                 **{f"out{i}": np.asarray(o) for i, o in enumerate(outs)})
        print(f"wrote {name}: {len(text.splitlines())} lines")


if __name__ == "__main__":
    main()
