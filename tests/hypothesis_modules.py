"""A Hypothesis strategy for small, valid, random HLO modules.

``hlo_modules()`` draws a module over one element type (by default any of ``f32``, ``f64``,
``f16``, ``bf16`` and the signed and unsigned integers of 8 to 64 bits) built with :class:`~xla_teach.hlo.builder.XlaBuilder`, so every
op is shape-checked as it is made. It starts from one to three parameters and then applies
random steps to a pool of values, each step one of:

* every elementwise opcode of ``xla_teach/hlo/opcodes.py`` the element type allows: unary and
  binary ops (the second operand: a pool value of the same shape, a broadcast scalar constant
  -- often 0 or 1, to give ``algsimp`` something to do -- a constant array, or a constant
  expression), ``compare`` + ``select``, ``clamp``, ``is-finite``, ``reduce-precision``, and
  round trips through ``convert`` and ``bitcast-convert`` to another element type (a test
  checks the op tables below against the opcode table);
* ``broadcast`` (a new dimension anywhere), ``reshape`` (to a random factorisation),
  ``transpose``, ``slice``, ``concatenate``, ``reverse``, ``pad``, ``iota``;
* ``reduce`` with ``add``, ``maximum`` or ``minimum`` over a random set of dimensions, alone
  or broadcast back over the rows it reduced and combined with its input (softmax-like rows
  for ``row-fusion``);
* ``dot`` against a constant or a new parameter, sometimes through a ``transpose``;
* constants (some computed from constants, for ``constant_folding``), a ``call`` of a small
  computation (for ``call-inliner``), a ``tuple`` read back with ``get-tuple-element``
  (for ``tuple-simplifier``);
* a ``while`` loop over ``(counter, value, invariant[, dead])`` that runs 0 to 3 times and
  updates the value with an op of a loop-invariant expression (for
  ``while-loop-invariant-code-motion``; the zero-trip loops and the dead state element are
  for ``simplify-while-loops``).

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
from xla_teach.hlo.types import PrimitiveType

ELEMENT_TYPES = ("f32", "s32", "f64", "f16", "bf16", "s8", "u8", "s16", "u16", "u32", "s64", "u64")

# Builder method names per element-type class.
FLOAT_UNARY = ("neg", "abs", "exp", "expm1", "log", "log1p", "logistic", "sqrt", "rsqrt", "cbrt", "sin", "cos",
               "tan", "tanh", "erf", "floor", "ceil", "round", "round_nearest_even", "sign")
INT_UNARY = ("neg", "not_", "population_count", "clz")
SIGNED_UNARY = ("abs", "sign")
FLOAT_BINARY = ("add", "sub", "mul", "max", "min", "div", "rem", "pow", "atan2")
INT_BINARY = ("add", "sub", "mul", "max", "min", "div", "rem", "pow", "and_", "or_", "xor", "shift_left",
              "shift_right_arithmetic", "shift_right_logical")
# Elementwise opcodes made by the steps other than "unary"/"binary" (a test checks that these
# plus the name tables above cover every elementwise opcode of the opcode table).
OTHER_ELEMENTWISE_OPCODES = ("bitcast-convert", "clamp", "compare", "convert", "is-finite", "reduce-precision",
                             "select")
# Same-width partners for bitcast-convert, and targets for a convert round trip.
BITCAST_PARTNERS = {"f32": ("s32", "u32"), "f64": ("s64", "u64"), "f16": ("s16", "u16", "bf16"),
                    "bf16": ("s16", "u16", "f16"), "s32": ("f32", "u32"), "s8": ("u8",), "u8": ("s8",),
                    "s16": ("u16", "f16", "bf16"), "u16": ("s16", "bf16"), "u32": ("f32", "s32"),
                    "s64": ("u64", "f64"), "u64": ("s64", "f64")}
CONVERT_TARGETS = ("f32", "f64", "f16", "bf16", "s32", "s8", "u32", "u8", "s64", "pred")
REDUCE_PRECISION_BITS = ((8, 7), (5, 10), (8, 23), (4, 3), (11, 52), (5, 2))
STEP_KINDS = ("unary", "binary", "select", "clamp", "is_finite", "convert", "bitcast_convert",
              "reduce_precision", "broadcast", "reshape", "transpose", "slice", "concatenate", "reverse",
              "pad", "iota", "reduce", "row_reduce", "dot", "constant", "call", "tuple", "while")

dims_st = st.lists(st.integers(1, 4), min_size=0, max_size=3).map(tuple)


class _ModuleDrawer:
    """Builds one module from Hypothesis draws; ``pool`` holds the values made so far."""

    def __init__(self, draw: st.DrawFn, etype: str) -> None:
        self.draw = draw
        self.etype = etype
        self.ptype = PrimitiveType.from_name(etype)
        self.dtype = self.ptype.dtype
        self.is_float = self.ptype.is_float
        self.b = XlaBuilder("random_module")
        self.pool: list[XlaOp] = []
        self.params = 0

    # ---- leaves ---------------------------------------------------------------------
    def parameter(self, dims: tuple[int, ...]) -> XlaOp:
        op = self.b.parameter(self.params, Shape.array(self.etype, dims), f"p{self.params}")
        self.params += 1
        return op

    def literal(self, values: object, etype: str | None = None) -> np.ndarray:
        """``values`` in ``etype`` (default: the module's); negative values wrap for unsigned types."""
        dtype = PrimitiveType.from_name(etype or self.etype).dtype
        return np.asarray(values).astype(np.int64 if dtype.kind in "iu" else np.float64).astype(dtype)

    def scalar_constant(self, etype: str | None = None) -> XlaOp:
        value = self.draw(st.sampled_from([0, 1, 2, -1, 3]))
        return self.b.constant(self.literal(value, etype))

    def array_constant(self, dims: tuple[int, ...]) -> XlaOp:
        values = self.draw(st.lists(st.integers(-3, 3), min_size=math.prod(dims), max_size=math.prod(dims)))
        return self.b.constant(self.literal(values).reshape(dims))

    def same_shape_operand(self, like: XlaOp) -> XlaOp:
        """A second operand for ``like``: a pool value, a broadcast scalar, or a constant."""
        matches = [v for v in self.pool if v.dimensions == like.dimensions]
        choice = self.draw(st.sampled_from(["pool", "scalar", "array", "folded"]))
        if choice == "pool" and matches:
            return self.draw(st.sampled_from(matches))
        if choice == "array" and like.rank > 0:
            return self.array_constant(like.dimensions)
        if choice == "folded" and like.rank > 0:
            return self.folded_constant(like.dimensions)
        return self.b.broadcast(self.scalar_constant(), like.dimensions)

    def folded_constant(self, dims: tuple[int, ...]) -> XlaOp:
        """A constant expression for ``constant_folding`` to evaluate."""
        total = self.b.add(self.array_constant(dims), self.b.broadcast(self.scalar_constant(), dims))
        return self.b.mul(self.array_constant(dims), total)

    # ---- steps ----------------------------------------------------------------------
    def step(self) -> None:
        kind = self.draw(st.sampled_from(STEP_KINDS))
        # Mostly extend one of the two newest values, so the result depends on many steps.
        recent = self.pool[-2:] if self.draw(st.integers(0, 3)) else self.pool
        x = self.draw(st.sampled_from(recent))
        new = getattr(self, f"_{kind}")(x)
        if new is not None:
            self.pool.append(new)

    def unary_names(self) -> tuple[str, ...]:
        if self.is_float:
            return FLOAT_UNARY
        return INT_UNARY + (SIGNED_UNARY if self.ptype.is_signed_int else ())

    def binary(self, x: XlaOp, y: XlaOp, b: XlaBuilder | None = None) -> XlaOp:
        """A random binary op of ``x`` and ``y`` (in either order), built by ``b`` (default: ENTRY's)."""
        name = self.draw(st.sampled_from(FLOAT_BINARY if self.is_float else INT_BINARY))
        return getattr(b or self.b, name)(*((x, y) if self.draw(st.booleans()) else (y, x)))

    def _unary(self, x: XlaOp) -> XlaOp:
        return getattr(self.b, self.draw(st.sampled_from(self.unary_names())))(x)

    def _binary(self, x: XlaOp) -> XlaOp:
        return self.binary(x, self.same_shape_operand(x))

    def _select(self, x: XlaOp) -> XlaOp:
        y = self.same_shape_operand(x)
        direction = self.draw(st.sampled_from(["EQ", "NE", "LT", "LE", "GT", "GE"]))
        comparison = "TOTALORDER" if self.is_float and self.draw(st.booleans()) else None
        return self.b.select(self.b.compare(x, y, direction, comparison), x, y)

    def _clamp(self, x: XlaOp) -> XlaOp:
        if self.draw(st.booleans()):
            low, high = sorted(self.draw(st.lists(st.sampled_from([-2, -1, 0, 1, 3]), min_size=2, max_size=2)))
            if not self.ptype.is_unsigned_int or low >= 0:
                return self.b.clamp(self.b.constant(self.literal(low)), x, self.b.constant(self.literal(high)))
        return self.b.clamp(self.same_shape_operand(x), x, self.same_shape_operand(x))

    def _is_finite(self, x: XlaOp) -> XlaOp:
        """``is-finite`` (floats only) as the predicate of a select, else a ``not`` of ``x``'s compare."""
        y = self.same_shape_operand(x)
        pred = self.b.is_finite(x) if self.is_float else self.b.not_(self.b.compare(x, y, "LT"))
        return self.b.select(pred, x, y)

    def _convert(self, x: XlaOp) -> XlaOp:
        """A round trip through another type (rounding, saturation, wrap-around), sometimes with
        an op in that type on the way."""
        target = self.draw(st.sampled_from([t for t in CONVERT_TARGETS if t != self.etype]))
        there = self.b.convert(x, target)
        if target in ("f32", "f64") and self.draw(st.booleans()):
            there = self.b.add(there, self.b.broadcast(self.scalar_constant(target), x.dimensions))
        return self.b.convert(there, self.etype)

    def _bitcast_convert(self, x: XlaOp) -> XlaOp:
        """A round trip through a same-width type, with a bit-exact op on the way (integer ops on
        a float's bits; a sign-bit op on an integer read as a float)."""
        partner = self.draw(st.sampled_from(BITCAST_PARTNERS[self.etype]))
        there = self.b.bitcast_convert(x, partner)
        if PrimitiveType.from_name(partner).is_float:
            if self.draw(st.booleans()):
                there = self.b.neg(there) if self.draw(st.booleans()) else self.b.abs(there)
        else:
            name = self.draw(st.sampled_from(["xor", "add", "shift_right_logical", "and_"]))
            constant = self.draw(st.sampled_from([1, 3, 0x40, 0x7F]))
            there = getattr(self.b, name)(there, self.b.broadcast(self.b.constant(self.literal(constant, partner)),
                                                                  x.dimensions))
        return self.b.bitcast_convert(there, self.etype)

    def _reduce_precision(self, x: XlaOp) -> XlaOp | None:
        if not self.is_float:
            return None
        exponent, mantissa = self.draw(st.sampled_from(REDUCE_PRECISION_BITS))
        return self.b.reduce_precision(x, exponent, mantissa)

    def _constant(self, x: XlaOp) -> XlaOp:
        """A constant of ``x``'s shape, sometimes computed from constants (to be folded)."""
        kind = self.draw(st.sampled_from(["broadcast", "array", "folded"]))
        if kind == "broadcast" or x.rank == 0:
            return self.b.broadcast(self.scalar_constant(), x.dimensions)
        if kind == "array":
            return self.array_constant(x.dimensions)
        return self.folded_constant(x.dimensions)

    def _call(self, x: XlaOp) -> XlaOp:
        """``call`` of a small computation: an op of its parameter and a constant."""
        sub = self.b.create_sub_builder("callee")
        p = sub.parameter(0, x.shape, "arg")
        one = sub.broadcast(sub.constant(self.literal(1)), x.dimensions)
        body = sub.build_computation(sub.add(sub.not_(p) if not self.is_float else sub.neg(p), one))
        return self.b.call(body, [x])

    def _tuple(self, x: XlaOp) -> XlaOp:
        """``get-tuple-element`` of a ``tuple`` (the other element is any pool value)."""
        other = self.draw(st.sampled_from(self.pool))
        first = self.draw(st.booleans())
        t = self.b.tuple([x, other] if first else [other, x])
        return self.b.get_tuple_element(t, 0 if first else 1)

    def _while(self, x: XlaOp) -> XlaOp:
        """``while i < trips: value = op(value, f(invariant))`` with ``f`` loop-invariant."""
        trips = self.draw(st.integers(0, 3))
        invariant = self.same_shape_operand(x)
        dead = self.draw(st.booleans())
        init = self.b.tuple([self.b.constant(np.int32(0)), x, invariant] + ([x] if dead else []))
        state_shape = init.shape

        cond = self.b.create_sub_builder("condition")
        s = cond.parameter(0, state_shape, "state")
        condition = cond.build_computation(cond.lt(cond.get_tuple_element(s, 0), cond.constant(np.int32(trips))))

        body = self.b.create_sub_builder("body")
        s = body.parameter(0, state_shape, "state")
        i, value, inv = (body.get_tuple_element(s, k) for k in range(3))
        if self.draw(st.booleans()):  # an invariant expression for the code motion to hoist
            inv = body.mul(inv, body.broadcast(body.constant(self.literal(2)), x.dimensions))
        out = [body.add(i, body.constant(np.int32(1))), self.binary(value, inv, body),
               body.get_tuple_element(s, 2)]
        if dead:
            out.append(body.add(body.get_tuple_element(s, 3), value))
        loop = self.b.while_loop(condition, body.build_computation(body.tuple(out)), init)
        return self.b.get_tuple_element(loop, 1)

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

    def _pad(self, x: XlaOp) -> XlaOp | None:
        """Edge padding (sometimes negative, i.e. cropping) and interior padding."""
        if x.rank == 0:
            return None
        config = []
        for size in x.dimensions:
            low = self.draw(st.integers(-1 if size > 1 else 0, 2))
            high = self.draw(st.integers(-1 if size + low > 1 else 0, 2))
            config.append((low, high, self.draw(st.sampled_from([0, 0, 1]))))
        return self.b.pad(x, self.scalar_constant(), config)

    def _iota(self, x: XlaOp) -> XlaOp | None:
        if x.rank == 0:
            return None
        return self.b.iota(x.shape, self.draw(st.integers(0, x.rank - 1)))

    def reduction(self, x: XlaOp, dims: list[int]) -> XlaOp:
        """``reduce`` of ``x`` over ``dims`` with a random reducer and its identity."""
        info = None if self.is_float else np.iinfo(self.dtype)
        reducer, init = self.draw(st.sampled_from([
            ("add", 0),
            ("maximum", -np.inf if info is None else info.min),
            ("minimum", np.inf if info is None else info.max)]))
        init_op = self.b.constant(np.asarray(init).astype(self.dtype))
        return self.b.reduce(x, init_op, self.b.create_scalar_computation(reducer, self.etype), dims)

    def _reduce(self, x: XlaOp) -> XlaOp | None:
        if x.rank == 0:
            return None
        dims = sorted(self.draw(st.lists(st.integers(0, x.rank - 1), min_size=1, max_size=x.rank, unique=True)))
        return self.reduction(x, dims)

    def _row_reduce(self, x: XlaOp) -> XlaOp | None:
        """``op(x, broadcast(reduce(x over its minor dims)))``: the softmax / layer-norm shape
        that ``row-fusion`` looks for, sometimes twice in a row."""
        if x.rank == 0:
            return None
        first = self.draw(st.integers(max(x.rank - 2, 0), x.rank - 1))
        kept = list(range(first))
        for _ in range(self.draw(st.integers(1, 2))):
            row = self.b.broadcast_in_dim(self.reduction(x, list(range(first, x.rank))), x.dimensions, kept)
            x = self.binary(x, row)
        return x

    def _dot(self, x: XlaOp) -> XlaOp | None:
        if x.rank not in (1, 2):
            return None
        if x.rank == 2 and self.draw(st.booleans()):
            x = self.b.transpose(x, (1, 0))  # for transpose-folding
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
def hlo_modules(draw: st.DrawFn, element_types: tuple[str, ...] = ELEMENT_TYPES) -> HloModule:
    """A small valid module (see the module docstring)."""
    etype = draw(st.sampled_from(element_types))
    return _ModuleDrawer(draw, etype).build()
