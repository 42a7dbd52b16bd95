"""How far may a correct compiler's result be from the exact one? Forward rounding-error bounds.

Two correct implementations of ``dot(a, b)`` in f32 need not agree bit for bit: one sums the
``k`` products left to right, another in blocks of 16 with fused multiply-adds, as OpenBLAS
does -- and which blocks it uses depends on the CPU it runs on. What they share is a *bound*:
the classical result of floating-point error analysis says every order of summation gives

    |computed - exact| <= gamma_k * (|A| @ |B|),    gamma_k = k u / (1 - k u)

element by element, where ``u`` is the unit roundoff of the type (2^-24 for f32) and ``|A|``
is ``A`` with every element made positive. The bound follows the *terms*, not the result: a
dot whose products cancel to -0.0432 from terms around +-30 may be off by far more than
``2e-5 * 0.0432``. A test tolerance written as an ``rtol`` of the result is therefore wrong
on some machine; a tolerance from the terms is right on all of them.

:func:`error_bounds` carries that argument through a whole module (a *running error
analysis*). It evaluates the module once more in f64 -- every f32/f16/bf16 array widened, so
that its values are nearly exact -- and beside each value it keeps ``E``, a bound on how far
any correct implementation of the *original* precision may be from it:

* elementwise ops (``add``, ``exp``, ``compare``, ``select``...): the operands' errors carried
  through the op -- evaluated at the corners ``x +- E`` of each operand's interval (sine and
  cosine, which are not monotonic, move by at most ``min(E, 2)``; tan by anything once ``E``
  reaches its poles' spacing) -- plus the
  op's own rounding, ``2u |result|`` for the basic operations (room for a rewrite such as
  ``x / c -> x * (1/c)``), ``8u |result|`` for library functions (exp, tanh, ...) and none for
  ops that pick or flip exactly (select, maximum, negate, floor...). A
  comparison whose operands' intervals overlap may go either way: its bound is 1 ("may flip"),
  and a ``select`` on it may take either side;
* ``dot`` and ``convolution``: ``gamma_k (|A| op |B|) + |A| op E_B + E_A op |B| + E_A op E_B``;
* ``reduce`` and ``reduce-window`` with ``add``: ``gamma_n sum|x| + sum E``; with ``max``/``min``:
  the largest ``E`` of the window (a max moves no further than its operands);
* data movement (``reshape``, ``transpose``, ``slice``, ``gather``, ``pad``...): the same op
  applied to the bounds;
* ``call``, ``fusion``, ``map``, ``while`` and ``conditional`` are followed into their computations;
  anything else (a ``sort``, a reducer of several ops) gets an unknown bound (NaN), and a
  module with ops that mean something else in f64 (``bitcast-convert``, random numbers,
  ``reduce-precision``, custom calls) is refused with :class:`BoundsUnavailable`.

Example::

    from xla_teach.hlo.evaluator.error_bounds import error_bounds
    bounds = error_bounds(module, args)          # one per leaf of the result
    ok = np.abs(got - bounds[0].value) <= bounds[0].bound

The tests compare every backend with the interpreter this way (``tests/backends``), so the
suite passes on any CPU whatever kernels its BLAS picks. ``flush_denormals`` results differ
from IEEE ones by at most the smallest normal number per operation, which each bound includes.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from xla_teach.hlo.evaluator.arguments import check_arguments
from xla_teach.hlo.evaluator.core import HloEvaluator, execution_order
from xla_teach.hlo.evaluator.registry import Token
from xla_teach.hlo.ir import HloComputation, HloInstruction, HloModule
from xla_teach.hlo.opcodes import TRANSCENDENTAL_OPCODES, is_elementwise
from xla_teach.hlo.shape import Shape
from xla_teach.hlo.types import PrimitiveType

WIDENED = (PrimitiveType.F16, PrimitiveType.BF16, PrimitiveType.F32)
# Ops whose f64 evaluation would not mean what the original computes.
REFUSED = frozenset({"bitcast-convert", "reduce-precision", "rng", "rng-bit-generator", "rng-get-and-update-state",
                     "custom-call"})
# Computed by a library's approximation (a few ulps); sqrt is correctly rounded, as IEEE asks.
LIBRARY_FUNCTIONS = TRANSCENDENTAL_OPCODES - {"sqrt"}
BASIC_ULPS, LIBRARY_ULPS = 2.0, 8.0
# Elementwise ops whose result is one of their operands or exactly representable: no rounding.
EXACT_ELEMENTWISE = frozenset({"select", "clamp", "maximum", "minimum", "abs", "negate", "copy", "sign", "floor",
                               "ceil", "round-nearest-afz", "round-nearest-even", "compare", "is-finite", "not",
                               "and", "or", "xor"})
# Ops that only move or pick elements: their error is the same op applied to the errors, with
# the operands listed here read as positions (their values, not their errors).
MOVES_DATA = {
    "broadcast": (), "reshape": (), "transpose": (), "slice": (), "concatenate": (), "reverse": (), "copy": (),
    "bitcast": (), "pad": (), "dynamic-slice": "index operands", "dynamic-update-slice": "index operands",
    "gather": (1,),
}
EXACT = frozenset({"constant", "iota", "parameter", "partition-id", "replica-id", "after-all"})


class BoundsUnavailable(ValueError):
    """The module uses an op whose f64 evaluation would not stand for the original."""


@dataclass
class Bounded:
    """One result leaf: the f64 ``value`` and the bound ``bound`` (same shape, float64) on how
    far a correct implementation in the original precision may be from it. For an integer
    result the bound is how far it may move; for ``pred``, 1 where it may flip. NaN: unknown."""

    value: np.ndarray
    bound: np.ndarray
    element_type: PrimitiveType


def error_bounds(module: HloModule, args: Sequence[Any]) -> list[Bounded]:
    """The f64 values of ``module``'s result leaves with their rounding-error bounds."""
    wide, original = widen_module(module)
    entry = wide.entry
    analysis = _Analysis(original)
    values = check_arguments(entry, [_widen_value(np.asarray(a)) for a in args])
    inputs = [(v, _zero_bound(v)) for v in values]
    with np.errstate(all="ignore"):
        value, bound = analysis.computation(entry, inputs)
    return [Bounded(v, b, t) for (v, b), t in zip(_leaves(value, bound), _leaf_types(module.entry.root.shape),
                                                    strict=True)]


# ---- the widened module -----------------------------------------------------------------
def widen_module(module: HloModule) -> tuple[HloModule, dict[int, Shape]]:
    """A copy of ``module`` with every f16/bf16/f32 array made f64, and for each of its
    instructions (by ``unique_id``) the shape it had."""
    for comp in module.computations:
        for instr in comp.instructions:
            if instr.opcode in REFUSED:
                raise BoundsUnavailable(f"{instr.name}: {instr.opcode} has no f64 equivalent")
            if instr.opcode == "bitcast" and instr.operand(0).shape.element_type is not instr.shape.element_type:
                # XLA's optimized HLO reinterprets f32 bits as s32 this way (in sort comparators)
                raise BoundsUnavailable(f"{instr.name}: a bitcast between element types has no f64 equivalent")
    wide = module.clone()
    original: dict[int, Shape] = {}
    for comp in wide.computations:
        for instr in comp.instructions:
            original[instr.unique_id] = instr.shape
            instr.shape = _widen_shape(instr.shape)
            if instr.opcode == "constant":
                instr.attrs["literal"] = _widen_literal(instr.attrs["literal"])
    return wide, original


def _widen_shape(shape: Shape) -> Shape:
    if shape.is_tuple:
        return Shape.make_tuple([_widen_shape(s) for s in shape.tuple_shapes])
    if shape.is_array and shape.element_type in WIDENED:
        return shape.with_element_type(PrimitiveType.F64)
    return shape


def _widen_literal(literal: Any) -> Any:
    if isinstance(literal, tuple):
        return tuple(_widen_literal(x) for x in literal)
    return _widen_value(literal)


def _widen_value(x: np.ndarray) -> np.ndarray:
    if x.dtype.kind == "f" or x.dtype.name == "bfloat16":
        return x.astype(np.float64)
    return x


def _leaf_types(shape: Shape) -> list[PrimitiveType]:
    if shape.is_tuple:
        return [t for s in shape.tuple_shapes for t in _leaf_types(s)]
    return [shape.element_type]


# ---- values with bounds -----------------------------------------------------------------
Pair = tuple[Any, Any]  # (value, bound), both nested alike: tuples of arrays, or a token and None


def _zero_bound(value: Any) -> Any:
    if isinstance(value, tuple):
        return tuple(_zero_bound(v) for v in value)
    if isinstance(value, Token):
        return None
    return np.zeros(np.shape(value))


def _unknown(value: Any) -> Any:
    if isinstance(value, tuple):
        return tuple(_unknown(v) for v in value)
    if isinstance(value, Token):
        return None
    return np.full(np.shape(value), np.nan)


def _leaves(value: Any, bound: Any) -> list[tuple[np.ndarray, np.ndarray]]:
    if isinstance(value, tuple):
        return [leaf for v, b in zip(value, bound, strict=True) for leaf in _leaves(v, b)]
    return [(value, bound)]


_ROUNDOFF = {PrimitiveType.F16: 2.0**-11, PrimitiveType.BF16: 2.0**-8, PrimitiveType.F32: 2.0**-24,
             PrimitiveType.F64: 2.0**-53}
_TINY = {PrimitiveType.F16: 2.0**-14, PrimitiveType.BF16: 2.0**-126, PrimitiveType.F32: 2.0**-126,
         PrimitiveType.F64: 2.0**-1022}


def _gamma(n: int, u: float) -> float:
    """``n u / (1 - n u)``: the relative error of a sum of ``n`` terms in any order."""
    nu = n * u
    return nu / (1 - nu) if nu < 0.5 else math.inf


def _as_operand(bound: np.ndarray, like: np.ndarray) -> np.ndarray:
    """A bound in the dtype of the value it bounds (to run an op on bounds)."""
    if like.dtype == np.bool_:
        return bound > 0
    if like.dtype.kind in "iu":
        return np.minimum(np.nan_to_num(bound, nan=0, posinf=0), np.iinfo(like.dtype).max).astype(like.dtype)
    return bound.astype(like.dtype)


def _difference(moved: np.ndarray, base: np.ndarray) -> np.ndarray:
    """``|moved - base|`` as float64, 0 where both are the same infinity or both NaN, 1 where a
    pred differs, inf where only one of them is NaN."""
    if base.dtype == np.bool_:
        return (moved != base).astype(np.float64)
    a, b = moved.astype(np.float64), base.astype(np.float64)
    same = (a == b) | (np.isnan(a) & np.isnan(b))
    return np.where(same, 0.0, np.where(np.isnan(a) | np.isnan(b), np.inf, np.abs(a - b)))


class _Analysis:
    """Walks the widened module, computing each instruction's (value, bound)."""

    def __init__(self, original: dict[int, Shape]) -> None:
        self.original = original
        self.ev = HloEvaluator(flush_denormals=False)

    # ---- computations ---------------------------------------------------------------------
    def computation(self, comp: HloComputation, args: Sequence[Pair]) -> Pair:
        env: dict[int, Pair] = {}
        for instr in execution_order(comp):
            if instr.opcode == "parameter":
                env[instr.unique_id] = args[instr.parameter_number]
            else:
                env[instr.unique_id] = self.instruction(instr, [env[op.unique_id] for op in instr.operands])
        return env[comp.root.unique_id]

    def instruction(self, instr: HloInstruction, operands: list[Pair]) -> Pair:
        op = instr.opcode
        values = [v for v, _ in operands]
        if op in ("call", "fusion", "async-start"):
            return self.computation(instr.called_computations()[0], operands)
        if op == "tuple":
            return tuple(values), tuple(b for _, b in operands)
        if op == "get-tuple-element":
            value, bound = operands[0]
            return value[instr.tuple_index], bound[instr.tuple_index]
        if op == "while":
            return self._while(instr, operands[0])
        if op == "conditional":
            return self._conditional(instr, operands)
        if op == "map":
            return self._map(instr, operands)
        value = self.ev.execute(instr, values)
        return value, self._bound(instr, value, operands)

    def _while(self, instr: HloInstruction, state: Pair) -> Pair:
        cond, body = instr.attrs["condition"], instr.attrs["body"]
        while True:
            go, go_bound = self.computation(cond, [state])
            if not bool(go):
                return state
            if np.any(go_bound != 0):  # the loop might stop elsewhere: nothing after it is known
                return state[0], _unknown(state[0])
            state = self.computation(body, [state])

    def _conditional(self, instr: HloInstruction, operands: list[Pair]) -> Pair:
        selector, selector_bound = operands[0]
        branches = instr.branch_computations()
        if selector.dtype == np.bool_:
            index = 0 if bool(selector) else 1
        else:
            index = int(selector) if 0 <= int(selector) < len(branches) else len(branches) - 1
        value, bound = self.computation(branches[index], [operands[1 + index]])
        if np.any(selector_bound != 0):  # another branch might run
            return value, _unknown(value)
        return value, bound

    def _map(self, instr: HloInstruction, operands: list[Pair]) -> Pair:
        """The scalar computation followed element by element (its own roundings count)."""
        shape = np.shape(operands[0][0])
        value = np.empty(shape, instr.shape.dtype)
        bound = np.empty(shape)
        for index in np.ndindex(*shape):
            element = index + (Ellipsis,)
            v, b = self.computation(instr.to_apply, [(x[element], e[element]) for x, e in operands])
            value[index], bound[index] = v, b
        return value, bound

    # ---- one instruction -------------------------------------------------------------------
    def _bound(self, instr: HloInstruction, value: Any, operands: list[Pair]) -> Any:
        op = instr.opcode
        bounds = [b for _, b in operands]
        if op in EXACT:
            return _zero_bound(value)
        if all(b is None or (not isinstance(b, tuple) and not np.any(b != 0)) for b in bounds) and not (
                self._rounds(instr)):
            return _zero_bound(value)
        if is_elementwise(op):
            return self._elementwise(instr, value, operands)
        if op in MOVES_DATA:
            return self._moved(instr, operands)
        if op in ("dot", "convolution"):
            return self._contraction(instr, value, operands)
        if op in ("reduce", "reduce-window"):
            return self._reduction(instr, value, operands)
        return _unknown(value)

    def _rounds(self, instr: HloInstruction) -> bool:
        """True if the instruction's result in the original precision is rounded."""
        shape = self.original[instr.unique_id]
        return any(t in _ROUNDOFF for t in _leaf_types(shape)) and instr.opcode not in MOVES_DATA

    def _own_rounding(self, instr: HloInstruction, value: np.ndarray, ulps: float) -> np.ndarray | float:
        ptype = self.original[instr.unique_id].element_type
        if ptype not in _ROUNDOFF or not isinstance(value, np.ndarray) or value.dtype.kind != "f":
            return 0.0
        if ulps == 0:
            return 0.0
        magnitude = np.abs(np.where(np.isfinite(value), value, 0.0))
        return ulps * _ROUNDOFF[ptype] * magnitude + _TINY[ptype]

    def _elementwise(self, instr: HloInstruction, value: np.ndarray, operands: list[Pair]) -> np.ndarray:
        """The op at the corners of its operands' intervals, plus its own rounding."""
        moving = [i for i, (_, b) in enumerate(operands) if b is not None and np.any(b != 0)]
        ulps = LIBRARY_ULPS if instr.opcode in LIBRARY_FUNCTIONS else BASIC_ULPS
        if instr.opcode in EXACT_ELEMENTWISE:
            ulps = 0.0
        if not moving:
            return np.zeros(np.shape(value)) + self._own_rounding(instr, value, ulps)
        if any(np.any(np.isnan(operands[i][1])) for i in moving):
            nan_mask = np.zeros(np.shape(value), bool)
            for i in moving:
                nan_mask |= np.broadcast_to(np.isnan(operands[i][1]), np.shape(value))
        else:
            nan_mask = None
        spread = np.zeros(np.shape(value))
        if instr.opcode in ("sine", "cosine"):
            # Not monotonic, so the corners may both land near the value; but 1-Lipschitz and in [-1, 1].
            spread = np.minimum(np.nan_to_num(operands[0][1], nan=0.0), 2.0)
            moving = []
        if instr.opcode == "tan":  # an interval as wide as the poles' spacing may hold one: anything goes
            spread = np.where(np.nan_to_num(operands[0][1], nan=0.0) > 0.5, np.inf, 0.0)
        if len(moving) > 3:  # too many corners: move every operand up, then every one down
            corners: Any = [(1,) * len(moving), (-1,) * len(moving)]
        else:
            corners = itertools.product((1, -1), repeat=len(moving))
        for signs in corners if moving else ():
            moved = [v for v, _ in operands]
            for sign, i in zip(signs, moving, strict=True):
                v, b = operands[i]
                if v.dtype == np.bool_:
                    moved[i] = v ^ (np.nan_to_num(b, nan=1.0) > 0)
                else:
                    step = _as_operand(np.nan_to_num(b, nan=0.0), v)
                    moved[i] = v + step if sign > 0 else v - step
            spread = np.maximum(spread, _difference(self.ev.execute(instr, moved), value))
        bound = spread + self._own_rounding(instr, value, ulps)
        if nan_mask is not None:
            bound = np.where(nan_mask, np.nan, bound)
        return bound

    def _moved(self, instr: HloInstruction, operands: list[Pair]) -> np.ndarray:
        """The same op applied to the bounds (positions read from the values)."""
        positions = MOVES_DATA[instr.opcode]
        if positions == "index operands":
            first_index = 1 if instr.opcode == "dynamic-slice" else 2
            positions = tuple(range(first_index, len(operands)))
        args = []
        for i, (v, b) in enumerate(operands):
            if i in positions:
                if np.any(b != 0):  # the position itself may move
                    return _unknown(self.ev.execute(instr, [x for x, _ in operands]))
                args.append(v)
            else:
                args.append(_as_operand(b, v))
        return self.ev.execute(instr, args).astype(np.float64)

    def _terms(self, instr: HloInstruction) -> int:
        """How many products each element of a dot or convolution adds up."""
        if instr.opcode == "dot":
            lhs = instr.operand(0).shape
            return math.prod(lhs.dimensions[d] for d in instr.attr("lhs_contracting_dims"))
        dnums = instr.attr("dim_labels")
        kernel = instr.operand(1).shape
        return math.prod(kernel.dimensions[d] for d in dnums.kernel_spatial_dimensions) * kernel.dimensions[
            dnums.kernel_input_feature_dimension]

    def _contraction(self, instr: HloInstruction, value: np.ndarray, operands: list[Pair]) -> np.ndarray:
        """``gamma_k (|A| op |B|) + |A| op E_B + E_A op |B| + E_A op E_B`` (and the final rounding of
        an f16/bf16 result, whose sums are kept in f32)."""
        (a, ea), (b, eb) = operands
        if value.dtype.kind != "f":
            return _zero_bound(value) if not (np.any(ea != 0) or np.any(eb != 0)) else _unknown(value)

        def run(x: np.ndarray, y: np.ndarray) -> np.ndarray:
            return np.asarray(self.ev.execute(instr, [x.astype(a.dtype), y.astype(b.dtype)]), np.float64)

        ptype = self.original[instr.unique_id].element_type
        accumulation = ptype if ptype in (PrimitiveType.F32, PrimitiveType.F64) else PrimitiveType.F32
        k = self._terms(instr)
        ea0, eb0 = np.nan_to_num(ea, nan=0.0), np.nan_to_num(eb, nan=0.0)
        terms = run(np.abs(a), np.abs(b))
        bound = _gamma(k, _ROUNDOFF.get(accumulation, 2.0**-24)) * terms + k * _TINY[accumulation]
        if np.any(eb0 != 0):
            bound = bound + run(np.abs(a), eb0)
        if np.any(ea0 != 0):
            bound = bound + run(ea0, np.abs(b)) + (run(ea0, eb0) if np.any(eb0 != 0) else 0.0)
        if accumulation is not ptype:
            bound = bound + self._own_rounding(instr, value, 1.0)
        unknown_terms = np.isnan(run(np.where(np.isnan(ea), np.nan, 0.0), np.where(np.isnan(eb), np.nan, 0.0)))
        return np.where(unknown_terms, np.nan, bound)

    def _reduction(self, instr: HloInstruction, value: Any, operands: list[Pair]) -> Any:
        """``reduce``/``reduce-window`` with one ``add``, ``maximum`` or ``minimum``."""
        pattern = self.ev.scalar_pattern(instr.to_apply)
        if isinstance(value, tuple) or pattern is None or pattern.opcode not in ("add", "maximum", "minimum"):
            return _unknown(value)
        (x, ex), (init, einit) = operands
        zero = np.zeros((), init.dtype)
        bounds = np.asarray(self.ev.execute(instr, [_as_operand(ex, x), zero]), np.float64)
        bounds = bounds + float(einit)
        if pattern.opcode != "add" or value.dtype.kind != "f":
            return bounds if value.dtype.kind == "f" or not np.any(ex != 0) else _unknown(value)
        terms = np.asarray(self.ev.execute(instr, [np.abs(x), np.abs(init)]), np.float64)
        n = max(1, x.size // max(1, value.size)) + 1
        if instr.opcode == "reduce-window":
            n = math.prod(d.size for d in instr.attr("window").dimensions) + 1
        ptype = self.original[instr.unique_id].element_type
        u = _ROUNDOFF.get(ptype, 2.0**-24)
        return bounds + _gamma(n, u) * terms + n * _TINY.get(ptype, 0.0)


# ---- checking a result against its bound ------------------------------------------------------
def outside_bound(got: np.ndarray, bounded: Bounded) -> np.ndarray:
    """Mask of the elements of ``got`` (a result in the original precision) that no correct
    implementation could have computed: further from the exact value than the bound, or a NaN or
    infinity where the exact value is finite and the bound cannot reach the type's overflow.
    Elements with an unknown (NaN) bound are never marked; see :func:`unknown_bound`."""
    value, bound = bounded.value, bounded.bound
    got = np.asarray(got)
    if got.dtype == np.bool_ or got.dtype.kind in "iu":
        moved = np.abs(got.astype(np.float64) - value.astype(np.float64))
        return ~np.isnan(bound) & (moved > bound)
    g = got.astype(np.float64)
    same = (g == value) | (np.isnan(g) & np.isnan(value))
    with np.errstate(invalid="ignore", over="ignore"):
        near = np.abs(g - value) <= bound
        finfo = np.finfo(got.dtype) if got.dtype.kind == "f" else np.finfo(np.float32)
        overflow = np.isinf(g) & (np.abs(value) + bound >= float(finfo.max)) & (np.sign(g) == np.sign(value))
        unstable = np.isinf(bound)
    return ~np.isnan(bound) & ~(same | near | overflow | unstable)


def unknown_bound(bounded: Bounded) -> np.ndarray:
    """Mask of the elements whose bound the analysis could not work out."""
    return np.isnan(bounded.bound)
