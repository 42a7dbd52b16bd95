"""while-loop-trip-count-annotator: the trip count of a counted loop, written where XLA writes it."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.passes.pass_test_utils import check_pass
from xla_teach.hlo.text.parser import parse_hlo
from xla_teach.passes.lowering.while_loop_trip_count_annotator import WhileLoopTripCountAnnotator, trip_count

LOOP = """HloModule m
cond {{ s = (s32[], f32[4]) parameter(0)  i = s32[] get-tuple-element(s), index=0
        n = s32[] constant({bound})  ROOT c = pred[] compare({lhs}, {rhs}), direction={direction} }}
body {{ s = (s32[], f32[4]) parameter(0)  i = s32[] get-tuple-element(s), index=0
        d = s32[] constant({step})  next = s32[] add(i, d)  v = f32[4] get-tuple-element(s), index=1
        w = f32[4] add(v, v)  ROOT t = (s32[], f32[4]) tuple(next, w) }}
ENTRY main {{ start = s32[] constant({start})  x = f32[4] parameter(0)  init = (s32[], f32[4]) tuple(start, x)
             ROOT loop = (s32[], f32[4]) while(init), condition=cond, body=body }}
"""


def loop(start: int, bound: int, step: int, direction: str = "LT", flipped: bool = False) -> str:
    lhs, rhs = ("n", "i") if flipped else ("i", "n")
    return LOOP.format(start=start, bound=bound, step=step, direction=direction, lhs=lhs, rhs=rhs)


def simulate(start: int, bound: int, step: int, direction: str, flipped: bool) -> int:
    """The trip count by running the counter (the oracle)."""
    import operator

    ops = {"LT": operator.lt, "LE": operator.le, "GT": operator.gt, "GE": operator.ge, "NE": operator.ne}
    i, trips = start, 0
    while (ops[direction](bound, i) if flipped else ops[direction](i, bound)) and trips < 10_000:
        i, trips = i + step, trips + 1
    return trips


@pytest.mark.parametrize("start,bound,step,direction,flipped", [
    (0, 32, 1, "LT", False), (3, 32, 4, "LT", False), (5, 5, 1, "LT", False), (9, 2, 1, "LT", False),
    (0, 10, 3, "LE", False), (-4, 4, 2, "LE", False), (0, 12, 3, "NE", False), (7, 20, 2, "GT", True),
    (1, 6, 1, "GE", True)])
def test_the_trip_count_is_what_running_the_counter_gives(start: int, bound: int, step: int, direction: str,
                                                          flipped: bool) -> None:
    module = parse_hlo(loop(start, bound, step, direction, flipped))
    trips, why = trip_count(module.entry.root)
    assert trips == simulate(start, bound, step, direction, flipped), why
    WhileLoopTripCountAnnotator().run(module)
    assert module.entry.root.backend_config == '{"known_trip_count":{"n":"' + str(trips) + '"}}'


def test_a_count_that_never_reaches_its_bound_or_depends_on_data_is_left_alone() -> None:
    never = loop(0, 7, 2, "NE")  # 0, 2, 4, 6, 8, ... never equals 7
    check_pass(WhileLoopTripCountAnnotator(), never, None)
    data = loop(0, 7, 1).replace("n = s32[] constant(7)", "n = s32[] get-tuple-element(s), index=0")
    annotator = WhileLoopTripCountAnnotator()
    check_pass(annotator, data, None)
    assert any("trip count unknown" in note for note in annotator.notes)


def test_the_explorers_lstm_runs_its_loop_as_often_as_the_annotation_says() -> None:
    """End to end: the scans of the LSTM example get their length, and the run's while thunks
    count the same number of iterations."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    import xla_teach as xt
    from examples.models import rnn_step

    step, args = rnn_step(seq=12, batch=2, features=4, hidden=8)
    compiled = xt.jit(step).lower(*args).compile()
    loops = [i for i in compiled.executable.module.entry.instructions if i.opcode == "while"]
    assert loops and all(i.backend_config == '{"known_trip_count":{"n":"12"}}' for i in loops)
    compiled(*args)
    thunks = [t for t in compiled.executable.entry.thunks if type(t).__name__ == "WhileThunk"]
    assert thunks and all(t.trip_count == 12 for t in thunks)
