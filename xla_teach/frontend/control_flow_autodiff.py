"""Reverse mode through control flow: what the rules of ``scan``/``fori_loop`` and ``cond``/``switch``
share. Each rule lives beside its primitive, since the transpose of a loop is a loop and that of a
conditional a conditional (:mod:`~xla_teach.frontend.scan_loop`, :mod:`~xla_teach.frontend.conditional`).

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

from xla_teach.frontend import dtypes
from xla_teach.frontend import lax_ops as L
from xla_teach.frontend.autodiff import backward_pass, identity_p, needs_grad
from xla_teach.frontend.tracer import Tape, Tracer, bind, current_context, recording

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
        return cts[id(t)] if id(t) in cts else L.zeros_like(t)

    return [ct_of(args[k]) for k in wrt], [ct_of(c) for c in copies]


def differentiable(ts: Sequence[Tracer]) -> list[int]:
    """Positions of the float values some cotangent is wanted for."""
    return [k for k, t in enumerate(ts) if dtypes.is_float(t.dtype) and needs_grad(t)]
