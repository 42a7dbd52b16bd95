"""Reverse-mode automatic differentiation: ``grad``, ``value_and_grad``, ``vjp``, ``jvp``.

The gradient is itself HLO. ``grad(f)`` traces ``f`` like ``jit`` does, and while
it traces, a :class:`~xla_teach.frontend.tracer.Tape` records every primitive
applied to a value that depends on the differentiated arguments. Then it walks the
tape backwards: each primitive's *vjp rule* (vector-Jacobian product, in
:mod:`xla_teach.frontend.autodiff_rules`) turns the cotangent of its output into
cotangents of its inputs -- by emitting more HLO instructions into the same
computation. A ``mul`` becomes two ``multiply``, a ``broadcast`` becomes a
``reduce``, a ``dot`` becomes two ``dot`` with transposed dimension numbers.

So ``jit(grad(loss))`` is one module holding the forward pass and the backward
pass; its instructions carry ``op_name="jit(grad_loss)/transpose(mul)/..."``
metadata, and it is dumped, optimized and fused like any other module. Since the
backward pass is built from the same primitives, it is recorded by any *outer*
tape too: ``grad(grad(f))`` works.

Control flow is differentiated as JAX does it (rules in
:mod:`xla_teach.frontend.control_flow_autodiff`): ``cond``/``switch`` become a
``conditional`` whose branches compute each branch's VJP; ``scan`` and ``fori_loop``
with Python-int bounds store every iteration's carry in stacked buffers, and a
backward loop walks them in reverse. A ``while_loop`` (trip count decided at run
time) raises :class:`CompilationError`: there is no size for those buffers.

Outside ``jit``, ``grad``, ``value_and_grad``, ``vjp`` and ``jvp`` compile themselves
with ``jit`` and return NumPy arrays.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from xla_teach.frontend import dtypes, tracer
from xla_teach.frontend.errors import CompilationError, expect_pair
from xla_teach.frontend.pytree import tree_flatten, tree_unflatten
from xla_teach.frontend.tracer import Primitive, Tape, Tracer, bind, current_context, name_scope, recording


class _Transposing(threading.local):
    def __init__(self) -> None:
        self.tapes: list[Tape] = []  # the tapes whose backward pass is being built, on this thread


_TRANSPOSING = _Transposing()


def needs_grad(t: Tracer) -> bool:
    """Whether the backward pass being built wants a cotangent for ``t`` (rules use it to
    skip expensive work, e.g. the second ``dot`` of a product with a constant)."""
    tapes = _TRANSPOSING.tapes
    return not tapes or id(t) in tapes[-1].tracked


def is_recorded(tracers: Sequence[Tracer]) -> bool:
    """Whether a tape of the current trace tracks one of ``tracers``: a gradient may flow
    through an operation on them (loops then store what their backward pass needs)."""
    ctx = current_context()
    return any(tape.ctx is ctx and any(id(t) in tape.tracked for t in tracers) for tape in tracer.active_tapes())


def backward_pass(tape: Tape, outputs: Sequence[Tracer], seeds: Sequence[Tracer]) -> dict[int, Tracer]:
    """Cotangents of every tracked value, given the cotangents (``seeds``) of ``outputs``."""
    _TRANSPOSING.tapes.append(tape)
    try:
        return _backward_pass(tape, outputs, seeds)
    finally:
        _TRANSPOSING.tapes.pop()


def _backward_pass(tape: Tape, outputs: Sequence[Tracer], seeds: Sequence[Tracer]) -> dict[int, Tracer]:
    from xla_teach.frontend import (  # noqa: F401 - importing them registers the rules
        autodiff_rules,
        autodiff_rules_indexing,
        autodiff_rules_window,
    )
    from xla_teach.frontend.numpy_api import add

    cts: dict[int, Tracer] = {}
    for out, seed in zip(outputs, seeds, strict=True):
        cts[id(out)] = add(cts[id(out)], seed) if id(out) in cts else seed
    for eqn in reversed(tape.equations):
        out_cts = [cts.pop(id(o), None) for o in eqn.outputs]
        if all(ct is None for ct in out_cts):
            continue
        prim = eqn.primitive
        if prim.vjp is None:
            raise CompilationError(
                f"differentiating {prim.name}", prim.nondiff_reason or f"the primitive {prim.name} has no "
                "reverse-mode rule", "compute this part outside the differentiated function, or stop the "
                "gradient through it with xla_teach.frontend.autodiff.stop_gradient", location=None)
        # In the scope its forward equation had under the differentiated function (a named_scope).
        inner = eqn.scope[len(tape.base):].strip("/") if eqn.scope.startswith(tape.base) else ""
        # ... and at the source line of the forward equation, as JAX attributes a transpose.
        with name_scope(f"{inner}/transpose({prim.name})" if inner else f"transpose({prim.name})"), \
                tape.ctx.at_source(eqn.location):
            in_cts = prim.vjp(out_cts, eqn.inputs, eqn.outputs, **eqn.params)
        for inp, ct in zip(eqn.inputs, in_cts, strict=True):
            if ct is None or id(inp) not in tape.tracked:
                continue
            if ct.shape != inp.shape or ct.dtype != inp.dtype:
                raise AssertionError(f"vjp of {prim.name} gave {ct.aval} for an input of {inp.aval}")
            with tape.ctx.at_source(eqn.location):  # a value used twice: its cotangents add up here
                cts[id(inp)] = add(cts[id(inp)], ct) if id(inp) in cts else ct
    return cts


def _fresh(ctx: Any, leaf: Any, what: str) -> Tracer:
    """A new tracer for ``leaf`` so the tape can tell it apart from other uses of the same value."""
    t = ctx.lift(leaf)
    if not dtypes.is_float(t.dtype):
        raise ValueError(f"{what}: can only differentiate with respect to floating-point arrays, got {t.aval} "
                         "(convert with .astype(float32), or leave it out of argnums)")
    fresh = bind(identity_p, t)  # recorded by outer tapes: grad(grad(f)) sees the link
    fresh.weak_type = t.weak_type
    return fresh


# A new name for the same HLO value: no instruction is emitted.
identity_p = Primitive("identity", lambda b, x: x)
identity_p.vjp = lambda cts, inputs, outputs: [cts[0]]


def _argnums(argnums: int | Sequence[int], nargs: int) -> tuple[int, ...]:
    nums = (argnums,) if isinstance(argnums, int) else tuple(argnums)
    for n in nums:
        if not -nargs <= n < nargs:
            raise ValueError(f"argnums {n} is out of range for {nargs} positional arguments")
    return tuple(n % nargs for n in nums)


def _value_and_grad_traced(fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any],
                           argnums: int | Sequence[int], has_aux: bool, what: str) -> tuple[Any, Any]:
    from xla_teach.frontend.numpy_api import ones_like, zeros_like

    ctx = current_context()
    assert ctx is not None
    nums = _argnums(argnums, len(args))
    tape = Tape(ctx)
    args = list(args)
    trees = {}
    for n in nums:
        leaves, tree = tree_flatten(args[n])
        fresh = [_fresh(ctx, leaf, what) for leaf in leaves]
        for t in fresh:
            tape.track(t)
        trees[n] = (fresh, tree)
        args[n] = tree_unflatten(tree, fresh)
    fn_name = getattr(fn, "__name__", "fn").replace("<lambda>", "lambda")
    with recording(tape), name_scope(f"jvp({fn_name})"):  # the forward pass, named as JAX names it
        tape.base = ctx.name_stack
        result = fn(*args, **kwargs)
    out, aux = expect_pair(result, f"{what}(has_aux=True)", "(output, aux)") if has_aux else (result, None)
    out_t = ctx.lift(out) if not isinstance(out, Tracer) else out
    if out_t.shape != () or not dtypes.is_float(out_t.dtype):
        raise ValueError(f"{what} needs a function returning a float scalar, got {out_t.aval} (sum it, or use "
                         "vjp for non-scalar outputs)")
    with name_scope(f"transpose(jvp({fn_name}))"):
        cts = backward_pass(tape, [out_t], [ones_like(out_t)])
        grads = []
        for n in nums:
            fresh, tree = trees[n]
            grads.append(tree_unflatten(tree, [cts.get(id(t)) if id(t) in cts else zeros_like(t)
                                               for t in fresh]))
    grad_value = grads[0] if isinstance(argnums, int) else tuple(grads)
    return ((out_t, aux) if has_aux else out_t), grad_value


class _Transformed:
    """A function transformation: traced inline inside jit, compiled with jit outside."""

    def __init__(self, fn: Callable[..., Any], name: str, impl: Callable[..., Any]) -> None:
        self._fn = fn
        self._impl = impl
        self.__name__ = f"{name}_{getattr(fn, '__name__', 'fn')}".replace("<lambda>", "lambda")
        self.__doc__ = getattr(fn, "__doc__", None)
        self.__wrapped__ = fn
        self._jitted: Any = None

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if current_context() is not None:
            return self._impl(*args, **kwargs)
        if self._jitted is None:
            from xla_teach.frontend.jit import jit

            self._jitted = jit(self)
        return self._jitted(*args, **kwargs)


def value_and_grad(fn: Callable[..., Any], argnums: int | Sequence[int] = 0, has_aux: bool = False) -> Any:
    """``(f(*args), df/dargs[argnums])``. ``f`` must return a float scalar (or
    ``(scalar, aux)`` with ``has_aux=True``); gradients have the pytree structure of
    the differentiated arguments."""
    def impl(*args: Any, **kwargs: Any) -> Any:
        return _value_and_grad_traced(fn, args, kwargs, argnums, has_aux, "value_and_grad")
    return _Transformed(fn, "value_and_grad", impl)


def grad(fn: Callable[..., Any], argnums: int | Sequence[int] = 0, has_aux: bool = False) -> Any:
    """The gradient of a scalar function with respect to ``args[argnums]``
    (``(grad, aux)`` with ``has_aux=True``)."""
    def impl(*args: Any, **kwargs: Any) -> Any:
        value, g = _value_and_grad_traced(fn, args, kwargs, argnums, has_aux, "grad")
        return (g, value[1]) if has_aux else g
    return _Transformed(fn, "grad", impl)


def vjp(fn: Callable[..., Any], *primals: Any, has_aux: bool = False) -> Any:
    """``(f(*primals), vjp_fn)`` where ``vjp_fn(cotangent)`` returns one cotangent per
    primal (``(out, vjp_fn, aux)`` with ``has_aux=True``). Inside ``jit`` the pullback
    emits HLO into the same trace; outside, everything is compiled and NumPy arrays
    come back (``vjp_fn`` then compiles a module that recomputes the forward pass)."""
    if current_context() is None:
        return _vjp_eager(fn, primals, has_aux)
    return _vjp_traced(fn, primals, has_aux)


def _vjp_traced(fn: Callable[..., Any], primals: Sequence[Any], has_aux: bool) -> Any:
    ctx = current_context()
    assert ctx is not None
    tape = Tape(ctx)
    trees = []
    fresh_args = []
    for p in primals:
        leaves, tree = tree_flatten(p)
        fresh = [_fresh(ctx, leaf, "vjp") for leaf in leaves]
        for t in fresh:
            tape.track(t)
        trees.append((fresh, tree))
        fresh_args.append(tree_unflatten(tree, fresh))
    with recording(tape):
        result = fn(*fresh_args)
    out, aux = expect_pair(result, "vjp(has_aux=True)", "(output, aux)") if has_aux else (result, None)
    out_leaves, out_tree = tree_flatten(out)
    out_tracers = [ctx.lift(leaf) for leaf in out_leaves]

    def vjp_fn(cotangent: Any) -> tuple[Any, ...]:
        from xla_teach.frontend.numpy_api import asarray, astype, zeros_like

        ct_leaves, ct_tree = tree_flatten(cotangent)
        if ct_tree != out_tree:
            raise ValueError(f"vjp_fn: cotangent structure {ct_tree} differs from the output's {out_tree}")
        seeds = []
        for c, o in zip(ct_leaves, out_tracers, strict=True):
            seed = astype(asarray(c), o.dtype)
            if seed.shape != o.shape:
                raise ValueError(f"vjp_fn: a cotangent of shape {seed.shape} for an output of shape {o.shape}")
            seeds.append(seed)
        cts = backward_pass(tape, out_tracers, seeds)
        return tuple(tree_unflatten(tree, [cts[id(t)] if id(t) in cts else zeros_like(t) for t in fresh])
                     for fresh, tree in trees)

    out_value = tree_unflatten(out_tree, out_tracers)
    return (out_value, vjp_fn, aux) if has_aux else (out_value, vjp_fn)


def _vjp_eager(fn: Callable[..., Any], primals: Sequence[Any], has_aux: bool) -> Any:
    """``vjp`` outside ``jit``: one compiled module for the forward pass, one (compiled on
    first use) for the pullback, as ``grad`` compiles itself."""
    from xla_teach.frontend.jit import jit

    name = getattr(fn, "__name__", "fn").replace("<lambda>", "lambda")

    def forward(*args: Any) -> Any:
        return fn(*args)

    def pullback(args: tuple[Any, ...], cotangent: Any) -> Any:
        return _vjp_traced(fn, args, has_aux)[1](cotangent)

    forward.__name__, pullback.__name__ = name, f"vjp_{name}"
    result = jit(forward)(*primals)
    out, aux = expect_pair(result, "vjp(has_aux=True)", "(output, aux)") if has_aux else (result, None)
    pullback_jit = jit(pullback)

    def vjp_fn(cotangent: Any) -> tuple[Any, ...]:
        return pullback_jit(tuple(primals), cotangent)

    return (out, vjp_fn, aux) if has_aux else (out, vjp_fn)


def jvp(fn: Callable[..., Any], primals: Sequence[Any], tangents: Sequence[Any]) -> tuple[Any, Any]:
    """Forward mode, ``(f(*primals), J @ tangents)``, computed by the transpose trick:
    ``u -> vjp_fn(u) . tangents`` is linear in ``u`` with gradient ``J @ tangents``,
    so the JVP is the reverse-mode gradient of the VJP. Outside ``jit`` it compiles
    itself and returns NumPy arrays."""
    primals, tangents = tuple(primals), tuple(tangents)
    if len(primals) != len(tangents):
        raise ValueError(f"jvp: {len(primals)} primals but {len(tangents)} tangents (one tangent per primal)")
    if current_context() is None:
        from xla_teach.frontend.jit import jit

        def jvp_fn(p: tuple[Any, ...], t: tuple[Any, ...]) -> tuple[Any, Any]:
            return jvp(fn, p, t)

        jvp_fn.__name__ = "jvp_" + getattr(fn, "__name__", "fn").replace("<lambda>", "lambda")
        return jit(jvp_fn)(primals, tangents)
    return _jvp_traced(fn, primals, tangents)


def _jvp_traced(fn: Callable[..., Any], primals: tuple[Any, ...], tangents: tuple[Any, ...]) -> tuple[Any, Any]:
    from xla_teach.frontend.numpy_api import multiply, zeros_like
    from xla_teach.frontend.numpy_api_reduce import sum as xsum

    for p, t in zip(primals, tangents, strict=True):
        p_shapes = [np.shape(v) for v in tree_flatten(p)[0]]
        t_shapes = [np.shape(v) for v in tree_flatten(t)[0]]
        if p_shapes != t_shapes:
            raise ValueError(f"jvp: tangent shapes {t_shapes} differ from the primal shapes {p_shapes}")
    out, vjp_fn = _vjp_traced(fn, primals, False)
    out_leaves, out_tree = tree_flatten(out)

    def pairing(*u_leaves: Any) -> Any:
        cts = vjp_fn(tree_unflatten(out_tree, list(u_leaves)))
        total = None
        for ct, tangent in zip(cts, tangents, strict=True):
            for c, t in zip(tree_flatten(ct)[0], tree_flatten(tangent)[0], strict=True):
                term = xsum(multiply(c, t))
                total = term if total is None else total + term
        return total

    zero = [zeros_like(o) for o in out_leaves]
    tangent_out = _value_and_grad_traced(pairing, tuple(zero), {}, tuple(range(len(zero))), False, "jvp")[1]
    return out, tree_unflatten(out_tree, list(tangent_out))


def stop_gradient(x: Any) -> Any:
    """``x`` with no gradient flowing back through it (the value is unchanged)."""
    ctx = current_context()
    if ctx is None:
        return np.asarray(x)
    t = ctx.lift(x)
    return Tracer(ctx, t.op, t.weak_type)  # a new identity the tape does not track
