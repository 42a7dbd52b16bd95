"""What xla_teach's HLO passes buy, counted rather than timed: kernels and temporary bytes.

    .venv/bin/python benchmarks/passes_benchmark.py [--samples tests/data/xla_samples]

1. For the example ``sum(x + y*z)`` and a 2-layer MLP training step (loss, gradients by
   ``value_and_grad`` and the SGD update in one ``xla_teach.jit`` module, the shapes of
   ``training_steps.py``): the kernels as lowered, just before fusion (after the simplification
   passes) and after the whole CPU pipeline; and the temporary bytes the module needs with one
   buffer per instruction (before and after fusion) against buffer assignment's arena, where
   values that are never alive together share bytes and elementwise ops overwrite dead operands.
2. For every program in the samples folder (a folder with ``meta.json``): kernels after our CPU
   pipeline beside kernels in XLA's own ``after_optimizations.txt``, counted the same way.
   Goal: no more kernels than XLA on any sample.

A *kernel* is what a backend launches: a fusion, or an unfused instruction that computes something
(everything but ``parameter``, ``constant``, ``tuple``, ``get-tuple-element`` and ``bitcast``), in
the computations that run as kernel sequences (the entry and the bodies of loops, conditionals and
calls -- not fused computations or reducers). ``while`` and ``call`` count as one each, on both
sides. The exit status is 1 when a sample has more kernels than XLA.
"""

from __future__ import annotations

import argparse
import collections
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from training_steps import BATCH, CLASSES, FEATURES, HIDDEN, LR, _xt_log_softmax  # noqa: E402

import xla_teach  # noqa: E402
import xla_teach.numpy as xnp  # noqa: E402
from xla_teach.backends.cpu.cpu_pipeline import cpu_pipeline  # noqa: E402
from xla_teach.hlo.ir import HloModule  # noqa: E402
from xla_teach.passes.fusion.instruction_fusion import fusible_computations  # noqa: E402
from xla_teach.passes.pass_base import PassOptions, PassRecorder  # noqa: E402
from xla_teach.passes.scheduling.buffer_assignment import ModuleBufferAssignment  # noqa: E402

SAMPLES = Path(__file__).resolve().parents[1] / "tests" / "data" / "xla_samples"  # XLA's own dumps, kept here
NOT_KERNELS = frozenset({"parameter", "constant", "tuple", "get-tuple-element", "bitcast"})
# The first pass that fuses; the module just before it is "before fusion".
FUSING_PASSES = ("row-fusion", "fusion")


# ---- counting -------------------------------------------------------------------------------------
def kernel_opcodes(module: HloModule) -> collections.Counter[str]:
    """Opcode -> how many kernels of it (see the module docstring for what counts)."""
    return collections.Counter(i.opcode for comp in fusible_computations(module) for i in comp.instructions
                               if i.opcode not in NOT_KERNELS)


def kernel_count(module: HloModule) -> int:
    return sum(kernel_opcodes(module).values())


def describe_kernels(module: HloModule) -> str:
    return ", ".join(f"{op} {n}" for op, n in sorted(kernel_opcodes(module).items(), key=lambda kv: (-kv[1], kv[0])))


def optimize(module: HloModule) -> tuple[HloModule, HloModule]:
    """(the module just before the first fusing pass, the module after the whole CPU pipeline)."""
    optimized = module.clone()
    recorder = PassRecorder()
    cpu_pipeline().run(optimized, PassOptions(), recorder)
    first_fusing = next(r for r in recorder.records if r.pass_name in FUSING_PASSES)
    return xla_teach.parse_hlo(first_fusing.before), optimized


def mib(nbytes: int) -> str:
    return f"{nbytes / 2**20:8.2f} MiB" if nbytes >= 2**20 else f"{nbytes / 2**10:8.2f} KiB"


# ---- 1. two programs from the front end -------------------------------------------------------------
@dataclass
class ProgramReport:
    name: str
    lowered_kernels: int
    before_fusion_kernels: int
    after_kernels: int
    after_description: str
    one_buffer_each_unfused: int  # bytes of temporaries, one buffer per instruction, before fusion
    one_buffer_each_fused: int  # the same after the whole pipeline
    assigned_temp_bytes: int  # buffer assignment's arena after the whole pipeline

    def lines(self) -> list[str]:
        return [
            f"{self.name}",
            f"  kernels   lowered {self.lowered_kernels:4d}   before fusion {self.before_fusion_kernels:4d}   "
            f"after fusion {self.after_kernels:4d}   ({self.after_description})",
            f"  temp      one buffer per instruction: before fusion {mib(self.one_buffer_each_unfused)}, "
            f"after fusion {mib(self.one_buffer_each_fused)};   buffer assignment {mib(self.assigned_temp_bytes)}",
        ]


def program_report(name: str, lowered: HloModule) -> ProgramReport:
    before_fusion, optimized = optimize(lowered)
    assignment = ModuleBufferAssignment(optimized)
    return ProgramReport(
        name=name, lowered_kernels=kernel_count(lowered), before_fusion_kernels=kernel_count(before_fusion),
        after_kernels=kernel_count(optimized), after_description=describe_kernels(optimized),
        one_buffer_each_unfused=ModuleBufferAssignment(before_fusion).naive_temp_bytes(),
        one_buffer_each_fused=assignment.naive_temp_bytes(), assigned_temp_bytes=assignment.temp_bytes())


def seed_module(n: int = 1024) -> HloModule:
    """The example ``sum(x + y*z)`` on three f32[n] (n = 1024 as in XLA's dump of it)."""
    x = np.zeros(n, np.float32)
    lowered = xla_teach.jit(lambda x, y, z: xnp.sum(x + y * z)).lower(x, x, x)
    return xla_teach.parse_hlo(lowered.as_text("hlo"))


def mlp_training_step_module() -> HloModule:
    """One SGD step of a 2-layer MLP (relu hidden layer, softmax cross-entropy), as ``training_steps.py``."""
    def loss(params, x, y):  # type: ignore[no-untyped-def]
        w1, b1, w2, b2 = params
        h = xnp.maximum(x @ w1 + b1, 0.0)
        return -xnp.mean(xnp.sum(y * _xt_log_softmax(h @ w2 + b2), axis=1))

    def step(params, x, y):  # type: ignore[no-untyped-def]
        value, grads = xla_teach.value_and_grad(loss)(params, x, y)
        return tuple(p - LR * g for p, g in zip(params, grads, strict=True)), value

    f32 = np.float32
    params = (np.zeros((FEATURES, HIDDEN), f32), np.zeros(HIDDEN, f32), np.zeros((HIDDEN, CLASSES), f32),
              np.zeros(CLASSES, f32))
    x, y = np.zeros((BATCH, FEATURES), f32), np.zeros((BATCH, CLASSES), f32)
    return xla_teach.parse_hlo(xla_teach.jit(step).lower(params, x, y).as_text("hlo"))


# ---- 2. the samples ----------------------------------------------------------------------------------
@dataclass
class SampleRow:
    name: str
    ours: int
    xla: int
    ours_description: str
    xla_description: str

    @property
    def goal_met(self) -> bool:
        return self.ours <= self.xla

    def line(self) -> str:
        verdict = "met" if self.goal_met else "NOT met"
        return (f"{self.name:<20s} xla_teach {self.ours:3d}   XLA {self.xla:3d}   [goal <= XLA: {verdict}]\n"
                f"{'':20s}   ours: {self.ours_description}\n{'':20s}   XLA:  {self.xla_description}")


def sample_folders(samples: Path) -> list[Path]:
    return sorted(p.parent for p in samples.glob("*/meta.json"))


def sample_rows(samples: Path) -> list[SampleRow]:
    rows = []
    for folder in sample_folders(samples):
        before = xla_teach.parse_hlo((folder / "before_optimizations.txt").read_text())
        xla_module = xla_teach.parse_hlo((folder / "after_optimizations.txt").read_text())
        _, ours = optimize(before)
        rows.append(SampleRow(folder.name, kernel_count(ours), kernel_count(xla_module), describe_kernels(ours),
                              describe_kernels(xla_module)))
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--samples", type=Path, default=SAMPLES,
                        help="folder of XLA sample programs, one sub-folder with meta.json each (default: %(default)s)")
    args = parser.parse_args(argv)

    print("# Kernels and temporary memory through the CPU pipeline\n")
    for name, module in [("seed: sum(x + y*z), f32[1024]", seed_module()),
                         (f"MLP training step ({FEATURES}-{HIDDEN}-{CLASSES}, batch {BATCH})",
                          mlp_training_step_module())]:
        print("\n".join(program_report(name, module).lines()))
    print()

    if not args.samples.is_dir():
        print(f"no samples folder at {args.samples}: skipping the comparison with XLA")
        return 0
    rows = sample_rows(args.samples)
    if not rows:
        print(f"no sample programs (folders with meta.json) under {args.samples}")
        return 0
    print(f"# Kernels after optimization: xla_teach's CPU pipeline vs XLA's after_optimizations.txt "
          f"({args.samples})\n")
    for row in rows:
        print(row.line())
    missed = [row.name for row in rows if not row.goal_met]
    print(f"\ngoal 'no more kernels than XLA on any sample': "
          f"{'met' if not missed else 'NOT met (' + ', '.join(missed) + ')'} "
          f"({sum(r.ours for r in rows)} kernels in all vs XLA's {sum(r.xla for r in rows)})")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
