"""xla_teach's GPU backend against XLA's GPU compiler on the HLO that JAX writes, every program of
``xla_comparison.py`` (the model-scale training steps included), with kernel times from a profiler.

    python benchmarks/gpu_xla_comparison.py [--only NAME ...] [--json FILE]   # an NVIDIA GPU, JAX with CUDA

For each program JAX lowers ``jax.jit(f)`` on the GPU; XLA compiles that and xla_teach compiles
the same HLO text. Three measurements, side by side in this process:

* **wall clock** from Python, inputs already on the device, the device synchronised after each
  run, medians of runs interleaved with XLA's (``paired_medians``): xla_teach with CUDA graphs
  (its default, ``--xla_gpu_graph_min_graph_size``), xla_teach launching every kernel from the
  host, and XLA;
* **kernel time** from CUPTI, through JAX's profiler (``jax.profiler`` traces every kernel the
  process launches, xla_teach's too): the GPU time of each side's kernels and copies per run, and
  how many there are. This is the device's own account, free of Python's dispatch;
* **bandwidth**: for each of xla_teach's kernels that is not a dot or a convolution and runs at
  least 20 us, the bytes it must move over its CUPTI time, as a share of the device's copy
  bandwidth (goal: 85 %).

The results of both sides are compared (largest difference relative to the result's largest
magnitude; both run f32 dots on TF32 tensor cores at default precision). The last lines are the
geometric means of XLA's time over xla_teach's, by wall clock and by kernel time.
"""

from __future__ import annotations

import argparse
import glob
import json
import math
import os
import statistics
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from datetime import date
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")  # leave device memory to both sides

from common import paired_medians  # noqa: E402
from gpu_benchmark import copy_bandwidth, max_difference  # noqa: E402
from xla_comparison import comparison_programs  # noqa: E402

from xla_teach.api import compile_module  # noqa: E402
from xla_teach.backends.gpu.executable import CommandBufferThunk, GpuKernelThunk, upload  # noqa: E402
from xla_teach.backends.gpu.runtime import CudaContext, device_available, unavailable_reason  # noqa: E402

TRACED_RUNS = 5
BANDWIDTH_GOAL = 0.85


def trace_kernels(jax: Any, fn: Callable[[], object], runs: int) -> tuple[list[tuple[str, float]], list[str]]:
    """``(name, microseconds)`` of every kernel and copy on the GPU during ``runs`` calls of ``fn``
    (which synchronises), from a CUPTI trace taken by JAX's profiler; and the trace's line names."""
    from jax.profiler import ProfileData

    fn()  # warm: nothing compiled or allocated inside the trace
    with tempfile.TemporaryDirectory() as folder:
        jax.profiler.start_trace(folder)
        try:
            for _ in range(runs):
                fn()
        finally:
            jax.profiler.stop_trace()
        files = glob.glob(f"{folder}/**/*.xplane.pb", recursive=True)
        if not files:
            raise RuntimeError("JAX's profiler wrote no trace")
        data = ProfileData.from_file(files[0])
    events: list[tuple[str, float]] = []
    lines: list[str] = []
    for plane in data.planes:
        if not plane.name.startswith("/device:GPU"):
            continue
        for line in plane.lines:
            lines.append(line.name)
            # A device's plane has a line per stream and lines that repeat the same time as XLA's
            # annotations ("XLA Ops", "XLA Modules"): only the streams' lines are counted.
            if line.name.startswith("Stream"):
                events += [(e.name, e.duration_ns / 1e3) for e in line.events]
    return events, lines


def per_run(events: list[tuple[str, float]], runs: int) -> tuple[float, float]:
    """Microseconds of GPU time and the number of kernels (copies left out of the count), per run."""
    kernels = [e for e in events if not e[0].lower().startswith(("memcpy", "memset"))]
    return sum(us for _, us in events) / runs, len(kernels) / runs


def our_kernels(loaded: Any) -> dict[str, GpuKernelThunk]:
    """Every kernel thunk of the device executable, nested sequences and graphs included."""
    found: dict[str, GpuKernelThunk] = {}
    seen: set[int] = set()

    def walk(sequence: Any) -> None:
        if id(sequence) in seen:
            return
        seen.add(id(sequence))
        for thunk in sequence.thunks:
            for kernel in thunk.thunks if isinstance(thunk, CommandBufferThunk) else [thunk]:
                if isinstance(kernel, GpuKernelThunk):
                    found[kernel.name] = kernel
            for attr in ("body", "condition", "callee", "branches"):  # the host thunks' nested sequences
                nested = getattr(thunk, attr, None)
                for seq in nested if isinstance(nested, list) else [nested]:
                    if seq is not None and hasattr(seq, "thunks"):
                        walk(seq)

    walk(loaded.entry)
    return found


def compute_bound(module: Any) -> set[str]:
    """The kernels that hold a dot or a convolution (the rest stream memory)."""
    names = set()
    for comp in module.computations:
        for instr in comp.instructions:
            inside = instr.fused_computation.instructions if instr.opcode == "fusion" else [instr]
            if any(i.opcode in ("dot", "convolution") for i in inside):
                names.add(instr.name)
    return names


def top_kernels(events: list[tuple[str, float]], runs: int, count: int = 8) -> list[list[Any]]:
    """The ``count`` kernels that take the most GPU time per run: ``[name, us per run, launches per run]``."""
    totals: dict[str, list[float]] = {}
    for name, us in events:
        entry = totals.setdefault(name, [0.0, 0.0])
        entry[0] += us / runs
        entry[1] += 1 / runs
    ranked = sorted(totals.items(), key=lambda item: -item[1][0])[:count]
    return [[name[:80], round(us, 1), round(launches, 2)] for name, (us, launches) in ranked]


def bandwidth_shares(events: list[tuple[str, float]], kernels: dict[str, GpuKernelThunk], copy_bw: float,
                     runs: int, skip: set[str]) -> list[tuple[str, float, float]]:
    """``(kernel, us per run, share of copy bandwidth)`` of xla_teach's memory-bound kernels of 20 us or
    more (those not in ``skip``)."""
    times: dict[str, float] = {}
    for name, us in events:
        if name in kernels:
            times[name] = times.get(name, 0.0) + us / runs
    shares = []
    for name, us in times.items():
        kernel = kernels[name]
        if us < 20 or name in skip:
            continue
        shares.append((name, us, kernel.nbytes / (us * 1e-6) / copy_bw))
    return sorted(shares, key=lambda s: s[2])


def measure(jax: Any, ctx: CudaContext, name: str, fn: Callable[..., Any], args: list[Any], copy_bw: float,
            runs: int) -> dict[str, Any]:
    gpu = jax.devices("gpu")[0]
    jitted = jax.jit(fn)
    lowered = jitted.lower(*args)
    text = lowered.compiler_ir("hlo").as_hlo_text()
    start = time.perf_counter()
    lowered.compile()
    xla_compile_s = time.perf_counter() - start
    start = time.perf_counter()
    executable = compile_module(text, "gpu")
    loaded = executable.loaded()
    compile_s = time.perf_counter() - start
    plain = executable.loaded_with_graphs(0)

    flat = jax.tree_util.tree_leaves(args)
    shapes = [shape for _, shape in loaded.entry.parameter_leaves]
    inputs = [upload(ctx, np.asarray(a), s) for a, s in zip(flat, shapes, strict=True)]
    device_args = jax.device_put(args, gpu)

    def ours() -> None:
        loaded.run_on_device(inputs)
        ctx.synchronize()

    def ours_launched() -> None:
        plain.run_on_device(inputs)
        ctx.synchronize()

    def theirs() -> None:
        jax.block_until_ready(jitted(*device_args))

    theirs_out = [np.asarray(o) for o in jax.tree_util.tree_leaves(jitted(*device_args))]
    ours_out = executable.execute(list(flat))
    t_ours, t_xla = paired_medians(ours, theirs, runs=runs)
    t_launched, _ = paired_medians(ours_launched, theirs, runs=max(runs // 2, 3))
    our_events, lines = trace_kernels(jax, ours, TRACED_RUNS)
    their_events, _ = trace_kernels(jax, theirs, TRACED_RUNS)
    our_us, our_count = per_run(our_events, TRACED_RUNS)
    their_us, their_count = per_run(their_events, TRACED_RUNS)
    shares = bandwidth_shares(our_events, our_kernels(loaded), copy_bw, TRACED_RUNS, compute_bound(executable.module))
    return {
        "program": name, "ours_ms": t_ours * 1e3, "ours_launched_ms": t_launched * 1e3, "xla_ms": t_xla * 1e3,
        "ours_kernel_us": our_us, "ours_kernels": our_count, "xla_kernel_us": their_us, "xla_kernels": their_count,
        "graphs": sum(isinstance(t, CommandBufferThunk) for t in loaded.entry.thunks),
        "max_rel_diff": max_difference(ours_out, theirs_out), "compile_s": compile_s, "xla_compile_s": xla_compile_s,
        "bandwidth": [{"kernel": k, "us": round(us, 1), "share": round(share, 3)} for k, us, share in shares],
        "trace_lines": sorted(set(lines)),
        "top_kernels": {"xla_teach": top_kernels(our_events, TRACED_RUNS),
                        "xla": top_kernels(their_events, TRACED_RUNS)},
    }


def geomean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")


def row(r: dict[str, Any]) -> str:
    kernel_ratio = r["xla_kernel_us"] / r["ours_kernel_us"] if r["ours_kernel_us"] else float("nan")
    low = [b for b in r["bandwidth"] if b["share"] < BANDWIDTH_GOAL]
    lowest = f" (lowest {low[0]['kernel'][:24]} {low[0]['share']:.0%})" if low else ""
    bandwidth = f"{len(r['bandwidth']) - len(low)}/{len(r['bandwidth'])}{lowest}" if r["bandwidth"] else "-"
    return (f"| {r['program']} | {r['ours_ms']:.3f} | {r['ours_launched_ms']:.3f} | {r['xla_ms']:.3f} | "
            f"{r['xla_ms'] / r['ours_ms']:.2f}x | {r['ours_kernel_us'] / 1e3:.3f} ({r['ours_kernels']:.0f}) | "
            f"{r['xla_kernel_us'] / 1e3:.3f} ({r['xla_kernels']:.0f}) | {kernel_ratio:.2f}x | {bandwidth} | "
            f"{r['max_rel_diff']:.1e} | {r['compile_s']:.1f} / {r['xla_compile_s']:.1f} s |")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", default=[], help="run only these programs")
    parser.add_argument("--skip", nargs="*", default=[], help="leave these programs out")
    parser.add_argument("--runs", type=int, default=11, help="timed runs per side (default 11)")
    parser.add_argument("--json", default="", help="also write the measurements to this file")
    a = parser.parse_args(argv)
    if not device_available():
        print(f"gpu_xla_comparison: {unavailable_reason()}", file=sys.stderr)
        return 2
    try:
        import jax
        import jax.numpy as jnp

        jax.devices("gpu")
    except Exception as err:  # noqa: BLE001 - no JAX, or JAX without CUDA
        print(f"gpu_xla_comparison: XLA's GPU compiler is not available here (JAX with CUDA): {err}", file=sys.stderr)
        return 2
    ctx = CudaContext.get()
    copy_bw = copy_bandwidth(ctx, 1 << 28)
    print(f"# {date.today()}: xla_teach GPU vs XLA GPU (jax {jax.__version__}) on {ctx.info.name} "
          f"({ctx.info.arch}, {ctx.info.multiprocessors} SMs); copy bandwidth {copy_bw / 1e9:.0f} GB/s")
    print("| program | xla_teach ms (graphs) | xla_teach ms (a launch per kernel) | XLA ms | XLA/xla_teach wall "
          "| xla_teach kernel ms (kernels) | XLA kernel ms (kernels) | XLA/xla_teach kernel "
          f"| kernels at >= {BANDWIDTH_GOAL:.0%} of copy bandwidth | max rel diff | compile xla_teach / XLA |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    results: list[dict[str, Any]] = []
    failures: list[str] = []
    for program in comparison_programs():
        if (a.only and program.name not in a.only) or program.name in a.skip:
            continue
        try:
            fn, args = program.make(jax, jnp, np.random.default_rng(0))
            result = measure(jax, ctx, program.name, fn, args, copy_bw, a.runs)
        except Exception as err:  # noqa: BLE001 - report it and go on to the next program
            failures.append(program.name)
            first_line = (str(err).splitlines() or [""])[0][:160]
            print(f"| {program.name} | FAILED: {type(err).__name__}: {first_line} |", flush=True)
            traceback.print_exc(file=sys.stderr)
            continue
        results.append(result)
        print(row(result), flush=True)
    if results:
        wall = geomean([r["xla_ms"] / r["ours_ms"] for r in results])
        kernel = geomean([r["xla_kernel_us"] / r["ours_kernel_us"] for r in results if r["ours_kernel_us"]])
        graphs = geomean([r["ours_launched_ms"] / r["ours_ms"] for r in results])
        shares = [b["share"] for r in results for b in r["bandwidth"]]
        print(f"geometric mean XLA/xla_teach over {len(results)} programs: wall clock {wall:.2f}x, kernel time "
              f"{kernel:.2f}x; CUDA graphs vs a launch per kernel: {graphs:.2f}x")
        if shares:
            print(f"memory-bound kernels of 20 us or more: {sum(s >= BANDWIDTH_GOAL for s in shares)}/{len(shares)} "
                  f"at >= {BANDWIDTH_GOAL:.0%} of copy bandwidth (median {statistics.median(shares):.0%})")
        print("trace lines seen:", sorted({line for r in results for line in r["trace_lines"]})[:12])
    if failures:
        print(f"failed: {', '.join(failures)}")
    if a.json:
        Path(a.json).write_text(json.dumps({"date": str(date.today()), "device": ctx.info.name,
                                            "copy_bandwidth": copy_bw, "results": results, "failed": failures},
                                           indent=1))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
