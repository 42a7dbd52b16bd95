"""``scan_loop``: the loop behind ``scan`` and ``fori_loop``, with a trip count known
while tracing -- which is what makes it reverse-differentiable.

The HLO it builds for ``carry, ys = scan(f, init, xs)`` (state after the counter:
carries, stacked outputs, inputs, captured values)::

    region_body (state: (s32[], f32[4], f32[N,4], f32[N,4], f32[N,4])) -> (...) {
      i = s32[] get-tuple-element(state), index=0
      x_i = f32[1,4] dynamic-slice(xs, i, 0)          // read xs[i]
      ... the traced step f(carry, x_i) ...
      ys = f32[N,4] dynamic-update-slice(ys, y, i, 0)  // write ys[i]
      carries = f32[N,4] dynamic-update-slice(carries, carry, i, 0)  // only when differentiating
      ROOT tuple(i + 1, new_carry, ys, carries, xs)
    }

``carries`` is there only when a gradient may flow through the loop: row ``i`` holds
the carry iteration ``i`` *received*. The backward pass (a second ``scan_loop``,
:mod:`xla_teach.frontend.control_flow_autodiff`) walks the rows in reverse and
recomputes each step from its stored carry.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from xla_teach.frontend import dtypes
from xla_teach.frontend.autodiff import is_recorded
from xla_teach.frontend.control_flow_autodiff import Rule, differentiable, transpose_step
from xla_teach.frontend.control_flow_trace import ClosedTrace, elements_of, match_avals, splice, trace_closed
from xla_teach.frontend.numpy_api import add, zeros, zeros_like
from xla_teach.frontend.tracer import Primitive, ShapedArray, Tracer, bind, current_context
from xla_teach.hlo.builder import XlaBuilder, XlaOp
from xla_teach.hlo.ir import HloComputation
from xla_teach.hlo.shape import Shape

ScanStep = Callable[[Tracer, list[Tracer], list[Tracer]], tuple[list[Any], list[Any]]]


def scan_loop(step: ScanStep, init: Sequence[Any], xs: Sequence[Any], length: int, reverse: bool,
              what: str) -> tuple[list[Tracer], list[Tracer]]:
    """The loop behind ``scan`` and ``fori_loop``, on flat lists of arrays.

    ``step(index, carry, x) -> (carry, y)`` runs for ``index = 0 .. length-1`` (in
    reverse with ``reverse``); ``x`` is ``xs[index]`` and ``y`` is written to
    ``ys[index]``. Returns ``(final carry, ys)``. It lowers to one HLO ``while`` whose
    state is ``(i, carry..., ys..., [carries...], xs..., captures...)``. When a
    gradient may flow through the loop (a tape is recording one of its inputs), the
    state also holds ``carries``: one buffer per carry, of shape ``(length, ...)``,
    into which iteration ``index`` writes the carry it *received*. The reverse-mode
    rule reads them back (:mod:`xla_teach.frontend.control_flow_autodiff`).
    """
    ctx = current_context()
    assert ctx is not None
    init_t = [ctx.lift(v) for v in init]
    xs_t = [ctx.lift(x) for x in xs]
    carry_avals = [ShapedArray(t.shape, t.dtype, False) for t in init_t]
    x_avals = [ShapedArray(x.shape[1:], x.dtype, False) for x in xs_t]
    n_c = len(init_t)

    def body(index: Tracer, *flat: Tracer) -> list[Tracer]:
        new_carry, y = step(index, list(flat[:n_c]), list(flat[n_c:]))
        sub = current_context()
        assert sub is not None
        return match_avals([sub.lift(c) for c in new_carry], carry_avals, what) + [sub.lift(v) for v in y]

    index_aval = ShapedArray((), np.dtype(np.int32), False)
    closed = trace_closed(body, [index_aval, *carry_avals, *x_avals], "body")
    y_avals = closed.out_avals[n_c:]
    if length == 0:  # the body never runs: the carry comes out as it went in, every ys is empty
        return init_t, [zeros((0, *a.shape), a.dtype) for a in y_avals]
    consts = list(closed.captured)
    store = is_recorded([*init_t, *xs_t, *consts])
    layout = _ScanLayout(length, reverse, carry_avals, y_avals, x_avals, store)

    def lower(b: XlaBuilder, *ops: XlaOp) -> list[XlaOp]:
        init_ops, x_ops, const_ops = ops[:n_c], ops[n_c:n_c + len(xs_t)], ops[n_c + len(xs_t):]
        buffers = [_zeros(b, (length, *a.shape), a.dtype) for a in layout.buffer_avals]
        state = b.tuple([b.constant(np.int32(0)), *init_ops, *buffers, *x_ops, *const_ops])
        cond_b = b.create_sub_builder("region_cond", keep_metadata=True)
        counter = cond_b.get_tuple_element(cond_b.parameter(0, state.shape, "state"), 0)
        cond_comp = cond_b.build_computation(cond_b.compare(counter, np.int32(length), "LT"))
        loop = b.while_loop(cond_comp, _scan_body(b, state.shape, layout, closed), state)
        return [b.get_tuple_element(loop, 1 + k) for k in range(n_c + len(layout.buffer_avals))]

    prim = Primitive(what, lower, multiple_results=True)
    if store:
        prim.vjp = scan_transpose_rule(step, consts, carry_avals, len(y_avals), length, reverse, what)
    outs = bind(prim, *init_t, *xs_t, *consts)
    return outs[:n_c], outs[n_c:n_c + len(y_avals)]


@dataclass
class _ScanLayout:
    """What the state tuple of a :func:`scan_loop` holds, after the counter."""

    length: int
    reverse: bool
    carry_avals: list[ShapedArray]
    y_avals: list[ShapedArray]
    x_avals: list[ShapedArray]
    store_carries: bool

    @property
    def buffer_avals(self) -> list[ShapedArray]:
        """Stacked outputs: the ``ys``, then (when storing) one buffer per carry."""
        return self.y_avals + (self.carry_avals if self.store_carries else [])


def _zeros(b: XlaBuilder, shape: Sequence[int], dtype: np.dtype) -> XlaOp:
    return b.broadcast(b.constant(np.zeros((), dtype)), tuple(shape))


def _scan_body(builder: XlaBuilder, state_shape: Shape, layout: _ScanLayout, closed: ClosedTrace) -> HloComputation:
    """``region_body``: read ``xs[index]``, run the step, write ``ys[index]`` (and the
    received carry into its buffer), count up."""
    sub = builder.create_sub_builder("region_body", keep_metadata=True)
    param = sub.parameter(0, state_shape, "state")
    elements = [sub.get_tuple_element(param, i) for i in range(len(state_shape.tuple_shapes))]
    n_c, n_buf, n_x = len(layout.carry_avals), len(layout.buffer_avals), len(layout.x_avals)
    i, carry = elements[0], elements[1:1 + n_c]
    buffers = elements[1 + n_c:1 + n_c + n_buf]
    xs = elements[1 + n_c + n_buf:1 + n_c + n_buf + n_x]
    consts = elements[1 + n_c + n_buf + n_x:]
    index = sub.sub(np.int32(layout.length - 1), i) if layout.reverse else i
    x_now = [sub.reshape(sub.dynamic_slice(x, [index] + [0] * len(a.shape), (1, *a.shape)), a.shape)
             for x, a in zip(xs, layout.x_avals, strict=True)]
    result = splice(closed.computation, sub, [index, *carry, *x_now, *consts])
    outs = elements_of(sub, result, len(closed.out_avals))
    new_carry, ys = outs[:n_c], outs[n_c:]
    written = ys + (carry if layout.store_carries else [])
    buffers = [sub.dynamic_update_slice(buf, sub.reshape(v, (1, *v.dimensions)), [index] + [0] * v.rank)
               for buf, v in zip(buffers, written, strict=True)]
    return sub.build_computation(sub.tuple([sub.add(i, np.int32(1)), *new_carry, *buffers, *xs, *consts]))


Step = Callable[[Tracer, list[Tracer], list[Tracer]], tuple[list[Any], list[Any]]]


def scan_transpose_rule(step: Step, captured: Sequence[Tracer], carry_avals: Sequence[ShapedArray], n_y: int,
                        length: int, reverse: bool, what: str) -> Rule:
    """The rule of one storing ``scan_loop``: inputs ``(init..., xs..., captured...)``,
    outputs ``(carry..., ys..., carries...)``."""
    n_c = len(carry_avals)

    def rule(cts: Sequence[Tracer | None], inputs: Sequence[Tracer], outputs: Sequence[Tracer]
             ) -> list[Tracer | None]:
        n_x = len(inputs) - n_c - len(captured)
        init, xs, outer = inputs[:n_c], inputs[n_c:n_c + n_x], inputs[n_c + n_x:]
        ct_carry, ct_ys, ct_carries = cts[:n_c], cts[n_c:n_c + n_y], cts[n_c + n_y:]
        carries = list(outputs[n_c + n_y:])
        wrt_c = [k for k in range(n_c) if dtypes.is_float(init[k].dtype)]
        wrt_x = differentiable(xs)
        wrt_closed = differentiable(outer)
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
