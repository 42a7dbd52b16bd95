"""Hidden checks of the ``read_dump`` exercise: reading XLA's own optimized dumps.

The modules are real: JAX programs compiled by XLA's CPU backend, their
``after_optimizations.txt`` shipped in ``xla_teach/exercises/data/xla_dumps/``. The grader sends
a dump's text to the student's process, which parses it and calls the student's functions. The
oracles here read the same dump another way: owners of fused computations found bottom-up
(``fusion_owners``), and stack frames read from the dump's text with regular expressions.
"""

from __future__ import annotations

import random
import re
from functools import cache, partial
from importlib import resources

from xla_teach.exercises.exercise import Exercise
from xla_teach.exercises.grading import CaseFailed, Check
from xla_teach.exercises.sandbox import StudentProcess
from xla_teach.hlo.ir import HloModule
from xla_teach.hlo.opcodes import BUFFER_NAMING_OPCODES
from xla_teach.hlo.text.parser import parse_hlo
from xla_teach.tools.explorer.structural_diff import fusion_owners

ENTRY_POINTS = ("kernels", "holder", "source_line", "fused_lines")
QUIET = BUFFER_NAMING_OPCODES  # no kernel, no line of their own worth asking about


def dump_names() -> list[str]:
    folder = resources.files("xla_teach.exercises").joinpath("data", "xla_dumps")
    return sorted(p.name.removesuffix(".txt") for p in folder.iterdir() if p.name.endswith(".txt"))


@cache
def dump_text(name: str) -> str:
    return resources.files("xla_teach.exercises").joinpath("data", "xla_dumps", f"{name}.txt").read_text()


@cache
def dump(name: str) -> HloModule:
    return parse_hlo(dump_text(name))


def frames_of(text: str) -> dict[int, tuple[str, int]]:
    """stack frame id -> (file, line), read from the dump's text."""
    section = {}
    for header in ("FileNames", "FileLocations", "StackFrames"):
        block = re.search(rf"^{header}\n(.*?)(?:\n\n|\Z)", text, re.S | re.M)
        section[header] = {int(m[1]): m[2] for m in re.finditer(r"^(\d+) (.*)$", block.group(1) if block else "", re.M)}
    out = {}
    for number, row in section["StackFrames"].items():
        location = section["FileLocations"][int(re.search(r"file_location_id=(\d+)", row)[1])]  # type: ignore[index]
        file_name = section["FileNames"][int(re.search(r"file_name_id=(\d+)", location)[1])].strip('"')  # type: ignore[index]
        out[number] = (file_name, int(re.search(r"\bline=(\d+)", location)[1]))  # type: ignore[index]
    return out


def entry_holder(module: HloModule, op_name: str, opcode: str) -> str | None:
    """The oracle: every instruction with this op_name and opcode, followed up to the ENTRY
    instruction that holds it; the first of those in ENTRY order."""
    owners = fusion_owners(module)
    by_name = {i.name: i for c in module.computations for i in c.instructions}
    holders = set()
    for comp in module.computations:
        for instr in comp.instructions:
            fields = instr.metadata.fields if instr.metadata else {}
            if instr.opcode != opcode or fields.get("op_name") != op_name:
                continue
            at = comp.name
            while at in owners:
                owner = by_name[owners[at]]
                if owner.parent is not None and owner.parent.name == module.entry.name:
                    holders.add(owner.name)
                    break
                at = owner.parent.name if owner.parent is not None else ""
            if comp.name == module.entry.name:
                holders.add(instr.name)
    order = [i.name for i in module.entry.instructions]
    return min(holders, key=order.index) if holders else None


def _named(module: HloModule) -> list[tuple[str, str]]:
    """(op_name, opcode) of every instruction with an op_name, fused or not."""
    found = []
    for comp in module.computations:
        for instr in comp.instructions:
            fields = instr.metadata.fields if instr.metadata else {}
            if fields.get("op_name") and instr.opcode not in QUIET:
                found.append((str(fields["op_name"]), instr.opcode))
    return sorted(set(found))


def _ask(solution: StudentProcess, name: str, function: str, **args: object) -> object:
    result = solution.call("read_dump", entry=function, dump=dump_text(name), args=args)
    return result.get("answer") if isinstance(result, dict) else None


def _kernels_case(name: str, solution: StudentProcess) -> None:
    want = [i.name for i in dump(name).entry.instructions if i.opcode not in QUIET]
    got = _ask(solution, name, "kernels")
    if got != want:
        raise CaseFailed(f"{name}: XLA runs {len(want)} kernels, {want[:8]}{' ...' if len(want) > 8 else ''}; "
                         f"you listed {got!r:.300}")


def _holder_case(name: str, op_name: str, opcode: str, solution: StudentProcess) -> None:
    want = entry_holder(dump(name), op_name, opcode)
    got = _ask(solution, name, "holder", op_name=op_name, opcode=opcode)
    if got != want:
        raise CaseFailed(f"{name}: the {opcode} named {op_name!r} runs in {want!r}, you said {got!r}")


def _frame_case(name: str, frame: int, solution: StudentProcess) -> None:
    want = list(frames_of(dump_text(name))[frame])
    got = _ask(solution, name, "source_line", frame_id=frame)
    if got != want:
        raise CaseFailed(f"{name}: stack frame {frame} is line {want[1]} of {want[0]}, you said {got!r}")


def _fused_lines_case(name: str, fusion: str, solution: StudentProcess) -> None:
    frames = frames_of(dump_text(name))
    module = dump(name)
    owners = fusion_owners(module)
    lines = set()
    for comp in module.computations:
        at = comp.name
        while at in owners and owners[at] != fusion:
            owner = next(i for c in module.computations for i in c.instructions if i.name == owners[at])
            at = owner.parent.name if owner.parent is not None else ""
        if at in owners and owners[at] == fusion:
            for instr in comp.instructions:
                frame = (instr.metadata.fields if instr.metadata else {}).get("stack_frame_id")
                if frame and instr.opcode != "fusion":
                    lines.add(frames[int(frame)][1])
    got = _ask(solution, name, "fused_lines", fusion=fusion)
    if got != sorted(lines):
        raise CaseFailed(f"{name}: {fusion} fuses the work of lines {sorted(lines)}, you said {got!r}")


def make_checks(seed: int = 0) -> list[Check]:
    rng = random.Random(1000 * seed)
    names = dump_names()
    holder_cases, frame_cases, fused_cases = [], [], []
    for name in rng.sample(names, 3):
        module = dump(name)
        for op_name, opcode in rng.sample(_named(module), 2):
            holder_cases.append(partial(_holder_case, name, op_name, opcode))
        frame_cases.append(partial(_frame_case, name, rng.choice(sorted(frames_of(dump_text(name))))))
        fusions = [i.name for i in module.entry.instructions if i.opcode == "fusion"]
        fused_cases.append(partial(_fused_lines_case, name, rng.choice(fusions)))
    holder_cases.append(partial(_holder_case, names[0], "jit(nothing)/no_such_op", "add"))
    return [
        Check("kernels", "the ENTRY instructions that run, in order, of every dump",
              [partial(_kernels_case, name) for name in names]),
        Check("finds-the-fusion", "the ENTRY instruction (a fusion, or itself) that computes an op of the program",
              holder_cases),
        Check("stack-frames", "a stack_frame_id resolved through StackFrames, FileLocations and FileNames",
              frame_cases),
        Check("fused-lines", "the source lines XLA fused into one kernel", fused_cases),
    ]


EXERCISE = Exercise(
    name="read_dump",
    title="Read XLA's own optimized dump",
    teaches="What XLA actually runs: kernels in the ENTRY computation, fusions and the computations they call, "
            "where each op of the program went, and the stack-frame tables that turn metadata into source "
            "lines -- on real dumps of JAX programs.",
    entry_points=[(name, "function") for name in ENTRY_POINTS],
    make_checks=make_checks,
)
