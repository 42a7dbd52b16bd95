"""Structured control flow: ``while_loop``, ``fori_loop``, ``scan``, ``cond``, ``switch``.

A Python ``for``/``if`` inside ``jit`` runs *while tracing*: a loop is unrolled, an
``if`` on a traced value is an error. To put the loop or the choice *into the
program*, call these functions; they lower to HLO ``while`` and ``conditional``.

The body functions are traced into their own computations (``body``, ``cond``,
``branch_0``...). Values a body uses from outside (closures) are *captured*: they
are passed into the loop as extra elements of its state tuple, as JAX's closure
conversion does. Each body is first traced into a computation of its own whose
parameters are the loop state and the captures, then spliced into the wrapper that
HLO wants (one tuple parameter, unpacked with ``get-tuple-element``).

Autodiff (:mod:`xla_teach.frontend.control_flow_autodiff`): ``scan`` and ``fori_loop``
with Python-int bounds share one loop, :func:`~xla_teach.frontend.scan_loop.scan_loop`,
whose trip count is known while tracing. When a gradient may flow through it, that loop also stores the carry
of every iteration in stacked buffers, and its reverse-mode rule is a second
``scan_loop`` that walks them backwards. ``cond``/``switch`` transpose into another
``conditional``. A ``while_loop`` is not reverse-differentiable: its trip count is
decided at run time, so there is no buffer size to store the iterations in.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from xla_teach.frontend.conditional import conditional_primitive
from xla_teach.frontend.control_flow_trace import ClosedTrace, elements_of, splice, trace_closed, unique_tracers
from xla_teach.frontend.errors import CompilationError, SourceLocation, expect_pair, user_frame
from xla_teach.frontend.pytree import PyTreeDef, tree_flatten, tree_unflatten
from xla_teach.frontend.scan_loop import scan_loop
from xla_teach.frontend.tracer import (
    Primitive,
    ShapedArray,
    Tracer,
    bind,
    current_context,
)
from xla_teach.hlo.builder import XlaBuilder, XlaOp
from xla_teach.hlo.ir import HloComputation
from xla_teach.hlo.shape import Shape


def _wrapper(builder: XlaBuilder, name: str, state_shape: Shape, n_state: int, captures: list[Tracer],
             closed: ClosedTrace, body: bool) -> HloComputation:
    """The HLO-shaped computation: one tuple parameter -> the closed trace's result."""
    sub = builder.create_sub_builder(name, keep_metadata=True)
    param = sub.parameter(0, state_shape, "state")
    elements = [sub.get_tuple_element(param, i) for i in range(len(state_shape.tuple_shapes))]
    position = {id(c): n_state + k for k, c in enumerate(captures)}
    args = elements[:n_state] + [elements[position[id(c)]] for c in closed.captured]
    outs = elements_of(sub, splice(closed.computation, sub, args), n_state if body else 1)
    if body:
        return sub.build_computation(sub.tuple(outs + elements[n_state:]))
    return sub.build_computation(outs[0])


def while_loop(cond_fun: Callable[[Any], Any], body_fun: Callable[[Any], Any], init_val: Any) -> Any:
    """``val = init_val; while cond_fun(val): val = body_fun(val); return val`` as one
    HLO ``while``. ``val`` is any pytree of arrays; its shapes and dtypes are fixed.
    Not reverse-differentiable: the trip count is only known at run time, so there is
    no buffer size for storing each iteration's state (use ``fori_loop``/``scan``)."""
    ctx = current_context()
    if ctx is None:
        from xla_teach.frontend.numpy_api import eager_call

        return eager_call(lambda v: while_loop(cond_fun, body_fun, v), (init_val,), {})
    return _while(cond_fun, body_fun, init_val, "while_loop")


def _while(cond_fun: Callable[[Any], Any], body_fun: Callable[[Any], Any], init_val: Any, what: str) -> Any:
    """One HLO ``while``; ``what`` names the user's call in the gradient error."""
    ctx = current_context()
    assert ctx is not None
    location = user_frame()  # where the loop is written: the gradient error points here
    leaves, tree = tree_flatten(init_val)
    init = [ctx.lift(leaf) for leaf in leaves]
    avals = [ShapedArray(t.shape, t.dtype, False) for t in init]
    n = len(init)

    def cond_fn(*xs: Tracer) -> Any:
        pred = cond_fun(tree_unflatten(tree, xs))
        pred = current_context().lift(pred)  # type: ignore[union-attr]
        if pred.shape != () or pred.dtype != np.bool_:
            raise CompilationError("while_loop", f"cond_fun must return a boolean scalar, got {pred.aval}",
                                   "reduce it, e.g. xnp.any(...) or compare a scalar")
        return pred

    cond_closed = trace_closed(cond_fn, avals, "cond")
    body_closed = trace_closed(lambda *xs: body_fun(tree_unflatten(tree, xs)), avals, "body", avals)
    if body_closed.out_tree != tree:
        raise CompilationError("while_loop", f"body_fun returned structure {body_closed.out_tree}, but the loop "
                               f"state is {tree}", "return the state with the same structure")
    captures = unique_tracers(cond_closed.captured + body_closed.captured)

    def lower(b: XlaBuilder, *ops: XlaOp) -> list[XlaOp]:
        state = b.tuple(list(ops))
        cond_comp = _wrapper(b, "region_cond", state.shape, n, captures, cond_closed, body=False)
        body_comp = _wrapper(b, "region_body", state.shape, n, captures, body_closed, body=True)
        loop = b.while_loop(cond_comp, body_comp, state)
        return [b.get_tuple_element(loop, i) for i in range(n)]

    prim = Primitive("while", lower, multiple_results=True)
    prim.vjp = _while_not_differentiable(what, location)
    outs = bind(prim, *init, *captures)
    return tree_unflatten(tree, outs)


def _while_not_differentiable(what: str, location: SourceLocation | None) -> Callable[..., Any]:
    """The reverse-mode "rule" of a ``while``: a clear error at the loop's source line."""
    def rule(cts: Sequence[Any], inputs: Sequence[Tracer], outputs: Sequence[Tracer]) -> list[Any]:
        raise CompilationError(
            f"differentiating {what}", "reverse-mode autodiff has to store the state of every iteration "
            "(the backward pass walks the iterations in reverse), so it needs the number of iterations while "
            "tracing; this loop's trip count is decided by a traced value at run time",
            "use fori_loop with Python-int bounds or scan (their trip count is known while tracing), or cut "
            "the gradient with stop_gradient", location=location)
    return rule


def fori_loop(lower: Any, upper: Any, body_fun: Callable[[Any, Any], Any], init_val: Any) -> Any:
    """``for i in range(lower, upper): val = body_fun(i, val)``; ``i`` is int32.

    With Python-int bounds (the trip count is known while tracing) this is a
    :func:`~xla_teach.frontend.scan_loop.scan_loop` -- reverse-differentiable, as in JAX. With a traced bound it is
    an HLO ``while`` whose state is ``(i, val)`` (not reverse-differentiable)."""
    from xla_teach.frontend.numpy_api import add, asarray, astype, less

    if current_context() is None:
        from xla_teach.frontend.numpy_api import eager_call

        return eager_call(lambda v: fori_loop(lower, upper, body_fun, v), (init_val,), {})

    if not isinstance(lower, Tracer) and not isinstance(upper, Tracer):
        first = int(np.asarray(lower))
        leaves, tree = tree_flatten(init_val)

        def step(index: Tracer, carry: list[Tracer], xs: list[Tracer]) -> tuple[list[Any], list[Any]]:
            i = add(index, np.int32(first)) if first else index
            new_leaves, new_tree = tree_flatten(body_fun(i, tree_unflatten(tree, carry)))
            if new_tree != tree:
                raise CompilationError("fori_loop", f"body_fun returned structure {new_tree}, but the loop state "
                                       f"is {tree}", "return the state with the same structure")
            return new_leaves, []

        carry, _ = scan_loop(step, leaves, [], max(int(np.asarray(upper)) - first, 0), False, "fori_loop")
        return tree_unflatten(tree, carry)

    start = astype(asarray(lower), np.int32)
    stop = astype(asarray(upper), np.int32) if isinstance(upper, Tracer) else upper

    def cond(state: tuple[Any, Any]) -> Any:
        return less(state[0], stop)

    def body(state: tuple[Any, Any]) -> Any:
        i, val = state
        return add(i, np.int32(1)), body_fun(i, val)

    return _while(cond, body, (start, init_val), "fori_loop with a traced bound")[1]


def scan(f: Callable[[Any, Any], tuple[Any, Any]], init: Any, xs: Any = None, length: int | None = None,
         reverse: bool = False) -> tuple[Any, Any]:
    """JAX's ``scan``: ``carry, y = f(carry, x)`` for each ``x`` in ``xs`` (sliced along
    the leading axis); returns the final carry and the stacked ``y``s. Lowers to an
    HLO ``while`` that reads ``xs[i]`` with ``dynamic-slice`` and writes ``ys[i]``
    with ``dynamic-update-slice`` (see :func:`~xla_teach.frontend.scan_loop.scan_loop`)."""
    ctx = current_context()
    if ctx is None:
        from xla_teach.frontend.numpy_api import eager_call

        return eager_call(lambda c, x: scan(f, c, x, length, reverse), (init, xs), {})
    x_leaves, x_tree = tree_flatten(xs)
    x_leaves = [ctx.lift(x) for x in x_leaves]
    lengths = {x.shape[0] for x in x_leaves if x.ndim} | ({length} if length is not None else set())
    if len(lengths) != 1 or any(x.ndim == 0 for x in x_leaves):
        raise ValueError(f"scan: xs leaves need one common leading length (and length= must match), got "
                         f"{[x.shape for x in x_leaves]} with length={length}")
    c_leaves, c_tree = tree_flatten(init)
    y_trees: list[PyTreeDef] = []

    def step(index: Tracer, carry: list[Tracer], x: list[Tracer]) -> tuple[list[Any], list[Any]]:
        new_carry, y = expect_pair(f(tree_unflatten(c_tree, carry), tree_unflatten(x_tree, x)), "scan",
                                   "(carry, y)")
        carry_leaves, tree = tree_flatten(new_carry)
        if tree != c_tree:
            raise CompilationError("scan", f"f returned the carry structure {tree}, but the initial carry is "
                                   f"{c_tree}", "return the carry with the same structure")
        y_leaves, y_tree = tree_flatten(y)
        y_trees.append(y_tree)
        return carry_leaves, y_leaves

    carry, ys = scan_loop(step, c_leaves, x_leaves, lengths.pop(), reverse, "scan")
    return tree_unflatten(c_tree, carry), tree_unflatten(y_trees[0], ys)


def switch(index: Any, branches: Sequence[Callable[..., Any]], *operands: Any) -> Any:
    """Run ``branches[index](*operands)`` (index clamped into range) as an HLO
    ``conditional`` with one computation per branch."""
    from xla_teach.frontend.numpy_api import astype, clip

    branches = list(branches)
    if not branches:
        raise ValueError("switch: needs at least one branch")
    ctx = current_context()
    if ctx is None:
        from xla_teach.frontend.numpy_api import eager_call

        return eager_call(lambda i, *ops: switch(i, branches, *ops), (np.asarray(index), *operands), {})
    if not isinstance(index, Tracer):
        i = int(np.clip(int(np.asarray(index)), 0, len(branches) - 1))
        return branches[i](*operands)
    return conditional_primitive(astype(clip(index, 0, len(branches) - 1), np.int32), list(branches), operands)


def cond(pred: Any, true_fun: Callable[..., Any], false_fun: Callable[..., Any], *operands: Any) -> Any:
    """``true_fun(*operands) if pred else false_fun(*operands)`` as an HLO ``conditional``
    (only the chosen branch runs). Both branches must return the same structure,
    shapes and dtypes. A concrete (non-traced) ``pred`` just calls the branch."""
    from xla_teach.frontend.numpy_api import astype

    ctx = current_context()
    if ctx is None:
        from xla_teach.frontend.numpy_api import eager_call

        return eager_call(lambda p, *ops: cond(p, true_fun, false_fun, *ops), (np.asarray(pred), *operands), {})
    if not isinstance(pred, Tracer):
        return true_fun(*operands) if bool(pred) else false_fun(*operands)
    if pred.shape != ():
        raise CompilationError("cond", f"the predicate must be a scalar, got {pred.aval}",
                               "reduce it first, e.g. xnp.any(x > 0)")
    return conditional_primitive(astype(pred, np.bool_), [true_fun, false_fun], operands)
