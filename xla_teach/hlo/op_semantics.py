"""What every HLO opcode computes, in one sentence, with a tiny example that runs.

The opcode table (:mod:`xla_teach.hlo.opcodes`) says how an instruction is *written* (operands,
attributes); this module says what it *means*, the way XLA's "Operation Semantics" page does,
for every opcode xla_teach implements. Each entry has

* ``summary`` -- one or two sentences: what the result is, in terms of the operands;
* ``example`` -- where the op can run on one device: a complete HLO module, its arguments, and a
  NumPy expression of the expected result (in ``x``, ``y``, ``z`` for parameters 0, 1, 2).
  ``tests/hlo/test_op_semantics.py`` runs every example on the interpreter and the CPU backend
  and compares with the NumPy expression, so the documentation cannot drift from the compiler.

The documentation page ``operation-semantics.md`` is generated from this table at every build
(``docs/hooks/op_semantics_page.py``), and the explorer's node panel links each instruction's
opcode to its entry there (:func:`anchor`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from xla_teach.hlo.opcodes import OPCODES


@dataclass(frozen=True)
class Example:
    """``module`` run on ``args`` (lists, with their NumPy dtypes) gives ``expected`` (a NumPy
    expression in ``x``, ``y``, ``z``)."""

    module: str
    args: tuple[tuple[Any, str], ...]
    expected: str
    ulps: int = 0  # how many units in the last place the result may differ (transcendentals)


@dataclass(frozen=True)
class Semantics:
    summary: str
    example: Example | None = None
    notes: tuple[str, ...] = field(default=())


def _unary(op: str, numpy: str, values: list[Any], dtype: str = "f32", ulps: int = 0) -> Example:
    n = len(values)
    return Example(f"HloModule {op.replace('-', '_')}\nENTRY main {{\n  x = {dtype}[{n}] parameter(0)\n"
                   f"  ROOT r = {_result(op, dtype)}[{n}] {op}(x)\n}}\n", ((values, _np_dtype(dtype)),), numpy, ulps)


def _binary(op: str, numpy: str, xs: list[Any], ys: list[Any], dtype: str = "f32", ulps: int = 0) -> Example:
    n = len(xs)
    return Example(f"HloModule {op.replace('-', '_')}\nENTRY main {{\n  x = {dtype}[{n}] parameter(0)\n"
                   f"  y = {dtype}[{n}] parameter(1)\n  ROOT r = {dtype}[{n}] {op}(x, y)\n}}\n",
                   ((xs, _np_dtype(dtype)), (ys, _np_dtype(dtype))), numpy, ulps)


def _result(op: str, dtype: str) -> str:
    return "pred" if op == "is-finite" else dtype


def _np_dtype(hlo: str) -> str:
    return {"f32": "float32", "s32": "int32", "u32": "uint32", "pred": "bool", "f64": "float64"}[hlo]


def _module(body: str, args: tuple[tuple[Any, str], ...], expected: str, name: str = "example",
            ulps: int = 0, computations: str = "") -> Example:
    return Example(f"HloModule {name}\n{computations}ENTRY main {{\n{body}\n}}\n", args, expected, ulps)


F = "float32"
_ADD = "add {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT s = f32[] add(a, b)\n}\n"
_MAX = "max {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT m = f32[] maximum(a, b)\n}\n"
_GE = "ge {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT c = pred[] compare(a, b), direction=GE\n}\n"
_LT = "lt {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT c = pred[] compare(a, b), direction=LT\n}\n"
_M4 = ([[1, 2, 3, 4], [5, 6, 7, 8]], F)
_X = [-2.5, -0.5, 0.5, 2.5]
_POS = [0.25, 1.0, 2.0, 9.0]
_INTS = [1, 6, -8, 255]

SEMANTICS: dict[str, Semantics] = {
    # ---- elementwise, one operand ------------------------------------------------------------
    "abs": Semantics("|x|, element by element.", _unary("abs", "np.abs(x)", _X)),
    "cbrt": Semantics("The real cube root.", _unary("cbrt", "np.cbrt(x)", [-8.0, -1.0, 1.0, 27.0], ulps=2)),
    "ceil": Semantics("Rounds up to an integer value (same type).", _unary("ceil", "np.ceil(x)", _X)),
    "cosine": Semantics("cos(x), x in radians.", _unary("cosine", "np.cos(x)", _X, ulps=2)),
    "count-leading-zeros": Semantics("The number of leading zero bits of each integer.",
                                     _unary("count-leading-zeros", "np.array([31, 29, 0, 24], np.int32)", _INTS,
                                            "s32")),
    "erf": Semantics("The error function.", _unary("erf", "np.array([math.erf(v) for v in x], np.float32)", _X,
                                                   ulps=4)),
    "exponential": Semantics("e to the power x.", _unary("exponential", "np.exp(x)", _X, ulps=2)),
    "exponential-minus-one": Semantics("e^x - 1, accurate for x near 0.",
                                       _unary("exponential-minus-one", "np.expm1(x)", [-1e-5, -0.5, 1e-6, 2.5],
                                              ulps=2)),
    "floor": Semantics("Rounds down to an integer value (same type).", _unary("floor", "np.floor(x)", _X)),
    "is-finite": Semantics("pred: true where x is neither infinite nor NaN.",
                           _unary("is-finite", "np.isfinite(x)", [1.0, float("inf"), float("nan"), -3.0])),
    "log": Semantics("The natural logarithm (NaN below 0, -inf at 0).", _unary("log", "np.log(x)", _POS, ulps=2)),
    "log-plus-one": Semantics("log(1 + x), accurate for x near 0.",
                              _unary("log-plus-one", "np.log1p(x)", [1e-6, 0.5, 2.0, 9.0], ulps=2)),
    "logistic": Semantics("The sigmoid 1 / (1 + e^-x).", _unary("logistic", "1 / (1 + np.exp(-x))", _X, ulps=4)),
    "negate": Semantics("-x.", _unary("negate", "-x", _X)),
    "not": Semantics("Logical not of pred, bitwise not of integers.",
                     _unary("not", "~x", _INTS, "s32")),
    "popcnt": Semantics("The number of one bits of each integer.",
                        _unary("popcnt", "np.array([1, 2, 29, 8], np.int32)", _INTS, "s32")),
    "round-nearest-afz": Semantics("Rounds to the nearest integer value, halves away from zero.",
                                   _unary("round-nearest-afz", "np.sign(x) * np.floor(np.abs(x) + 0.5)", _X)),
    "round-nearest-even": Semantics("Rounds to the nearest integer value, halves to even.",
                                    _unary("round-nearest-even", "np.round(x)", _X)),
    "rsqrt": Semantics("1 / sqrt(x).", _unary("rsqrt", "1 / np.sqrt(x)", _POS, ulps=2)),
    "sign": Semantics("-1, 0 or 1 by the sign of x (NaN stays NaN).",
                      _unary("sign", "np.sign(x)", [-2.0, 0.0, 3.0, -0.0])),
    "sine": Semantics("sin(x), x in radians.", _unary("sine", "np.sin(x)", _X, ulps=2)),
    "sqrt": Semantics("The square root (NaN below 0).", _unary("sqrt", "np.sqrt(x)", _POS, ulps=1)),
    "tan": Semantics("tan(x), x in radians.", _unary("tan", "np.tan(x)", [-1.0, -0.5, 0.5, 1.0], ulps=4)),
    "tanh": Semantics("The hyperbolic tangent.", _unary("tanh", "np.tanh(x)", _X, ulps=2)),
    # ---- elementwise, two operands ---------------------------------------------------------------
    "add": Semantics("x + y. Operands have one shape: a broadcast makes them so.",
                     _binary("add", "x + y", _X, _POS)),
    "and": Semantics("Logical and of pred, bitwise and of integers.",
                     _binary("and", "x & y", _INTS, [3, 3, 3, 15], "s32")),
    "atan2": Semantics("The angle whose tangent is x / y, in [-pi, pi], the signs of both choosing the quadrant "
                       "(NumPy's arctan2(x, y)).",
                       _binary("atan2", "np.arctan2(x, y)", [1.0, -1.0, 0.5, 2.0], [1.0, 1.0, -2.0, -0.5], ulps=2)),
    "divide": Semantics("x / y; for integers, rounded toward zero.",
                        _binary("divide", "x / y", _X, _POS)),
    "maximum": Semantics("The larger of x and y (NaN if either is NaN).",
                         _binary("maximum", "np.maximum(x, y)", _X, _POS)),
    "minimum": Semantics("The smaller of x and y (NaN if either is NaN).",
                         _binary("minimum", "np.minimum(x, y)", _X, _POS)),
    "multiply": Semantics("x * y.", _binary("multiply", "x * y", _X, _POS)),
    "or": Semantics("Logical or of pred, bitwise or of integers.", _binary("or", "x | y", _INTS, [3, 3, 3, 15], "s32")),
    "power": Semantics("x to the power y.", _binary("power", "np.power(x, y)", _POS, [2.0, 0.5, -1.0, 0.5], ulps=2)),
    "remainder": Semantics("x - y * trunc(x / y): the sign follows x (C's fmod, not Python's %).",
                           _binary("remainder", "np.fmod(x, y)", [5.5, -5.5, 7.0, -7.0], [2.0, 2.0, -3.0, -3.0])),
    "shift-left": Semantics("x << y; a shift by the bit width or more gives 0.",
                            _binary("shift-left", "x << y", [1, 3, -1, 7], [0, 2, 4, 1], "s32")),
    "shift-right-arithmetic": Semantics("x >> y, filling with the sign bit.",
                                        _binary("shift-right-arithmetic", "x >> y", [16, -16, 7, -1], [2, 2, 1, 3],
                                                "s32")),
    "shift-right-logical": Semantics("x >> y, filling with zeros (on the unsigned bits).",
                                     _binary("shift-right-logical", "np.array([4, 1073741820, 3, 536870911], np.int32)",
                                             [16, -16, 7, -1], [2, 2, 1, 3], "s32")),
    "subtract": Semantics("x - y.", _binary("subtract", "x - y", _X, _POS)),
    "xor": Semantics("Logical exclusive or of pred, bitwise of integers.",
                     _binary("xor", "x ^ y", _INTS, [3, 3, 3, 15], "s32")),
    # ---- elementwise, other --------------------------------------------------------------------------
    "bitcast-convert": Semantics("The same bits read as another type of the same width.", _module(
        "  x = f32[3] parameter(0)\n  ROOT r = s32[3] bitcast-convert(x)", (([1.0, -2.0, 0.5], F),),
        "x.view(np.int32)")),
    "clamp": Semantics("clamp(lo, x, hi): x limited to [lo, hi] (the operands in that order).", _module(
        "  x = f32[4] parameter(0)\n  lo = f32[] constant(-1)\n  hi = f32[] constant(1)\n"
        "  ROOT r = f32[4] clamp(lo, x, hi)", ((_X, F),), "np.clip(x, -1, 1)")),
    "compare": Semantics("pred: x compared with y by ``direction`` (EQ, NE, LT, LE, GT, GE).", _module(
        "  x = f32[4] parameter(0)\n  y = f32[4] parameter(1)\n  ROOT r = pred[4] compare(x, y), direction=LT",
        ((_X, F), ([0.0, 0.0, 0.0, 0.0], F)), "x < y")),
    "convert": Semantics("Each element converted to the result's type (floats to integers round toward zero, "
                         "saturating).", _module("  x = f32[4] parameter(0)\n  ROOT r = s32[4] convert(x)",
                                                 ((_X, F),), "np.trunc(x).astype(np.int32)")),
    "reduce-precision": Semantics("Each float rounded to ``exponent_bits`` and ``mantissa_bits`` (and kept in "
                                  "its type): e.g. to bf16's precision.", _module(
        "  x = f32[2] parameter(0)\n  ROOT r = f32[2] reduce-precision(x), exponent_bits=8, mantissa_bits=7",
        (([1.00390625, 3.0], F),), "np.array([1.0, 3.0], np.float32)")),
    "select": Semantics("select(p, a, b): a where p is true, else b.", _module(
        "  p = pred[4] parameter(0)\n  a = f32[4] parameter(1)\n  b = f32[4] parameter(2)\n"
        "  ROOT r = f32[4] select(p, a, b)", (([True, False, True, False], "bool"), (_X, F), (_POS, F)),
        "np.where(x, y, z)")),
    # ---- leaves ---------------------------------------------------------------------------------------
    "constant": Semantics("A literal value written in the module.", _module(
        "  ROOT c = f32[2,2] constant({{1, 2}, {3, 4}})", (), "np.array([[1, 2], [3, 4]], np.float32)")),
    "iota": Semantics("Each element is its index along ``iota_dimension``.", _module(
        "  ROOT r = s32[2,3] iota(), iota_dimension=1", (), "np.tile(np.arange(3, dtype=np.int32), (2, 1))")),
    "parameter": Semantics("The computation's argument number ``parameter(N)``.", _module(
        "  ROOT x = f32[4] parameter(0)", ((_X, F),), "x")),
    "partition-id": Semantics("u32[]: which partition (device of an SPMD program) runs this copy; 0 on one device.",
                              _module("  ROOT r = u32[] partition-id()", (), "np.uint32(0)")),
    "replica-id": Semantics("u32[]: which replica runs this copy; 0 on one device.",
                            _module("  ROOT r = u32[] replica-id()", (), "np.uint32(0)")),
    # ---- data movement ------------------------------------------------------------------------------
    "bitcast": Semantics("The same buffer seen with another shape or layout (no data moves); written by the "
                         "compiler's layout passes, never by a front end."),
    "broadcast": Semantics("Copies x into a larger shape; ``dimensions`` names the result dimension each of x's "
                           "dimensions becomes.", _module(
        "  x = f32[3] parameter(0)\n  ROOT r = f32[2,3] broadcast(x), dimensions={1}", (([1, 2, 3], F),),
        "np.broadcast_to(x, (2, 3))")),
    "concatenate": Semantics("The operands joined along ``dimensions={d}``.", _module(
        "  x = f32[2,2] parameter(0)\n  y = f32[2,1] parameter(1)\n  ROOT r = f32[2,3] concatenate(x, y), "
        "dimensions={1}", (([[1, 2], [3, 4]], F), ([[5], [6]], F)), "np.concatenate([x, y], axis=1)")),
    "copy": Semantics("A copy of x (layout assignment uses it to change a layout).", _module(
        "  x = f32[4] parameter(0)\n  ROOT r = f32[4] copy(x)", ((_X, F),), "x")),
    "dynamic-slice": Semantics("A slice of size ``dynamic_slice_sizes`` at start indices given as scalar operands, "
                               "clamped so that the slice stays inside x.", _module(
        "  x = f32[2,4] parameter(0)\n  i = s32[] parameter(1)\n  zero = s32[] constant(0)\n"
        "  ROOT r = f32[2,2] dynamic-slice(x, zero, i), dynamic_slice_sizes={2,2}",
        (_M4, (3, "int32")), "x[:, 2:4]")),
    "dynamic-update-slice": Semantics("x with the block ``update`` written at start indices given as scalar operands "
                                      "(clamped to fit).", _module(
        "  x = f32[2,4] parameter(0)\n  u = f32[2,1] parameter(1)\n  i = s32[] parameter(2)\n"
        "  zero = s32[] constant(0)\n  ROOT r = f32[2,4] dynamic-update-slice(x, u, zero, i)",
        (_M4, ([[0], [0]], F), (1, "int32")), "np.array([[1, 0, 3, 4], [5, 0, 7, 8]], np.float32)")),
    "pad": Semantics("x with ``padding_value`` added before, after and between elements: ``padding=lo_hi_interior`` "
                     "per dimension (negative lo/hi crop).", _module(
        "  x = f32[3] parameter(0)\n  zero = f32[] constant(0)\n  ROOT r = f32[8] pad(x, zero), padding=1_2_1",
        (([1, 2, 3], F),), "np.array([0, 1, 0, 2, 0, 3, 0, 0], np.float32)")),
    "reshape": Semantics("The elements in row-major order, in a new shape of the same size.", _module(
        "  x = f32[2,4] parameter(0)\n  ROOT r = f32[4,2] reshape(x)", (_M4,), "x.reshape(4, 2)")),
    "reverse": Semantics("x with the order of the elements reversed along ``dimensions``.", _module(
        "  x = f32[2,4] parameter(0)\n  ROOT r = f32[2,4] reverse(x), dimensions={1}", (_M4,), "x[:, ::-1]")),
    "slice": Semantics("The elements ``[start:limit:stride]`` of each dimension.", _module(
        "  x = f32[2,4] parameter(0)\n  ROOT r = f32[2,2] slice(x), slice={[0:2], [0:4:2]}", (_M4,), "x[:, 0:4:2]")),
    "transpose": Semantics("x with its dimensions permuted: result dimension i is x's dimension ``dimensions[i]``.",
                           _module("  x = f32[2,4] parameter(0)\n  ROOT r = f32[4,2] transpose(x), dimensions={1,0}",
                                   (_M4,), "x.T")),
    # ---- contractions ---------------------------------------------------------------------------------
    "convolution": Semantics("A sliding-window sum of products of the input and the kernel: ``dim_labels`` names the "
                             "batch, feature and spatial dimensions (e.g. ``b01f_01io->b01f``), ``window`` the size, "
                             "stride, padding and dilation.", _module(
        "  x = f32[1,4,1] parameter(0)\n  k = f32[2,1,1] parameter(1)\n"
        "  ROOT r = f32[1,3,1] convolution(x, k), window={size=2}, dim_labels=b0f_0io->b0f",
        (([[[1], [2], [3], [4]]], F), ([[[1]], [[10]]], F)),
        "np.array([[[21], [32], [43]]], np.float32)")),
    "dot": Semantics("A sum of products over ``lhs_contracting_dims``/``rhs_contracting_dims``, for each pair of "
                     "``batch_dims``; the result is batch, then lhs free, then rhs free dimensions.", _module(
        "  x = f32[2,4] parameter(0)\n  y = f32[4,2] parameter(1)\n"
        "  ROOT r = f32[2,2] dot(x, y), lhs_contracting_dims={1}, rhs_contracting_dims={0}",
        (_M4, ([[1, 0], [0, 1], [1, 0], [0, 1]], F)), "x @ y")),
    # ---- reductions -----------------------------------------------------------------------------------
    "reduce": Semantics("Combines the elements along ``dimensions`` with ``to_apply``, starting from the init value "
                        "(in an order XLA does not promise).", _module(
        "  x = f32[2,4] parameter(0)\n  zero = f32[] constant(0)\n"
        "  ROOT r = f32[2] reduce(x, zero), dimensions={1}, to_apply=add", (_M4,), "x.sum(axis=1)",
        computations=_ADD)),
    "reduce-window": Semantics("``reduce`` over each window of x (size, stride, padding in ``window``): pooling.",
                               _module("  x = f32[2,4] parameter(0)\n  init = f32[] constant(-inf)\n"
                                       "  ROOT r = f32[2,2] reduce-window(x, init), window={size=1x2 stride=1x2}, "
                                       "to_apply=max", (_M4,), "x.reshape(2, 2, 2).max(axis=2)",
                                       computations=_MAX)),
    "select-and-scatter": Semantics("For each window, ``select`` picks one element of x; the source value for "
                                    "that window is added (``scatter``) at the picked position: max-pooling's "
                                    "gradient.", _module(
        "  x = f32[4] parameter(0)\n  s = f32[2] parameter(1)\n  zero = f32[] constant(0)\n"
        "  ROOT r = f32[4] select-and-scatter(x, s, zero), window={size=2 stride=2}, select=ge, scatter=add",
        (([1, 5, 7, 2], F), ([10, 20], F)), "np.array([0, 10, 20, 0], np.float32)",
        computations=_GE + _ADD)),
    # ---- indexing -------------------------------------------------------------------------------------
    "gather": Semantics("Slices of x at positions read from an index array (``offset_dims``, "
                        "``collapsed_slice_dims``, ``start_index_map``, ``index_vector_dim``, ``slice_sizes``): "
                        "an embedding lookup, x[indices].", _module(
        "  x = f32[3,2] parameter(0)\n  i = s32[2] parameter(1)\n"
        "  ROOT r = f32[2,2] gather(x, i), offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0}, "
        "index_vector_dim=1, slice_sizes={1,2}", (([[1, 2], [3, 4], [5, 6]], F), ([2, 0], "int32")), "x[y]")),
    "scatter": Semantics("x with updates combined (``to_apply``) into the positions an index array names: "
                         "gather's inverse, ``x.at[i].add(u)``.", _module(
        "  x = f32[3] parameter(0)\n  i = s32[2,1] parameter(1)\n  u = f32[2] parameter(2)\n"
        "  ROOT r = f32[3] scatter(x, i, u), update_window_dims={}, inserted_window_dims={0}, "
        "scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add",
        (([1, 1, 1], F), ([[2], [2]], "int32"), ([5, 7], F)), "np.array([1, 1, 13], np.float32)",
        computations=_ADD)),
    # ---- sorting --------------------------------------------------------------------------------------
    "sort": Semantics("Sorts along ``dimensions={d}`` by the ``to_apply`` comparator; several operands are sorted "
                      "together by the first's order (``is_stable`` keeps equal keys in order).", _module(
        "  x = f32[4] parameter(0)\n  ROOT r = f32[4] sort(x), dimensions={0}, to_apply=lt",
        (([3, 1, 4, 2], F),), "np.sort(x)", computations=_LT)),
    "topk": Semantics("The k largest elements of the last dimension and their indices, largest first.", _module(
        "  x = f32[5] parameter(0)\n  ROOT r = (f32[2], s32[2]) topk(x), k=2, largest=true",
        (([3, 9, 1, 7, 5], F),), "(np.array([9, 7], np.float32), np.array([1, 3], np.int32))")),
    # ---- tuples and control flow ----------------------------------------------------------------------
    "tuple": Semantics("Groups its operands into one value of tuple shape.", _module(
        "  x = f32[2] parameter(0)\n  y = s32[] parameter(1)\n  ROOT r = (f32[2], s32[]) tuple(x, y)",
        (([1, 2], F), (7, "int32")), "(x, y)")),
    "get-tuple-element": Semantics("Element ``index`` of a tuple.", _module(
        "  x = f32[2] parameter(0)\n  y = s32[] parameter(1)\n  t = (f32[2], s32[]) tuple(x, y)\n"
        "  ROOT r = s32[] get-tuple-element(t), index=1", (([1, 2], F), (7, "int32")), "y")),
    "call": Semantics("Runs ``to_apply`` on the operands (the inliner usually removes it).", _module(
        "  x = f32[] parameter(0)\n  y = f32[] parameter(1)\n  ROOT r = f32[] call(x, y), to_apply=add",
        ((2.0, F), (3.0, F)), "x + y", computations=_ADD)),
    "conditional": Semantics("Runs one of ``branch_computations`` on its operand: by a pred (true: branch 0) or an "
                             "s32 index (out of range: the last branch).", _module(
        "  p = pred[] parameter(0)\n  x = f32[] parameter(1)\n"
        "  ROOT r = f32[] conditional(p, x, x), true_computation=double, false_computation=negate",
        ((True, "bool"), (3.0, F)), "np.float32(6)",
        computations="double {\n  a = f32[] parameter(0)\n  ROOT d = f32[] add(a, a)\n}\n"
                     "negate {\n  a = f32[] parameter(0)\n  ROOT n = f32[] negate(a)\n}\n")),
    "fusion": Semantics("Runs its ``calls`` computation as one kernel (``kind=kLoop``, ``kInput``, ``kOutput``): "
                        "made by the fusion passes.", _module(
        "  x = f32[4] parameter(0)\n  ROOT r = f32[4] fusion(x), kind=kLoop, calls=fused",
        ((_X, F),), "x * x + x",
        computations="fused {\n  p = f32[4] parameter(0)\n  m = f32[4] multiply(p, p)\n"
                     "  ROOT a = f32[4] add(m, p)\n}\n")),
    "map": Semantics("Applies the scalar computation ``to_apply`` to each element (of each operand).", _module(
        "  x = f32[4] parameter(0)\n  y = f32[4] parameter(1)\n  ROOT r = f32[4] map(x, y), dimensions={0}, "
        "to_apply=add", ((_X, F), (_POS, F)), "x + y", computations=_ADD)),
    "while": Semantics("Runs ``body`` on its state while ``condition`` says true; the state is one value (usually a "
                       "tuple).", _module(
        "  x = s32[] parameter(0)\n  ROOT r = s32[] while(x), condition=below_100, body=double",
        ((3, "int32"),), "np.int32(192)",
        computations="below_100 {\n  a = s32[] parameter(0)\n  limit = s32[] constant(100)\n"
                     "  ROOT c = pred[] compare(a, limit), direction=LT\n}\n"
                     "double {\n  a = s32[] parameter(0)\n  ROOT d = s32[] add(a, a)\n}\n")),
    "scan": Semantics("Runs ``to_apply`` once per position i along ``dimensions={d}`` (from the end when "
                      "``is_reverse``): on the inputs' slices at i and the carries (the last ``num_carries`` operands "
                      "start them), it returns (outputs..., new carries...). The result is (the outputs stacked "
                      "along d..., the final carries): ``jnp.cumsum`` is a scan whose body adds.", _module(
        "  x = f32[4] parameter(0)\n  zero = f32[] constant(0)\n"
        "  ROOT r = (f32[4], f32[]) scan(x, zero), dimensions={0}, num_carries=1, to_apply=running_sum",
        ((_X, F),), "(np.cumsum(x), np.sum(x))",
        computations="running_sum {\n  x_i = f32[] parameter(0)\n  carry = f32[] parameter(1)\n"
                     "  s = f32[] add(x_i, carry)\n  ROOT t = (f32[], f32[]) tuple(s, s)\n}\n")),
    "opt-barrier": Semantics("Returns its operand unchanged, and no pass may move work across it.", _module(
        "  x = f32[4] parameter(0)\n  ROOT r = f32[4] opt-barrier(x)", ((_X, F),), "x")),
    "after-all": Semantics("A token that orders side effects after all of its operands."),
    "custom-call": Semantics("Calls a function the compiler does not know by name (``custom_call_target``): a "
                             "library kernel, a host callback. xla_teach runs the targets it knows."),
    # ---- random numbers ---------------------------------------------------------------------------------
    "rng": Semantics("Random numbers of a ``distribution`` (uniform in [a, b) or normal); the state is hidden."),
    "rng-bit-generator": Semantics("Random bits from an explicit state (``algorithm``: Philox, ThreeFry); returns the "
                                   "new state and the bits, so the same state gives the same bits."),
    "rng-get-and-update-state": Semantics("The hidden random state's current value, advanced by ``delta``."),
    # ---- collectives (several devices) -------------------------------------------------------------------
    "all-gather": Semantics("Each device's x concatenated along ``dimensions`` over its replica group."),
    "all-gather-start": Semantics("The asynchronous start of an all-gather; ``all-gather-done`` waits for it."),
    "all-gather-done": Semantics("Waits for an ``all-gather-start`` and returns its result."),
    "all-reduce": Semantics("Every device of a replica group gets the group's elementwise ``to_apply`` "
                            "reduction of x."),
    "all-reduce-start": Semantics("The asynchronous start of an all-reduce; ``all-reduce-done`` waits for it."),
    "all-reduce-done": Semantics("Waits for an ``all-reduce-start`` and returns its result."),
    "reduce-scatter": Semantics("An all-reduce whose result is split along ``dimensions``: each device keeps "
                                "its part."),
    "all-to-all": Semantics("Each device splits x into as many parts as devices in its group and sends part i to "
                            "device i (a transpose across devices)."),
    "collective-permute": Semantics("Sends x from each ``source_target_pairs`` source to its target; a device that "
                                    "receives nothing gets zeros."),
    "collective-permute-start": Semantics("The asynchronous start of a collective-permute."),
    "collective-permute-done": Semantics("Waits for a ``collective-permute-start`` and returns its result."),
    "collective-broadcast": Semantics("Every device of a group gets the value of the group's first device."),
}


def semantics(opcode: str) -> Semantics | None:
    return SEMANTICS.get(opcode)


def anchor(opcode: str) -> str:
    """The opcode's anchor on the documentation page (``operation-semantics.md#<anchor>``)."""
    return "op-" + opcode


def missing() -> list[str]:
    """Opcodes of the opcode table without an entry here (a test keeps this empty)."""
    return sorted(set(OPCODES) - set(SEMANTICS))
