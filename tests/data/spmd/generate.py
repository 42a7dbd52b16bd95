"""Write XLA's per-device (SPMD-partitioned) optimized HLO of a few sharded JAX programs, with
each device's input shards and XLA's output shards, for the multi-device interpreter's tests;
also the global inputs and outputs, each output's sharding (``out_sharding{i}``: XLA's optimized
module does not print the root's), and the module JAX writes before partitioning
(``<name>.before.txt``, with its ``sharding=`` attributes and Shardy custom calls).

    XLA_FLAGS=--xla_force_host_platform_device_count=4 .venv/bin/python tests/data/spmd/generate.py

Also ``jax_dump/``: the module exactly as ``--xla_dump_to`` writes it for a sharded ``jax.jit``
(``num_partitions=4`` and the Shardy mesh in its header, before XLA's SPMD partitioner), with its
inputs and JAX's output in ``jax_dump/io.npz`` (:func:`write_jax_dump`).

Device i of the files is partition i: the i-th device of the mesh, in the mesh's order.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np


def write_jax_dump(out_dir: Path) -> None:
    """Compile a data-parallel program with ``--xla_dump_to`` and keep its before_optimizations file."""
    import os
    import shutil
    import subprocess
    import tempfile

    program = (
        "import jax, jax.numpy as jnp, numpy as np\n"
        "from jax.sharding import NamedSharding, PartitionSpec as P\n"
        "mesh = jax.make_mesh((2, 2), ('x', 'y'))\n"
        "f = jax.jit(lambda x, w: jnp.tanh(x @ w).sum(0), in_shardings=(NamedSharding(mesh, P(('x', 'y'))),"
        " NamedSharding(mesh, P())))\n"
        "x = np.random.default_rng(0).standard_normal((16, 8)).astype(np.float32); w = np.ones((8, 4), np.float32)\n"
        "np.savez(OUT + '/io.npz', x=x, w=w, out=np.asarray(f(x, w)))\n")
    target = out_dir / "jax_dump"
    target.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory() as dump:
        env = {**os.environ, "XLA_FLAGS": f"--xla_force_host_platform_device_count=4 --xla_dump_to={dump}"}
        subprocess.run([sys.executable, "-c", f"OUT = {str(target)!r}\n" + program], env=env, check=True)
        (found,) = Path(dump).glob("*jit__lambda.before_optimizations.txt")
        shutil.copyfile(found, target / found.name)


def mlp_sgd_step(w1, w2, x, y):  # type: ignore[no-untyped-def]
    import jax

    def loss(w1, w2):  # type: ignore[no-untyped-def]
        return -(jax.nn.log_softmax(jax.nn.relu(x @ w1) @ w2) * y).sum() / x.shape[0]

    g1, g2 = jax.grad(loss, argnums=(0, 1))(w1, w2)
    return w1 - 0.1 * g1, w2 - 0.1 * g2


def megatron_sgd_step(x, w1, b1, w2, y):  # type: ignore[no-untyped-def]
    import jax
    import jax.numpy as jnp

    def loss(w1, b1, w2):  # type: ignore[no-untyped-def]
        return jnp.mean((jax.nn.gelu(x @ w1 + b1) @ w2 - y) ** 2)

    g1, gb, g2 = jax.grad(loss, argnums=(0, 1, 2))(w1, b1, w2)
    return w1 - 0.1 * g1, b1 - 0.1 * gb, w2 - 0.1 * g2


def transformer_sgd_step(x, wq, wk, wv, wo, w1, w2, y):  # type: ignore[no-untyped-def]
    import jax
    import jax.numpy as jnp

    def norm(h):  # type: ignore[no-untyped-def]
        mean = h.mean(-1, keepdims=True)
        return (h - mean) / jnp.sqrt(((h - mean) ** 2).mean(-1, keepdims=True) + 1e-5)

    def block(wq, wk, wv, wo, w1, w2):  # type: ignore[no-untyped-def]
        h = norm(x)
        q, k, v = (jnp.einsum("bsd,dhe->bhse", h, w) for w in (wq, wk, wv))
        attention = jax.nn.softmax(jnp.einsum("bhse,bhte->bhst", q, k) / 2.0, axis=-1)
        h = x + jnp.einsum("bhse,hed->bsd", jnp.einsum("bhst,bhte->bhse", attention, v), wo)
        out = h + jax.nn.gelu(norm(h) @ w1) @ w2
        return jnp.mean((out - y) ** 2)

    grads = jax.grad(block, argnums=tuple(range(6)))(wq, wk, wv, wo, w1, w2)
    return tuple(w - 0.1 * g for w, g in zip((wq, wk, wv, wo, w1, w2), grads, strict=True))


def main() -> int:
    import jax
    import jax.numpy as jnp
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    if len(jax.devices()) < 4:
        print("run with XLA_FLAGS=--xla_force_host_platform_device_count=4")
        return 1
    out_dir = Path(__file__).parent
    write_jax_dump(out_dir)
    from jax.sharding import AxisType

    explicit = jax.make_mesh((2, 2), ("x", "y"))
    mesh = jax.make_mesh((2, 2), ("x", "y"), axis_types=(AxisType.Auto, AxisType.Auto))  # XLA propagates
    order = list(explicit.devices.flat)
    rng = np.random.default_rng(0)
    programs = {
        # a sum over both axes (all-reduces over each mesh axis), a row sum, a transpose
        "sums_2x2": (lambda x: (x.sum(0), jnp.tanh(x).sum(), x.T), [rng.standard_normal((8, 4)).astype(np.float32)],
                     [P("x", "y")], explicit),
        # data parallel: a batch-sharded matmul with a replicated weight and a mean over the batch
        "data_parallel": (lambda x, w: jnp.mean(jnp.tanh(x @ w)), [rng.standard_normal((16, 8)).astype(np.float32),
                                                                   rng.standard_normal((8, 4)).astype(np.float32)],
                          [P(("x", "y")), P()], explicit),
        # a matmul on the 2-D mesh: rows over x, the contraction over y
        "matmul_2d": (lambda a, b: a @ b, [rng.standard_normal((8, 8)).astype(np.float32),
                                            rng.standard_normal((8, 4)).astype(np.float32)], [P("x", "y"), P("y")], mesh),
        # a softmax over a split axis: max and sum across devices
        "softmax_split": (lambda x: jax.nn.softmax(x, axis=-1), [rng.standard_normal((4, 16)).astype(np.float32)],
                          [P(None, ("x", "y"))], mesh),
        # a transpose of rows split four ways into columns split four ways (an all-to-all)
        "transpose_all_to_all": (lambda x: jax.lax.with_sharding_constraint(x.T, NamedSharding(mesh, P(("x", "y")))),
                                 [rng.standard_normal((8, 8)).astype(np.float32)], [P(("x", "y"))], mesh),
        # a gather from a table split by rows
        "gather_split_table": (lambda t, i: t[i], [rng.standard_normal((16, 4)).astype(np.float32),
                                                    rng.integers(0, 16, 6).astype(np.int32)], [P(("x", "y")), P()], mesh),
        # a prefix sum over a split axis
        "cumsum_split": (lambda x: jnp.cumsum(x, axis=1), [rng.standard_normal((4, 16)).astype(np.float32)],
                         [P(None, ("x", "y"))], mesh),
        # shard_map with JAX's collectives by axis name: psum, all_gather, ppermute, all_to_all, psum_scatter
        "shard_map_collectives": (jax.shard_map(
            lambda b: (jax.lax.psum(b, "x"), jax.lax.all_gather(b, "y", tiled=True),
                       jax.lax.ppermute(b, "x", [(0, 1), (1, 0)]),
                       jax.lax.all_to_all(b, "y", 0, 1, tiled=True),
                       jax.lax.psum_scatter(b, "y", scatter_dimension=1, tiled=True)),
            mesh=mesh, in_specs=P("x", "y"), out_specs=(P(None, "y"), P("x"), P("x", "y"), P("x", "y"), P("x", "y")),
            check_vma=False),
            [rng.standard_normal((8, 8)).astype(np.float32)], [P("x", "y")], mesh),
        # an SGD step on an embedding table split by rows: the gradient is a scatter-add into it
        "embedding_grad": (lambda t, i, g: t - 0.1 * jax.grad(lambda t: (t[i] * g).sum())(t),
                           [rng.standard_normal((16, 4)).astype(np.float32), rng.integers(0, 16, 6).astype(np.int32),
                            rng.standard_normal((6, 4)).astype(np.float32)], [P(("x", "y")), P(), P()], mesh),
        # max-pooling 2x2 (stride 2) of images split by rows
        "maxpool_rows": (lambda x: jax.lax.reduce_window(x, -jnp.inf, jax.lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID"),
                         [rng.standard_normal((2, 8, 8, 3)).astype(np.float32)], [P(None, ("x", "y"))], mesh),
        # a SAME 3x3 convolution of images split by batch (data parallelism) and by rows (halos)
        "conv_batch": (lambda x, w: jax.lax.conv_general_dilated(x, w, (1, 1), "SAME",
                                                                 dimension_numbers=("NHWC", "HWIO", "NHWC")),
                       [rng.standard_normal((4, 8, 8, 3)).astype(np.float32),
                        rng.standard_normal((3, 3, 3, 5)).astype(np.float32)], [P(("x", "y")), P()], mesh),
        "conv_rows": (lambda x, w: jax.lax.conv_general_dilated(x, w, (1, 1), "SAME",
                                                                dimension_numbers=("NHWC", "HWIO", "NHWC")),
                      [rng.standard_normal((2, 16, 8, 3)).astype(np.float32),
                       rng.standard_normal((3, 3, 3, 5)).astype(np.float32)], [P(None, ("x", "y")), P()], mesh),
        # a data-parallel SGD step of an MLP, written the ordinary way (JAX's log_softmax is a call)
        "mlp_step_data_parallel": (mlp_sgd_step, [(rng.standard_normal((16, 32)) * 0.3).astype(np.float32),
                                                  (rng.standard_normal((32, 8)) * 0.3).astype(np.float32),
                                                  rng.standard_normal((64, 16)).astype(np.float32),
                                                  np.eye(8, dtype=np.float32)[rng.integers(0, 8, 64)]],
                                   [P(), P(), P(("x", "y")), P(("x", "y"))], mesh),
        # a megatron MLP step on the 2x2 mesh: the batch over x, the hidden units over y (the first
        # weight's columns and bias, the second weight's rows)
        "megatron_mlp_step": (megatron_sgd_step, [rng.standard_normal((8, 16)).astype(np.float32),
                                                  (rng.standard_normal((16, 32)) * 0.3).astype(np.float32),
                                                  (rng.standard_normal(32) * 0.1).astype(np.float32),
                                                  (rng.standard_normal((32, 16)) * 0.3).astype(np.float32),
                                                  rng.standard_normal((8, 16)).astype(np.float32)],
                              [P("x"), P(None, "y"), P("y"), P("y"), P("x")], mesh),
        # a transformer block's SGD step on the 2x2 mesh: the batch over x; attention heads and the
        # MLP's hidden units over y (megatron's split)
        "transformer_step": (transformer_sgd_step, [rng.standard_normal((4, 8, 16)).astype(np.float32),
                                                    *[(rng.standard_normal((16, 4, 4)) * 0.3).astype(np.float32)
                                                      for _ in range(3)],
                                                    (rng.standard_normal((4, 4, 16)) * 0.3).astype(np.float32),
                                                    (rng.standard_normal((16, 32)) * 0.3).astype(np.float32),
                                                    (rng.standard_normal((32, 16)) * 0.3).astype(np.float32),
                                                    rng.standard_normal((4, 8, 16)).astype(np.float32)],
                             [P("x"), P(None, "y"), P(None, "y"), P(None, "y"), P("y"), P(None, "y"), P("y"),
                              P("x")], mesh),
    }
    for name, (fn, args, specs, on) in programs.items():
        placed = [jax.device_put(a, NamedSharding(on, s)) for a, s in zip(args, specs, strict=True)]
        jitted = jax.jit(fn)
        lowered = jitted.lower(*placed)
        compiled = lowered.compile()
        text = compiled.as_text()
        outs = jax.tree_util.tree_leaves(jitted(*placed))
        arrays: dict[str, np.ndarray] = {}
        for i, a in enumerate(args):
            arrays[f"global_arg{i}"] = a
        for i, (o, sharding) in enumerate(zip(outs, jax.tree_util.tree_leaves(compiled.output_shardings),
                                              strict=True)):
            arrays[f"global_out{i}"] = np.asarray(o)
            arrays[f"out_sharding{i}"] = np.array(str(sharding._to_xla_hlo_sharding(o.ndim)))
        for d, device in enumerate(order):
            for i, a in enumerate(placed):
                shard = next(s for s in a.addressable_shards if s.device == device)
                arrays[f"dev{d}_arg{i}"] = np.asarray(shard.data)
            for i, o in enumerate(outs):
                shard = next(s for s in o.addressable_shards if s.device == device)
                arrays[f"dev{d}_out{i}"] = np.asarray(shard.data)
        (out_dir / f"{name}.txt").write_text(text)
        (out_dir / f"{name}.before.txt").write_text(lowered.as_text("hlo"))
        np.savez(out_dir / f"{name}.npz", **arrays)
        print("wrote", name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
