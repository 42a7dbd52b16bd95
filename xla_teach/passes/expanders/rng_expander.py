"""Rewrite the legacy ``rng`` as ``rng-bit-generator`` plus a conversion (``rng-expander``).

``rng(a, b), distribution=...`` is stateful: the interpreter draws it from its own
Philox-4x32-10 stream (key ``rng_seed`` = 0, a counter that starts at 0 in every run and
advances by the blocks each draw uses; see :mod:`xla_teach.hlo.evaluator.random`). No
code generator keeps such a hidden counter, so, as XLA's ``RngExpander`` does, this pass
makes the state explicit: an ``rng`` whose draw starts at counter ``c`` becomes
``rng-bit-generator`` on the constant state ``{seed, c}`` -- the very same words -- and
the interpreter's formula written as HLO:

* ``rng_uniform``, floats: ``u = (bits >> 11) * 2^-53`` (53 random bits in [0, 1)),
  ``a + (b - a) * u`` in f64, clamped below ``nextafter(b, a)``, converted to the type;
* ``rng_uniform``, integers: ``a + bits % max(b - a, 1)``, in 64-bit wrap-around arithmetic;
* ``rng_normal``: Box-Muller in f64, ``a + b * sqrt(-2 log1p(-u1)) cos(2 pi u2)`` with
  ``u1``, ``u2`` two successive uniform draws.

The counters are fixed at compile time, in the order the interpreter runs the ``rng``
instructions (:func:`~xla_teach.hlo.evaluator.core.execution_order`, descending into
``call``), which is why the pass runs first in the pipeline, before anything moves
them. An ``rng`` that may run a data-dependent number of times -- in a ``while`` body, a
``conditional`` branch, a ``map`` or reducer, a computation called from two places --
has no fixed counter; the pass rejects it with an error that says so.

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
      state = u64[2] constant({0, 0})
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

A second ``rng`` would read ``state = {0, 2}``: the first one used ``ceil(3 * 2 / 4) = 2``
Philox blocks.
"""

from __future__ import annotations

import math

import numpy as np

from xla_teach.hlo.evaluator.core import execution_order
from xla_teach.hlo.ir import HloComputation, HloInstruction, HloModule
from xla_teach.hlo.shape import Shape
from xla_teach.hlo.types import PrimitiveType
from xla_teach.passes.pass_base import HloPass
from xla_teach.passes.simplifiers.rewrite_utils import add_constant, add_instruction, replace_instruction

U64, S64, F64, PRED = PrimitiveType.U64, PrimitiveType.S64, PrimitiveType.F64, PrimitiveType.PRED


class RngExpander(HloPass):
    name = "rng-expander"
    is_optimization = False  # code generation needs it: there is no rng kernel

    def __init__(self, seed: int = 0) -> None:
        """``seed``: the Philox key, the interpreter's ``rng_seed`` (0 in the backends)."""
        super().__init__()
        self.seed = seed

    def run(self, module: HloModule) -> bool:
        rngs = [i for i in module.instructions() if i.opcode == "rng"]
        if not rngs:
            return False
        counters: dict[int, int] = {}
        end = self._assign_counters(module.entry, counters, 0)
        for rng in rngs:
            # An rng the interpreter never runs (dead, or in an unused computation) may take any
            # counter: it cannot change a result, and dce removes it.
            counter = counters.get(rng.unique_id, end)
            self.note(f"{rng.name}: {rng.attr('distribution')} drawn from Philox counter {counter}")
            _Expansion(rng, self.seed, counter).run()
        return True

    def _assign_counters(self, comp: HloComputation, counters: dict[int, int], counter: int) -> int:
        """Give every rng ``comp`` runs its counter, in the interpreter's order; return the
        counter after them."""
        for instr in execution_order(comp):
            if instr.opcode == "rng":
                if instr.unique_id in counters:
                    raise NotImplementedError(
                        f"rng-expander: {instr.name} in {comp.name} runs once per call of {comp.name}, which is "
                        f"called from more than one place; each run needs its own Philox counter")
                counters[instr.unique_id] = counter
                counter = (counter + _blocks(instr)) % 2**64
            elif instr.opcode == "call":
                counter = self._assign_counters(instr.to_apply, counters, counter)
            else:
                for callee in instr.called_computations():
                    inner = _first_rng(callee)
                    if inner is not None:
                        raise NotImplementedError(
                            f"rng-expander: {inner.name} (rng) is reached through {instr.name} ({instr.opcode}) "
                            f"in {comp.name}, which may run it a data-dependent number of times; the legacy rng "
                            "compiles only in the entry computation and computations it calls -- use "
                            "rng-bit-generator with an explicit state there")
        return counter


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
        if instr.opcode == "rng":
            return instr
        for callee in instr.called_computations():
            found = _first_rng(callee, seen)
            if found is not None:
                return found
    return None


class _Expansion:
    """Builds the replacement of one ``rng`` next to it."""

    def __init__(self, rng: HloInstruction, seed: int, counter: int) -> None:
        assert rng.parent is not None
        self.rng, self.comp, self.seed, self.counter = rng, rng.parent, seed, counter
        self.dims = rng.shape.dimensions
        self.etype = rng.shape.element_type

    def run(self) -> None:
        distribution = str(self.rng.attr("distribution"))
        a, b = self.rng.operands
        if distribution == "rng_uniform" and self.etype.is_float:
            result = self._uniform_float(a, b)
        elif distribution == "rng_uniform" and self.etype.is_integral:
            result = self._uniform_integer(a, b)
        elif distribution == "rng_normal" and self.etype.is_float:
            result = self._normal(a, b)
        else:
            raise ValueError(f"{self.rng.name}: rng {distribution} of {self.rng.shape.to_text()} is not defined "
                             "(uniform takes floats or integers, normal takes floats)")
        name = self.rng.name
        result = replace_instruction(self.rng, self._convert(result, self.etype, "sample"))
        self.comp.remove_instruction(self.rng)  # an rng has a side effect: nothing removes it for us
        result.name = name  # the value keeps its name, so the users' text reads as before

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

    def _bits(self, counter: int) -> HloInstruction:
        """``count`` u64 words of the stream, starting at Philox block ``counter``."""
        state = self._constant(np.array([self.seed, counter], dtype=np.uint64), U64, "state")
        shape = Shape.make_tuple([state.shape, Shape.array(U64, self.dims)])
        generator = self._add("rng-bit-generator", [state], {"algorithm": "rng_philox"}, shape=shape)
        return self._add("get-tuple-element", [generator], {"index": 1}, name="bits")

    def _uniform01(self, counter: int) -> HloInstruction:
        """f64 in [0, 1): the top 53 bits of each u64, times 2^-53 (both steps exact)."""
        bits = self._bits(counter)
        top = self._binary("shift-right-logical", bits, self._broadcast(self._constant(11, U64, "eleven"), "eleven_b"),
                           "top53")
        scale = self._broadcast(self._constant(2.0**-53, F64, "two_pow_minus_53"), "scale")
        return self._binary("multiply", self._convert(top, F64, "top53_f64"), scale, "u")

    # ---- the three formulas -------------------------------------------------------------
    def _uniform_float(self, a: HloInstruction, b: HloInstruction) -> HloInstruction:
        low, high = self._convert(a, F64, "low"), self._convert(b, F64, "high")
        span = self._binary("subtract", high, low, "span")
        scaled = self._binary("multiply", self._broadcast(span, "span_b"), self._uniform01(self.counter), "scaled")
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
        offset = self._binary("remainder", self._bits(self.counter), self._broadcast(span, "span_b"), "offset")
        total = self._binary("add", self._broadcast(a_u64, "a_b"), offset, "sum")
        if wide is S64:
            return self._add("bitcast-convert", [total], name="signed", result_element_type=S64)
        return total

    def _normal(self, a: HloInstruction, b: HloInstruction) -> HloInstruction:
        u1 = self._uniform01(self.counter)
        u2 = self._uniform01((self.counter + _blocks(self.rng) // 2) % 2**64)
        log = self._add("log-plus-one", [self._add("negate", [u1], name="minus_u1")], name="log1p")
        radius = self._add("sqrt", [self._binary("multiply", self._broadcast(
            self._constant(-2.0, F64, "minus_two"), "minus_two_b"), log, "minus_two_log")], name="radius")
        angle = self._binary("multiply", self._broadcast(self._constant(2.0 * np.pi, F64, "two_pi"), "two_pi_b"),
                             u2, "angle")
        normal = self._binary("multiply", radius, self._add("cosine", [angle], name="cos"), "normal")
        mean, deviation = self._convert(a, F64, "mean"), self._convert(b, F64, "deviation")
        spread = self._binary("multiply", self._broadcast(deviation, "deviation_b"), normal, "spread")
        return self._binary("add", self._broadcast(mean, "mean_b"), spread, "normal_sample")
