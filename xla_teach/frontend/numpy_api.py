"""``xla_teach.numpy`` (``xnp``), part 1: arrays, promotion, broadcasting, elementwise
functions and array creation.

Inside ``jit`` every function here adds HLO instructions; outside (eager mode) it
compiles a tiny one-function program for the ``interpreter`` backend and runs it,
so ``xnp.exp(np.ones(3))`` works anywhere. The NumPy semantics followed, and the
few differences, are listed in :mod:`xla_teach.frontend.dtypes` and ``docs/frontend.md``.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from xla_teach.frontend import dtypes
from xla_teach.frontend import primitives as P
from xla_teach.frontend.errors import data_dependent_shape_error
from xla_teach.frontend.pytree import tree_flatten, tree_unflatten
from xla_teach.frontend.tracer import Tracer, bind, current_context

ArrayLike = Any  # Tracer | np.ndarray | np.generic | bool | int | float
Shape = Sequence[int]

# ---- eager mode -----------------------------------------------------------------------------
_EAGER_CACHE: dict[Any, Any] = {}


def api(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Decorator: trace ``fn`` when called inside a trace, else run it eagerly.

    Eager calls compile ``fn`` with the NumPy-array arguments as parameters (every
    other argument is static) for the ``interpreter`` backend, cached per signature.
    """

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if current_context() is not None:
            return fn(*args, **kwargs)
        return eager_call(fn, args, kwargs)

    wrapper.__wrapped_api__ = fn  # type: ignore[attr-defined]
    return wrapper


def eager_call(fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    from xla_teach.frontend.jit import jit

    leaves, tree = tree_flatten((args, kwargs))
    dynamic = [i for i, leaf in enumerate(leaves) if isinstance(leaf, (np.ndarray, np.generic))]
    template = list(leaves)

    def staged(*values: Any) -> Any:
        full = list(template)
        for i, v in zip(dynamic, values, strict=True):
            full[i] = v
        a, k = tree_unflatten(tree, full)
        return fn(*a, **k)

    staged.__name__ = fn.__name__
    statics = tuple((i, leaf) for i, leaf in enumerate(leaves) if i not in dynamic)
    key = (fn, tree, tuple(dynamic), statics)
    try:
        jitted = _EAGER_CACHE.get(key)
    except TypeError:  # an unhashable static argument: do not cache
        key, jitted = None, None
    if jitted is None:
        jitted = jit(staged, backend="interpreter")
        if key is not None:
            _EAGER_CACHE[key] = jitted
    else:
        jitted._fn = staged
    return jitted(*[leaves[i] for i in dynamic])


# ---- arrays ----------------------------------------------------------------------------------
def _ctx() -> Any:
    ctx = current_context()
    assert ctx is not None
    return ctx


def lift(x: ArrayLike) -> Tracer:
    """``x`` as a tracer of the current trace (Python scalars: weakly typed constants)."""
    return _ctx().lift(x)


@api
def asarray(x: ArrayLike, dtype: Any = None) -> Tracer:
    t = lift(x)
    return astype(t, dtype) if dtype is not None else t


array = asarray


def _shape_of(x: ArrayLike) -> tuple[int, ...]:
    return x.shape if isinstance(x, Tracer) else np.shape(x)


def _dtype_weak(x: ArrayLike) -> tuple[np.dtype, bool]:
    if isinstance(x, Tracer):
        return x.dtype, x.weak_type
    if isinstance(x, (bool, int, float)) and not isinstance(x, np.generic):
        return dtypes.python_scalar_dtype(x), True
    return dtypes.canonicalize(np.asarray(x).dtype), False


def result_type(*xs: ArrayLike) -> np.dtype:
    """The dtype ``xs`` promote to (see :mod:`xla_teach.frontend.dtypes`)."""
    return dtypes.result_type(*[_dtype_weak(x) for x in xs])[0]


def promote(*xs: ArrayLike) -> list[Tracer]:
    """Lift ``xs`` and convert them to their common dtype (weak if all inputs were weak)."""
    dtype, weak = dtypes.result_type(*[_dtype_weak(x) for x in xs])
    out = []
    for x in xs:
        t = lift(x) if not isinstance(x, (bool, int, float)) or isinstance(x, np.generic) else \
            _ctx().constant(x, dtype)
        if t.dtype != dtype:
            t = bind(P.convert_p, t, dtype=dtype)
        t.weak_type = weak
        out.append(t)
    return out


def broadcast_shapes(*shapes: Shape, op: str = "") -> tuple[int, ...]:
    """NumPy's broadcast result shape; ``op`` names the operation in the error."""
    try:
        return tuple(np.broadcast_shapes(*[tuple(s) for s in shapes]))
    except ValueError:
        listed = " and ".join(str(tuple(s)) for s in shapes)
        raise ValueError(f"{op + ': ' if op else ''}shapes {listed} cannot be broadcast together "
                         "(NumPy's rule: align trailing dimensions; each pair must be equal or 1)") from None


@api
def broadcast_to(x: ArrayLike, shape: Shape) -> Tracer:
    """NumPy's ``broadcast_to``: size-1 dims are dropped with a reshape, then one
    ``broadcast`` places the remaining dims (HLO's broadcast never stretches)."""
    t = lift(x)
    shape = tuple(int(d) for d in shape)
    if t.shape == shape:
        return t
    lead = len(shape) - t.ndim
    if lead < 0 or any(d != 1 and d != shape[lead + i] for i, d in enumerate(t.shape)):
        raise ValueError(f"cannot broadcast an array of shape {t.shape} to shape {shape}")
    kept = [i for i, d in enumerate(t.shape) if d == shape[lead + i]]
    weak = t.weak_type
    if len(kept) != t.ndim:
        t = bind(P.reshape_p, t, new_sizes=tuple(t.shape[i] for i in kept))
    out = bind(P.broadcast_in_dim_p, t, shape=shape, dims=tuple(lead + i for i in kept))
    out.weak_type = weak
    return out


def broadcast_arrays(*xs: Tracer, op: str = "") -> list[Tracer]:
    shape = broadcast_shapes(*[x.shape for x in xs], op=op)
    return [broadcast_to(x, shape) for x in xs]


@api
def astype(x: ArrayLike, dtype: Any) -> Tracer:
    t = lift(x)
    dt = dtypes.canonicalize(dtype)
    if t.dtype == dt:
        return t
    if dt == np.bool_:  # NumPy: nonzero -> True (HLO convert would do the same, but say it)
        return not_equal(t, 0)
    return bind(P.convert_p, t, dtype=dt)


# ---- elementwise -----------------------------------------------------------------------------
def _nary(prim: str, *xs: ArrayLike) -> Tracer:
    ts = broadcast_arrays(*promote(*xs), op=prim)
    out = bind(P.PRIMITIVES[prim], *ts)
    out.weak_type = all(t.weak_type for t in ts)
    return out


def to_inexact(x: ArrayLike) -> Tracer:
    """Integers and bools become the default float (NumPy would use float64)."""
    t = lift(x)
    if not dtypes.is_float(t.dtype):
        weak = t.weak_type
        t = bind(P.convert_p, t, dtype=dtypes.DEFAULT_FLOAT)
        t.weak_type = weak
    return t


def _unary_float(prim: str) -> Callable[[ArrayLike], Tracer]:
    def fn(x: ArrayLike) -> Tracer:
        t = to_inexact(x)
        out = bind(P.PRIMITIVES[prim], t)
        out.weak_type = t.weak_type
        return out
    fn.__name__ = prim
    return fn


def _unary_same(prim: str) -> Callable[[ArrayLike], Tracer]:
    def fn(x: ArrayLike) -> Tracer:
        t = lift(x)
        out = bind(P.PRIMITIVES[prim], t)
        out.weak_type = t.weak_type
        return out
    fn.__name__ = prim
    return fn


@api
def add(x: ArrayLike, y: ArrayLike) -> Tracer:
    x, y = promote(x, y)
    if x.dtype == np.bool_:
        return _nary("or", x, y)
    return _nary("add", x, y)


def _reject_bool(name: str, op: str, alternative: str, *ts: Tracer) -> None:
    """NumPy refuses ``-`` on booleans (it would not be a logical operation); so do we."""
    if any(t.dtype == np.bool_ for t in ts):
        raise TypeError(f"xnp.{name}: boolean {name}, the `{op}` operator, is not supported (as in NumPy); "
                        f"use {alternative} instead")


@api
def subtract(x: ArrayLike, y: ArrayLike) -> Tracer:
    x, y = promote(x, y)
    _reject_bool("subtract", "-", "the bitwise_xor, the `^` operator, or the logical_xor function", x, y)
    return _nary("sub", x, y)


@api
def multiply(x: ArrayLike, y: ArrayLike) -> Tracer:
    x, y = promote(x, y)
    if x.dtype == np.bool_:
        return _nary("and", x, y)
    return _nary("mul", x, y)


@api
def true_divide(x: ArrayLike, y: ArrayLike) -> Tracer:
    x, y = promote(x, y)
    if not dtypes.is_float(x.dtype):
        x, y = to_inexact(x), to_inexact(y)
    return _nary("div", x, y)


divide = true_divide


@api
def floor_divide(x: ArrayLike, y: ArrayLike) -> Tracer:
    """Rounds toward minus infinity, as NumPy (HLO's integer divide truncates toward zero)."""
    x, y = promote(x, y)
    if dtypes.is_float(x.dtype):
        return floor(_nary("div", x, y))
    q = _nary("div", x, y)
    if np.dtype(x.dtype).kind == "u":
        return q
    r = _nary("rem", x, y)
    adjust = logical_and(not_equal(r, 0), not_equal(less(r, 0), less(y, 0)))
    return where(adjust, subtract(q, 1), q)


@api
def remainder(x: ArrayLike, y: ArrayLike) -> Tracer:
    """The result has the sign of the divisor, as NumPy (HLO's remainder: of the dividend)."""
    r = _nary("rem", x, y)
    x, y = promote(x, y)
    if np.dtype(r.dtype).kind == "u":
        return r
    y = broadcast_to(y, r.shape)
    adjust = logical_and(not_equal(r, 0), not_equal(less(r, 0), less(y, 0)))
    return where(adjust, add(r, y), r)


mod = remainder


@api
def power(x: ArrayLike, y: ArrayLike) -> Tracer:
    if isinstance(y, int) and not isinstance(y, bool) and 0 <= y <= 4 and isinstance(x, Tracer):
        # Small integer powers as products (exact, and differentiable at x <= 0), like JAX's integer_pow.
        result = ones_like(x) if y == 0 else x
        for _ in range(max(0, y - 1)):
            result = multiply(result, x)
        return result
    return _nary("pow", x, y)


@api
def maximum(x: ArrayLike, y: ArrayLike) -> Tracer:
    return _nary("max", x, y)


@api
def minimum(x: ArrayLike, y: ArrayLike) -> Tracer:
    return _nary("min", x, y)


@api
def arctan2(y: ArrayLike, x: ArrayLike) -> Tracer:
    y, x = promote(to_inexact(y), to_inexact(x))
    return _nary("atan2", y, x)


@api
def negative(x: ArrayLike) -> Tracer:
    t = lift(x)
    _reject_bool("negative", "-", "the `~` operator or the logical_not function", t)
    return _unary_same("neg")(t)


sign = api(_unary_same("sign"))
exp = api(_unary_float("exp"))
log = api(_unary_float("log"))
log1p = api(_unary_float("log1p"))
expm1 = api(_unary_float("expm1"))
tanh = api(_unary_float("tanh"))
sqrt = api(_unary_float("sqrt"))
cbrt = api(_unary_float("cbrt"))
sin = api(_unary_float("sin"))
cos = api(_unary_float("cos"))
tan = api(_unary_float("tan"))
for _f in (sign, exp, log, log1p, expm1, tanh, sqrt, cbrt, sin, cos, tan):
    _f.__name__ = _f.__qualname__ = _f.__wrapped_api__.__name__ = _f.__name__


@api
def absolute(x: ArrayLike) -> Tracer:
    t = lift(x)
    if np.dtype(t.dtype).kind in "ub":
        return t
    return _unary_same("abs")(t)


abs = absolute  # noqa: A001 - NumPy's name


def _rounding(prim: str) -> Callable[[ArrayLike], Tracer]:
    def fn(x: ArrayLike) -> Tracer:
        t = lift(x)
        return t if not dtypes.is_float(t.dtype) else _unary_same(prim)(t)
    fn.__name__ = {"round": "round"}.get(prim, prim)
    return api(fn)


floor = _rounding("floor")
ceil = _rounding("ceil")
rint = _rounding("round")


@api
def round(x: ArrayLike, decimals: int = 0) -> Tracer:  # noqa: A001 - NumPy's name
    """Round half to even, as NumPy (``decimals`` scales by 10**decimals first)."""
    if decimals == 0:
        return rint(x)
    t = to_inexact(x)
    scale = 10.0 ** decimals
    return true_divide(rint(multiply(t, scale)), scale)


around = round


@api
def trunc(x: ArrayLike) -> Tracer:
    t = lift(x)
    return where(less(t, 0), ceil(t), floor(t))


@api
def square(x: ArrayLike) -> Tracer:
    return multiply(x, x)


@api
def reciprocal(x: ArrayLike) -> Tracer:
    return true_divide(1.0, to_inexact(x))


@api
def exp2(x: ArrayLike) -> Tracer:
    return exp(multiply(to_inexact(x), math.log(2.0)))


@api
def log2(x: ArrayLike) -> Tracer:
    return true_divide(log(x), math.log(2.0))


@api
def log10(x: ArrayLike) -> Tracer:
    return true_divide(log(x), math.log(10.0))


def _half_exp(a: Tracer) -> Tracer:
    """``exp(a) / 2`` for ``a >= 0`` without overflowing early: ``(exp(a/2) / 2) * exp(a/2)``
    stays finite wherever the result fits (``exp(a)`` alone overflows first)."""
    e = exp(multiply(a, 0.5))
    return multiply(multiply(e, 0.5), e)


@api
def sinh(x: ArrayLike) -> Tracer:
    """``(e^x - e^-x) / 2``: for ``|x| < 1`` as ``(E + E/(E+1)) / 2`` with ``E = expm1(x)``
    (no cancellation, so tiny ``x`` keeps its relative accuracy), else ``e^|x|/2 - e^-|x|/2``
    computed by :func:`_half_exp` so it only overflows where the result does."""
    t = to_inexact(x)
    e = expm1(clip(t, -1.0, 1.0))  # clipped: the unused branch stays finite (and so do its gradients)
    small = multiply(add(e, true_divide(e, add(e, 1.0))), 0.5)
    half = _half_exp(absolute(t))
    large = subtract(half, true_divide(0.25, half))
    large = where(less(t, 0), negative(large), large)
    return where(less(absolute(t), 1.0), small, large)


@api
def cosh(x: ArrayLike) -> Tracer:
    """``(e^x + e^-x) / 2 = e^|x|/2 + 1/(4 * (e^|x|/2))``, finite wherever the result fits."""
    half = _half_exp(absolute(to_inexact(x)))
    return add(half, true_divide(0.25, half))


@api
def arctan(x: ArrayLike) -> Tracer:
    t = to_inexact(x)
    return arctan2(t, ones_like(t))


@api
def arcsin(x: ArrayLike) -> Tracer:
    t = to_inexact(x)
    return arctan2(t, sqrt(subtract(1.0, multiply(t, t))))


@api
def arccos(x: ArrayLike) -> Tracer:
    t = to_inexact(x)
    return arctan2(sqrt(subtract(1.0, multiply(t, t))), t)


# ---- comparisons and logic ---------------------------------------------------------------------
_COMPARE_OPS = {"EQ": "==", "NE": "!=", "LT": "<", "LE": "<=", "GT": ">", "GE": ">="}


def _compare(direction: str, name: str) -> Callable[[ArrayLike, ArrayLike], Tracer]:
    def fn(x: ArrayLike, y: ArrayLike) -> Tracer:
        if x is None or y is None:
            # NumPy compares None as an object (``np.ones(2) == None`` is all False); XLA arrays have
            # no object dtype, and an all-False array would hide the usual bug, so refuse it clearly.
            raise TypeError(f"xnp.{name} (the `{_COMPARE_OPS[direction]}` operator): comparison with None is not "
                            "supported (arrays have no object dtype); use `x is None` to test for None")
        ts = broadcast_arrays(*promote(x, y), op=name)
        return bind(P.compare_p, *ts, direction=direction)
    fn.__name__ = name
    return api(fn)


equal = _compare("EQ", "equal")
not_equal = _compare("NE", "not_equal")
less = _compare("LT", "less")
less_equal = _compare("LE", "less_equal")
greater = _compare("GT", "greater")
greater_equal = _compare("GE", "greater_equal")


def _as_bool(x: ArrayLike) -> Tracer:
    t = lift(x)
    return t if t.dtype == np.bool_ else astype(t, np.bool_)


@api
def logical_and(x: ArrayLike, y: ArrayLike) -> Tracer:
    return _nary("and", _as_bool(x), _as_bool(y))


@api
def logical_or(x: ArrayLike, y: ArrayLike) -> Tracer:
    return _nary("or", _as_bool(x), _as_bool(y))


@api
def logical_xor(x: ArrayLike, y: ArrayLike) -> Tracer:
    return _nary("xor", _as_bool(x), _as_bool(y))


@api
def logical_not(x: ArrayLike) -> Tracer:
    return bind(P.PRIMITIVES["not"], _as_bool(x))


def _bitwise(prim: str, name: str) -> Callable[[ArrayLike, ArrayLike], Tracer]:
    def fn(x: ArrayLike, y: ArrayLike) -> Tracer:
        if dtypes.is_float(result_type(x, y)):
            raise TypeError(f"{name} is not defined for floating-point arrays")
        return _nary(prim, x, y)
    fn.__name__ = name
    return api(fn)


bitwise_and = _bitwise("and", "bitwise_and")
bitwise_or = _bitwise("or", "bitwise_or")
bitwise_xor = _bitwise("xor", "bitwise_xor")


def _check_shift(name: str, x: ArrayLike, y: ArrayLike) -> np.dtype:
    dtype = result_type(x, y)
    if not dtypes.is_int(dtype):
        raise TypeError(f"{name} needs integer arrays, got {np.dtype(dtype).name}")
    return dtype


@api
def left_shift(x: ArrayLike, y: ArrayLike) -> Tracer:
    """``x << y`` (HLO ``shift-left``; shifting by the bit width or more gives 0)."""
    _check_shift("left_shift", x, y)
    return _nary("shift_left", x, y)


@api
def right_shift(x: ArrayLike, y: ArrayLike) -> Tracer:
    """``x >> y`` as NumPy does it: arithmetic (sign-filling) for signed integers, logical
    for unsigned ones (HLO ``shift-right-arithmetic`` / ``shift-right-logical``)."""
    dtype = _check_shift("right_shift", x, y)
    unsigned = np.dtype(dtype).kind == "u"
    return _nary("shift_right_logical" if unsigned else "shift_right_arithmetic", x, y)


@api
def invert(x: ArrayLike) -> Tracer:
    t = lift(x)
    if dtypes.is_float(t.dtype):
        raise TypeError("~ (invert) is not defined for floating-point arrays")
    return bind(P.PRIMITIVES["not"], t)


bitwise_not = invert


@api
def isfinite(x: ArrayLike) -> Tracer:
    t = lift(x)
    if not dtypes.is_float(t.dtype):
        return full(t.shape, True)
    return bind(P.PRIMITIVES["is_finite"], t)


@api
def isnan(x: ArrayLike) -> Tracer:
    t = lift(x)
    return not_equal(t, t)


@api
def isinf(x: ArrayLike) -> Tracer:
    t = lift(x)
    return logical_and(logical_not(isfinite(t)), logical_not(isnan(t)))


def where(condition: ArrayLike, x: ArrayLike = None, y: ArrayLike = None) -> Tracer:
    """``where(c, x, y)`` picks per element (HLO ``select``); the one-argument form
    ``where(c)`` is ``nonzero`` and cannot be compiled."""
    if x is None and y is None:  # NumPy's where(c) is nonzero(c): its shape depends on the data
        if current_context() is None:
            return tuple(np.nonzero(np.asarray(condition)))
        raise data_dependent_shape_error(
            "xnp.where(condition) with one argument", "pass a static size: xnp.nonzero(condition, size=N, "
            "fill_value=0) returns exactly N indices per dimension; or keep the full shape with xnp.where(c, x, 0)")
    if x is None or y is None:
        raise ValueError("where needs both x and y (or neither)")
    if current_context() is None:
        return eager_call(_where3, (condition, x, y), {})
    return _where3(condition, x, y)


def _where3(condition: ArrayLike, x: ArrayLike, y: ArrayLike) -> Tracer:
    c = _as_bool(condition)
    x, y = promote(x, y)
    c, x, y = broadcast_arrays(c, x, y, op="where")
    out = bind(P.select_p, c, x, y)
    out.weak_type = x.weak_type and y.weak_type
    return out


_where3.__name__ = "where"


@api
def clip(x: ArrayLike, a_min: ArrayLike = None, a_max: ArrayLike = None) -> Tracer:
    t = lift(x)
    if a_min is not None:
        t = maximum(t, a_min)
    if a_max is not None:
        t = minimum(t, a_max)
    return t


# ---- creation ---------------------------------------------------------------------------------------
def _static_shape(shape: Any, what: str) -> tuple[int, ...]:
    if isinstance(shape, Tracer):
        raise data_dependent_shape_error(f"xnp.{what} with a traced shape", "shapes must be Python ints; mark "
                                         "the argument that decides the shape static with jit(..., "
                                         "static_argnums=...)")
    if isinstance(shape, (int, np.integer)):
        shape = (shape,)
    out = []
    for d in shape:
        if isinstance(d, Tracer):
            raise data_dependent_shape_error(f"xnp.{what} with a traced shape", "shapes must be Python ints; "
                                             "mark the argument that decides the shape static with jit(..., "
                                             "static_argnums=...)")
        out.append(int(d))
    if any(d < 0 for d in out):
        raise ValueError(f"xnp.{what}: negative dimensions are not allowed (got shape {tuple(out)})")
    return tuple(out)


@api
def full(shape: Any, fill_value: ArrayLike, dtype: Any = None) -> Tracer:
    shape = _static_shape(shape, "full")
    if dtype is None:
        value = lift(fill_value)
    else:
        value = astype(lift(fill_value), dtype)
    return broadcast_to(value, shape) if value.shape != shape else value


@api
def zeros(shape: Any, dtype: Any = None) -> Tracer:
    return full(_static_shape(shape, "zeros"), 0, dtype if dtype is not None else dtypes.DEFAULT_FLOAT)


@api
def ones(shape: Any, dtype: Any = None) -> Tracer:
    return full(_static_shape(shape, "ones"), 1, dtype if dtype is not None else dtypes.DEFAULT_FLOAT)


empty = zeros


@api
def full_like(x: ArrayLike, fill_value: ArrayLike, dtype: Any = None) -> Tracer:
    t = lift(x)
    return full(t.shape, fill_value, dtype if dtype is not None else t.dtype)


@api
def zeros_like(x: ArrayLike, dtype: Any = None) -> Tracer:
    return full_like(x, 0, dtype)


@api
def ones_like(x: ArrayLike, dtype: Any = None) -> Tracer:
    return full_like(x, 1, dtype)


def _static_number(value: Any, what: str) -> Any:
    if isinstance(value, Tracer):
        raise data_dependent_shape_error(f"xnp.{what}", "the bounds decide the length of the result, so they "
                                         "must be Python numbers; mark them static, or build xnp.arange(n) with a "
                                         "static n and scale/shift it")
    return value.item() if isinstance(value, np.generic) else value


@api
def arange(start: Any, stop: Any = None, step: Any = 1, dtype: Any = None) -> Tracer:
    """``iota`` scaled and shifted; the bounds must be static Python numbers."""
    start, stop, step = (_static_number(v, "arange") for v in (start, stop, step))
    if stop is None:
        start, stop = 0, start
    if step == 0:
        raise ZeroDivisionError("xnp.arange: step must not be zero (as in NumPy: division by zero)")
    n = max(0, math.ceil((stop - start) / step))
    if dtype is None:
        is_int = all(isinstance(v, (int, np.integer)) for v in (start, stop, step))
        dtype = dtypes.DEFAULT_INT if is_int else dtypes.DEFAULT_FLOAT
    dtype = dtypes.canonicalize(dtype)
    out = bind(P.iota_p, dtype=dtype, shape=(n,), dimension=0)
    if step != 1:
        out = multiply(out, np.asarray(step, dtype))
    if start != 0:
        out = add(out, np.asarray(start, dtype))
    return out


@api
def linspace(start: Any, stop: Any, num: int = 50, endpoint: bool = True, dtype: Any = None) -> Tracer:
    num = int(_static_number(num, "linspace"))
    if num < 0:
        raise ValueError(f"xnp.linspace: Number of samples, {num}, must be non-negative.")
    dtype = dtypes.canonicalize(dtype) if dtype is not None else dtypes.DEFAULT_FLOAT
    div = (num - 1) if endpoint else num
    start_t, stop_t = to_inexact(start), to_inexact(stop)
    steps = bind(P.iota_p, dtype=dtypes.DEFAULT_FLOAT, shape=(num,), dimension=0)
    delta = subtract(stop_t, start_t)
    out = add(start_t, multiply(steps, true_divide(delta, float(max(div, 1)))))
    if endpoint and num > 1:
        out = out.at[num - 1].set(stop_t)  # exactly `stop`, as NumPy
    return astype(out, dtype)


@api
def eye(N: int, M: int | None = None, k: int = 0, dtype: Any = None) -> Tracer:
    N, M = int(_static_number(N, "eye")), int(_static_number(N if M is None else M, "eye"))
    if N < 0 or M < 0:
        raise ValueError(f"xnp.eye: negative dimensions are not allowed (got N={N}, M={M})")
    rows = bind(P.iota_p, dtype=np.int32, shape=(N, M), dimension=0)
    cols = bind(P.iota_p, dtype=np.int32, shape=(N, M), dimension=1)
    return astype(equal(add(rows, k), cols), dtype if dtype is not None else dtypes.DEFAULT_FLOAT)


identity = eye


@api
def one_hot(x: ArrayLike, num_classes: int, dtype: Any = None, axis: int = -1) -> Tracer:
    """``out[..., c] = (x[...] == c)``: a new axis of size ``num_classes`` (JAX's ``nn.one_hot``)."""
    t = lift(x)
    out_ndim = t.ndim + 1
    axis = axis % out_ndim
    shape = t.shape[:axis] + (num_classes,) + t.shape[axis:]
    classes = bind(P.iota_p, dtype=t.dtype if dtypes.is_int(t.dtype) else np.int32, shape=shape, dimension=axis)
    expanded = bind(P.broadcast_in_dim_p, t, shape=shape,
                    dims=tuple(i if i < axis else i + 1 for i in range(t.ndim)))
    return astype(equal(expanded, classes), dtype if dtype is not None else dtypes.DEFAULT_FLOAT)


@api
def ravel(x: ArrayLike) -> Tracer:
    t = lift(x)
    return t if t.ndim == 1 else bind(P.reshape_p, t, new_sizes=(t.size,))


def shape(x: ArrayLike) -> tuple[int, ...]:
    return _shape_of(x)


def ndim(x: ArrayLike) -> int:
    return len(_shape_of(x))


def size(x: ArrayLike) -> int:
    return int(np.prod(_shape_of(x), dtype=np.int64))


_INTERNAL = {"api", "eager_call", "lift", "promote", "shape", "ndim", "size"}
__all__ = sorted(n for n, v in list(globals().items())
                 if not n.startswith("_") and callable(v) and getattr(v, "__module__", "") == __name__
                 and n not in _INTERNAL and not isinstance(v, type)) + ["shape", "ndim", "size"]
