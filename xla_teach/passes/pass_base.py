"""Passes and pass pipelines, with a recorder that keeps every stage.

A pass rewrites a module in place and says whether it changed anything::

    class DeadCodeElimination(HloPass):
        name = "dce"
        def run(self, module: HloModule) -> bool: ...

An :class:`HloPassPipeline` runs passes in order (pipelines nest, since a
pipeline is itself a pass) and guards itself the way XLA's does:

* the verifier runs before the first pass and after every pass that changed the
  module, so a broken pass is caught at the pass that broke it;
* a pass you write is checked against its own report: the module text is taken
  before and after it, so a pass that changes the module but reports ``False``
  (or the reverse) raises :class:`PassMisreportedChange`. xla_teach's own passes
  are trusted, as XLA trusts ``HloPassInterface::Run``'s ``changed``: a pass that
  reports no change costs no printing. The tests check them too
  (``PassOptions(check_reported_changes=True)`` checks every pass);
* every pass run is recorded (:class:`PassRecord`) with both texts, instruction
  and fusion counts, wall time and the pass's own notes ("why" explanations). The
  module is printed once per pass that changed it: an unchanged pass's "after"
  is its "before".

:class:`HloPassFix` reruns its passes until none of them changes anything.
"""

from __future__ import annotations

import inspect
import time
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from xla_teach.hlo.ir import HloComputation, HloInstruction, HloModule


class HloPass:
    """Base class of every pass. Subclasses set ``name`` and implement :meth:`run` -- or, for a
    pass that rewrites each computation on its own, :meth:`run_on_computation`."""

    name: str = "unnamed-pass"
    # False for passes a backend needs even at optimization level 0 (legalization).
    is_optimization: bool = True

    def __init__(self) -> None:
        self.notes: list[str] = []
        self.steps: list[RewriteStep] = []
        self.recording_steps = False  # set by the pipeline (PassOptions.record_steps)

    def run(self, module: HloModule) -> bool:
        """Rewrite ``module`` in place; return True if anything changed.

        By default: :meth:`run_on_computation` on every computation except fused ones (a fusion's
        body belongs to the fusion; passes before fusion never see one, later ones must not
        rewrite it behind the fusion's back)."""
        fused = {id(i.fused_computation) for i in module.instructions() if i.opcode == "fusion"}
        changed = False
        for comp in module.computation_post_order():
            if id(comp) not in fused:
                changed |= self.run_on_computation(comp)
        return changed

    def run_on_computation(self, comp: HloComputation) -> bool:
        raise NotImplementedError(f"pass {self.name} implements neither run() nor run_on_computation()")

    def note(self, message: str) -> None:
        """Record a decision ("fused x into y", "not fusing z: expensive") for the stage record."""
        self.notes.append(message)

    def record_step(self, rule: str, where: Callable[..., Any] | None, before: list[str], after: list[str],
                    touched: list[str]) -> None:
        """Record one rewrite -- a rule application, a fusion decision -- with the rule's source
        (``where``: the function that decided, found with ``inspect``) and the few HLO lines
        around it before and after, when the pipeline asks for steps (it does by default)."""
        if self.recording_steps and len(self.steps) < MAX_STEPS:
            self.steps.append(RewriteStep(rule, *source_of(where), before, after, touched))

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"


MAX_STEPS = 500  # rewrite steps kept per pass run
MAX_CODE_LINES = 40  # of a rule's code kept for the explorer


@dataclass
class RewriteStep:
    """One rewrite of a pass: which rule, where its code is, and the instructions around it."""

    rule: str
    source_file: str
    source_line: int
    before: list[str]  # HLO lines of the instructions it read, before
    after: list[str]  # HLO lines of what replaced them
    touched: list[str]  # instruction names (before and after)


_SOURCES: dict[Any, tuple[str, int]] = {}
_CODE: dict[str, str] = {}  # "file:line" -> the function's source there


def source_of(fn: Callable[..., Any] | None) -> tuple[str, int]:
    """``(file relative to the package's parent, first line)`` of ``fn`` (cached; the first line
    is its first decorator's); :func:`source_code` then gives the code there."""
    if fn is None:
        return "", 0
    key = getattr(fn, "__code__", fn)
    if key not in _SOURCES:
        try:
            where = Path(inspect.getsourcefile(fn) or "").resolve()
            lines, line = inspect.getsourcelines(fn)
            root = Path(__file__).resolve().parents[2]
            name = str(where.relative_to(root)) if where.is_relative_to(root) else str(where)
            _SOURCES[key] = (name, line)
            _CODE[f"{name}:{line}"] = "".join(lines[:MAX_CODE_LINES]).rstrip()
        except (OSError, TypeError):
            _SOURCES[key] = ("", 0)
    return _SOURCES[key]


def hlo_lines(instrs: Iterable[HloInstruction]) -> list[str]:
    """The HLO lines of ``instrs`` (each once, without metadata): what a rewrite step shows."""
    return [i.to_text(print_metadata=False).strip() for i in dict.fromkeys(instrs)]


def source_code(where: str) -> str:
    """The code of a function :func:`source_of` located at ``where`` ("file:line"), or ""."""
    return _CODE.get(where, "")


@dataclass
class PassRecord:
    """What one pass run did."""

    index: int  # position among all pass runs of this compilation
    pipeline: str  # innermost pipeline that ran the pass
    pass_name: str
    changed: bool
    before: str  # module text before the pass
    after: str  # module text after the pass
    instructions_before: int
    instructions_after: int
    fusions_before: int
    fusions_after: int
    seconds: float
    notes: list[str] = field(default_factory=list)
    skipped: str = ""  # why the pass did not run ("disabled", "opt level 0"), "" if it ran
    steps: list[RewriteStep] = field(default_factory=list)  # each rewrite, when the pass records them

    def summary(self) -> str:
        mark = "*" if self.changed else " "
        why = f"  ({self.skipped})" if self.skipped else ""
        name = f"{self.pipeline}/{self.pass_name}"
        return (
            f"{self.index:4d} {mark} {name:<52s} "
            f"{self.instructions_before:5d} -> {self.instructions_after:<5d} "
            f"{self.fusions_before:4d} -> {self.fusions_after:<4d} {self.seconds * 1e3:8.2f} ms{why}"
        )


@dataclass
class PassOptions:
    """How a pipeline run behaves (filled from flags by the compiler driver)."""

    disabled_passes: frozenset[str] = frozenset()  # --xla_disable_hlo_passes
    disable_all: bool = False  # --xla_disable_all_hlo_passes
    opt_level: int = 2  # 0: only passes with is_optimization=False run
    verify: bool = True  # run the verifier after every pass that changed the module
    record: bool = True  # keep PassRecords (module text before/after each pass)
    # compare the module's text before and after *every* pass with its report (passes from
    # outside xla_teach are always checked; xla_teach's own are trusted unless this is set)
    check_reported_changes: bool = False
    # record each rewrite of the passes that report them (algsimp's rules, fusion's decisions):
    # the explorer steps through them; costs about 1% of a compile (docs/performance.md)
    record_steps: bool = True
    # Called after every pass run with its record (dump writers listen here).
    listeners: list[Callable[[PassRecord], None]] = field(default_factory=list)


class PassRecorder:
    """Collects the :class:`PassRecord` of every pass run of one compilation."""

    def __init__(self) -> None:
        self.records: list[PassRecord] = []

    def changed_records(self) -> list[PassRecord]:
        return [r for r in self.records if r.changed]

    def table(self, notes: bool = False) -> str:
        """One line per pass run; ``*`` marks the ones that changed the module. With
        ``notes``, each pass's notes follow its line, indented (what it did, and why
        fusion refused each candidate it refused)."""
        lines: list[str] = [f"{'#':>4s} * {'pipeline/pass':<52s} {'instructions':<14s}{'fusions':<12s}{'time':>8s}"
                            "   (* changed the module; instructions include those inside fusions)"]
        for r in self.records:
            lines.append(r.summary())
            if notes:
                lines += ["      " + note for note in r.notes]
        return "\n".join(lines)

    def __len__(self) -> int:
        return len(self.records)


class PassMisreportedChange(RuntimeError):
    """A pass changed the module while returning False (or returned True without a change)."""


def count_fusions(module: HloModule) -> int:
    return sum(1 for i in module.instructions() if i.opcode == "fusion")


def is_built_in(p: HloPass) -> bool:
    """A pass of xla_teach's own pipelines (not one a user or a student wrote)."""
    module = type(p).__module__
    return module.startswith("xla_teach.") and not module.startswith("xla_teach.exercises")


class HloPassPipeline(HloPass):
    """Runs passes in order; itself a pass, so pipelines nest."""

    is_optimization = False  # a pipeline's own passes decide

    def __init__(self, name: str, passes: Iterable[HloPass] = ()) -> None:
        super().__init__()
        self.name = name
        self.passes: list[HloPass] = list(passes)

    # ---- editing (students insert their own passes anywhere) -------------------------
    def add_pass(self, p: HloPass) -> HloPass:
        self.passes.append(p)
        return p

    def _index(self, name: str) -> int:
        for i, p in enumerate(self.passes):
            if p.name == name:
                return i
        raise KeyError(f"pipeline {self.name} has no pass named '{name}' (has: {self.pass_names()})")

    def insert_before(self, name: str, p: HloPass) -> HloPass:
        self.passes.insert(self._index(name), p)
        return p

    def insert_after(self, name: str, p: HloPass) -> HloPass:
        self.passes.insert(self._index(name) + 1, p)
        return p

    def remove_pass(self, name: str) -> HloPass:
        return self.passes.pop(self._index(name))

    def pass_names(self) -> list[str]:
        return [p.name for p in self.passes]

    def find(self, name: str) -> HloPass | None:
        """The first pass (or sub-pipeline) called ``name``, searching nested pipelines."""
        for p in self.passes:
            if p.name == name:
                return p
            if isinstance(p, HloPassPipeline):
                found = p.find(name)
                if found is not None:
                    return found
        return None

    def describe(self, indent: int = 0) -> str:
        """The pipeline as an indented tree of pass names."""
        lines = [" " * indent + self.name + (" (fixed point)" if isinstance(self, HloPassFix) else "")]
        for p in self.passes:
            if isinstance(p, HloPassPipeline):
                lines.append(p.describe(indent + 2))
            else:
                lines.append(" " * (indent + 2) + p.name)
        return "\n".join(lines)

    # ---- running --------------------------------------------------------------------
    def run(self, module: HloModule, options: PassOptions | None = None,
            recorder: PassRecorder | None = None) -> bool:
        options = options or PassOptions()
        if options.disable_all:
            return False
        if options.verify:
            _verify(module, f"before pipeline {self.name}")
        # Each pass's "after" text is the next one's "before": nothing else touches the module
        # between two passes of one run, so it is printed once (and forgotten when the run ends).
        module.pass_text = None
        try:
            return self._run_passes(module, options, recorder)
        finally:
            module.pass_text = None

    def _run_passes(self, module: HloModule, options: PassOptions, recorder: PassRecorder | None) -> bool:
        changed = False
        for p in self.passes:
            if isinstance(p, HloPassPipeline) and p.name in options.disabled_passes:
                # a disabled sub-pipeline (as in XLA, a pipeline is a pass and has a name):
                # record it and each pass in it as skipped, so none of them seems to vanish
                self._run_one(p, module, options, recorder)
                p._skip_all(module, options, recorder, f"in {p.name}, disabled by --xla_disable_hlo_passes")
            elif isinstance(p, HloPassPipeline):
                changed |= p._run_passes(module, options, recorder)
            else:
                changed |= self._run_one(p, module, options, recorder)
        return changed

    def _skip_all(self, module: HloModule, options: PassOptions, recorder: PassRecorder | None, why: str) -> None:
        for p in self.passes:
            if isinstance(p, HloPassPipeline):
                p._skip_all(module, options, recorder, why)
            else:
                self._run_one(p, module, options, recorder, skip=why)

    def _run_one(self, p: HloPass, module: HloModule, options: PassOptions,
                 recorder: PassRecorder | None, skip: str = "") -> bool:
        skipped = skip  # why the pass does not run ("" if it does)
        if not skipped and p.name in options.disabled_passes:
            skipped = "disabled by --xla_disable_hlo_passes"
        elif not skipped and options.opt_level == 0 and p.is_optimization:
            skipped = "optimization level 0"
        keep_text = options.record or bool(options.listeners)
        check = options.check_reported_changes or not is_built_in(p)
        if keep_text or check:
            if module.pass_text is None:
                module.pass_text = _text_and_parts(module)
            before, before_parts = module.pass_text
        else:
            before, before_parts = "", None
        instrs_before, fusions_before = module.instruction_count(), count_fusions(module)
        p.notes = []
        p.steps = []
        p.recording_steps = options.record and options.record_steps
        start = time.perf_counter()
        changed = False if skipped else bool(p.run(module))
        seconds = time.perf_counter() - start
        if skipped or not (changed or check):
            after, after_parts = before, before_parts  # a trusted "no change": nothing to print
        elif keep_text or check:
            after, after_parts = _text_and_parts(module)
        else:
            after, after_parts = "", None
        module.pass_text = (after, after_parts) if after_parts is not None else None
        if check and changed != (after != before):
            claim = "a change" if changed else "no change"
            raise PassMisreportedChange(
                f"pass '{p.name}' reported {claim}, but the module text "
                f"{'is identical' if changed else 'differs'} after it")
        if changed and options.verify:
            _verify(module, f"after pass {p.name}", _touched(module, before_parts, after_parts))
        record = PassRecord(
            index=len(recorder.records) if recorder else 0, pipeline=self.name, pass_name=p.name,
            changed=changed, before=before if keep_text else "", after=after if keep_text else "",
            instructions_before=instrs_before,
            instructions_after=module.instruction_count() if changed else instrs_before,
            fusions_before=fusions_before, fusions_after=count_fusions(module) if changed else fusions_before,
            seconds=seconds,
            notes=list(p.notes), skipped=skipped, steps=list(p.steps),
        )
        if recorder is not None and options.record:
            recorder.records.append(record)
        for listener in options.listeners:
            listener(record)
        return changed


class HloPassFix(HloPassPipeline):
    """Reruns its passes until an iteration changes nothing (at most ``max_iterations``)."""

    def __init__(self, name: str, passes: Iterable[HloPass] = (), max_iterations: int = 25) -> None:
        super().__init__(name, passes)
        self.max_iterations = max_iterations

    def _run_passes(self, module: HloModule, options: PassOptions, recorder: PassRecorder | None) -> bool:
        changed_any = False
        for _ in range(self.max_iterations):
            if not super()._run_passes(module, options, recorder):
                break
            changed_any = True
        else:  # XLA logs this too: two passes undoing each other never reach a fixed point
            warnings.warn(f"pipeline {self.name} still changed the module after {self.max_iterations} "
                          "iterations; stopped without reaching a fixed point", UserWarning, stacklevel=2)
        return changed_any


def _text_and_parts(module: HloModule) -> tuple[str, dict[str, str]]:
    from xla_teach.hlo.text.printer import module_text_and_computations

    return module_text_and_computations(module)


def _touched(module: HloModule, before: dict[str, str] | None,
             after: dict[str, str] | None) -> dict[str, set[str] | None] | None:
    """What must be checked again after a pass, as computation name -> the names of the
    instructions to check there (None: all of them). An instruction's check reads its own line,
    its operands' shapes and the computations it calls, so it is checked again when its line
    changed, an operand's line changed, or it calls a computation that changed; a computation
    whose text changed also has its structure checked again. Everything else would pass as it
    did before the pass. None (check all) when either text is missing, or when a computation
    holds an instruction that its text leaves out (one unreachable from its root)."""
    if before is None or after is None:
        return None
    changed = {name for name, text in after.items() if before.get(name) != text}
    touched: dict[str, set[str] | None] = {}
    for comp in module.computations:
        text = after.get(comp.name)
        if text is None or len(comp.instructions) != text.count("\n") - 1:
            return None
        old = before.get(comp.name)
        if comp.name in changed and old is None:
            touched[comp.name] = None
            continue
        moved: set[str] = set()
        if comp.name in changed:
            old_lines = _lines_by_name(old or "")
            moved = {name for name, line in _lines_by_name(text).items() if line != old_lines.get(name)}
        check = {i.name for i in comp.instructions
                 if i.name in moved or any(op.name in moved for op in i.operands)
                 or any(c.name in changed for c in i.called_computations())}
        if check or comp.name in changed:
            touched[comp.name] = check
    return touched


def _lines_by_name(text: str) -> dict[str, str]:
    """A computation's instruction lines by instruction name."""
    lines = {}
    for line in text.split("\n")[1:-1]:
        head = line.split(" = ", 1)[0].strip()
        lines[head.removeprefix("ROOT ").lstrip("%")] = line
    return lines


def _verify(module: HloModule, when: str, only: dict[str, set[str] | None] | None = None) -> None:
    from xla_teach.hlo.errors import VerificationError
    from xla_teach.hlo.verifier import verify_module

    try:
        verify_module(module, only)
    except VerificationError as err:
        raise VerificationError(f"HLO verification failed {when}:\n{err}") from None
