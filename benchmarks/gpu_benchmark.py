"""GPU benchmark: the seeds' reduce_sum(x + y*z) at 2^26 f32 elements and a row softmax, as a
fraction of the device's copy bandwidth measured in the same run, and against JAX (same machine,
same HLO) when JAX with a GPU is installed.

    python benchmarks/gpu_benchmark.py            # needs an NVIDIA GPU and driver

Bandwidth convention: a device-to-device copy of N bytes moves 2N bytes (read + write); a kernel
moves the bytes it must read plus the bytes it writes (its inputs once, its outputs once). Times
are CUDA-event medians of several runs after a warm-up.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from datetime import date
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from common import SEED, SOFTMAX  # noqa: E402

from xla_teach.api import compile_module  # noqa: E402
from xla_teach.backends.gpu.executable import upload  # noqa: E402
from xla_teach.backends.gpu.runtime import CudaContext, device_available, unavailable_reason  # noqa: E402


def event_median_ms(ctx: CudaContext, fn, runs: int = 20) -> float:  # type: ignore[no-untyped-def]
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


def bench(ctx: CudaContext, text: str, args: list[np.ndarray], bytes_moved: int) -> tuple[float, object]:
    executable = compile_module(text, "gpu")
    loaded = executable.loaded()
    shapes = [p.shape for p in executable.module.entry.parameter_instructions]
    inputs = [upload(ctx, a, s) for a, s in zip(args, shapes, strict=True)]
    ms = event_median_ms(ctx, lambda: loaded.run_on_device(inputs))
    out = executable.execute(args)
    kernels = sum(1 for i in executable.module.entry.instructions if i.backend_config)
    return ms, (bytes_moved / (ms / 1e3), kernels, out)


def jax_ms(fn, args: list[np.ndarray]) -> float | None:  # type: ignore[no-untyped-def]
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        return None
    if not any(d.platform == "gpu" for d in jax.devices()):
        return None
    import time

    dev = [jnp.asarray(a) for a in args]
    f = jax.jit(fn)
    f(*dev).block_until_ready()
    times = []
    for _ in range(20):
        t = time.perf_counter()
        f(*dev).block_until_ready()
        times.append((time.perf_counter() - t) * 1e3)
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--log2n", type=int, default=26)
    parser.add_argument("--rows", type=int, default=8192)
    parser.add_argument("--cols", type=int, default=4096)
    ns = parser.parse_args()
    if not device_available():
        print(f"gpu_benchmark: {unavailable_reason()}", file=sys.stderr)
        return 2
    ctx = CudaContext.get()
    info = ctx.info
    print(f"# {date.today()} on {info.name} ({info.arch}, {info.multiprocessors} SMs)")
    rng = np.random.default_rng(0)
    n = 1 << ns.log2n
    copy_bw = copy_bandwidth(ctx, 4 * n)
    print(f"device copy bandwidth (read+write): {copy_bw / 1e9:.0f} GB/s")

    xs = [rng.standard_normal(n, dtype=np.float32) for _ in range(3)]
    ms, (bw, kernels, out) = bench(ctx, SEED.format(n=n), xs, 3 * 4 * n + 4)
    want = float(np.sum(xs[0].astype(np.float64) + xs[1].astype(np.float64) * xs[2]))
    print(f"seed reduce_sum(x + y*z), 2^{ns.log2n} f32: {ms:.3f} ms, {kernels} kernel(s), {bw / 1e9:.0f} GB/s = "
          f"{bw / copy_bw:.0%} of copy bandwidth; result {out[0]:.6g} vs f64 {want:.6g}")
    jms = jax_ms(lambda x, y, z: (x + y * z).sum(), xs)
    if jms is not None:
        print(f"  JAX jit on the same device: {jms:.3f} ms -> xla_teach is {jms / ms:.2f}x JAX")

    x = rng.standard_normal((ns.rows, ns.cols), dtype=np.float32)
    ms, (bw, kernels, out) = bench(ctx, SOFTMAX.format(r=ns.rows, c=ns.cols), [x], 2 * x.nbytes)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    err = float(np.max(np.abs(out[0] - e / e.sum(axis=1, keepdims=True))))
    print(f"row softmax {ns.rows}x{ns.cols} f32: {ms:.3f} ms, {kernels} kernel(s), {bw / 1e9:.0f} GB/s = "
          f"{bw / copy_bw:.0%} of copy bandwidth; max |error| {err:.2g}")
    jms = jax_ms(lambda v: __import__("jax").nn.softmax(v, axis=1), [x])
    if jms is not None:
        print(f"  JAX jit on the same device: {jms:.3f} ms -> xla_teach is {jms / ms:.2f}x JAX")
    return 0


if __name__ == "__main__":
    sys.exit(main())
