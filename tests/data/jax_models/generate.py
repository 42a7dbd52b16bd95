"""Writes the HLO that JAX lowers small model training steps to (needs the ``bench`` extra):

    .venv/bin/python tests/data/jax_models/generate.py

``gpt_step.hlo``: one SGD step of a GPT-style decoder written the ordinary way in JAX (token and
tied output embedding, pre-norm blocks of causal multi-head attention and a GELU MLP,
``value_and_grad`` of the mean cross-entropy), small enough for the interpreter. Its dots are the
shapes every transformer writes: ``x @ W`` on 3-D activations, weight gradients contracting the
batch and sequence dimensions, ``bqhd`` attention einsums. ``gpt_step.json`` records the sizes.
"""

from __future__ import annotations

import json
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

HERE = Path(__file__).parent


def gpt_step(layers: int, width: int, seq: int, batch: int, vocab: int, heads: int):  # type: ignore[no-untyped-def]
    def init(rng: np.random.Generator) -> dict:
        def w(*shape: int) -> np.ndarray:
            return (rng.standard_normal(shape) * 0.02).astype(np.float32)
        return {"emb": w(vocab, width), "blocks": [
            {"ln1": np.ones(width, np.float32), "ln2": np.ones(width, np.float32), "qkv": w(width, 3 * width),
             "proj": w(width, width), "fc1": w(width, 4 * width), "fc2": w(4 * width, width)}
            for _ in range(layers)]}

    def norm(x, g):  # type: ignore[no-untyped-def]
        mean = x.mean(-1, keepdims=True)
        var = ((x - mean) ** 2).mean(-1, keepdims=True)
        return (x - mean) * jax.lax.rsqrt(var + 1e-5) * g

    def logits(p, tokens):  # type: ignore[no-untyped-def]
        x = p["emb"][tokens]
        causal = jnp.tril(jnp.ones((seq, seq), bool))
        for blk in p["blocks"]:
            q, k, v = jnp.split(norm(x, blk["ln1"]) @ blk["qkv"], 3, -1)
            q, k, v = (t.reshape(batch, seq, heads, width // heads) for t in (q, k, v))
            scores = jnp.einsum("bqhd,bkhd->bhqk", q, k) / np.sqrt(width // heads)
            attn = jax.nn.softmax(jnp.where(causal, scores, -1e9), -1)
            x = x + jnp.einsum("bhqk,bkhd->bqhd", attn, v).reshape(batch, seq, width) @ blk["proj"]
            x = x + jax.nn.gelu(norm(x, blk["ln2"]) @ blk["fc1"]) @ blk["fc2"]
        return x @ p["emb"].T

    def loss(p, tokens, targets):  # type: ignore[no-untyped-def]
        logp = jax.nn.log_softmax(logits(p, tokens))
        return -jnp.mean(jnp.take_along_axis(logp, targets[..., None], -1))

    def step(p, tokens, targets):  # type: ignore[no-untyped-def]
        value, grads = jax.value_and_grad(loss)(p, tokens, targets)
        return value, jax.tree.map(lambda a, g: a - 0.1 * g, p, grads)

    rng = np.random.default_rng(0)
    params = init(rng)
    tokens = rng.integers(0, vocab, (batch, seq)).astype(np.int32)
    targets = rng.integers(0, vocab, (batch, seq)).astype(np.int32)
    return step, (params, tokens, targets)


def main() -> None:
    sizes = {"layers": 1, "width": 64, "seq": 32, "batch": 2, "vocab": 128, "heads": 2}
    step, args = gpt_step(**sizes)
    (HERE / "gpt_step.hlo").write_text(jax.jit(step).lower(*args).as_text("hlo", debug_info=True))
    (HERE / "gpt_step.json").write_text(json.dumps({"jax": jax.__version__, **sizes}, indent=1) + "\n")


if __name__ == "__main__":
    main()
