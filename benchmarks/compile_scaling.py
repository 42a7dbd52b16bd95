"""How compile time and run time grow with the size of a module, for xla_teach and XLA.

    .venv/bin/python benchmarks/compile_scaling.py [--layers 1 2 4 8 16 32]

The program is a GPT-style training step written in JAX (``model_programs.gpt``: width 128,
sequence 64, batch 4, vocabulary 512, 4 heads), with more and more blocks: the HLO JAX writes
grows from a few hundred instructions to many thousands. For each size both compilers compile
the same HLO text (XLA: ``jax.jit(f).lower(...).compile()``; xla_teach: ``compile_module``), and
one step runs on each (interleaved medians). At the largest size the table of where
xla_teach's compile time goes follows: HLO passes, IR emission (with buffer assignment), LLVM,
and the passes that took longest.
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from common import compile_both, cpu_jax, header, paired_medians  # noqa: E402
from model_programs import gpt  # noqa: E402


def _measure(jax: Any, jnp: Any, layers: int, runs: int) -> dict[str, Any]:
    step, args = gpt(layers=layers, width=128, seq=64, batch=4, vocab=512, heads=4)(jax, jnp, np.random.default_rng(0))
    both = compile_both(jax, step, args)
    jitted, executable, flat = both["jitted"], both["executable"], both["flat"]
    text, xla_compile, ours_compile = both["text"], both["xla_compile_s"], both["compile_s"]
    jax.block_until_ready(jitted(*args))
    t_ours, t_xla = paired_medians(lambda: executable.execute(flat), lambda: jax.block_until_ready(jitted(*args)),
                                   runs=runs)
    passes: dict[str, float] = defaultdict(float)
    recorder = getattr(executable, "recorder", None)
    for record in getattr(recorder, "records", []):
        passes[record.pass_name] += record.seconds
    return {"layers": layers, "before": text.count("\n  "), "after": executable.module.instruction_count(),
            "xla_compile": xla_compile, "ours_compile": ours_compile, "xla_run": t_xla, "ours_run": t_ours,
            "stages": dict(getattr(executable, "compile_timings", {})), "passes": dict(passes)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--layers", type=int, nargs="*", default=[1, 2, 4, 8, 16, 32])
    parser.add_argument("--runs", type=int, default=3, help="interleaved runs per size (default 3)")
    a = parser.parse_args(argv)
    found = cpu_jax()
    if found is None:
        return 1
    jax, jnp = found
    header("Compile and run time against module size, xla_teach and XLA (GPT steps of growing depth)")
    print(f"{'blocks':>6} {'HLO in':>7} {'optimized':>9}   {'compile ours':>12} {'compile XLA':>11} {'ratio':>6}   "
          f"{'step ours':>10} {'step XLA':>10} {'XLA/ours':>8}")
    largest = None
    for layers in a.layers:
        m = _measure(jax, jnp, layers, a.runs)
        largest = m
        compile_ratio = m["ours_compile"] / m["xla_compile"]
        print(f"{layers:>6} {m['before']:>7} {m['after']:>9}   {m['ours_compile']:>11.2f}s {m['xla_compile']:>10.2f}s "
              f"{compile_ratio:>5.2f}x   {m['ours_run'] * 1e3:>8.1f}ms {m['xla_run'] * 1e3:>8.1f}ms "
              f"{m['xla_run'] / m['ours_run']:>7.2f}x", flush=True)
    if largest is not None:
        total = largest["ours_compile"]
        print(f"\nxla_teach's compile of {largest['layers']} blocks ({total:.2f} s), by stage:")
        for stage, seconds in largest["stages"].items():
            print(f"  {stage:<24} {seconds:7.2f} s  {100 * seconds / total:5.1f} %")
        own = sum(largest["passes"].values())
        print(f"  of the HLO passes' {largest['stages'].get('hlo_passes', 0):.2f} s, the passes themselves took "
              f"{own:.2f} s; the rest is recording each stage (the module after every pass, for dumps and the "
              "explorer)")
        print("  the slowest passes:")
        for name, seconds in sorted(largest["passes"].items(), key=lambda kv: -kv[1])[:10]:
            print(f"    {name:<38} {seconds:7.3f} s  {100 * seconds / total:5.1f} %")
    return 0


if __name__ == "__main__":
    sys.exit(main())
