"""A Hypothesis strategy for small, valid, random HLO modules.

``hlo_modules()`` draws a module over one element type (``f32`` or ``s32``) built with
:class:`~xla_teach.hlo.builder.XlaBuilder`, so every op is shape-checked as it is made.
It starts from one to three parameters and then applies random steps to a pool of
values, each step one of:

* unary and binary elementwise ops (the second operand: a pool value of the same shape,
  a broadcast scalar constant -- often 0 or 1, to give ``algsimp`` something to do -- or a
  constant array), ``compare`` + ``select``;
* ``broadcast`` (a new dimension anywhere), ``reshape`` (to a random factorisation),
  ``transpose``, ``slice``, ``concatenate``, ``reverse``;
* ``reduce`` with ``add`` or ``maximum`` over a random set of dimensions;
* ``dot`` against a constant or a new parameter, sometimes through a ``transpose``;
* constants (some computed from constants, for ``constant_folding``) and a ``call`` of a
  small computation (for ``call-inliner``).

The ENTRY root is the last value, or a tuple of the last two. Values that nothing ends
up using are dead code, which ``dce`` should remove. Failing examples shrink to short
step lists, and ``module.to_text()`` of a failing example reads like a hand-written test.
"""

from __future__ import annotations

import math

import numpy as np
from hypothesis import strategies as st

from xla_teach.hlo.builder import XlaBuilder, XlaOp
from xla_teach.hlo.ir import HloModule
from xla_teach.hlo.shape import Shape

FLOAT_UNARY = ("neg", "abs", "exp", "expm1", "log", "log1p", "logistic", "sqrt", "rsqrt", "cbrt", "sin", "cos",
               "tan", "tanh", "floor", "ceil", "round", "round_nearest_even", "sign")
INT_UNARY = ("neg", "abs", "not_", "sign", "population_count", "clz")
FLOAT_BINARY = ("add", "sub", "mul", "max", "min", "div", "rem", "pow", "atan2")
INT_BINARY = ("add", "sub", "mul", "max", "min", "div", "rem", "pow", "and_", "or_", "xor", "shift_left",
              "shift_right_arithmetic", "shift_right_logical")
STEP_KINDS = ("unary", "binary", "select", "broadcast", "reshape", "transpose", "slice", "concatenate", "reverse",
              "reduce", "dot", "constant", "call")

dims_st = st.lists(st.integers(1, 4), min_size=0, max_size=3).map(tuple)


class _ModuleDrawer:
    """Builds one module from Hypothesis draws; ``pool`` holds the values made so far."""

    def __init__(self, draw: st.DrawFn, etype: str) -> None:
        self.draw = draw
        self.etype = etype
        self.dtype = np.dtype(np.float32 if etype == "f32" else np.int32)
        self.b = XlaBuilder("random_module")
        self.pool: list[XlaOp] = []
        self.params = 0

    # ---- leaves ---------------------------------------------------------------------
    def parameter(self, dims: tuple[int, ...]) -> XlaOp:
        op = self.b.parameter(self.params, Shape.array(self.etype, dims), f"p{self.params}")
        self.params += 1
        return op

    def scalar_constant(self) -> XlaOp:
        value = self.draw(st.sampled_from([0, 1, 2, -1, 3]))
        return self.b.constant(np.asarray(value, self.dtype))

    def array_constant(self, dims: tuple[int, ...]) -> XlaOp:
        values = self.draw(st.lists(st.integers(-3, 3), min_size=math.prod(dims), max_size=math.prod(dims)))
        return self.b.constant(np.asarray(values, self.dtype).reshape(dims))

    def same_shape_operand(self, like: XlaOp) -> XlaOp:
        """A second operand for ``like``: a pool value, a broadcast scalar, or a constant."""
        matches = [v for v in self.pool if v.dimensions == like.dimensions]
        choice = self.draw(st.sampled_from(["pool", "scalar", "array"]))
        if choice == "pool" and matches:
            return self.draw(st.sampled_from(matches))
        if choice == "array" and like.rank > 0:
            return self.array_constant(like.dimensions)
        return self.b.broadcast(self.scalar_constant(), like.dimensions)

    # ---- steps ----------------------------------------------------------------------
    def step(self) -> None:
        kind = self.draw(st.sampled_from(STEP_KINDS))
        # Mostly extend one of the two newest values, so the result depends on many steps.
        recent = self.pool[-2:] if self.draw(st.integers(0, 3)) else self.pool
        x = self.draw(st.sampled_from(recent))
        new = getattr(self, f"_{kind}")(x)
        if new is not None:
            self.pool.append(new)

    def _unary(self, x: XlaOp) -> XlaOp:
        name = self.draw(st.sampled_from(FLOAT_UNARY if self.etype == "f32" else INT_UNARY))
        return getattr(self.b, name)(x)

    def _binary(self, x: XlaOp) -> XlaOp:
        name = self.draw(st.sampled_from(FLOAT_BINARY if self.etype == "f32" else INT_BINARY))
        y = self.same_shape_operand(x)
        return getattr(self.b, name)(*((x, y) if self.draw(st.booleans()) else (y, x)))

    def _select(self, x: XlaOp) -> XlaOp:
        y = self.same_shape_operand(x)
        direction = self.draw(st.sampled_from(["EQ", "NE", "LT", "LE", "GT", "GE"]))
        return self.b.select(self.b.compare(x, y, direction), x, y)

    def _constant(self, x: XlaOp) -> XlaOp:
        """A constant of ``x``'s shape, sometimes computed from constants (to be folded)."""
        kind = self.draw(st.sampled_from(["broadcast", "array", "folded"]))
        if kind == "broadcast" or x.rank == 0:
            return self.b.broadcast(self.scalar_constant(), x.dimensions)
        c = self.array_constant(x.dimensions)
        if kind == "array":
            return c
        return self.b.mul(c, self.b.add(self.array_constant(x.dimensions), self.b.broadcast(
            self.scalar_constant(), x.dimensions)))

    def _call(self, x: XlaOp) -> XlaOp:
        """``call`` of a small computation: an op of its parameter and a constant."""
        sub = self.b.create_sub_builder("callee")
        p = sub.parameter(0, x.shape, "arg")
        one = sub.broadcast(sub.constant(np.asarray(1, self.dtype)), x.dimensions)
        body = sub.build_computation(sub.add(sub.neg(p), one))
        return self.b.call(body, [x])

    def _broadcast(self, x: XlaOp) -> XlaOp | None:
        if x.rank >= 3:
            return None
        size = self.draw(st.integers(1, 3))
        at = self.draw(st.integers(0, x.rank))
        out = list(x.dimensions)
        out.insert(at, size)
        kept = [d for d in range(len(out)) if d != at]
        return self.b.broadcast_in_dim(x, out, kept)

    def _reshape(self, x: XlaOp) -> XlaOp:
        n = math.prod(x.dimensions)
        dims: list[int] = []
        rest = n
        for _ in range(self.draw(st.integers(0, 2))):
            divisors = [d for d in range(1, rest + 1) if rest % d == 0]
            d = self.draw(st.sampled_from(divisors))
            dims.append(d)
            rest //= d
        dims.append(rest)
        return self.b.reshape(x, dims)

    def _transpose(self, x: XlaOp) -> XlaOp | None:
        if x.rank < 2:
            return None
        perm = self.draw(st.permutations(range(x.rank)))
        return self.b.transpose(x, perm)

    def _slice(self, x: XlaOp) -> XlaOp | None:
        if x.rank == 0:
            return None
        starts, limits, strides = [], [], []
        for size in x.dimensions:
            start = self.draw(st.integers(0, size - 1))
            limit = self.draw(st.integers(start + 1, size))
            starts.append(start)
            limits.append(limit)
            strides.append(self.draw(st.sampled_from([1, 1, 2])))
        return self.b.slice(x, starts, limits, strides)

    def _concatenate(self, x: XlaOp) -> XlaOp | None:
        if x.rank == 0:
            return None
        dim = self.draw(st.integers(0, x.rank - 1))
        partners = [v for v in self.pool if v.rank == x.rank and all(
            a == b for i, (a, b) in enumerate(zip(v.dimensions, x.dimensions, strict=True)) if i != dim)]
        other = self.draw(st.sampled_from(partners))  # x itself is always a partner
        return self.b.concat_in_dim([x, other], dim)

    def _reverse(self, x: XlaOp) -> XlaOp | None:
        if x.rank == 0:
            return None
        dims = self.draw(st.lists(st.integers(0, x.rank - 1), min_size=1, max_size=x.rank, unique=True))
        return self.b.rev(x, dims)

    def _reduce(self, x: XlaOp) -> XlaOp | None:
        if x.rank == 0:
            return None
        dims = sorted(self.draw(st.lists(st.integers(0, x.rank - 1), min_size=1, max_size=x.rank, unique=True)))
        if self.draw(st.booleans()):
            reducer, init = self.b.create_scalar_computation("add", self.etype), 0
        else:
            lowest = -np.inf if self.etype == "f32" else np.iinfo(np.int32).min
            reducer, init = self.b.create_scalar_computation("maximum", self.etype), lowest
        return self.b.reduce(x, self.b.constant(np.asarray(init, self.dtype)), reducer, dims)

    def _dot(self, x: XlaOp) -> XlaOp | None:
        if x.rank not in (1, 2):
            return None
        k = x.dimensions[-1]
        n = self.draw(st.integers(1, 3))
        rhs_kind = self.draw(st.sampled_from(["constant", "parameter", "transposed"]))
        if rhs_kind == "constant":
            rhs = self.array_constant((k, n))
        elif rhs_kind == "parameter":
            rhs = self.parameter((k, n))
        else:
            rhs = self.b.transpose(self.parameter((n, k)), (1, 0))
        return self.b.dot(x, rhs)

    def build(self) -> HloModule:
        for _ in range(self.draw(st.integers(1, 3))):
            self.pool.append(self.parameter(self.draw(dims_st)))
        for _ in range(self.draw(st.integers(1, 12))):
            self.step()
        last = self.pool[-1]
        if len(self.pool) > 1 and self.draw(st.booleans()):
            return self.b.build(self.b.tuple([self.pool[-2], last]))
        return self.b.build(last)


@st.composite
def hlo_modules(draw: st.DrawFn, element_types: tuple[str, ...] = ("f32", "s32")) -> HloModule:
    """A small valid module (see the module docstring)."""
    etype = draw(st.sampled_from(element_types))
    return _ModuleDrawer(draw, etype).build()
