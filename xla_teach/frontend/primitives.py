"""The primitives: the small set of operations every ``xnp`` function is built from.

Each primitive lowers to one HLO instruction (or a few) through the
:class:`~xla_teach.hlo.builder.XlaBuilder`. Their names (``mul``, ``reduce_sum``,
``dot_general``...) are JAX's, so ``op_name`` metadata reads as in JAX's dumps.
Operand shapes are already equal where HLO needs them to be: broadcasting and
type promotion happen one level up, in :mod:`xla_teach.frontend.numpy_api`.
Reverse-mode rules are attached in :mod:`xla_teach.frontend.autodiff_rules`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from xla_teach.frontend.tracer import Primitive
from xla_teach.hlo.builder import XlaBuilder, XlaOp
from xla_teach.hlo.ir import HloComputation
from xla_teach.hlo.shape import Shape
from xla_teach.hlo.types import PrimitiveType

PRIMITIVES: dict[str, Primitive] = {}


def _def(name: str, lower: Any, multiple_results: bool = False) -> Primitive:
    prim = Primitive(name, lower, multiple_results)
    PRIMITIVES[name] = prim
    return prim


def _etype(dtype: Any) -> PrimitiveType:
    return PrimitiveType.from_dtype(np.dtype(dtype))


# ---- elementwise ----------------------------------------------------------------------
UNARY = {  # primitive name -> builder method
    "neg": "neg", "exp": "exp", "log": "log", "log1p": "log1p", "expm1": "expm1", "tanh": "tanh",
    "sqrt": "sqrt", "rsqrt": "rsqrt", "cbrt": "cbrt", "abs": "abs", "sign": "sign", "floor": "floor",
    "ceil": "ceil", "round": "round_nearest_even", "sin": "sin", "cos": "cos", "tan": "tan",
    "logistic": "logistic", "erf": "erf", "not": "not_", "is_finite": "is_finite",
}
BINARY = {
    "add": "add", "sub": "sub", "mul": "mul", "div": "div", "rem": "rem", "max": "max", "min": "min",
    "pow": "pow", "atan2": "atan2", "and": "and_", "or": "or_", "xor": "xor",
    "shift_left": "shift_left", "shift_right_arithmetic": "shift_right_arithmetic",
}

for _name, _method in UNARY.items():
    _def(_name, lambda b, x, _m=_method: getattr(b, _m)(x))
for _name, _method in BINARY.items():
    _def(_name, lambda b, x, y, _m=_method: getattr(b, _m)(x, y))

compare_p = _def("compare", lambda b, x, y, *, direction: b.compare(x, y, direction))
select_p = _def("select_n", lambda b, pred, on_true, on_false: b.select(pred, on_true, on_false))
convert_p = _def("convert_element_type", lambda b, x, *, dtype: b.convert_element_type(x, _etype(dtype)))
bitcast_convert_p = _def("bitcast_convert_type",  # same-width only: the bits read as another type
                             lambda b, x, *, dtype: b.bitcast_convert_type(x, _etype(dtype)))


# ---- shapes -----------------------------------------------------------------------------
def _broadcast_in_dim(b: XlaBuilder, x: XlaOp, *, shape: Sequence[int], dims: Sequence[int]) -> XlaOp:
    return b.broadcast_in_dim(x, shape, dims)


broadcast_in_dim_p = _def("broadcast_in_dim", _broadcast_in_dim)
reshape_p = _def("reshape", lambda b, x, *, new_sizes: b.reshape(x, new_sizes))
transpose_p = _def("transpose", lambda b, x, *, permutation: b.transpose(x, permutation))
reverse_p = _def("rev", lambda b, x, *, dimensions: b.rev(x, dimensions))
slice_p = _def("slice", lambda b, x, *, start, limit, strides: b.slice(x, start, limit, strides))
pad_p = _def("pad", lambda b, x, value, *, config: b.pad(x, value, config))
concatenate_p = _def("concatenate", lambda b, *xs, dimension: b.concat_in_dim(list(xs), dimension))
dynamic_slice_p = _def("dynamic_slice", lambda b, x, *idx, sizes: b.dynamic_slice(x, list(idx), sizes))
dynamic_update_slice_p = _def("dynamic_update_slice",
                              lambda b, x, update, *idx: b.dynamic_update_slice(x, update, list(idx)))


def _iota(b: XlaBuilder, *, dtype: Any, shape: Sequence[int], dimension: int) -> XlaOp:
    return b.iota(Shape.array(_etype(dtype), shape), dimension)


iota_p = _def("iota", _iota)


# ---- reductions ----------------------------------------------------------------------------
REDUCERS = {"sum": "add", "prod": "multiply", "max": "maximum", "min": "minimum", "and": "and", "or": "or"}


def reducer(b: XlaBuilder, opcode: str, etype: PrimitiveType) -> HloComputation:
    """The scalar computation ``(lhs, rhs) -> opcode(lhs, rhs)``, one per module and type."""
    root = b
    while root.parent is not None:
        root = root.parent  # type: ignore[assignment]
    cache = root.__dict__.setdefault("_frontend_reducers", {})
    key = (opcode, etype)
    if key not in cache:
        cache[key] = root.create_scalar_computation(opcode, etype)
    return cache[key]


def init_value(kind: str, dtype: np.dtype) -> np.ndarray:
    """The identity of the reduction (``-inf`` for max of floats, the minimum int for ints)."""
    dtype = np.dtype(dtype)
    if kind == "sum" or kind == "or":
        return np.zeros((), dtype)
    if kind == "prod" or kind == "and":
        return np.ones((), dtype)
    is_float = dtype.kind == "f" or dtype.name == "bfloat16"
    if kind == "max":
        return np.asarray(-np.inf if is_float else (False if dtype.kind == "b" else np.iinfo(dtype).min), dtype)
    return np.asarray(np.inf if is_float else (True if dtype.kind == "b" else np.iinfo(dtype).max), dtype)


def _reduce(kind: str) -> Any:
    def lower(b: XlaBuilder, x: XlaOp, *, axes: Sequence[int]) -> XlaOp:
        dtype = x.shape.element_type.dtype
        comp = reducer(b, REDUCERS[kind], x.shape.element_type)
        return b.reduce(x, b.constant(init_value(kind, dtype)), comp, tuple(axes))
    return lower


for _kind in REDUCERS:
    _def(f"reduce_{_kind}", _reduce(_kind))


def _argreduce(b: XlaBuilder, x: XlaOp, *, axis: int, index_dtype: Any, kind: str) -> XlaOp:
    """A variadic reduce over (value, index): keeps the first index of the max (min);
    NaN wins, as in NumPy."""
    etype, itype = x.shape.element_type, _etype(index_dtype)
    sub = b.create_sub_builder(f"arg{kind}")
    acc_v = sub.parameter(0, Shape.scalar(etype), "acc_value")
    acc_i = sub.parameter(1, Shape.scalar(itype), "acc_index")
    v, i = sub.parameter(2, Shape.scalar(etype), "value"), sub.parameter(3, Shape.scalar(itype), "index")
    better = sub.compare(v, acc_v, "GT" if kind == "max" else "LT")
    tie = sub.compare(v, acc_v, "EQ")
    if etype.is_float:  # NaN beats everything; between NaNs the first index wins
        v_nan, acc_nan = sub.compare(v, v, "NE"), sub.compare(acc_v, acc_v, "NE")
        better = sub.and_(sub.or_(better, v_nan), sub.not_(acc_nan))
        tie = sub.or_(tie, sub.and_(v_nan, acc_nan))
    tie = sub.and_(tie, sub.compare(i, acc_i, "LT"))
    pick_index = sub.or_(better, tie)
    comp = sub.build_computation(sub.tuple([sub.select(better, v, acc_v), sub.select(pick_index, i, acc_i)]))
    indices = b.iota(Shape.array(itype, x.shape.dimensions), axis)
    result = b.reduce([x, indices], [b.constant(init_value(kind, etype.dtype)), b.constant(np.zeros((), itype.dtype))],
                      comp, (axis,))
    return b.get_tuple_element(result, 1)


argreduce_p = _def("argreduce", _argreduce)


def _reduce_window(b: XlaBuilder, x: XlaOp, *, kind: str, window: Sequence[int], strides: Sequence[int],
                   padding: Sequence[tuple[int, int]], base_dilation: Sequence[int] | None = None,
                   window_dilation: Sequence[int] | None = None) -> XlaOp:
    comp = reducer(b, REDUCERS[kind], x.shape.element_type)
    init = b.constant(init_value(kind, x.shape.element_type.dtype))
    return b.reduce_window(x, init, comp, window, strides, list(padding), base_dilation, window_dilation)


reduce_window_p = _def("reduce_window", _reduce_window)


def _select_and_scatter_add(b: XlaBuilder, source: XlaOp, operand: XlaOp, *, window: Sequence[int],
                            strides: Sequence[int], padding: Sequence[tuple[int, int]]) -> XlaOp:
    """Max-pool's gradient: each window's cotangent goes to the position of its maximum."""
    etype = operand.shape.element_type
    sub = b.create_sub_builder("select_ge")
    lhs, rhs = sub.parameter(0, Shape.scalar(etype), "lhs"), sub.parameter(1, Shape.scalar(etype), "rhs")
    select = sub.build_computation(sub.compare(lhs, rhs, "GE"))
    zero = b.constant(np.zeros((), etype.dtype))
    return b.select_and_scatter(operand, select, window, strides, list(padding), source, zero,
                                reducer(b, "add", etype))


select_and_scatter_add_p = _def("select_and_scatter_add", _select_and_scatter_add)


# ---- contractions -----------------------------------------------------------------------------
def _dot_general(b: XlaBuilder, x: XlaOp, y: XlaOp, *, contracting: tuple[Sequence[int], Sequence[int]],
                 batch: tuple[Sequence[int], Sequence[int]]) -> XlaOp:
    return b.dot_general(x, y, contracting[0], contracting[1], batch[0], batch[1])


dot_general_p = _def("dot_general", _dot_general)


def _conv(b: XlaBuilder, lhs: XlaOp, rhs: XlaOp, *, strides: Sequence[int], padding: Sequence[tuple[int, int]],
          lhs_dilation: Sequence[int], rhs_dilation: Sequence[int], dim_labels: str,
          feature_group_count: int = 1) -> XlaOp:
    return b.conv_general_dilated(lhs, rhs, strides, list(padding), lhs_dilation, rhs_dilation, dim_labels,
                                  feature_group_count)


conv_general_dilated_p = _def("conv_general_dilated", _conv)


# ---- gather / scatter / sort -------------------------------------------------------------------
def _gather(b: XlaBuilder, x: XlaOp, indices: XlaOp, *, offset_dims: Sequence[int],
            collapsed_slice_dims: Sequence[int], start_index_map: Sequence[int],
            slice_sizes: Sequence[int]) -> XlaOp:
    return b.gather(x, indices, offset_dims, collapsed_slice_dims, start_index_map,
                    indices.rank - 1, slice_sizes)


gather_p = _def("gather", _gather)

SCATTER_COMBINERS = {"add": "add", "mul": "multiply", "min": "minimum", "max": "maximum"}


def _scatter(b: XlaBuilder, x: XlaOp, indices: XlaOp, updates: XlaOp, *, mode: str,
             update_window_dims: Sequence[int], inserted_window_dims: Sequence[int],
             scatter_dims_to_operand_dims: Sequence[int]) -> XlaOp:
    etype = x.shape.element_type
    if mode == "set":
        sub = b.create_sub_builder("scatter_set")
        sub.parameter(0, Shape.scalar(etype), "current")
        new = sub.parameter(1, Shape.scalar(etype), "update")
        comp = sub.build_computation(new)
    else:
        comp = reducer(b, SCATTER_COMBINERS[mode], etype)
    return b.scatter(x, indices, updates, comp, update_window_dims, inserted_window_dims,
                     scatter_dims_to_operand_dims, indices.rank - 1)


scatter_p = _def("scatter", _scatter)


def _float_sort_key(b: XlaBuilder, x: XlaOp) -> XlaOp:
    """``x`` with every NaN made ``+NaN`` and ``-0.0`` made ``+0.0`` (as JAX does): under
    ``TOTALORDER`` the key sorts NaNs last whatever their sign, and keeps the two zeros
    equal, so a stable sort leaves them in input order (NumPy's order)."""
    no_neg_zero = b.select(b.compare(x, 0.0, "EQ"), 0.0, x)
    return b.select(b.compare(x, x, "NE"), float("nan"), no_neg_zero)


def _sort(b: XlaBuilder, *xs: XlaOp, dimension: int) -> list[XlaOp]:
    """A stable ascending sort of ``xs[0]`` along ``dimension``; the others move along.

    Floats sort by :func:`_float_sort_key` under ``TOTALORDER``: a plain ``LT`` is no
    strict weak order once a NaN is present, and backends would disagree on the result."""
    operands = list(xs)
    comparison_type = None
    if xs[0].shape.element_type.is_float:
        operands = [_float_sort_key(b, xs[0]), *xs]
        comparison_type = "TOTALORDER"
    comparator = b.create_scalar_comparator("LT", [x.shape.element_type for x in operands], comparison_type)
    result = b.sort(operands, comparator, dimension, is_stable=True)
    if len(operands) == 1:
        return [result]
    skip = len(operands) - len(xs)
    return [b.get_tuple_element(result, i) for i in range(skip, len(operands))]


sort_p = _def("sort", _sort, multiple_results=True)


def _rng_bit_generator(b: XlaBuilder, key: XlaOp, *, shape: Sequence[int], dtype: Any) -> list[XlaOp]:
    result = b.rng_bit_generator("rng_default", key, Shape.array(_etype(dtype), shape))
    return [b.get_tuple_element(result, 0), b.get_tuple_element(result, 1)]


rng_bit_generator_p = _def("rng_bit_generator", _rng_bit_generator, multiple_results=True)

shift_right_logical_p = _def("shift_right_logical", lambda b, x, y: b.shift_right_logical(x, y))
