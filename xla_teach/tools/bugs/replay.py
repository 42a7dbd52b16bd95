"""``replay``: run a dumped module again, as XLA's ``replay_computation`` does.

The input is HLO text (a dump of xla_teach or of real XLA) or a snapshot written with
``--xla_dump_hlo_snapshots``. A snapshot carries its arguments, so the run repeats the
recorded execution exactly; HLO text needs ``--use_fake_data`` (or
``--input_literals_file``). The module is compiled once and run ``num_runs`` times;
each run is timed, and the last run's results are printed the way XLA prints them::

    module_0000.jit_f.snapshot.0.npz: jit_f :: f32[] 12.5
    was f32[] 12.5

When the snapshot recorded results, ``replay`` also says whether the new results are
bit-identical to them (the same backend should reproduce them exactly).
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import numpy as np

from xla_teach.hlo.ir import HloModule
from xla_teach.tools.tool_support import (
    HloInput,
    arguments_for,
    compare_outputs,
    compile_on,
    format_literal,
    load_hlo_input,
    normalize_platform,
)


@dataclass
class ReplayResult:
    module_name: str
    platform: str
    outputs: list[np.ndarray]  # of the last run ([] when compile_only or num_runs < 1)
    compile_seconds: float
    run_seconds: list[float] = field(default_factory=list)
    recorded_outputs: list[np.ndarray] | None = None

    @property
    def bit_identical(self) -> bool | None:
        """Whether the outputs equal the snapshot's recorded ones bit for bit (None: nothing recorded)."""
        if self.recorded_outputs is None or not self.outputs:
            return None
        return all(c.ok for c in compare_outputs(self.outputs, self.recorded_outputs, exact=True))


def replay(source: str | Path | HloModule | HloInput, platform: str = "cpu", *, use_fake_data: bool = False,
           num_runs: int = 1, print_result: bool = True, compile_only: bool = False, input_literals_file: str = "",
           args: list[Any] | None = None, seed: int = 0, out: TextIO | None = None) -> ReplayResult:
    """Compile ``source`` for ``platform`` and run it ``num_runs`` times (``< 1``: compile only).

    ``source`` is a path (HLO text or snapshot), a parsed :class:`HloInput`, or a module
    (then ``args`` or ``use_fake_data`` say what to run on). Printing goes to ``out``
    (standard output by default; pass ``print_result=False`` for silence).
    """
    out = out if out is not None else sys.stdout
    if isinstance(source, HloModule):
        loaded = HloInput(source, f"<{source.name}>")
    elif isinstance(source, HloInput):
        loaded = source
    else:
        loaded = load_hlo_input(source)
    platform = normalize_platform(platform)
    if compile_only:
        num_runs = 0
    if args is None:
        args = arguments_for(loaded, use_fake_data, input_literals_file, seed) if num_runs > 0 else []
    start = time.perf_counter()
    executable = compile_on(loaded.module, platform)
    result = ReplayResult(loaded.module.name, platform, [], time.perf_counter() - start,
                          recorded_outputs=None if use_fake_data else loaded.recorded_outputs)
    if print_result:
        print(f"{loaded.source}: compiled {loaded.module.name} for {platform} in {result.compile_seconds:.3f}s",
              file=out)
    for run in range(num_runs):
        start = time.perf_counter()
        outputs = _run(executable, list(args), platform)
        result.run_seconds.append(time.perf_counter() - start)
        result.outputs = outputs
        if print_result and num_runs > 1:
            print(f"run {run + 1}/{num_runs}: {result.run_seconds[-1] * 1e3:.3f} ms", file=out)
    if print_result and result.outputs:
        _print_outputs(result, loaded, out)
    return result


def _run(executable: Any, args: list[Any], platform: str) -> list[Any]:
    """One run: a module of several devices (a snapshot of a sharded ``jit`` holds the global
    arguments) runs on all of them, its arguments split and its results put back together."""
    if executable.module.device_count() <= 1:
        return executable.execute(args)
    from xla_teach.api import run_on_devices

    return run_on_devices(executable.module, executable, args, platform)


def _print_outputs(result: ReplayResult, loaded: HloInput, out: TextIO) -> None:
    for i, value in enumerate(result.outputs):
        print(f"{loaded.source}: {result.module_name} :: {format_literal(value)}", file=out)
        if result.recorded_outputs is not None and i < len(result.recorded_outputs):
            recorded = format_literal(result.recorded_outputs[i])
            if recorded != format_literal(value):  # the same value is not printed twice
                print(f"was {recorded}", file=out)
    identical = result.bit_identical
    if identical is not None:
        recorded_on = f" (recorded on {loaded.backend})" if loaded.backend else ""
        verdict = "bit-identical to" if identical else "DIFFERENT from"
        print(f"results are {verdict} the snapshot's recorded outputs{recorded_on}", file=out)
    total = sum(result.run_seconds)
    print(f"Done executing in {total:.6f}s ({len(result.run_seconds)} run(s), "
          f"mean {total / len(result.run_seconds) * 1e3:.3f} ms)", file=out)

