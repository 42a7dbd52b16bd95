"""xla_teach's CPU backend against XLA on the HLO that JAX writes for ordinary programs.

    .venv/bin/pip install -e ".[bench]"
    .venv/bin/python benchmarks/xla_comparison.py [--quick] [--only NAME ...]

Each program is written in JAX at a realistic size; the last five are whole training steps of
real models (``model_programs.py``: transformers of 2 and 8 blocks, a CNN, an LSTM, MLP-Mixer).
XLA CPU runs ``jax.jit(f)``; xla_teach compiles the HLO text JAX lowers it to
(``jax.jit(f).lower(*args).compiler_ir("hlo")``), the same input XLA gets. The results are
checked against XLA's, then both are timed *interleaved* in this process (``paired_medians``),
and the table shows XLA's time over xla_teach's (below 1: slower) and the temporary bytes each
needs (xla_teach's buffer assignment; XLA's ``memory_analysis().temp_size_in_bytes``). The last
line is the geometric mean of the ratios.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from common import compile_both, cpu_jax, header, paired_medians  # noqa: E402
from model_programs import MODELS  # noqa: E402

from xla_teach.api import compile_module  # noqa: E402


@dataclass
class Program:
    name: str
    make: Callable[[Any, Any, np.random.Generator], tuple[Callable[..., Any], list[np.ndarray]]]
    rtol: float = 2e-3


def comparison_programs() -> list[Program]:
    def f32(rng: np.random.Generator, *shape: int) -> np.ndarray:
        return rng.standard_normal(shape).astype(np.float32)

    def cumsum(jax, jnp, rng):  # type: ignore[no-untyped-def]
        return (lambda x: jnp.cumsum(x, -1)), [f32(rng, 1024, 4096)]

    def conv(jax, jnp, rng):  # type: ignore[no-untyped-def]
        def f(x, w):  # type: ignore[no-untyped-def]
            return jax.lax.conv_general_dilated(x, w, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))
        return f, [f32(rng, 8, 56, 56, 64), f32(rng, 3, 3, 64, 64) * 0.1]

    def _conv_training(jax, rng, which):  # type: ignore[no-untyped-def]
        """A 3x3 SAME convolution of 8x28x28x32 to 32 features, one of its training pieces."""
        def conv(x, w, stride=1, layout=("NHWC", "HWIO", "NHWC")):  # type: ignore[no-untyped-def]
            return jax.lax.conv_general_dilated(x, w, (stride, stride), "SAME", dimension_numbers=layout)

        def loss(x, w):  # type: ignore[no-untyped-def]
            return (conv(x, w) ** 2).sum()
        x, w = f32(rng, 8, 28, 28, 32), f32(rng, 3, 3, 32, 32) * 0.1
        if which == "nchw":
            return (lambda x, w: conv(x, w, layout=("NCHW", "OIHW", "NCHW"))), [x.transpose(0, 3, 1, 2).copy(),
                                                                               w.transpose(3, 2, 0, 1).copy()]
        fn = {"grad_x": jax.grad(loss, 0), "grad_w": jax.grad(loss, 1), "strided": lambda x, w: conv(x, w, 2)}[which]
        return fn, [x, w]

    def conv_grad_x(jax, jnp, rng):  # type: ignore[no-untyped-def]
        return _conv_training(jax, rng, "grad_x")

    def conv_grad_w(jax, jnp, rng):  # type: ignore[no-untyped-def]
        return _conv_training(jax, rng, "grad_w")

    def conv_strided(jax, jnp, rng):  # type: ignore[no-untyped-def]
        return _conv_training(jax, rng, "strided")

    def conv_nchw(jax, jnp, rng):  # type: ignore[no-untyped-def]
        return _conv_training(jax, rng, "nchw")

    def top_k(jax, jnp, rng):  # type: ignore[no-untyped-def]
        return (lambda x: jax.lax.top_k(x, 10)), [f32(rng, 2048, 1024)]

    def gelu_erf(jax, jnp, rng):  # type: ignore[no-untyped-def]
        return (lambda x: jax.nn.gelu(x, approximate=False)), [f32(rng, 1 << 22)]

    def gelu_tanh(jax, jnp, rng):  # type: ignore[no-untyped-def]
        return (lambda x: jax.nn.gelu(x, approximate=True)), [f32(rng, 1 << 22)]

    def newton_sqrt(jax, jnp, rng):  # type: ignore[no-untyped-def]
        def f(a):  # type: ignore[no-untyped-def]
            return jax.lax.fori_loop(0, 30, lambda i, x: 0.5 * (x + a / x), jnp.ones_like(a))
        return f, [np.abs(f32(rng, 1 << 20)) + 0.1]

    def tiny_add(jax, jnp, rng):  # type: ignore[no-untyped-def]
        return (lambda a, b: a + b), [f32(rng, 16), f32(rng, 16)]

    def transpose_add(jax, jnp, rng):  # type: ignore[no-untyped-def]
        return (lambda a, b: a.T + b), [f32(rng, 4096, 4096), f32(rng, 4096, 4096)]

    def softmax(jax, jnp, rng):  # type: ignore[no-untyped-def]
        return (lambda x: jax.nn.softmax(x, axis=-1)), [f32(rng, 4096, 1024)]

    def layer_norm(jax, jnp, rng):  # type: ignore[no-untyped-def]
        def f(x, g, b):  # type: ignore[no-untyped-def]
            mean = x.mean(-1, keepdims=True)
            var = ((x - mean) ** 2).mean(-1, keepdims=True)
            return (x - mean) / jnp.sqrt(var + 1e-5) * g + b
        return f, [f32(rng, 4096, 1024), f32(rng, 1024), f32(rng, 1024)]

    def attention(jax, jnp, rng):  # type: ignore[no-untyped-def]
        def f(q, k, v):  # type: ignore[no-untyped-def]
            s = jnp.einsum("bhqd,bhkd->bhqk", q, k) / 8.0
            return jnp.einsum("bhqk,bhkd->bhqd", jax.nn.softmax(s, -1), v)
        return f, [f32(rng, 4, 8, 256, 64) for _ in range(3)]

    def batched_matmul(jax, jnp, rng):  # type: ignore[no-untyped-def]
        return (lambda a, b: a @ b), [f32(rng, 32, 256, 256), f32(rng, 32, 256, 256)]

    def matmul(jax, jnp, rng):  # type: ignore[no-untyped-def]
        return (lambda a, b: a @ b), [f32(rng, 1024, 1024), f32(rng, 1024, 1024)]

    def rnn_scan(jax, jnp, rng):  # type: ignore[no-untyped-def]
        def f(h, xs, w, u):  # type: ignore[no-untyped-def]
            def step(h, x):  # type: ignore[no-untyped-def]
                h = jnp.tanh(h @ w + x @ u)
                return h, h.sum()
            return jax.lax.scan(step, h, xs)
        return f, [f32(rng, 32, 256), f32(rng, 100, 32, 256), f32(rng, 256, 256) * 0.05, f32(rng, 256, 256) * 0.05]

    def mlp_step(jax, jnp, rng):  # type: ignore[no-untyped-def]
        def loss(params, x, y):  # type: ignore[no-untyped-def]
            w1, w2 = params
            logits = jax.nn.relu(x @ w1) @ w2
            return -(jax.nn.log_softmax(logits) * y).sum() / x.shape[0]

        def f(w1, w2, x, y):  # type: ignore[no-untyped-def]
            g1, g2 = jax.grad(loss)((w1, w2), x, y)
            return w1 - 0.1 * g1, w2 - 0.1 * g2
        y = np.eye(10, dtype=np.float32)[rng.integers(0, 10, 256)]
        return f, [f32(rng, 784, 512) * 0.05, f32(rng, 512, 10) * 0.05, f32(rng, 256, 784), y]

    def maxpool(jax, jnp, rng):  # type: ignore[no-untyped-def]
        def f(x):  # type: ignore[no-untyped-def]
            return jax.lax.reduce_window(x, -jnp.inf, jax.lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")
        return f, [f32(rng, 16, 112, 112, 64)]

    def adam(jax, jnp, rng):  # type: ignore[no-untyped-def]
        def f(p, g, m, v):  # type: ignore[no-untyped-def]
            m = 0.9 * m + 0.1 * g
            v = 0.999 * v + 0.001 * g * g
            return p - 1e-3 * m / (jnp.sqrt(v) + 1e-8), m, v
        return f, [f32(rng, 1 << 22) for _ in range(3)] + [np.abs(f32(rng, 1 << 22))]

    def segment_sum(jax, jnp, rng):  # type: ignore[no-untyped-def]
        ids = np.sort(rng.integers(0, 1000, 1 << 20)).astype(np.int32)
        return (lambda x, s: jax.ops.segment_sum(x, s, num_segments=1000)), [f32(rng, 1 << 20), ids]

    def sort(jax, jnp, rng):  # type: ignore[no-untyped-def]
        return (lambda x: jnp.sort(x, -1)), [f32(rng, 256, 4096)]

    names = [cumsum, conv, conv_grad_x, conv_grad_w, conv_strided, conv_nchw,
             top_k, gelu_erf, gelu_tanh, newton_sqrt, tiny_add, transpose_add, softmax, layer_norm,
             attention, batched_matmul, matmul, rnn_scan, mlp_step, maxpool, adam, segment_sum, sort]
    # Whole training steps at the size of real models (model_programs.py).
    return [Program(fn.__name__, fn) for fn in names] + [Program(name, make) for name, make in MODELS.items()]


def _temp_bytes_xla(jitted: Any, args: list[np.ndarray]) -> int | None:
    try:
        return int(jitted.lower(*args).compile().memory_analysis().temp_size_in_bytes)
    except Exception:  # noqa: BLE001 - older jaxlibs have no memory analysis
        return None


def _temp_bytes_ours(executable: Any) -> int:
    ba = getattr(executable, "buffer_assignment", None)
    if ba is None:
        return 0
    return sum(a.size for comp in ba.computations.values() for a in comp.allocations if a.kind == "temp")


def _kib(nbytes: int) -> str:
    return f"{nbytes / 1024:.1f}Ki"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer timed runs")
    parser.add_argument("--only", nargs="*", default=[], help="run only these programs")
    a = parser.parse_args(argv)
    found = cpu_jax()
    if found is None:
        return 1
    jax, jnp = found
    header("xla_teach CPU vs XLA CPU on the HLO JAX writes")
    print(f"{'program':<16} {'xla_teach':>11} {'XLA':>11} {'XLA/ours':>9}   {'temp ours':>10} {'temp XLA':>10}  "
          "compile (ours / XLA)")
    ratios = []
    runs = 5 if a.quick else 15
    # Neither side's start-up counts: both first compile a tiny program and a small convolution
    # (XLA loads its runtime and Eigen; xla_teach loads OpenBLAS and compiles its runtime
    # library's convolution, once per process).
    def small_conv(x, w):  # type: ignore[no-untyped-def]
        return jax.lax.conv_general_dilated(x, w, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))

    for fn, args in ((lambda x: x + 1, (np.zeros(4, np.float32),)),
                     (small_conv, (np.zeros((1, 4, 4, 2), np.float32), np.zeros((3, 3, 2, 2), np.float32)))):
        warm_up = jax.jit(fn).lower(*args)
        warm_up.compile()
        compile_module(warm_up.compiler_ir("hlo").as_hlo_text(), "cpu")
    for program in comparison_programs():
        if a.only and program.name not in a.only:
            continue
        rng = np.random.default_rng(0)
        fn, args = program.make(jax, jnp, rng)
        both = compile_both(jax, fn, args)
        jitted, executable, flat = both["jitted"], both["executable"], both["flat"]
        xla_compile_s, compile_s = both["xla_compile_s"], both["compile_s"]
        want = jax.tree_util.tree_leaves(jitted(*args))
        got = executable.execute(list(flat))
        for g, w in zip(got, want, strict=True):
            np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=program.rtol, atol=1e-3,
                                       err_msg=f"{program.name}: xla_teach and XLA differ")

        def ours(executable: Any = executable, args: list[np.ndarray] = flat) -> None:
            executable.execute(args)

        def theirs(jitted: Any = jitted, args: list[np.ndarray] = args) -> None:
            jax.block_until_ready(jitted(*args))

        t_ours, t_xla = paired_medians(ours, theirs, runs=runs)
        ratio = t_xla / t_ours
        ratios.append(ratio)
        xla_temp = _temp_bytes_xla(jitted, args)
        theirs_temp = "?" if xla_temp is None else _kib(xla_temp)
        print(f"{program.name:<16} {t_ours * 1e3:>9.3f}ms {t_xla * 1e3:>9.3f}ms {ratio:>8.2f}x   "
              f"{_kib(_temp_bytes_ours(executable)):>10} {theirs_temp:>10}  "
              f"{compile_s:6.3f}s / {xla_compile_s:.3f}s", flush=True)
    if ratios:
        print(f"geometric mean XLA/xla_teach over {len(ratios)} programs: "
              f"{math.exp(sum(math.log(r) for r in ratios) / len(ratios)):.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
