"""GPU benchmark: xla_teach's GPU backend against the device's copy bandwidth and against XLA's own
GPU compiler (``jax.jit``) on the same device and **the same HLO** (the text JAX lowers each program
to, compiled by both).

    python benchmarks/gpu_benchmark.py                 # needs an NVIDIA GPU and driver (and JAX
    python benchmarks/gpu_benchmark.py --quick         # with CUDA for the XLA column)

What it prints, one table:

* the device's copy bandwidth (a device-to-device copy of N bytes moves 2N bytes: read + write);
* launch overhead: one tiny kernel launched back to back (GPU time per launch, CUDA events) and one
  tiny compiled program run end to end from the host (host time per call);
* for each program (the reduce_sum(x + y*z) at 2^26 f32, a row softmax, a matmul, an MLP
  training step, a layer norm and attention): xla_teach's time, its GPU time, the bytes it must
  move (inputs once, outputs once) over its GPU time as a fraction of copy bandwidth, XLA's time
  on the same HLO, XLA/xla_teach (goal >= 0.8x), and the largest difference between the results.

The times compared are medians over several runs after warm-up, wall clock from the host with the
inputs already on the device and the device synchronised after each run, so both sides pay their
dispatch from Python. The GPU time is CUDA events around the same run. Both compilers run f32 dots
at default precision on TF32 tensor cores (``--xla_teach_gpu_tf32``).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")  # leave device memory to both sides

from xla_teach.api import compile_module  # noqa: E402
from xla_teach.backends.gpu.executable import upload  # noqa: E402
from xla_teach.backends.gpu.runtime import (  # noqa: E402
    CudaContext,
    KernelArguments,
    device_available,
    unavailable_reason,
)

RUNS = 15


def median_seconds(fn: Callable[[], object], sync: Callable[[], object], runs: int = RUNS) -> float:
    for _ in range(2):
        fn()
    sync()
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def event_median_ms(ctx: CudaContext, fn: Callable[[], object], runs: int = 20) -> float:
    fn()
    ctx.synchronize()
    times = []
    for _ in range(runs):
        start, end = ctx.event(), ctx.event()
        ctx.record(start)
        fn()
        ctx.record(end)
        times.append(ctx.elapsed_ms(start, end))
    return statistics.median(times)


def copy_bandwidth(ctx: CudaContext, nbytes: int) -> float:
    a, b = ctx.alloc(nbytes), ctx.alloc(nbytes)
    ms = event_median_ms(ctx, lambda: ctx.copy_device(b.ptr, a.ptr, nbytes))
    return 2 * nbytes / (ms / 1e3)


# ---- the programs, written in JAX -------------------------------------------------------------
@dataclass
class Program:
    name: str
    make: Callable[[Any, np.random.Generator], tuple[Callable[..., Any], list[np.ndarray]]]


def seed(jnp: Any, rng: np.random.Generator, log2n: int) -> tuple[Callable[..., Any], list[np.ndarray]]:
    n = 1 << log2n
    return (lambda x, y, z: jnp.sum(x + y * z)), [rng.standard_normal(n, dtype=np.float32) for _ in range(3)]


def softmax(jnp: Any, rng: np.random.Generator) -> tuple[Callable[..., Any], list[np.ndarray]]:
    import jax

    return (lambda x: jax.nn.softmax(x, axis=1)), [rng.standard_normal((8192, 4096), dtype=np.float32)]


def matmul(jnp: Any, rng: np.random.Generator) -> tuple[Callable[..., Any], list[np.ndarray]]:
    n = 2048
    return (lambda a, b: a @ b), [rng.standard_normal((n, n), dtype=np.float32) for _ in range(2)]


def mlp_step(jnp: Any, rng: np.random.Generator) -> tuple[Callable[..., Any], list[np.ndarray]]:
    import jax

    def loss(w1, b1, w2, b2, x, y):  # type: ignore[no-untyped-def]
        h = jax.nn.relu(x @ w1 + b1)
        logits = h @ w2 + b2
        return -jnp.mean(jnp.sum(jax.nn.log_softmax(logits) * y, axis=1))

    def step(w1, b1, w2, b2, x, y):  # type: ignore[no-untyped-def]
        value, grads = jax.value_and_grad(loss, argnums=(0, 1, 2, 3))(w1, b1, w2, b2, x, y)
        return value, *[p - 0.1 * g for p, g in zip((w1, b1, w2, b2), grads, strict=True)]

    batch, d_in, hidden, classes = 256, 784, 512, 10
    args = [rng.standard_normal((d_in, hidden), dtype=np.float32) * 0.05, np.zeros(hidden, np.float32),
            rng.standard_normal((hidden, classes), dtype=np.float32) * 0.05, np.zeros(classes, np.float32),
            rng.standard_normal((batch, d_in), dtype=np.float32),
            np.eye(classes, dtype=np.float32)[rng.integers(0, classes, batch)]]
    return step, args


def layer_norm(jnp: Any, rng: np.random.Generator) -> tuple[Callable[..., Any], list[np.ndarray]]:
    def f(x, g, b):  # type: ignore[no-untyped-def]
        mean = jnp.mean(x, axis=-1, keepdims=True)
        var = jnp.mean((x - mean) ** 2, axis=-1, keepdims=True)
        return (x - mean) / jnp.sqrt(var + 1e-5) * g + b

    return f, [rng.standard_normal((8192, 4096), dtype=np.float32), rng.standard_normal(4096, dtype=np.float32),
               rng.standard_normal(4096, dtype=np.float32)]


def attention(jnp: Any, rng: np.random.Generator) -> tuple[Callable[..., Any], list[np.ndarray]]:
    import jax

    def f(q, k, v):  # type: ignore[no-untyped-def]
        s = jnp.einsum("bhqd,bhkd->bhqk", q, k) / np.sqrt(q.shape[-1]).astype(np.float32)
        return jnp.einsum("bhqk,bhkd->bhqd", jax.nn.softmax(s, axis=-1), v)

    return f, [rng.standard_normal((4, 8, 256, 64), dtype=np.float32) for _ in range(3)]


def bytes_of(arrays: list[Any]) -> int:
    return sum(int(np.asarray(a).nbytes) for a in arrays)


def hlo_text(jax: Any, fn: Callable[..., Any], args: list[np.ndarray]) -> str:
    lowered = jax.jit(fn).lower(*args)
    try:
        return str(lowered.as_text(dialect="hlo"))
    except Exception:  # noqa: BLE001 - older JAX
        return str(lowered.compiler_ir("hlo").as_hlo_text())


def max_difference(ours: list[np.ndarray], theirs: list[np.ndarray]) -> float:
    worst = 0.0
    for a, b in zip(ours, theirs, strict=True):
        a64, b64 = np.asarray(a, np.float64), np.asarray(b, np.float64)
        scale = max(1.0, float(np.max(np.abs(b64))) if b64.size else 1.0)
        worst = max(worst, float(np.max(np.abs(a64 - b64))) / scale if a64.size else 0.0)
    return worst


def measure(ctx: CudaContext, jax: Any, name: str, fn: Callable[..., Any], args: list[np.ndarray],
            copy_bw: float, goal: float) -> str:
    text = hlo_text(jax, fn, args)
    t = time.perf_counter()
    executable = compile_module(text, "gpu")
    compile_s = time.perf_counter() - t
    loaded = executable.loaded()
    shapes = [p.shape for p in executable.module.entry.parameter_instructions]
    inputs = [upload(ctx, a, s) for a, s in zip(args, shapes, strict=True)]
    ours_s = median_seconds(lambda: loaded.run_on_device(inputs), ctx.synchronize)
    gpu_ms = event_median_ms(ctx, lambda: loaded.run_on_device(inputs))  # device time, for the bandwidth
    kernels = sum(1 for i in executable.module.entry.instructions if i.backend_config)
    ours_out = executable.execute(args)

    jitted = jax.jit(fn)
    device_args = [jax.device_put(a) for a in args]
    theirs_s = median_seconds(lambda: jitted(*device_args), lambda: jax.block_until_ready(jitted(*device_args)))
    theirs_out = [np.asarray(o) for o in jax.tree_util.tree_leaves(jitted(*device_args))]
    moved = bytes_of(args) + bytes_of(theirs_out)
    ratio = theirs_s / ours_s
    verdict = "met" if ratio >= goal else "NOT met"
    return (f"| {name} | {ours_s * 1e3:.3f} | {gpu_ms:.3f} | {kernels} | {moved / (gpu_ms / 1e3) / copy_bw:.0%} | "
            f"{theirs_s * 1e3:.3f} | "
            f"{ratio:.2f}x ({verdict}) | {max_difference(ours_out, theirs_out):.1e} | {compile_s:.1f} s |")


def launch_overhead(ctx: CudaContext) -> tuple[float, float]:
    """GPU time per back-to-back launch of a one-element kernel, and host time per tiny program."""
    text = "HloModule tiny\nENTRY e {\n  x = f32[16] parameter(0)\n  y = f32[16] parameter(1)\n" \
           "  ROOT s = f32[16] add(x, y)\n}\n"
    executable = compile_module(text, "gpu")
    loaded = executable.loaded()
    shapes = [p.shape for p in executable.module.entry.parameter_instructions]
    inputs = [upload(ctx, np.ones(16, np.float32), s) for s in shapes]
    thunk = loaded.entry.thunks[0]
    out = ctx.alloc(64)
    arguments = KernelArguments(3)
    arguments.set([inputs[0].ptr, inputs[1].ptr, out.ptr])
    launches = 1000

    def many() -> None:
        for _ in range(launches):
            ctx.launch_with(thunk.function, thunk.launch.blocks, thunk.launch.threads, arguments)

    per_launch_ms = event_median_ms(ctx, many, runs=5) / launches
    per_call_s = median_seconds(lambda: loaded.run_on_device(inputs), ctx.synchronize, runs=200)
    return per_launch_ms * 1e3, per_call_s * 1e6


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--log2n", type=int, default=26, help="the seed example's size, 2^N f32 (default 26)")
    parser.add_argument("--goal", type=float, default=0.8, help="XLA/xla_teach ratio counted as met")
    parser.add_argument("--only", default="", help="comma-separated program names to run")
    ns = parser.parse_args()
    if not device_available():
        print(f"gpu_benchmark: {unavailable_reason()}", file=sys.stderr)
        return 2
    ctx = CudaContext.get()
    info = ctx.info
    print(f"# {date.today()} on {info.name} ({info.arch}, {info.multiprocessors} SMs)")
    copy_bw = copy_bandwidth(ctx, 1 << 28)
    print(f"device copy bandwidth (read+write): {copy_bw / 1e9:.0f} GB/s")
    launch_us, call_us = launch_overhead(ctx)
    print(f"launch overhead: {launch_us:.2f} us per kernel launched back to back (GPU time); "
          f"{call_us:.1f} us per tiny one-kernel program run from the host")
    try:
        import jax
        import jax.numpy as jnp

        if not any(d.platform == "gpu" for d in jax.devices()):
            raise ImportError("JAX sees no GPU")
    except Exception as err:  # noqa: BLE001
        print(f"no XLA column: {err}")
        return 0
    print(f"XLA: jax {jax.__version__} on {jax.devices()[0].device_kind}")
    rng = np.random.default_rng(0)
    programs: list[tuple[str, Callable[[], tuple[Callable[..., Any], list[np.ndarray]]]]] = [
        (f"seed reduce_sum(x+y*z) 2^{ns.log2n}", lambda: seed(jnp, rng, ns.log2n)),
        ("row softmax 8192x4096", lambda: softmax(jnp, rng)),
        ("layer norm 8192x4096", lambda: layer_norm(jnp, rng)),
        ("matmul 2048^3 f32", lambda: matmul(jnp, rng)),
        ("attention b4 h8 s256 d64", lambda: attention(jnp, rng)),
        ("MLP training step 256x784-512-10", lambda: mlp_step(jnp, rng)),
    ]
    only = [w.strip() for w in ns.only.split(",") if w.strip()]
    print("| program | xla_teach ms | its GPU time ms | kernels | of copy bandwidth | XLA ms | XLA/xla_teach "
          "| max rel diff | compile |")
    print("|---|---|---|---|---|---|---|---|---|")
    failures = 0
    for name, make in programs:
        if only and not any(w in name for w in only):
            continue
        try:
            fn, args = make()
            print(measure(ctx, jax, name, fn, args, copy_bw, ns.goal), flush=True)
        except Exception as err:  # noqa: BLE001 - report and go on to the next program
            failures += 1
            print(f"| {name} | FAILED: {type(err).__name__}: {str(err).splitlines()[0][:200]} |", flush=True)
            traceback.print_exc(file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
