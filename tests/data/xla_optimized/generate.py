"""Write XLA CPU's optimized HLO of ordinary JAX programs, with inputs and XLA's outputs.

    .venv/bin/pip install -e ".[bench]" && .venv/bin/python tests/data/xla_optimized/generate.py

Each program NAME gets NAME.txt (``jax.jit(f).lower(*args).compile().as_text()``: what XLA's
CPU compiler ran, with its fusions, custom-calls and layouts) and NAME.npz (arg0..argN-1, the
inputs; out0..outM-1, XLA's results). tests/hlo/test_xla_optimized_modules.py runs them on the
interpreter and the CPU backend.
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


PROGRAMS = {
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
        outs = out if isinstance(out, (tuple, list)) else (out,)
        (HERE / f"{name}.txt").write_text(text)
        np.savez(HERE / f"{name}.npz", **{f"arg{i}": a for i, a in enumerate(args)},
                 **{f"out{i}": np.asarray(o) for i, o in enumerate(outs)})
        print(f"wrote {name}: {len(text.splitlines())} lines")


if __name__ == "__main__":
    main()
