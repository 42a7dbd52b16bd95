"""Write each ``while`` loop's trip count into the HLO when it is known (``while-loop-trip-count-annotator``).

A loop counts with an *induction variable*: one element of its state tuple starts at a constant,
the condition compares it with a constant, and the body adds a constant to it. Then the number of
iterations is known before the loop runs, and XLA writes it into the loop's ``backend_config`` as
``{"known_trip_count":{"n":"30"}}`` (its ``WhileLoopTripCountAnnotator``): backends use it, and a
reader of the optimized HLO -- or the compile explorer, which shows it on the loop's box -- sees
how often the body runs without running it. This pass does the same for loops of that form::

    i < N   with i = C, C + s, C + 2s, ...     ->  trip count ceil((N - C) / s)   (0 if N <= C)
    i <= N                                      ->  ceil((N - C + 1) / s)
    i != N  (only when s divides N - C and N >= C)

Before (``scan`` over 32 steps, the counter is state element 0)::

    HloModule scan

    cond { s = (s32[], f32[4]) parameter(0)  i = s32[] get-tuple-element(s), index=0
           n = s32[] constant(32)  ROOT lt = pred[] compare(i, n), direction=LT }
    body { s = (s32[], f32[4]) parameter(0)  i = s32[] get-tuple-element(s), index=0
           one = s32[] constant(1)  next = s32[] add(i, one)  v = f32[4] get-tuple-element(s), index=1
           ROOT t = (s32[], f32[4]) tuple(next, v) }
    ENTRY main { zero = s32[] constant(0)  x = f32[4] parameter(0)  init = (s32[], f32[4]) tuple(zero, x)
                 ROOT w = (s32[], f32[4]) while(init), condition=cond, body=body }

After (only the ``while`` changes)::

    HloModule scan

    cond { s = (s32[], f32[4]) parameter(0)  i = s32[] get-tuple-element(s), index=0
           n = s32[] constant(32)  ROOT lt = pred[] compare(i, n), direction=LT }
    body { s = (s32[], f32[4]) parameter(0)  i = s32[] get-tuple-element(s), index=0
           one = s32[] constant(1)  next = s32[] add(i, one)  v = f32[4] get-tuple-element(s), index=1
           ROOT t = (s32[], f32[4]) tuple(next, v) }
    ENTRY main { zero = s32[] constant(0)  x = f32[4] parameter(0)  init = (s32[], f32[4]) tuple(zero, x)
                 ROOT w = (s32[], f32[4]) while(init), condition=cond, body=body,
                     backend_config={"known_trip_count":{"n":"32"}} }

A loop whose count depends on data, or whose counter the body changes in another way, is left
as it is (the pass's note says why).
"""

from __future__ import annotations

from xla_teach.hlo.backend_config import backend_config_object, set_backend_config_field
from xla_teach.hlo.ir import HloInstruction, HloModule
from xla_teach.passes.pass_base import HloPass


def _scalar_constant(instr: HloInstruction) -> int | None:
    """The value of an integer scalar ``constant`` (through ``copy``/``convert``), else None."""
    while instr.opcode in ("copy", "convert", "bitcast") and instr.operand_count == 1:
        instr = instr.operand(0)
    if instr.opcode != "constant" or instr.shape.rank != 0 or instr.shape.dtype.kind not in "iu":
        return None
    return int(instr.literal)


def _element(instr: HloInstruction, param: HloInstruction) -> int | None:
    """``k`` when ``instr`` is ``get-tuple-element(param), index=k``."""
    if instr.opcode == "get-tuple-element" and instr.operand(0) is param:
        return instr.tuple_index
    return None


def trip_count(loop: HloInstruction) -> tuple[int | None, str]:
    """``(trips, why)``: the loop's trip count when its counter has the form above, else
    ``(None, the reason)``."""
    cond, body = loop.attrs["condition"], loop.attrs["body"]
    init = loop.operand(0)
    if not loop.shape.is_tuple or init.opcode != "tuple" or body.root.opcode != "tuple":
        return None, "its state is not built as a tuple"
    compare = cond.root
    if compare.opcode != "compare":
        return None, "its condition is not one comparison"
    direction = str(compare.attr("direction"))
    param = cond.parameter(0)
    lhs, rhs = _element(compare.operand(0), param), _element(compare.operand(1), param)
    if lhs is not None and _scalar_constant(compare.operand(1)) is not None:
        k, bound = lhs, _scalar_constant(compare.operand(1))
    elif rhs is not None and _scalar_constant(compare.operand(0)) is not None:
        k, bound = rhs, _scalar_constant(compare.operand(0))
        direction = {"GT": "LT", "GE": "LE", "LT": "GT", "LE": "GE"}.get(direction, direction)
    else:
        return None, "its condition does not compare a state element with a constant"
    start = _scalar_constant(init.operand(k))
    if start is None:
        return None, f"state element {k} does not start at a constant"
    update = body.root.operand(k)
    body_param = body.parameter(0)
    step = None
    if update.opcode == "add":
        for a, b in ((0, 1), (1, 0)):
            if _element(update.operand(a), body_param) == k and _scalar_constant(update.operand(b)) is not None:
                step = _scalar_constant(update.operand(b))
    if step is None or step <= 0:
        return None, f"the body does not add a positive constant to state element {k}"
    assert bound is not None
    if direction == "LT":
        return max(0, -(-(bound - start) // step)), ""
    if direction == "LE":
        return max(0, -(-(bound - start + 1) // step)), ""
    if direction == "NE" and bound >= start and (bound - start) % step == 0:
        return (bound - start) // step, ""
    return None, f"its condition ({direction}) is not a count up to a bound"


class WhileLoopTripCountAnnotator(HloPass):
    name = "while-loop-trip-count-annotator"
    is_optimization = False

    def run(self, module: HloModule) -> bool:
        changed = False
        for instr in module.instructions():
            if instr.opcode != "while":
                continue
            trips, why = trip_count(instr)
            if trips is None:
                self.note(f"{instr.name}: trip count unknown: {why}")
                continue
            config = backend_config_object(instr)
            if config is not None and config.get("known_trip_count") == {"n": str(trips)}:
                continue
            if set_backend_config_field(instr, "known_trip_count", {"n": str(trips)}):
                self.note(f"{instr.name}: runs its body {trips} times")
                changed = True
        return changed
