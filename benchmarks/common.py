"""Helpers shared by the benchmark scripts: timing, the machine's copy bandwidth, a report table."""

from __future__ import annotations

import os
import platform
import statistics
import time
from collections.abc import Callable
from datetime import date
from typing import Any

import numpy as np


def median_seconds(fn: Callable[[], object], runs: int = 15, warmup: int = 2, min_time: float = 0.0) -> float:
    """Median wall time of ``fn()`` over ``runs`` calls after ``warmup`` calls."""
    for _ in range(warmup):
        fn()
    times = []
    start_all = time.perf_counter()
    while len(times) < runs or time.perf_counter() - start_all < min_time:
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def paired_medians(a: Callable[[], object], b: Callable[[], object], runs: int = 21,
                   warmup: int = 2) -> tuple[float, float]:
    """Median times of ``a`` and ``b`` measured *interleaved* (a, b, a, b, ...), so that a busy
    machine slows both alike instead of whichever happened to run during the disturbance."""
    for _ in range(warmup):
        a()
        b()
    ta, tb = [], []
    for _ in range(runs):
        t = time.perf_counter()
        a()
        ta.append(time.perf_counter() - t)
        t = time.perf_counter()
        b()
        tb.append(time.perf_counter() - t)
    return statistics.median(ta), statistics.median(tb)


def block_medians(a: Callable[[], object], b: Callable[[], object], runs: int = 21) -> tuple[float, float]:
    """Median times of ``a`` and ``b`` measured in blocks (a..., b..., a..., b...): for comparisons
    with another runtime whose worker threads keep spinning after each call (XLA's), which would
    otherwise slow the interleaved call of the other side. Each side gets two blocks and keeps its
    better median, so neither is favoured by when a disturbance happened."""
    half = runs // 2 + 1
    ta, tb = [], []
    for _ in range(2):
        ta.append(median_seconds(a, runs=half))
        tb.append(median_seconds(b, runs=half))
    return min(ta), min(tb)


def copy_bandwidth(nbytes: int) -> float:
    """Bytes *read* per second by ``np.copyto`` of an ``nbytes`` buffer (the machine's copy speed,
    counted the way the kernels are: bytes read / time)."""
    src = np.ones(nbytes // 8, np.float64)
    dst = np.empty_like(src)
    return src.nbytes / median_seconds(lambda: np.copyto(dst, src), runs=11)


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return f"{cpu}, {os.cpu_count()} cores, Python {platform.python_version()}, NumPy {np.__version__}"


def header(title: str) -> None:
    print(f"# {title} -- {date.today()} on {machine()}")


def row(name: str, ours: float, other: float, other_name: str, goal: float | None = None) -> None:
    ratio = other / ours
    verdict = "met" if goal is not None and ratio >= goal else "NOT met"
    mark = "" if goal is None else f"  [goal >= {goal:.2f}x: {verdict}]"
    print(f"{name:<48s} xla_teach {ours * 1e3:9.3f} ms   {other_name} {other * 1e3:9.3f} ms   "
          f"-> {ratio:5.2f}x{mark}")


# ---- the programs both benchmark scripts measure -------------------------------------------------
SEED = """HloModule seed_reduce_sum
add {{ a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT s = f32[] add(a, b) }}
ENTRY main {{
  x = f32[{n}] parameter(0)
  y = f32[{n}] parameter(1)
  z = f32[{n}] parameter(2)
  m = f32[{n}] multiply(y, z)
  s = f32[{n}] add(x, m)
  zero = f32[] constant(0)
  ROOT r = f32[] reduce(s, zero), dimensions={{0}}, to_apply=add
}}
"""

SOFTMAX = """HloModule softmax
add {{ a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT s = f32[] add(a, b) }}
max {{ a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT s = f32[] maximum(a, b) }}
ENTRY main {{
  x = f32[{r},{c}] parameter(0)
  ninf = f32[] constant(-inf)
  mx = f32[{r}] reduce(x, ninf), dimensions={{1}}, to_apply=max
  mb = f32[{r},{c}] broadcast(mx), dimensions={{0}}
  s = f32[{r},{c}] subtract(x, mb)
  e = f32[{r},{c}] exponential(s)
  zero = f32[] constant(0)
  sm = f32[{r}] reduce(e, zero), dimensions={{1}}, to_apply=add
  sb = f32[{r},{c}] broadcast(sm), dimensions={{0}}
  ROOT d = f32[{r},{c}] divide(e, sb)
}}
"""


def cpu_jax() -> tuple[Any, Any] | None:
    """``(jax, jax.numpy)`` on the CPU platform (XLA, the bar), or None -- after saying how to
    install it -- when the ``bench`` extra is not installed."""
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        print("JAX is not installed: pip install -e '.[bench]' (XLA is the bar these programs are measured against)")
        return None
    jax.config.update("jax_platforms", "cpu")
    return jax, jnp


def compile_both(jax: Any, fn: Callable[..., Any], args: list[Any]) -> dict[str, Any]:
    """``fn`` on ``args`` compiled by XLA (``jax.jit``) and by xla_teach from the HLO text JAX
    lowers it to, each compile timed from a clean start: ``jitted``, ``text``, ``executable``,
    ``flat`` (the arguments' leaves: the ENTRY's parameters, in order), ``xla_compile_s`` and
    ``compile_s``."""
    import gc

    from xla_teach.api import compile_module

    jitted = jax.jit(fn)
    lowered = jitted.lower(*args)
    text = lowered.compiler_ir("hlo").as_hlo_text()
    jax.clear_caches()  # (XLA keeps compiled executables: only the first compile after this counts)
    # Each compile starts with no garbage pending (as timeit runs with the collector off):
    # one left by an earlier step would be collected in whichever compile comes next.
    gc.collect()
    start = time.perf_counter()
    lowered.compile()
    xla_compile_s = time.perf_counter() - start
    gc.collect()
    start = time.perf_counter()
    executable = compile_module(text, "cpu")
    compile_s = time.perf_counter() - start
    return {"jitted": jitted, "text": text, "executable": executable, "flat": jax.tree_util.tree_leaves(args),
            "xla_compile_s": xla_compile_s, "compile_s": compile_s}
