"""``run-hlo-module``: run a module on a test platform and on a reference, and compare.

XLA's ``run_hlo_module`` is the first tool to reach for when a backend may be
miscompiling: it runs the module with (fake) inputs on ``--platform`` and on
``--reference_platform`` (the Interpreter by default, whose semantics are the
definition of right) and reports whether the results are close enough::

    ** Results on cpu and interpreter are close enough. **

or, for a miscompile, which output differs, how much (max abs/rel error), and the
first differing index, ending with ``K/N runs miscompared.`` The CLI exits with 1 on
any mismatch. An element differs when its absolute error exceeds
``--abs_error_bound`` *and* its relative error exceeds ``--rel_error_bound``.

``--iterations=N`` draws new random inputs for every run. Either platform may also be
a Python function ``(module, args) -> outputs`` (a *runner*), which is how tests
plant a wrong backend; ``test_pipeline`` replaces the test platform's HLO passes
(how they plant a wrong pass).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TextIO

import numpy as np

from xla_teach.backends.backend_info import backend_info
from xla_teach.hlo.ir import HloModule
from xla_teach.passes.pass_base import HloPassPipeline
from xla_teach.passes.spmd.spmd_partitioner import needs_partitioning
from xla_teach.tools.bugs.fake_data import fake_arguments
from xla_teach.tools.tool_support import (
    OutputComparison,
    Runner,
    compare_outputs,
    format_literal,
    normalize_platform,
    runner_for,
)


@dataclass
class RunComparison:
    """One iteration: the arguments, both platforms' outputs, and the per-output verdicts."""

    iteration: int
    args: list[Any]
    test_outputs: list[np.ndarray]
    reference_outputs: list[np.ndarray] | None
    comparisons: list[OutputComparison] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.comparisons)


@dataclass
class RunHloModuleReport:
    module_name: str
    platform: str
    reference_platform: str  # "" when there was no reference
    runs: list[RunComparison]

    @property
    def miscompared(self) -> int:
        return sum(1 for r in self.runs if not r.ok)

    @property
    def ok(self) -> bool:
        return self.miscompared == 0

    def text(self, print_literals: bool = False) -> str:
        lines = []
        for run in self.runs:
            if len(self.runs) > 1:
                lines.append(f"iteration {run.iteration}:")
            if print_literals:
                lines += [f"  arg{i}: {format_literal(a)}" for i, a in enumerate(run.args)]
                lines += [f"  {self.platform} out{i}: {format_literal(o)}" for i, o in enumerate(run.test_outputs)]
                for i, o in enumerate(run.reference_outputs or []):
                    lines.append(f"  {self.reference_platform} out{i}: {format_literal(o)}")
            if not self.reference_platform:
                continue
            if run.ok:
                lines.append(f"** Results on {self.platform} and {self.reference_platform} are close enough. **")
            else:
                lines.append(f"** Results on {self.platform} and {self.reference_platform} DIFFER **")
                lines += ["  " + c.describe(self.platform, self.reference_platform)
                          for c in run.comparisons if not c.ok]
        if self.reference_platform:
            lines.append(f"{self.miscompared}/{len(self.runs)} runs miscompared.")
        return "\n".join(lines)


def _label(platform: str | Runner) -> str:
    if callable(platform):
        return getattr(platform, "__name__", "custom")
    return normalize_platform(platform)


def run_hlo_module(module: HloModule, platform: str | Runner = "cpu",
                   reference_platform: str | Runner | None = "interpreter", *, args: list[Any] | None = None,
                   iterations: int = 1, abs_error_bound: float = 1e-3, rel_error_bound: float = 1e-3,
                   run_test_hlo_passes: bool = True, run_reference_hlo_passes: bool = True,
                   test_pipeline: HloPassPipeline | None = None, seed: int = 0,
                   progress: Callable[[str], None] | None = None) -> RunHloModuleReport:
    """Run ``module`` on both platforms ``iterations`` times and compare every output.

    ``args`` fixes the inputs (all iterations then use them); otherwise iteration ``i``
    uses fake data from seed ``seed + i``. ``reference_platform=None`` (or ``""``)
    only runs the test platform.
    """
    if iterations < 1:
        raise ValueError(f"--iterations must be at least 1, got {iterations}")
    test = runner_for(platform, test_pipeline, run_test_hlo_passes)
    reference = None
    if reference_platform:
        reference = runner_for(reference_platform, None, run_reference_hlo_passes)
    report = RunHloModuleReport(module.name, _label(platform), _label(reference_platform) if reference else "", [])
    for i in range(iterations):
        if progress is not None and iterations > 1:
            progress(f"run-hlo-module: iteration {i + 1}/{iterations}")
        run_args = list(args) if args is not None else fake_arguments(module, seed + i)
        test_out = test(module, run_args)
        ref_out = reference(module, run_args) if reference is not None else None
        run = RunComparison(i, run_args, test_out, ref_out)
        if ref_out is not None:
            run.comparisons = compare_outputs(test_out, ref_out, abs_error_bound, rel_error_bound)
        report.runs.append(run)
    return report


def print_report(report: RunHloModuleReport, print_literals: bool = False, out: TextIO | None = None) -> None:
    print(report.text(print_literals), file=out if out is not None else sys.stdout)


def run_on_devices(module: HloModule, devices: int, seed: int = 0, print_literals: bool = False,
                   out: TextIO | None = None, platform: str = "interpreter") -> list[list[np.ndarray]]:
    """Run a per-device module on ``devices`` devices -- simulated by the interpreter, or CPU
    devices (one thread each) -- each with fake inputs of its own (seed + device), and print
    every device's results."""
    from xla_teach.hlo.evaluator.devices import run_devices, run_partitioned

    out = out or sys.stdout
    if needs_partitioning(module):
        return [run_global_program(module, fake_arguments(module, seed=seed), print_literals, out, platform)]
    args = [fake_arguments(module, seed=seed + d) for d in range(devices)]
    if backend_info(platform).devices == "threads":
        from xla_teach.api import compile_module

        executable = compile_module(module, platform)
        results = run_devices(devices, lambda device: executable.execute(args[device.index]))
        print(f"** {module.name} ran on {devices} CPU devices (one thread each). **", file=out)
    else:
        results = run_partitioned(module, args)
        print(f"** {module.name} ran on {devices} simulated devices (interpreter). **", file=out)
    for d, outputs in enumerate(results):
        shapes = ", ".join(f"{o.dtype}{list(o.shape)}" for o in outputs)
        print(f"device {d}: {shapes}", file=out)
        if print_literals:
            for i, o in enumerate(outputs):
                print(f"  out{i} = {format_literal(o)}", file=out)
    return results


def run_global_program(module: HloModule, args: list[Any], print_literals: bool, out: TextIO,
                       platform: str) -> list[np.ndarray]:
    """A global program for several devices, as JAX dumps it before partitioning: run on global
    arguments, partitioned and on the devices (as XLA runs it), and compared with the same
    program run whole on one device by the interpreter (the reference)."""
    from xla_teach.api import execute
    from xla_teach.hlo.evaluator import evaluate_module

    got = execute(module, args, backend=platform)
    whole = module.clone()
    whole.header_attributes.pop("num_partitions", None)  # the same program, on one device
    want = evaluate_module(whole, args)
    threads = backend_info(platform).devices == "threads"
    where = f"{platform} devices (one thread each)" if threads else f"simulated devices ({platform})"
    print(f"** {module.name} ran on {module.device_count()} {where} after SPMD partitioning, on global arguments; "
          "compared with the whole program on one device (interpreter). **", file=out)
    for k, (g, w) in enumerate(zip(got, want, strict=True)):
        same = g.shape == w.shape and np.allclose(g, w, rtol=1e-5, atol=1e-6, equal_nan=True)
        print(f"out{k}: {g.dtype}{list(g.shape)} {'OK' if same else 'DIFFERS from the one-device run'}", file=out)
        if print_literals:
            print(f"  out{k} = {format_literal(g)}", file=out)
    return got
