"""Reverse-mode rules for control flow: ``scan``/``fori_loop`` and ``cond``/``switch``.

The body of a loop or a branch is traced into its own computation, so the tape of
``grad`` (which records the enclosing trace) sees the whole loop as *one* equation.
Its rule therefore has to differentiate the body itself. Both rules do it the same
way, with :func:`transpose_step`: trace the body function again, inside the
computation being built for the backward pass, under a fresh tape, and run the
ordinary backward pass over that tape. The gradient is still plain HLO:

* ``cond``/``switch`` -> a ``conditional`` on the same predicate/index whose
  branch ``k`` computes the VJP of branch ``k`` (only the branch that ran
  forward runs backward).
* ``scan`` (and ``fori_loop`` with Python-int bounds) -> a second
  :func:`~xla_teach.frontend.scan_loop.scan_loop` running the other way. The
  forward loop stored the carry each iteration received (``carries[i]``); backward
  iteration ``i`` reads ``carries[i]`` and ``xs[i]`` with ``dynamic-slice``,
  recomputes the step from them and transposes it (JAX stores the step's residuals
  instead; recomputing the step from its carry is what ``jax.checkpoint`` on the
  body does). The loop state carries the cotangent of the carry and accumulates
  those of the captured values; the cotangents of ``xs[i]`` are written out with
  ``dynamic-update-slice``.

Because the backward loop and the backward conditional are built with the same
functions, they are recorded by an *outer* tape and can be differentiated again.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from xla_teach.frontend import dtypes
from xla_teach.frontend.autodiff import backward_pass, identity_p, needs_grad
from xla_teach.frontend.control_flow import conditional_primitive, match_avals
from xla_teach.frontend.tracer import ShapedArray, Tape, Tracer, bind, current_context, recording

Rule = Callable[[Sequence[Tracer | None], Sequence[Tracer], Sequence[Tracer]], list[Tracer | None]]


def transpose_step(fn: Callable[[list[Tracer]], list[Tracer]], args: Sequence[Tracer], wrt: Sequence[int],
                   closed_over: Sequence[tuple[Tracer, Tracer]], seeds: dict[int, Tracer]
                   ) -> tuple[list[Tracer], list[Tracer]]:
    """Trace ``fn(args)`` into the current computation and transpose it.

    ``wrt``: positions of ``args`` to differentiate. ``closed_over``: pairs
    ``(original, outer)`` -- a tracer ``fn`` closes over (as it was captured by the
    forward trace) and the same value as an input of the equation being transposed;
    ``fn``'s uses of ``original`` are redirected to a tracked copy, so they get
    cotangents too. ``seeds``: cotangent per output position of ``fn``.
    Returns the cotangents of ``args[wrt]`` and of the closed-over values (zeros
    where no gradient reaches).
    """
    from xla_teach.frontend.numpy_api import zeros_like

    ctx = current_context()
    assert ctx is not None
    tape = Tape(ctx)
    args = list(args)
    for k in wrt:
        args[k] = bind(identity_p, args[k])
        tape.track(args[k])
    copies = []
    for original, outer in closed_over:
        copy = bind(identity_p, ctx.lift(outer))
        tape.track(copy)
        ctx._local_of[id(original)] = copy  # what `fn` gets when it lifts the value it closed over
        copies.append(copy)
    with recording(tape):
        outs = fn(args)
    positions = sorted(seeds)
    cts = backward_pass(tape, [outs[p] for p in positions], [seeds[p] for p in positions])

    def ct_of(t: Tracer) -> Tracer:
        return cts[id(t)] if id(t) in cts else zeros_like(t)

    return [ct_of(args[k]) for k in wrt], [ct_of(c) for c in copies]


def _differentiable(ts: Sequence[Tracer]) -> list[int]:
    """Positions of the float values some cotangent is wanted for."""
    return [k for k, t in enumerate(ts) if dtypes.is_float(t.dtype) and needs_grad(t)]


def cond_transpose_rule(branches: Sequence[Callable[..., list[Any]]], captured: Sequence[Tracer]) -> Rule:
    """The rule of one ``conditional``: inputs ``(selector, operands..., captured...)``.
    ``branches[k](*operands)`` returns the flat outputs of branch ``k``."""
    def rule(cts: Sequence[Tracer | None], inputs: Sequence[Tracer], outputs: Sequence[Tracer]
             ) -> list[Tracer | None]:
        n_ops = len(inputs) - 1 - len(captured)
        selector, operands, outer = inputs[0], list(inputs[1:1 + n_ops]), list(inputs[1 + n_ops:])
        wrt = _differentiable(operands)
        wrt_closed = _differentiable(outer)
        seeded = [k for k, ct in enumerate(cts) if ct is not None]
        if not (wrt or wrt_closed) or not seeded:
            return [None] * len(inputs)
        closed_over = [(captured[k], outer[k]) for k in wrt_closed]

        def backward_branch(fn: Callable[..., list[Any]]) -> Callable[..., list[Tracer]]:
            def branch(ops: list[Tracer], ct_list: list[Tracer]) -> list[Tracer]:
                def forward(args: list[Tracer]) -> list[Tracer]:
                    sub = current_context()
                    assert sub is not None
                    return [sub.lift(v) for v in fn(*args)]

                ct_ops, ct_closed = transpose_step(forward, ops, wrt, closed_over, dict(zip(seeded, ct_list,
                                                                                          strict=True)))
                return ct_ops + ct_closed
            return branch

        result = conditional_primitive(selector, [backward_branch(fn) for fn in branches],
                              (operands, [cts[k] for k in seeded]))
        grads: list[Tracer | None] = [None] * len(inputs)
        for k, g in zip([1 + k for k in wrt] + [1 + len(operands) + k for k in wrt_closed], result, strict=True):
            grads[k] = g
        return grads
    return rule


Step = Callable[[Tracer, list[Tracer], list[Tracer]], tuple[list[Any], list[Any]]]


def scan_transpose_rule(step: Step, captured: Sequence[Tracer], carry_avals: Sequence[ShapedArray], n_y: int,
                        length: int, reverse: bool, what: str) -> Rule:
    """The rule of one storing ``scan_loop``: inputs ``(init..., xs..., captured...)``,
    outputs ``(carry..., ys..., carries...)``."""
    from xla_teach.frontend.numpy_api import add, zeros_like
    from xla_teach.frontend.scan_loop import scan_loop

    n_c = len(carry_avals)

    def rule(cts: Sequence[Tracer | None], inputs: Sequence[Tracer], outputs: Sequence[Tracer]
             ) -> list[Tracer | None]:
        n_x = len(inputs) - n_c - len(captured)
        init, xs, outer = inputs[:n_c], inputs[n_c:n_c + n_x], inputs[n_c + n_x:]
        ct_carry, ct_ys, ct_carries = cts[:n_c], cts[n_c:n_c + n_y], cts[n_c + n_y:]
        carries = list(outputs[n_c + n_y:])
        wrt_c = [k for k in range(n_c) if dtypes.is_float(init[k].dtype)]
        wrt_x = _differentiable(xs)
        wrt_closed = _differentiable(outer)
        seeded_ys = [k for k in range(n_y) if ct_ys[k] is not None]
        seeded_carries = [k for k in wrt_c if ct_carries[k] is not None]
        closed_over = [(captured[k], outer[k]) for k in wrt_closed]
        ct_init = [ct_carry[k] if ct_carry[k] is not None else zeros_like(init[k]) for k in wrt_c]
        acc_init = [zeros_like(outer[k]) for k in wrt_closed]
        xs_back = carries + list(xs) + [ct_ys[k] for k in seeded_ys] + [ct_carries[k] for k in seeded_carries]

        def backward_step(index: Tracer, state: list[Tracer], row: list[Tracer]) -> tuple[list[Any], list[Any]]:
            ct_c, acc = state[:len(wrt_c)], state[len(wrt_c):]
            carry_i, x_i = row[:n_c], row[n_c:n_c + n_x]
            ct_y_i = row[n_c + n_x:n_c + n_x + len(seeded_ys)]
            ct_stored_i = row[n_c + n_x + len(seeded_ys):]

            def forward(args: list[Tracer]) -> list[Tracer]:
                new_carry, y = step(index, args[:n_c], args[n_c:])
                sub = current_context()
                assert sub is not None
                return match_avals([sub.lift(c) for c in new_carry], carry_avals, what) + [sub.lift(v) for v in y]

            seeds = dict(zip(wrt_c, ct_c, strict=True))
            seeds.update({n_c + k: ct for k, ct in zip(seeded_ys, ct_y_i, strict=True)})
            grads, ct_closed = transpose_step(forward, [*carry_i, *x_i], wrt_c + [n_c + k for k in wrt_x],
                                              closed_over, seeds)
            ct_prev = grads[:len(wrt_c)]
            stored = dict(zip(seeded_carries, ct_stored_i, strict=True))
            ct_prev = [add(g, stored[k]) if k in stored else g for k, g in zip(wrt_c, ct_prev, strict=True)]
            acc = [add(a, g) for a, g in zip(acc, ct_closed, strict=True)]
            return ct_prev + acc, grads[len(wrt_c):]

        state, ct_xs = scan_loop(backward_step, ct_init + acc_init, xs_back, length, not reverse, what)
        grads: list[Tracer | None] = [None] * len(inputs)
        for k, g in zip(wrt_c, state[:len(wrt_c)], strict=True):
            grads[k] = g
        for k, g in zip(wrt_x, ct_xs, strict=True):
            grads[n_c + k] = g
        for k, g in zip(wrt_closed, state[len(wrt_c):], strict=True):
            grads[n_c + n_x + k] = g
        return grads
    return rule
