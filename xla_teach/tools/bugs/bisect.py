"""``bisect``: which pass broke my program, and what is the smallest module that still breaks?

XLA leaves this to the user (``--xla_disable_hlo_passes``, ``--xla_fuel``, then
``hlo_bisect`` to shrink the module). xla_teach does both steps:

1. **Pass bisection.** Compile once, recording the module after every pass
   (:class:`~xla_teach.passes.pass_base.PassRecorder`). Stage 0 is the module before
   any pass, stage *k* the module after the *k*-th pass that changed it. Each stage
   is still an HLO module, so the interpreter can run it: a stage is *good* when its
   results equal the unoptimized module's. Binary search finds the first bad stage;
   the pass that produced it is the culprit, shown with its before/after diff.
   If every stage is good, the HLO passes are innocent and the backend's code
   generation miscompiles the optimized module.
2. **Shrinking** (like ``hlo_bisect``, see :mod:`xla_teach.tools.bugs.shrink`): greedily
   try smaller modules while the failure persists; the result is written as a
   reproducer (HLO text + snapshot).

Test hook: :data:`BROKEN_PASSES` holds deliberately wrong passes, and
:func:`inject_pass` plants one into a pipeline (``--inject-bug=...`` on the CLI), so
tests -- and students -- can watch bisect catch a miscompile.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from xla_teach.hlo.ir import HloInstruction, HloModule
from xla_teach.passes.pass_base import HloPass, HloPassPipeline, PassOptions, PassRecord, PassRecorder
from xla_teach.tools.bugs.shrink import ShrinkResult, shrink_module
from xla_teach.tools.tool_support import ToolError, compare_outputs, compile_on, reference_outputs

Progress = Callable[[str], None]


# ---- deliberately broken passes (test hooks) ----------------------------------------------
class BrokenMultiplyToAdd(HloPass):
    """TEST ONLY, deliberately wrong: turns every ``multiply`` into an ``add``."""

    name = "broken-multiply-to-add"

    def run(self, module: HloModule) -> bool:
        changed = False
        for comp in module.computations:
            for instr in list(comp.instructions):
                if instr.opcode == "multiply":
                    wrong = HloInstruction("add", instr.shape, instr.operands, name=f"{instr.name}.broken")
                    wrong.copy_side_info_from(instr)
                    comp.replace_instruction(instr, wrong)
                    changed = True
        return changed


class BrokenSwapOperands(HloPass):
    """TEST ONLY, deliberately wrong: swaps the operands of ``subtract`` and ``divide``."""

    name = "broken-swap-operands"

    def run(self, module: HloModule) -> bool:
        changed = False
        for instr in module.instructions():
            if instr.opcode in ("subtract", "divide") and instr.operand(0) is not instr.operand(1):
                a, b = instr.operands
                instr.replace_operand_with(0, b)
                instr.replace_operand_with(1, a)
                changed = True
        return changed


BROKEN_PASSES: dict[str, type[HloPass]] = {p.name: p for p in (BrokenMultiplyToAdd, BrokenSwapOperands)}


def inject_pass(pipeline: HloPassPipeline, new_pass: HloPass | str, after: str = "") -> HloPassPipeline:
    """Insert ``new_pass`` (or a :data:`BROKEN_PASSES` name) after the first pass or
    sub-pipeline called ``after`` anywhere in ``pipeline`` (at the front when ``after`` is "")."""
    if isinstance(new_pass, str):
        if new_pass not in BROKEN_PASSES:
            raise ToolError(f"unknown --inject-bug '{new_pass}' (known: {', '.join(BROKEN_PASSES)})")
        new_pass = BROKEN_PASSES[new_pass]()
    if not after:
        pipeline.passes.insert(0, new_pass)
        return pipeline
    if not _insert_after(pipeline, after, new_pass):
        raise ToolError(f"no pass or pipeline named '{after}' to inject after; the pipeline is:\n"
                        f"{pipeline.describe()}")
    return pipeline


def _insert_after(pipeline: HloPassPipeline, name: str, new_pass: HloPass) -> bool:
    for i, p in enumerate(pipeline.passes):
        if p.name == name:
            pipeline.passes.insert(i + 1, new_pass)
            return True
        if isinstance(p, HloPassPipeline) and _insert_after(p, name, new_pass):
            return True
    return False


# ---- step 1: pass bisection ---------------------------------------------------------------
@dataclass
class StageCheck:
    stage: int  # 0 = before any pass
    pass_name: str  # the pass that produced the stage ("" for stage 0)
    good: bool


@dataclass
class PassBisectResult:
    """The first pass after which the module computes something else (None: no such pass)."""

    culprit: PassRecord | None
    stage: int  # the first bad stage (0 when none was bad)
    num_stages: int  # stages after passes that changed the module
    checks: list[StageCheck] = field(default_factory=list)

    @property
    def pass_name(self) -> str:
        return self.culprit.pass_name if self.culprit else ""

    def diff(self, context: int = 2) -> str:
        if self.culprit is None:
            return ""
        name = f"{self.culprit.pipeline}/{self.culprit.pass_name}"
        return "\n".join(difflib.unified_diff(self.culprit.before.splitlines(), self.culprit.after.splitlines(),
                                              f"before {name}", f"after {name}", n=context, lineterm=""))

    def describe(self) -> str:
        if self.culprit is None:
            return (f"all {self.num_stages} HLO stages compute the same results on the interpreter: "
                    "no HLO pass changed the program's meaning")
        return (f"first bad pass: {self.culprit.pipeline}/{self.culprit.pass_name} (pass run #{self.culprit.index}, "
                f"stage {self.stage} of {self.num_stages}); {len(self.checks)} stages checked")


def stage_checker(args: Sequence[Any], expected: Sequence[Any], abs_error: float = 1e-3,
                  rel_error: float = 1e-3) -> Callable[[HloModule], bool]:
    """``check(module)``: True when the interpreter's results on ``args`` match ``expected``."""
    def check(module: HloModule) -> bool:
        try:
            got = reference_outputs(module, args)
        except Exception:  # an HLO stage the interpreter cannot even run is bad
            return False
        return all(c.ok for c in compare_outputs(got, expected, abs_error, rel_error))

    return check


def bisect_records(records: Sequence[PassRecord], check: Callable[[HloModule], bool],
                   progress: Progress | None = None) -> PassBisectResult:
    """Binary-search the recorded stages for the first one ``check`` calls bad.

    Assumes stage 0 (the input) is good and that once broken a program stays broken
    (a later pass does not repair it), which is what makes halving sound.
    """
    from xla_teach.hlo.text.parser import parse_hlo

    changed = [r for r in records if r.changed]
    checks: list[StageCheck] = []

    def good(stage: int) -> bool:
        record = changed[stage - 1]
        ok = check(parse_hlo(record.after))
        checks.append(StageCheck(stage, record.pass_name, ok))
        if progress is not None:
            progress(f"bisect: stage {stage}/{len(changed)} after {record.pipeline}/{record.pass_name}: "
                     f"{'good' if ok else 'BAD'}")
        return ok

    if not changed or good(len(changed)):
        return PassBisectResult(None, 0, len(changed), checks)
    lo, hi = 0, len(changed)  # stage lo is good, stage hi is bad
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if good(mid):
            lo = mid
        else:
            hi = mid
    return PassBisectResult(changed[hi - 1], hi, len(changed), checks)


def bisect_passes(module: HloModule, passes: HloPassPipeline | Sequence[HloPass], args: Sequence[Any],
                  check: Callable[[HloModule], bool] | None = None,
                  progress: Progress | None = None) -> PassBisectResult:
    """Run ``passes`` on a copy of ``module`` and find the first one that changes its results.

    ``check(stage_module) -> bool`` decides good/bad; by default the interpreter's
    results on ``args`` must match those of the unoptimized ``module``.
    """
    pipeline = passes if isinstance(passes, HloPassPipeline) else HloPassPipeline("bisect", list(passes))
    recorder = PassRecorder()
    pipeline.run(module.clone(), PassOptions(), recorder)
    if check is None:
        check = stage_checker(args, reference_outputs(module, args))
    return bisect_records(recorder.records, check, progress)


# ---- both steps for a backend ---------------------------------------------------------------
@dataclass
class BisectReport:
    platform: str
    failure: str  # "" when the platform agrees with the reference
    pass_result: PassBisectResult | None = None
    shrunk: ShrinkResult | None = None

    def text(self) -> str:
        if not self.failure:
            return f"results on {self.platform} and the interpreter agree: nothing to bisect"
        lines = [f"{self.platform} miscompiles the module: {self.failure}"]
        if self.pass_result is not None:
            lines.append(self.pass_result.describe())
            if self.pass_result.culprit is None:
                lines.append(f"=> the bug is in {self.platform}'s code generation (run_backend), not in an HLO pass")
            else:
                lines.append(self.pass_result.diff())
        if self.shrunk is not None:
            lines.append(f"shrunk to {self.shrunk.module.instruction_count()} instructions in "
                         f"{len(self.shrunk.steps)} steps ({self.shrunk.checks} candidates tried):")
            lines.append(self.shrunk.module.to_text())
        return "\n".join(lines)


def failure_of(module: HloModule, args: Sequence[Any], platform: str, pipeline_factory: Callable[[], Any] | None,
               abs_error: float, rel_error: float) -> str:
    """Why ``platform`` disagrees with the interpreter on ``module`` ("" if it does not)."""
    expected = reference_outputs(module, args)
    try:
        pipeline = pipeline_factory() if pipeline_factory is not None else None
        got = compile_on(module, platform, pipeline).execute(list(args))
    except Exception as err:  # a crash is a failure too (shrinking keeps the same kind)
        return f"crash: {type(err).__name__}"
    bad = [c for c in compare_outputs(got, expected, abs_error, rel_error) if not c.ok]
    return "; ".join(c.describe(platform, "interpreter") for c in bad)


def bisect_compilation(module: HloModule, args: list[Any], platform: str = "cpu",
                       pipeline_factory: Callable[[], HloPassPipeline] | None = None, abs_error: float = 1e-3,
                       rel_error: float = 1e-3, shrink: bool = True, max_checks: int = 300,
                       progress: Progress | None = None) -> BisectReport:
    """Does ``platform`` miscompile ``module``? If so: which pass, and a minimal module.

    ``pipeline_factory()`` makes the HLO pipeline to compile with (default: the
    platform's own); a fresh one per compile, so planted passes never carry state.
    """
    failure = failure_of(module, args, platform, pipeline_factory, abs_error, rel_error)
    report = BisectReport(platform, failure)
    if not failure:
        return report
    if not failure.startswith("crash"):
        pipeline = pipeline_factory() if pipeline_factory is not None else None
        executable = compile_on(module, platform, pipeline)
        check = stage_checker(args, reference_outputs(module, args), abs_error, rel_error)
        report.pass_result = bisect_records(executable.recorder.records, check, progress)
    if shrink:
        kind = failure.split(":", 1)[0] if failure.startswith("crash") else "mismatch"

        def still_fails(candidate: HloModule, candidate_args: list[Any]) -> bool:
            why = failure_of(candidate, candidate_args, platform, pipeline_factory, abs_error, rel_error)
            return bool(why) and (why.startswith("crash") == (kind == "crash"))

        report.shrunk = shrink_module(module, args, still_fails, max_checks, progress)
    return report


def check_reproducer_directory(directory: str | Path) -> tuple[Path, Path]:
    """The two reproducer paths in ``directory``; a ``ToolError`` if they cannot be written
    without replacing something. The CLI checks this before bisecting, not after minutes of it."""
    directory = Path(directory)
    if directory.exists() and not directory.is_dir():
        raise ToolError(f"--dump_path={directory} is a file, not a folder")
    hlo, snap = directory / "reproducer.hlo", directory / "reproducer.snapshot.npz"
    for path in (hlo, snap):
        if path.exists():
            raise ToolError(f"{path} already exists; refusing to overwrite it (choose another --dump_path)")
    return hlo, snap


def write_reproducer(directory: str | Path, shrunk: ShrinkResult, platform: str, note: str = "") -> list[Path]:
    """Write ``reproducer.hlo`` and ``reproducer.snapshot.npz`` into ``directory`` (never overwriting)."""
    from xla_teach.tools.bugs.snapshot import save_snapshot

    hlo, snap = check_reproducer_directory(directory)
    Path(directory).mkdir(parents=True, exist_ok=True)
    expected = reference_outputs(shrunk.module, shrunk.args)
    hlo.write_text(shrunk.module.to_text())
    save_snapshot(snap, shrunk.module, shrunk.args, [np.asarray(e) for e in expected], backend="interpreter",
                  failing_platform=platform, note=note)
    return [hlo, snap]
