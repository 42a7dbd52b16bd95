"""Tracing: running a Python function on *abstract* arrays to record an HLO program.

``jit(f)(x)`` does not run ``f`` on ``x``. It calls ``f`` with a :class:`Tracer`
for each array argument: an object that has a shape and a dtype but no values.
Every ``xnp`` operation on tracers adds HLO instructions (through an
:class:`~xla_teach.hlo.builder.XlaBuilder`) and returns new tracers. When ``f``
returns, the instructions form the ENTRY computation of the module.

The pieces:

* :class:`TraceContext` -- one computation being built (the ENTRY, or a loop body
  or branch); contexts nest, and a tracer from an enclosing context used inside a
  body is *captured*: it becomes an extra parameter of the body (closure conversion).
* :class:`Primitive` -- one operation the front end knows how to lower to HLO (and,
  for autodiff, how to transpose). :func:`bind` applies a primitive to tracers.
* The *tape* hook: while ``grad`` traces a function, :func:`bind` records every
  primitive applied to values that depend on the differentiated inputs
  (see :mod:`xla_teach.frontend.autodiff`).
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from xla_teach.frontend import dtypes
from xla_teach.frontend.errors import CompilationError, SourceLocation, concretization_error, user_frame
from xla_teach.hlo.attributes import OpMetadata
from xla_teach.hlo.builder import XlaBuilder, XlaOp
from xla_teach.hlo.ir import HloComputation
from xla_teach.hlo.shape import Shape
from xla_teach.hlo.types import PrimitiveType


@dataclass(frozen=True)
class ShapedArray:
    """An abstract value: what is known about an array while tracing (JAX's name)."""

    shape: tuple[int, ...]
    dtype: np.dtype
    weak_type: bool = False

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def hlo_shape(self) -> Shape:
        return Shape.array(PrimitiveType.from_dtype(self.dtype), self.shape)

    def __str__(self) -> str:
        etype = PrimitiveType.from_dtype(self.dtype).value
        return f"{etype}[{','.join(str(d) for d in self.shape)}]" + ("{weak}" if self.weak_type else "")


class TraceContext:
    """One computation under construction.

    ``name_stack`` prefixes the ``op_name`` metadata of every instruction
    (``jit(f)/while/body/mul``), as JAX does. ``on_capture`` is called when an
    operation uses a tracer of an *enclosing* context; it returns the local stand-in
    (a new parameter). The ENTRY context has none: there, a foreign tracer is an error.
    """

    def __init__(self, builder: XlaBuilder, name_stack: str, parent: TraceContext | None = None,
                 on_capture: Callable[[Tracer], XlaOp] | None = None) -> None:
        self.builder = builder
        self.name_stack = name_stack
        self.parent = parent
        self.on_capture = on_capture
        self.captured: list[Tracer] = []  # outer tracers, in capture order
        self._local_of: dict[int, Tracer] = {}
        same_module = parent is not None and parent.builder.module is builder.module
        self.reducers: dict[tuple[Any, ...], HloComputation] = parent.reducers if same_module else {}
        self.closed = False
        # The source line instructions are attributed to instead of the caller's: a backward pass
        # is emitted at the grad call, but each transpose belongs to the forward line it
        # differentiates (as JAX attributes it). Inherited by nested contexts (a loop's body).
        self.source: SourceLocation | None = parent.source if parent is not None else None

    @contextlib.contextmanager
    def at_source(self, location: SourceLocation | None) -> Iterator[None]:
        """Attribute what is built inside to ``location`` (when it is known)."""
        saved = self.source
        self.source = location or saved
        try:
            yield
        finally:
            self.source = saved

    def is_ancestor(self, other: TraceContext) -> bool:
        ctx = self.parent
        while ctx is not None:
            if ctx is other:
                return True
            ctx = ctx.parent
        return False

    def lift(self, value: Any) -> Tracer:
        """``value`` as a tracer of this context: captured if it comes from an enclosing
        context, a constant if it is a Python scalar or NumPy array."""
        if isinstance(value, Tracer):
            if value.ctx is self:
                return value
            local = self._local_of.get(id(value))
            if local is not None:
                return local
            if self.on_capture is None or not self.is_ancestor(value.ctx):
                raise CompilationError(
                    "using a traced value", f"the value {value.aval} belongs to a different trace (it escaped "
                    "from the function that created it, e.g. stored in a global or returned through a "
                    "side channel, or it comes from a trace that already finished)",
                    "pass the value in as an argument and return it as a result instead")
            local = Tracer(self, self.on_capture(value), value.weak_type)
            self._local_of[id(value)] = local
            self.captured.append(value)
            return local
        return self.constant(value)

    def constant(self, value: Any, dtype: np.dtype | None = None) -> Tracer:
        """A constant instruction; Python scalars become weakly typed constants."""
        weak = False
        if isinstance(value, (bool, int, float)) and not isinstance(value, np.generic):
            dt = dtypes.python_scalar_dtype(value) if dtype is None else dtype
            weak = dtype is None
            array = np.asarray(value, dtype=dt)
        else:
            try:
                array = np.asarray(value)
            except Exception:
                array = np.asarray(None, dtype=object)
            if array.dtype == object or array.dtype.kind in "USVc":
                raise ValueError(f"cannot use a {type(value).__name__} as an array ({value!r:.60})")
            array = array.astype(dtypes.canonicalize(dtype if dtype is not None else array.dtype))
        with self.metadata("constant"):
            op = self.builder.constant(array)
        return Tracer(self, op, weak)

    @contextlib.contextmanager
    def metadata(self, op_name: str, scoped: bool = True) -> Iterator[None]:
        """Attach ``op_name`` (under the name stack unless not ``scoped``: a parameter's op_name is
        its pytree path, ``params['w1']``, as JAX writes it) and the user's source line to the
        instructions built inside."""
        fields: dict[str, str | int] = {"op_name": f"{self.name_stack}/{op_name}" if scoped else op_name}
        loc = self.source or user_frame()
        if loc is not None:
            fields["source_file"] = source_path(loc.file)
            fields["source_line"] = loc.line
        saved = self.builder._metadata
        self.builder.set_op_metadata(OpMetadata(fields))
        try:
            yield
        finally:
            self.builder.set_op_metadata(saved)


class _ThreadState(threading.local):
    """What is being traced, per thread: two threads calling jitted functions trace separately
    (as JAX keeps its trace state per thread)."""

    def __init__(self) -> None:
        self.contexts: list[TraceContext] = []
        self.tapes: list[Tape] = []


_STATE = _ThreadState()


def source_path(file: str) -> str:
    """The path written into ``source_file``: relative to the working directory when the file is
    below it (``model_fn.py``), else absolute -- so that the compile explorer can read the line."""
    try:
        relative = os.path.relpath(file)
    except ValueError:  # another drive (Windows)
        return os.path.abspath(file)
    return os.path.abspath(file) if relative.startswith("..") else relative


def current_context() -> TraceContext | None:
    """The innermost context being traced, or None outside ``jit`` (eager mode)."""
    return _STATE.contexts[-1] if _STATE.contexts else None


@contextlib.contextmanager
def push_context(ctx: TraceContext) -> Iterator[TraceContext]:
    _STATE.contexts.append(ctx)
    try:
        yield ctx
    finally:
        _STATE.contexts.pop()
        ctx.closed = True


@contextlib.contextmanager
def name_scope(name: str) -> Iterator[None]:
    """Extend the ``op_name`` prefix of the current context, as ``jax.named_scope`` does::

        with xla_teach.named_scope("layer1"):
            h = relu(x @ w)        # op_name="jit(f)/layer1/dot_general", ...

    ``grad`` uses it too (``jvp(loss)``, ``transpose(jvp(loss))``). Outside a trace it does nothing.
    The compile explorer groups a module's instructions by these scopes."""
    ctx = current_context()
    if ctx is None:
        yield
        return
    saved = ctx.name_stack
    ctx.name_stack = f"{saved}/{name}"
    try:
        yield
    finally:
        ctx.name_stack = saved


# ---- primitives -----------------------------------------------------------------------
@dataclass
class Primitive:
    """An operation with a lowering to HLO and (optionally) a reverse-mode rule.

    ``lower(builder, *operand_ops, **params)`` returns one XlaOp (or a list when
    ``multiple_results``). ``vjp(cotangents, inputs, outputs, **params)`` returns one
    cotangent (a tracer or None) per input; see :mod:`xla_teach.frontend.autodiff_rules`.
    """

    name: str
    lower: Callable[..., Any]
    multiple_results: bool = False
    vjp: Callable[..., Sequence[Tracer | None]] | None = None
    nondiff_reason: str = ""


@dataclass
class Equation:
    """One recorded application of a primitive (a line of the tape)."""

    primitive: Primitive
    inputs: list[Tracer]
    outputs: list[Tracer]
    params: dict[str, Any] = field(default_factory=dict)
    scope: str = ""  # the op_name prefix it was traced under, so its transpose lands in the same scope
    location: SourceLocation | None = None  # the user's line it was traced at: its transpose's line too


class Tape:
    """The equations of one ``grad``: those depending on the differentiated inputs. ``base`` is
    the name stack the differentiated function was traced under (``jit(f)/jvp(loss)``)."""

    def __init__(self, ctx: TraceContext) -> None:
        self.ctx = ctx
        self.base = ctx.name_stack
        self.tracked: set[int] = set()
        self.keep_alive: list[Tracer] = []
        self.equations: list[Equation] = []

    def track(self, tracer: Tracer) -> None:
        self.tracked.add(id(tracer))
        self.keep_alive.append(tracer)


def active_tapes() -> list[Tape]:
    """The tapes recording on this thread, outermost first."""
    return _STATE.tapes


@contextlib.contextmanager
def recording(tape: Tape) -> Iterator[Tape]:
    _STATE.tapes.append(tape)
    try:
        yield tape
    finally:
        _STATE.tapes.remove(tape)


def bind(primitive: Primitive, *args: Any, **params: Any) -> Any:
    """Apply ``primitive`` to ``args`` (tracers or constants) in the current context."""
    ctx = current_context()
    if ctx is None:
        raise RuntimeError(f"bind({primitive.name}) outside a trace")
    inputs = [ctx.lift(a) for a in args]
    with ctx.metadata(primitive.name):
        result = primitive.lower(ctx.builder, *[t.op for t in inputs], **params)
    ops = list(result) if primitive.multiple_results else [result]
    outputs = [Tracer(ctx, op) for op in ops]
    for tape in _STATE.tapes:
        if tape.ctx is ctx and any(id(t) in tape.tracked for t in inputs):
            tape.equations.append(Equation(primitive, inputs, outputs, params, ctx.name_stack,
                                           ctx.source or user_frame()))
            for out in outputs:
                if dtypes.is_float(out.dtype):
                    tape.track(out)
    return outputs if primitive.multiple_results else outputs[0]


# ---- the traced array -----------------------------------------------------------------
# A Tracer's operators and methods are NumPy functions (``x + y`` is ``xnp.add(x, y)``, ``x[i]``
# is a gather). Those are defined in the layer above this one; :mod:`xla_teach.numpy` registers
# them here when it is imported (as the Python array API standard has every array name its
# namespace: ``x.__array_namespace__()``), so this core never imports the layers built on it.
@dataclass(frozen=True)
class ArrayMethods:
    namespace: Any  # xla_teach.numpy: x + y calls namespace.add(x, y)
    getitem: Callable[[Any, Any], Any]  # x[index]
    at: Callable[[Any], Any]  # x.at[index].set(v) and friends


_ARRAY_METHODS: list[ArrayMethods] = []


def register_array_methods(methods: ArrayMethods) -> None:
    """Called once by :mod:`xla_teach.numpy`: what a Tracer's operators and methods call."""
    _ARRAY_METHODS[:] = [methods]


def _methods() -> ArrayMethods:
    if not _ARRAY_METHODS:
        raise RuntimeError("a traced array's operators need xla_teach.numpy: import xla_teach first")
    return _ARRAY_METHODS[0]


def _np() -> Any:
    return _methods().namespace


class Tracer:
    """A traced array: shape and dtype known, values not (they exist only at run time).

    Supports NumPy's operators and the common ``ndarray`` methods; ``x.at[i].set(v)``
    is the functional update. Anything that needs the values -- ``bool(x)``,
    ``float(x)``, ``np.asarray(x)`` -- raises :class:`CompilationError`.
    """

    __slots__ = ("ctx", "op", "weak_type", "__weakref__")
    __array_priority__ = 1000

    def __init__(self, ctx: TraceContext, op: XlaOp, weak_type: bool = False) -> None:
        self.ctx = ctx
        self.op = op
        self.weak_type = weak_type

    # ---- abstract value ---------------------------------------------------------------
    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.op.shape.dimensions)

    @property
    def dtype(self) -> np.dtype:
        return self.op.shape.element_type.dtype

    @property
    def aval(self) -> ShapedArray:
        return ShapedArray(self.shape, self.dtype, self.weak_type)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d (scalar) array")
        return self.shape[0]

    def __repr__(self) -> str:
        return f"Traced<{self.aval}>"

    # ---- values that do not exist yet -----------------------------------------------
    def __bool__(self) -> bool:
        raise concretization_error(
            "bool() of a traced array", "a Python `if`, `while`, `and`, `or`, `not` or `assert` on a traced "
            "value", "use xnp.where(cond, a, b) for elementwise choices, xla_teach.numpy.cond(pred, "
            "true_fn, false_fn, *operands) to choose between computations, or while_loop/fori_loop for loops; "
            "or mark the argument static with jit(..., static_argnums=...)")

    def __float__(self) -> float:
        raise concretization_error("float() of a traced array", "converting to a Python float",
                                   "keep the value as an array (return it from the jitted function and "
                                   "convert the result), or mark the argument static")

    def __int__(self) -> int:
        raise concretization_error("int() of a traced array", "converting to a Python int",
                                   "keep the value as an array, or mark the argument static with "
                                   "jit(..., static_argnums=...) if it decides a shape")

    def __index__(self) -> int:
        raise concretization_error("using a traced array as a Python index", "range(x), list[x], a shape "
                                   "or a slice bound built from a traced value",
                                   "index arrays with traced integers (x[i] becomes dynamic-slice), use "
                                   "fori_loop instead of range(), or make the value static")

    def __complex__(self) -> complex:
        raise concretization_error("complex() of a traced array", "converting to a Python complex",
                                   "keep the value as an array")

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        raise concretization_error("converting a traced array to a NumPy array", "np.asarray(x) / np.<fn>(x)",
                                   "use the xla_teach.numpy (xnp) function instead of the NumPy one inside "
                                   "jitted code")

    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
        """``np.exp(x)`` or ``np_array * x`` on a tracer: use the ``xnp`` function of the
        same name (NumPy cannot compute on values that do not exist yet)."""
        fn = getattr(_np(), ufunc.__name__, None)
        if method != "__call__" or kwargs or fn is None:
            raise concretization_error(f"numpy.{ufunc.__name__}{'.' + method if method != '__call__' else ''} on a "
                                       "traced array", "running a NumPy function",
                                       f"use xla_teach.numpy.{ufunc.__name__} (xnp) inside jitted code")
        return fn(*inputs)

    def __array_function__(self, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
        """``np.sum(x)``, ``np.reshape(x, s)``, ``np.concatenate([x, y])`` on a tracer (NumPy's
        NEP 18 hook): use the ``xnp`` function of the same name. Without this hook NumPy would
        call ``x.sum(axis=None, dtype=None, out=None)`` or ``np.asarray(x)`` and fail deep inside
        NumPy. A function ``xnp`` does not have runs NumPy's own code (``np.shape(x)`` works)."""
        fn = getattr(_np(), func.__name__, None)
        if fn is None or not callable(fn):
            return func._implementation(*args, **kwargs)
        if kwargs.get("out") is not None:
            raise CompilationError(f"numpy.{func.__name__}(..., out=...) on a traced array",
                                   "arrays are immutable values in XLA programs",
                                   f"use the result: y = xla_teach.numpy.{func.__name__}(...)")
        kwargs = {k: v for k, v in kwargs.items() if k != "out"}
        return fn(*args, **kwargs)

    def tolist(self) -> Any:
        raise concretization_error("tolist() of a traced array", "converting to Python values",
                                   "return the array from the jitted function and convert the result")

    def item(self) -> Any:
        raise concretization_error("item() of a traced array", "converting to a Python scalar",
                                   "return the array from the jitted function and convert the result")

    def __iter__(self) -> Iterator[Tracer]:
        if not self.shape:
            raise TypeError("iteration over a 0-d (scalar) array")
        return (self[i] for i in range(self.shape[0]))

    def __hash__(self) -> int:
        raise TypeError("traced arrays are not hashable (a static argument must be a hashable Python value)")

    # ---- operators ----------------------------------------------------------------------
    def __add__(self, o: Any) -> Tracer: return _np().add(self, o)
    def __radd__(self, o: Any) -> Tracer: return _np().add(o, self)
    def __sub__(self, o: Any) -> Tracer: return _np().subtract(self, o)
    def __rsub__(self, o: Any) -> Tracer: return _np().subtract(o, self)
    def __mul__(self, o: Any) -> Tracer: return _np().multiply(self, o)
    def __rmul__(self, o: Any) -> Tracer: return _np().multiply(o, self)
    def __truediv__(self, o: Any) -> Tracer: return _np().true_divide(self, o)
    def __rtruediv__(self, o: Any) -> Tracer: return _np().true_divide(o, self)
    def __floordiv__(self, o: Any) -> Tracer: return _np().floor_divide(self, o)
    def __rfloordiv__(self, o: Any) -> Tracer: return _np().floor_divide(o, self)
    def __mod__(self, o: Any) -> Tracer: return _np().remainder(self, o)
    def __rmod__(self, o: Any) -> Tracer: return _np().remainder(o, self)
    def __pow__(self, o: Any) -> Tracer: return _np().power(self, o)
    def __rpow__(self, o: Any) -> Tracer: return _np().power(o, self)
    def __matmul__(self, o: Any) -> Tracer: return _np().matmul(self, o)
    def __rmatmul__(self, o: Any) -> Tracer: return _np().matmul(o, self)
    def __neg__(self) -> Tracer: return _np().negative(self)
    def __pos__(self) -> Tracer: return self
    def __abs__(self) -> Tracer: return _np().abs(self)
    def __invert__(self) -> Tracer: return _np().invert(self)
    def __and__(self, o: Any) -> Tracer: return _np().bitwise_and(self, o)
    def __rand__(self, o: Any) -> Tracer: return _np().bitwise_and(o, self)
    def __or__(self, o: Any) -> Tracer: return _np().bitwise_or(self, o)
    def __ror__(self, o: Any) -> Tracer: return _np().bitwise_or(o, self)
    def __xor__(self, o: Any) -> Tracer: return _np().bitwise_xor(self, o)
    def __rxor__(self, o: Any) -> Tracer: return _np().bitwise_xor(o, self)
    def __lshift__(self, o: Any) -> Tracer: return _np().left_shift(self, o)
    def __rlshift__(self, o: Any) -> Tracer: return _np().left_shift(o, self)
    def __rshift__(self, o: Any) -> Tracer: return _np().right_shift(self, o)
    def __rrshift__(self, o: Any) -> Tracer: return _np().right_shift(o, self)
    def __lt__(self, o: Any) -> Tracer: return _np().less(self, o)
    def __le__(self, o: Any) -> Tracer: return _np().less_equal(self, o)
    def __gt__(self, o: Any) -> Tracer: return _np().greater(self, o)
    def __ge__(self, o: Any) -> Tracer: return _np().greater_equal(self, o)
    def __eq__(self, o: Any) -> Tracer: return _np().equal(self, o)  # type: ignore[override]
    def __ne__(self, o: Any) -> Tracer: return _np().not_equal(self, o)  # type: ignore[override]

    # ---- indexing -------------------------------------------------------------------------
    def __getitem__(self, index: Any) -> Tracer:
        return _methods().getitem(self, index)

    def __setitem__(self, index: Any, value: Any) -> None:
        raise CompilationError("x[...] = value on a traced array", "arrays are immutable values in XLA programs",
                               "use x = x.at[index].set(value), which returns the updated array")

    @property
    def at(self) -> Any:
        return _methods().at(self)

    def __array_namespace__(self, api_version: str | None = None) -> Any:
        """The array API standard's hook: the module whose functions work on this array."""
        return _np()

    # ---- ndarray methods -------------------------------------------------------------------
    @property
    def T(self) -> Tracer:
        return _np().transpose(self)

    def reshape(self, *shape: Any) -> Tracer:
        return _np().reshape(self, shape[0] if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else shape)

    def transpose(self, *axes: Any) -> Tracer:
        if not axes:
            return _np().transpose(self)
        return _np().transpose(self, axes[0] if len(axes) == 1 and isinstance(axes[0], (tuple, list)) else axes)

    def astype(self, dtype: Any) -> Tracer: return _np().astype(self, dtype)
    def flatten(self) -> Tracer: return _np().ravel(self)
    def ravel(self) -> Tracer: return _np().ravel(self)
    def squeeze(self, axis: Any = None) -> Tracer: return _np().squeeze(self, axis)
    def swapaxes(self, a: int, b: int) -> Tracer: return _np().swapaxes(self, a, b)
    def sum(self, axis: Any = None, keepdims: bool = False, dtype: Any = None) -> Tracer:
        return _np().sum(self, axis, keepdims=keepdims, dtype=dtype)
    def prod(self, axis: Any = None, keepdims: bool = False) -> Tracer: return _np().prod(self, axis, keepdims=keepdims)
    def mean(self, axis: Any = None, keepdims: bool = False) -> Tracer: return _np().mean(self, axis, keepdims=keepdims)
    def var(self, axis: Any = None, keepdims: bool = False, ddof: int = 0) -> Tracer:
        return _np().var(self, axis, keepdims=keepdims, ddof=ddof)
    def std(self, axis: Any = None, keepdims: bool = False, ddof: int = 0) -> Tracer:
        return _np().std(self, axis, keepdims=keepdims, ddof=ddof)
    def max(self, axis: Any = None, keepdims: bool = False) -> Tracer: return _np().max(self, axis, keepdims=keepdims)
    def min(self, axis: Any = None, keepdims: bool = False) -> Tracer: return _np().min(self, axis, keepdims=keepdims)
    def argmax(self, axis: Any = None, keepdims: bool = False) -> Tracer:
        return _np().argmax(self, axis, keepdims=keepdims)
    def argmin(self, axis: Any = None, keepdims: bool = False) -> Tracer:
        return _np().argmin(self, axis, keepdims=keepdims)
    def any(self, axis: Any = None, keepdims: bool = False) -> Tracer: return _np().any(self, axis, keepdims=keepdims)
    def all(self, axis: Any = None, keepdims: bool = False) -> Tracer: return _np().all(self, axis, keepdims=keepdims)
    def cumsum(self, axis: Any = None) -> Tracer: return _np().cumsum(self, axis)
    def clip(self, a_min: Any = None, a_max: Any = None) -> Tracer: return _np().clip(self, a_min, a_max)
    def dot(self, other: Any) -> Tracer: return _np().dot(self, other)
    def nonzero(self) -> Any: return _np().nonzero(self)


def eval_shape(fn: Callable[..., Any], *args: Any) -> Any:
    """Trace ``fn(*args)`` into a throwaway module and return its abstract result
    (a pytree of :class:`ShapedArray`): the result shapes without adding anything to
    the program being built. Tracers of the current trace in ``args`` (or closed over)
    become parameters of the throwaway module."""
    from xla_teach.frontend.pytree import tree_map

    parent = current_context()
    scratch = XlaBuilder("eval_shape")
    count = [0]

    def capture(outer: Tracer) -> XlaOp:
        op = scratch.parameter(count[0], outer.op.shape)
        count[0] += 1
        return op

    ctx = TraceContext(scratch, "eval_shape", parent, capture)
    with push_context(ctx):
        out = fn(*args)
        return tree_map(lambda v: ctx.lift(v).aval, out)
