"""Hidden checks of the ``liveness`` exercise: live ranges and the peak memory of a schedule.

The grader writes random computations (elementwise chains, broadcasts, reductions, values
nobody reads) and picks orders for them: the order the scheduler would use and shuffled
topological orders. The student's functions run in the student's process on the module text
and the order (as names); their answers are compared here with the grader's own computation of
the same definitions, which the exercise's docstring states.
"""

from __future__ import annotations

import random
from functools import partial

from xla_teach.exercises.exercise import Exercise
from xla_teach.exercises.grading import CaseFailed, Check
from xla_teach.exercises.hlo_checks import show
from xla_teach.exercises.random_modules import FLOAT_BINARY, FLOAT_UNARY_CHEAP, ModuleWriter, random_expression
from xla_teach.exercises.sandbox import StudentProcess
from xla_teach.hlo.ir import HloInstruction, HloModule
from xla_teach.hlo.text.parser import parse_hlo

ENTRY_POINTS = ("live_ranges", "peak_bytes")


def liveness_module(seed: int, dead: bool = False, reduce: bool = False) -> str:
    rng = random.Random(seed)
    shape = rng.choice(["f32[16]", "f32[4,8]", "f32[64]"])
    w = ModuleWriter(f"liveness_{seed}")
    params = [w.parameter(shape) for _ in range(rng.randint(2, 3))]
    values = random_expression(w, rng, params, rng.randint(4, 7), shape, FLOAT_UNARY_CHEAP, FLOAT_BINARY)
    outs = values[-1]
    if dead:
        w.add("exponential", shape, [rng.choice(values[:-1])], name="unused")
    if reduce:
        zero = w.constant("0", "f32[]", name="zero")
        dims = "{0}" if shape.count(",") == 0 else "{0,1}"
        total = w.add("reduce", "f32[]", [rng.choice(values), zero], f"dimensions={dims}, to_apply="
                      f"{w.reducer('add', 'f32')}", name="total")
        spread = w.add("broadcast", shape, [total], "dimensions={}", name="spread")
        outs = w.add("multiply", shape, [outs, spread], name="scaled")
    return w.text(outs)


def orders(module: HloModule, seed: int, count: int) -> list[list[str]]:
    """The post order, then ``count - 1`` random topological orders of the ENTRY."""
    entry = module.entry
    found = [[i.name for i in entry.post_order()]]
    rng = random.Random(seed)
    for _ in range(count - 1):
        waiting = {i.name: len(set(i.operands)) for i in entry.instructions}
        by_name = {i.name: i for i in entry.instructions}
        ready = sorted(n for n, k in waiting.items() if k == 0)
        order = []
        while ready:
            name = ready.pop(rng.randrange(len(ready)))
            order.append(name)
            for user in dict.fromkeys(by_name[name].users):
                waiting[user.name] -= 1
                if waiting[user.name] == 0:
                    ready.append(user.name)
        found.append(order)
    return found


def expected(module: HloModule, order: list[str]) -> tuple[dict[str, tuple[int, int]], int]:
    """The oracle, from the definitions in the exercise's docstring."""
    entry = module.entry
    by_name: dict[str, HloInstruction] = {i.name: i for i in entry.instructions}
    position = {n: p for p, n in enumerate(order)}
    ranges = {}
    for p, name in enumerate(order):
        instr = by_name[name]
        end = len(order) - 1 if instr is entry.root else max([position[u.name] for u in instr.users] + [p])
        ranges[name] = (0 if instr.opcode == "parameter" else p, end)
    size = {n: by_name[n].shape.element_count() * by_name[n].shape.element_type.byte_size for n in order}
    peak = max(sum(size[n] for n, (s, e) in ranges.items() if s <= p <= e) for p in range(len(order)))
    return ranges, peak


def _case(text: str, order_seed: int, which: int, solution: StudentProcess, peak: bool = False) -> None:
    module = parse_hlo(text)
    order = orders(module, order_seed, which + 1)[which]
    result = solution.call("liveness", entry=list(ENTRY_POINTS), text=text, order=order)
    want_ranges, want_peak = expected(module, order)
    listing = show("module", text) + "\n  order: " + ", ".join(order)
    if not peak:
        got = result.get("ranges") if isinstance(result, dict) else None
        if not isinstance(got, dict):
            raise CaseFailed(f"live_ranges must return a dict {{name: (start, end)}}\n{listing}")
        missing = sorted(set(want_ranges) - set(got))
        if missing:
            raise CaseFailed(f"live_ranges has no entry for {', '.join(missing)}\n{listing}")
        for name in order:
            if list(got[name]) != list(want_ranges[name]):
                raise CaseFailed(f"live range of {name}: expected {want_ranges[name]}, got {tuple(got[name])}\n"
                                 f"{listing}")
        return
    got_peak = result.get("peak") if isinstance(result, dict) else None
    if got_peak != want_peak:
        raise CaseFailed(f"peak_bytes: expected {want_peak}, got {got_peak}\n{listing}")


def make_checks(seed: int = 0) -> list[Check]:
    base = 1000 * seed
    plain = [liveness_module(base + s) for s in range(3)]
    odd = [liveness_module(base + 10, dead=True), liveness_module(base + 11, reduce=True),
           liveness_module(base + 12, dead=True, reduce=True)]
    return [
        Check("ranges-in-schedule-order", "live ranges in the scheduler's order: defined, last read, the ROOT to the "
              "end, parameters from 0", [partial(_case, t, base, 0) for t in plain]),
        Check("ranges-any-order", "the same definitions in shuffled (still valid) orders, with dead values and "
              "reductions", [partial(_case, t, base + 1, 2) for t in plain + odd]),
        Check("peak-memory", "the largest total size of the values live at one position",
              [partial(_case, t, base + 2, k, peak=True) for t in odd for k in (0, 1)]),
    ]


EXERCISE = Exercise(
    name="liveness",
    title="Live ranges and peak memory",
    teaches="When a value is alive (from its definition to its last reader; parameters and the result "
            "beyond), why buffer assignment may share the bytes of values whose ranges do not overlap, and "
            "how the schedule decides the peak memory.",
    entry_points=[(name, "function") for name in ENTRY_POINTS],
    make_checks=make_checks,
)
