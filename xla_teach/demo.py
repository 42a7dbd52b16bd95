"""The main job (``make demo``): the example ``reduce_sum(x + y*z)`` through the whole compiler.

1. build the HLO with the XlaBuilder, as a front end would, and print it;
2. compile it for the CPU -- every pass recorded -- and print the optimized HLO: the multiply, add
   and reduce have become *one* fusion, so ``y*z`` and ``x + y*z`` never touch memory;
3. run it on the CPU backend and on the reference interpreter and compare with NumPy;
4. time it against NumPy's eager ``np.sum(x + y * z)`` (three passes over memory);
5. compile it for the GPU too (LLVM IR -> PTX; running needs an NVIDIA device);
6. write XLA-style dumps (``--xla_dump_to``) into a fresh folder under ``dumps/``, with an
   ``index.html`` and the compile explorer, whose path is printed last.

Run ``python -m xla_teach.demo --help`` for options.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

from xla_teach import flags
from xla_teach.api import compile_module
from xla_teach.hlo.builder import XlaBuilder
from xla_teach.hlo.ir import HloModule
from xla_teach.hlo.shape import Shape


def seed_module(n: int) -> HloModule:
    """``reduce_sum(x + y*z)`` over three ``f32[n]``, named as JAX names it."""
    b = XlaBuilder("jit_seed_example")
    shape = Shape.array("f32", (n,))
    x, y, z = (b.parameter(i, shape, name) for i, name in enumerate("xyz"))
    total = b.reduce(b.add(x, b.multiply(y, z)), b.constant(np.float32(0)),
                     b.create_scalar_computation("add", "f32"), (0,))
    return b.build(total)


def _section(title: str) -> None:
    print(f"\n{'=' * 100}\n{title}\n{'=' * 100}")


def _best_of(fn, runs: int = 7) -> float:  # type: ignore[no-untyped-def]
    fn()
    best = float("inf")
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m xla_teach.demo", description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1 << 22, help="elements per input (default 2^22)")
    parser.add_argument("--dump-to", default=None, help="dump folder (default: a new dumps/seed_example_N)")
    parser.add_argument("--no-gpu", action="store_true", help="skip the GPU compilation step")
    ns = parser.parse_args(argv)

    module = seed_module(ns.n)
    _section("1. The HLO a front end builds (before optimizations)")
    print(module.to_text())

    dump_dir = Path(ns.dump_to) if ns.dump_to else _fresh_dump_dir()
    with flags.override(xla_dump_to=str(dump_dir), xla_dump_hlo_pass_re=".*", xla_dump_hlo_as_text=True,
                        xla_dump_hlo_as_dot=True, xla_dump_hlo_as_html=True, xla_dump_hlo_snapshots=True):
        executable = compile_module(module, "cpu")
        _section("2. The passes that ran (* = changed the module)")
        print(executable.recorder.table())
        fusions = sum(1 for i in executable.module.entry.instructions if i.opcode == "fusion")
        _section(f"   ... and the HLO after optimizations: {fusions} fused kernel{'s' if fusions != 1 else ''}")
        print(executable.module.to_text())

        _section("3. Run it: CPU backend vs reference interpreter vs NumPy")
        rng = np.random.default_rng(0)
        x, y, z = (rng.standard_normal(ns.n, dtype=np.float32) for _ in range(3))
        cpu = float(executable.execute([x, y, z])[0])
        dumper = executable.dumper
        if dumper is not None:
            dumper.snapshot([x, y, z], [np.float32(cpu)])
    k = min(ns.n, 4096)  # the interpreter is slow: compare on a prefix
    prefix = [x[:k], y[:k], z[:k]]
    interpreter = float(compile_module(seed_module(k), "interpreter").execute(prefix)[0])
    cpu_small = float(compile_module(seed_module(k), "cpu").execute(prefix)[0])
    exact = float(np.sum(x.astype(np.float64) + y.astype(np.float64) * z))
    print(f"CPU backend       : {cpu:.6f}   (f64 NumPy reference {exact:.6f}, "
          f"relative error {abs(cpu - exact) / abs(exact):.1e})")
    print(f"first {k} values : interpreter {interpreter:.6f}   CPU {cpu_small:.6f}")

    _section("4. Why fusion pays: one pass over memory instead of three")
    ours = _best_of(lambda: executable.execute([x, y, z]))
    numpy = _best_of(lambda: np.sum(x + y * z))
    print(f"xla_teach CPU: {ours * 1e3:.2f} ms    NumPy eager: {numpy * 1e3:.2f} ms    -> {numpy / ours:.2f}x faster")
    print(f"bytes read per second: {3 * x.nbytes / ours / 1e9:.1f} GB/s")

    if not ns.no_gpu:
        _section("5. The same module for an NVIDIA GPU: LLVM IR -> PTX")
        gpu = compile_module(seed_module(ns.n), "gpu")
        kernels = [i for i in gpu.module.entry.instructions if i.backend_config]
        for instr in kernels:
            print(f"{instr.name}: {instr.backend_config}")
        print("\n".join(gpu.artifacts.ptx.splitlines()[:25]) + "\n    ...")
        from xla_teach.backends.gpu.runtime import device_available, unavailable_reason

        print("GPU present: running it" if device_available() else f"Not running it: {unavailable_reason()}")
        if device_available():
            print(f"GPU result: {float(gpu.execute([x, y, z])[0]):.6f}")

    _section(f"6. Dumps written to {dump_dir}/ (as XLA_FLAGS=--xla_dump_to=... would)")
    for path in sorted(dump_dir.iterdir()) if dump_dir.is_dir() else []:
        print(f"  {path.name}")
    snapshots = sorted(dump_dir.glob("*.snapshot.*.npz"))
    if snapshots:
        print("\nReplay the snapshot with the CLI:")
        print(f"  .venv/bin/xla-teach replay {snapshots[-1]}")
    index = dump_dir / "index.html"
    explorers = sorted(dump_dir.glob("*.explorer.html"))
    if index.is_file():
        print(f"\nEvery dumped file, explained: {index}")
    if explorers:
        print("\nOpen the compile explorer in a browser (passes, graph, source lines, kernels, buffers):")
        print(f"  {explorers[0].resolve()}")
    return 0


def _fresh_dump_dir() -> Path:
    """``dumps/seed_example_N`` with the first N not taken (nothing is ever overwritten)."""
    root = Path("dumps")
    root.mkdir(exist_ok=True)
    n = 1
    while (root / f"seed_example_{n}").exists():
        n += 1
    return root / f"seed_example_{n}"


if __name__ == "__main__":
    sys.exit(main())
