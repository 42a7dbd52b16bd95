"""Rewrite the legacy ``rng`` as ``rng-get-and-update-state`` + ``rng-bit-generator`` (``rng-expander``).

``rng(a, b), distribution=...`` is stateful: the interpreter draws it from its own
Philox-4x32-10 stream (key ``rng_seed`` = 0, a counter that starts at 0 in every run and
advances by the blocks each draw uses; see :mod:`xla_teach.hlo.evaluator.random`). As
XLA's ``RngExpander`` does, this pass makes the state explicit: each ``rng`` reads it with
``rng-get-and-update-state(), delta=<blocks it uses>`` -- which returns ``{seed, counter}``
and advances the counter at run time -- draws its bits with ``rng-bit-generator`` on that
state, and applies the interpreter's formula written as HLO:

* ``rng_uniform``, floats: ``u = (bits >> 11) * 2^-53`` (53 random bits in [0, 1)),
  ``a + (b - a) * u`` in f64, clamped below ``nextafter(b, a)``, converted to the type;
* ``rng_uniform``, integers and pred (false = 0, true = 1): ``a + bits % max(b - a, 1)``, in
  64-bit wrap-around arithmetic;
* ``rng_normal``: Box-Muller in f64, ``a + b * sqrt(-2 log1p(-u1)) cos(2 pi u2)`` with
  ``u1``, ``u2`` two successive uniform draws (``u2`` from the first generator's new state).

Because the counter lives at run time, an ``rng`` in a ``while`` body, a ``conditional``
branch or a computation called twice draws fresh numbers each time it runs, exactly as the
interpreter's does. What must hold is the *order* of the draws, which the interpreter
fixes (:func:`~xla_teach.hlo.evaluator.core.execution_order`) and a scheduler could
change. So, per computation, the pass lists the instructions that draw -- the ``rng``
themselves and the ``while``/``conditional``/``call`` reaching one -- in the interpreter's
order, and makes each a *control successor* of the draws since the previous ``rng``
(every scheduler obeys control edges; no pass removes a ``rng-get-and-update-state``).
Then it inlines the ``call`` reaching an ``rng`` (carrying those edges over, which the
general ``call-inliner`` would drop). Before all that it removes dead instructions, as the
interpreter never runs a dead ``call``. An ``rng`` run once per *element* -- in a ``map``,
a reducer, a comparator -- has no order and is rejected with an error that says so.

Before::

    ENTRY main {
      a = s32[] parameter(0)
      b = s32[] parameter(1)
      ROOT r = s32[3] rng(a, b), distribution=rng_uniform
    }

After::

    ENTRY main {
      a = s32[] parameter(0)
      a_wide = s64[] convert(a)
      a_u64 = u64[] bitcast-convert(a_wide)
      a_b = u64[3] broadcast(a_u64), dimensions={}
      state = u64[2] rng-get-and-update-state(), delta=2
      rng-bit-generator = (u64[2], u64[3]) rng-bit-generator(state), algorithm=rng_philox
      bits = u64[3] get-tuple-element(rng-bit-generator), index=1
      b = s32[] parameter(1)
      high = pred[] compare(b, a), direction=GT
      b_wide = s64[] convert(b)
      b_u64 = u64[] bitcast-convert(b_wide)
      difference = u64[] subtract(b_u64, a_u64)
      one = u64[] constant(1)
      span = u64[] select(high, difference, one)
      span_b = u64[3] broadcast(span), dimensions={}
      offset = u64[3] remainder(bits, span_b)
      sum = u64[3] add(a_b, offset)
      signed = s64[3] bitcast-convert(sum)
      ROOT r = s32[3] convert(signed)
    }

``delta=2``: three u64 draws take 6 Philox words, ``ceil(6 / 4) = 2`` blocks. A second
``rng`` would get ``control-predecessors={state}``.
"""

from __future__ import annotations

import math

import numpy as np

from xla_teach.hlo.evaluator.core import execution_order
from xla_teach.hlo.ir import HloComputation, HloInstruction, HloModule
from xla_teach.hlo.opcodes import CONTROL_FLOW_OPCODES
from xla_teach.hlo.shape import Shape
from xla_teach.hlo.types import PrimitiveType
from xla_teach.passes.pass_base import HloPass
from xla_teach.passes.rewrite_utils import add_constant, add_instruction
from xla_teach.passes.simplifiers.call_inliner import inline_call
from xla_teach.passes.simplifiers.dce import remove_dead_instructions, remove_unreachable_computations

U64, S64, F64, PRED = PrimitiveType.U64, PrimitiveType.S64, PrimitiveType.F64, PrimitiveType.PRED
STATE_OP = "rng-get-and-update-state"
# Control flow that runs a whole computation at one point of its caller's order.
SEQUENTIAL_CALLERS = CONTROL_FLOW_OPCODES


class RngExpander(HloPass):
    name = "rng-expander"
    is_optimization = False  # code generation needs it: there is no rng kernel

    def run(self, module: HloModule) -> bool:
        if not any(i.opcode == "rng" for i in module.instructions()):
            return False
        for comp in module.computations:
            remove_dead_instructions(comp)
        _reject_per_element_rngs(module)
        orders = {id(comp): _draws(comp) for comp in module.computations}  # before anything moves
        for comp in module.computations:
            since_last_state: list[HloInstruction] = []
            for instr in orders[id(comp)]:
                if instr.opcode == "rng":
                    self.note(f"{instr.name}: {instr.attr('distribution')} drawn from the run-time Philox state")
                    instr = _Expansion(instr).run()
                _add_control_predecessors(instr, since_last_state)
                since_last_state = [instr] if instr.opcode == STATE_OP else since_last_state + [instr]
        self._inline_drawing_calls(module)
        return True

    def _inline_drawing_calls(self, module: HloModule) -> None:
        """Inline every ``call`` that draws, callees first, keeping the order of the draws."""
        for comp in module.computation_post_order():
            for call in [i for i in comp.post_order() if i.opcode == "call" and _draws_inside(i)]:
                before = {i.unique_id for i in comp.instructions}
                predecessors, call.control_predecessors = list(call.control_predecessors), []
                successors = [i for i in comp.instructions if call in i.control_predecessors]
                for successor in successors:  # detached, so inlining can remove the call
                    successor.control_predecessors.remove(call)
                inline_call(call)
                clones = [i for i in comp.instructions if i.unique_id not in before and _is_draw(i)]
                for clone in clones:
                    _add_control_predecessors(clone, predecessors)
                for successor in successors:
                    _add_control_predecessors(successor, clones)
                self.note(f"{comp.name}: inlined {call.name}, which draws")
        remove_unreachable_computations(module)  # inlined callees, and what only dead code called


def _is_draw(instr: HloInstruction) -> bool:
    return instr.opcode in ("rng", STATE_OP) or (instr.opcode in SEQUENTIAL_CALLERS and _draws_inside(instr))


def _draws_inside(instr: HloInstruction) -> bool:
    return any(_first_rng(callee) is not None for callee in instr.called_computations())


def _draws(comp: HloComputation) -> list[HloInstruction]:
    """The instructions of ``comp`` that draw, in the order the interpreter runs them."""
    return [i for i in execution_order(comp) if _is_draw(i)]


def _add_control_predecessors(instr: HloInstruction, predecessors: list[HloInstruction]) -> None:
    for pred in predecessors:
        if pred is not instr and pred not in instr.control_predecessors:
            instr.control_predecessors.append(pred)


def _reject_per_element_rngs(module: HloModule) -> None:
    for comp in module.computations:
        for instr in comp.instructions:
            if instr.opcode in SEQUENTIAL_CALLERS:
                continue
            for callee in instr.called_computations():
                inner = _first_rng(callee)
                if inner is not None:
                    raise NotImplementedError(
                        f"rng-expander: {inner.name} ({inner.opcode}) is reached through {instr.name} "
                        f"({instr.opcode}) in {comp.name}, which runs it once per element in no defined order; "
                        "the legacy rng compiles in computations run by call, while and conditional -- use "
                        "rng-bit-generator with an explicit state here")


def _blocks(rng: HloInstruction) -> int:
    """Philox blocks one rng uses: 2 words (one u64) per element and draw, 4 words per block."""
    draws = 2 if rng.attr("distribution") == "rng_normal" else 1
    return draws * math.ceil(2 * rng.shape.element_count() / 4)


def _first_rng(comp: HloComputation, seen: set[int] | None = None) -> HloInstruction | None:
    seen = seen if seen is not None else set()
    if id(comp) in seen:
        return None
    seen.add(id(comp))
    for instr in comp.instructions:
        if instr.opcode in ("rng", STATE_OP):
            return instr
        for callee in instr.called_computations():
            found = _first_rng(callee, seen)
            if found is not None:
                return found
    return None


class _Expansion:
    """Builds the replacement of one ``rng`` next to it."""

    def __init__(self, rng: HloInstruction) -> None:
        assert rng.parent is not None
        self.rng, self.comp = rng, rng.parent
        self.dims = rng.shape.dimensions
        self.etype = rng.shape.element_type

    def run(self) -> HloInstruction:
        """Replace the rng; returns its ``rng-get-and-update-state``, which inherits its control edges."""
        distribution = str(self.rng.attr("distribution"))
        if distribution not in ("rng_uniform", "rng_normal") or (
                distribution == "rng_normal" and not self.etype.is_float) or not (
                self.etype.is_float or self.etype.is_integral or self.etype.is_pred):
            raise ValueError(f"{self.rng.name}: rng {distribution} of {self.rng.shape.to_text()} is not defined "
                             "(uniform takes floats, integers or pred, normal takes floats)")
        self.state = self._add(STATE_OP, [], {"delta": _blocks(self.rng)}, name="state")
        a, b = self.rng.operands
        if distribution == "rng_normal":
            result = self._normal(a, b)
        elif self.etype.is_float:
            result = self._uniform_float(a, b)
        else:
            result = self._uniform_integer(a, b)
        name = self.rng.name
        self.state.control_predecessors = list(self.rng.control_predecessors)
        for user in self.comp.instructions:
            if self.rng in user.control_predecessors:
                user.control_predecessors[user.control_predecessors.index(self.rng)] = self.state
        result = self.comp.replace_instruction(self.rng, self._convert(result, self.etype, "sample"))
        self.comp.remove_instruction(self.rng)  # an rng has a side effect: nothing removes it for us
        result.name = name  # the value keeps its name, so the users' text reads as before
        return self.state

    # ---- helpers ------------------------------------------------------------------------
    def _add(self, opcode: str, operands: list[HloInstruction], attrs: dict | None = None,
             name: str | None = None, **kwargs: object) -> HloInstruction:
        instr = add_instruction(self.comp, opcode, operands, attrs, name=name, **kwargs)  # type: ignore[arg-type]
        instr.metadata = self.rng.metadata
        return instr

    def _constant(self, value: object, etype: PrimitiveType, name: str) -> HloInstruction:
        instr = add_constant(self.comp, value, etype, name)  # type: ignore[arg-type]
        instr.metadata = self.rng.metadata
        return instr

    def _broadcast(self, scalar: HloInstruction, name: str) -> HloInstruction:
        if not self.dims:
            return scalar
        return self._add("broadcast", [scalar], {"dimensions": ()}, name=name, result_dims=self.dims)

    def _convert(self, x: HloInstruction, etype: PrimitiveType, name: str) -> HloInstruction:
        if x.shape.element_type is etype:
            return x
        return self._add("convert", [x], name=name, result_element_type=etype)

    def _binary(self, opcode: str, x: HloInstruction, y: HloInstruction, name: str) -> HloInstruction:
        return self._add(opcode, [x, y], name=name)

    def _bits(self, state: HloInstruction) -> tuple[HloInstruction, HloInstruction]:
        """(one u64 of the stream per element, drawn from Philox state ``state``; the generator,
        whose element 0 is the state after them)."""
        shape = Shape.make_tuple([state.shape, Shape.array(U64, self.dims)])
        generator = self._add("rng-bit-generator", [state], {"algorithm": "rng_philox"}, shape=shape)
        return self._add("get-tuple-element", [generator], {"index": 1}, name="bits"), generator

    def _uniform01(self, state: HloInstruction) -> tuple[HloInstruction, HloInstruction]:
        """(f64 in [0, 1): the top 53 bits of each u64, times 2^-53 (both steps exact); the generator)."""
        bits, generator = self._bits(state)
        top = self._binary("shift-right-logical", bits, self._broadcast(self._constant(11, U64, "eleven"), "eleven_b"),
                           "top53")
        scale = self._broadcast(self._constant(2.0**-53, F64, "two_pow_minus_53"), "scale")
        return self._binary("multiply", self._convert(top, F64, "top53_f64"), scale, "u"), generator

    # ---- the three formulas -------------------------------------------------------------
    def _uniform_float(self, a: HloInstruction, b: HloInstruction) -> HloInstruction:
        low, high = self._convert(a, F64, "low"), self._convert(b, F64, "high")
        span = self._binary("subtract", high, low, "span")
        scaled = self._binary("multiply", self._broadcast(span, "span_b"), self._uniform01(self.state)[0], "scaled")
        values = self._binary("add", self._broadcast(low, "low_b"), scaled, "values")
        limit = self._broadcast(self._next_after(high, low), "limit_b")
        return self._binary("minimum", values, limit, "below_high")

    def _next_after(self, x: HloInstruction, toward: HloInstruction) -> HloInstruction:
        """C's ``nextafter(x, toward)`` on f64 scalars, through the bits: one ulp away from zero
        is ``bits + 1`` and toward zero ``bits - 1`` (as s64, for either sign); from +-0 it is the
        smallest subnormal of ``toward``'s side; ``toward`` itself when they are equal."""
        bits = self._add("bitcast-convert", [x], name="x_bits", result_element_type=S64)
        up = self._add("compare", [toward, x], {"direction": "GT"}, name="up")
        positive = self._add("compare", [bits, self._constant(0, S64, "zero_bits")], {"direction": "GE"},
                             name="positive")
        away_from_zero = self._add("compare", [up, positive], {"direction": "EQ"}, name="away_from_zero")
        one = self._constant(1, S64, "one_bits")
        stepped = self._add("select", [away_from_zero, self._binary("add", bits, one, "bits_up"),
                                       self._binary("subtract", bits, one, "bits_down")], name="stepped")
        tiniest = self._add("select", [up, one, self._constant(np.iinfo(np.int64).min + 1, S64, "minus_tiniest")],
                            name="tiniest")
        is_zero = self._add("compare", [x, self._constant(0.0, F64, "zero")], {"direction": "EQ"}, name="is_zero")
        next_bits = self._add("select", [is_zero, tiniest, stepped], name="next_bits")
        after = self._add("bitcast-convert", [next_bits], name="next", result_element_type=F64)
        equal = self._add("compare", [x, toward], {"direction": "EQ"}, name="equal")
        return self._add("select", [equal, toward, after], name="next_after")

    def _uniform_integer(self, a: HloInstruction, b: HloInstruction) -> HloInstruction:
        wide = S64 if self.etype.is_signed_int else U64
        high = self._add("compare", [b, a], {"direction": "GT"}, name="high")

        def as_u64(x: HloInstruction) -> HloInstruction:
            x = self._convert(x, wide, f"{x.name}_wide")
            if wide is U64:
                return x
            return self._add("bitcast-convert", [x], name=f"{x.name.removesuffix('_wide')}_u64",
                             result_element_type=U64)

        b_u64, a_u64 = as_u64(b), as_u64(a)
        difference = self._binary("subtract", b_u64, a_u64, "difference")
        span = self._add("select", [high, difference, self._constant(1, U64, "one")], name="span")
        offset = self._binary("remainder", self._bits(self.state)[0], self._broadcast(span, "span_b"), "offset")
        total = self._binary("add", self._broadcast(a_u64, "a_b"), offset, "sum")
        if wide is S64:
            return self._add("bitcast-convert", [total], name="signed", result_element_type=S64)
        return total

    def _normal(self, a: HloInstruction, b: HloInstruction) -> HloInstruction:
        u1, generator = self._uniform01(self.state)
        u2, _ = self._uniform01(self._add("get-tuple-element", [generator], {"index": 0}, name="next_state"))
        log = self._add("log-plus-one", [self._add("negate", [u1], name="minus_u1")], name="log1p")
        radius = self._add("sqrt", [self._binary("multiply", self._broadcast(
            self._constant(-2.0, F64, "minus_two"), "minus_two_b"), log, "minus_two_log")], name="radius")
        angle = self._binary("multiply", self._broadcast(self._constant(2.0 * np.pi, F64, "two_pi"), "two_pi_b"),
                             u2, "angle")
        normal = self._binary("multiply", radius, self._add("cosine", [angle], name="cos"), "normal")
        mean, deviation = self._convert(a, F64, "mean"), self._convert(b, F64, "deviation")
        spread = self._binary("multiply", self._broadcast(deviation, "deviation_b"), normal, "spread")
        return self._binary("add", self._broadcast(mean, "mean_b"), spread, "normal_sample")
