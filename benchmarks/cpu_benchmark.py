"""CPU benchmark: xla_teach's CPU backend against NumPy (and JAX when the ``bench`` extra is
installed), measured side by side in one process.

    .venv/bin/python benchmarks/cpu_benchmark.py [--quick]

Programs: the reduce_sum(x + y*z) at 2^24 f32 elements (also as a
fraction of the machine's copy bandwidth: bytes read / time), a row softmax 4096x1024, a
1024x1024x1024 matmul, sin over 2^22 f32, and jit-compiled training steps of softmax regression and a 2-layer MLP
against hand-written NumPy (with the MLP step's compile time).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from common import SEED, SOFTMAX, block_medians, copy_bandwidth, header, paired_medians, row  # noqa: E402

from xla_teach.api import compile_module  # noqa: E402

MATMUL = """HloModule matmul
ENTRY main {{
  a = f32[{n},{n}] parameter(0)
  b = f32[{n},{n}] parameter(1)
  ROOT d = f32[{n},{n}] dot(a, b), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}
}}
"""


def _jax():  # type: ignore[no-untyped-def]
    try:
        import jax

        jax.config.update("jax_platforms", "cpu")
        return jax
    except ImportError:
        return None


def bench_seed(log2n: int, jax) -> None:  # type: ignore[no-untyped-def]
    n = 1 << log2n
    rng = np.random.default_rng(0)
    x, y, z = (rng.standard_normal(n, dtype=np.float32) for _ in range(3))
    exe = compile_module(SEED.format(n=n), "cpu")
    np.testing.assert_allclose(exe.execute([x, y, z])[0], np.sum(x.astype(np.float64) + y * z), rtol=1e-3)
    if jax is None:
        ours, numpy = paired_medians(lambda: exe.execute([x, y, z]), lambda: np.sum(x + y * z))
        row(f"seed reduce_sum(x + y*z), 2^{log2n} f32", ours, numpy, "NumPy", 2.0)
        read_bw = 3 * x.nbytes / ours
        copy_bw = copy_bandwidth(x.nbytes)
        print(f"{'':<48s} reads {read_bw / 1e9:.1f} GB/s = {read_bw / copy_bw:.0%} of copy bandwidth "
              f"({copy_bw / 1e9:.1f} GB/s read)  [goal >= 70%: {'met' if read_bw >= 0.7 * copy_bw else 'NOT met'}]")
    else:
        f = jax.jit(lambda a, b, c: (a + b * c).sum())
        args = [jax.device_put(v) for v in (x, y, z)]
        ours, theirs = block_medians(lambda: exe.execute([x, y, z]), lambda: f(*args).block_until_ready())
        row(f"seed reduce_sum(x + y*z), 2^{log2n} f32", ours, theirs, "JAX", 1.0)


def bench_softmax(rows: int, cols: int, jax) -> None:  # type: ignore[no-untyped-def]
    x = np.random.default_rng(1).standard_normal((rows, cols), dtype=np.float32)
    exe = compile_module(SOFTMAX.format(r=rows, c=cols), "cpu")

    def numpy_softmax() -> np.ndarray:
        e = np.exp(x - x.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)

    np.testing.assert_allclose(exe.execute([x])[0], numpy_softmax(), rtol=1e-5, atol=1e-7)
    if jax is None:
        row(f"row softmax {rows}x{cols} f32", *paired_medians(lambda: exe.execute([x]), numpy_softmax), "NumPy", 1.5)
    else:
        f = jax.jit(lambda v: jax.nn.softmax(v, axis=1))
        xd = jax.device_put(x)
        row(f"row softmax {rows}x{cols} f32", *block_medians(lambda: exe.execute([x]),
                                                             lambda: f(xd).block_until_ready()), "JAX", 1.0)


def bench_matmul(n: int) -> None:
    rng = np.random.default_rng(2)
    a, b = rng.standard_normal((n, n), dtype=np.float32), rng.standard_normal((n, n), dtype=np.float32)
    exe = compile_module(MATMUL.format(n=n), "cpu")
    np.testing.assert_allclose(exe.execute([a, b])[0], a @ b, rtol=1e-3, atol=1e-3)
    row(f"matmul {n}x{n}x{n} f32", *paired_medians(lambda: exe.execute([a, b]), lambda: a @ b, runs=9), "NumPy @", 0.8)


SINE = """HloModule sine
ENTRY main {{
  x = f32[{n}] parameter(0)
  ROOT s = f32[{n}] sine(x)
}}
"""


def bench_sine(log2n: int, jax) -> None:  # type: ignore[no-untyped-def]
    """An elementwise transcendental alone (no fusion to win by): sin over [-100, 100], whose
    argument reduction also carries the Payne-Hanek path for huge inputs."""
    x = np.random.default_rng(3).uniform(-100, 100, 1 << log2n).astype(np.float32)
    exe = compile_module(SINE.format(n=x.size), "cpu")
    np.testing.assert_allclose(exe.execute([x])[0], np.sin(x.astype(np.float64)), rtol=1e-6, atol=1e-7)
    if jax is None:
        row(f"sin, 2^{log2n} f32", *paired_medians(lambda: exe.execute([x]), lambda: np.sin(x)), "NumPy", 0.8)
    else:
        f = jax.jit(jax.numpy.sin)
        xd = jax.device_put(x)
        row(f"sin, 2^{log2n} f32", *block_medians(lambda: exe.execute([x]), lambda: f(xd).block_until_ready()),
            "JAX", 1.0)


def bench_training() -> None:
    try:
        from training_steps import mlp_step_programs, softmax_regression_programs
    except ImportError as err:  # the front end (xla_teach.jit / grad) is needed
        print(f"training steps: skipped ({err})")
        return
    for name, (ours, theirs, compile_seconds) in (("softmax regression", softmax_regression_programs()),
                                                  ("2-layer MLP", mlp_step_programs())):
        row(f"{name} training step", *paired_medians(ours, theirs), "NumPy", 1.0)
        if compile_seconds is not None:
            print(f"{'':<48s} compile time {compile_seconds:.2f} s  [goal < 2 s: "
                  f"{'met' if compile_seconds < 2 else 'NOT met'}]")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes (a smoke test)")
    ns = parser.parse_args()
    header("xla_teach CPU benchmark")
    start = time.perf_counter()
    bench_seed(18 if ns.quick else 24, None)
    bench_softmax(256 if ns.quick else 4096, 1024, None)
    bench_matmul(128 if ns.quick else 1024)
    bench_sine(16 if ns.quick else 22, None)
    bench_training()
    # JAX last: importing it starts XLA's thread pool, which would disturb the rows above.
    jax = _jax()
    if jax is not None:
        print("-- against JAX's XLA (jax.jit on the same CPU, same program; timed in blocks) --")
        bench_seed(18 if ns.quick else 24, jax)
        bench_softmax(256 if ns.quick else 4096, 1024, jax)
        bench_sine(16 if ns.quick else 22, jax)
    print(f"(total {time.perf_counter() - start:.1f} s; JAX {'present' if jax else 'not installed'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
