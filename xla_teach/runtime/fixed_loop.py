"""A while loop whose buffers stay put: bind once, then only call kernels.

Every run of a nested computation binds its buffers afresh -- parameters to the arrays passed
in, outputs to new memory, each kernel's table of addresses filled again -- which costs tens of
microseconds of Python per iteration of a loop whose body may be one short kernel. But when the
body updates the loop state in place (buffer assignment was told the state is donated, see
``passes/scheduling/output_aliasing.py``), every address is the same on every iteration: the
state's arrays, the body's and the condition's temporaries and outputs. So, when the condition
and the body are nothing but kernels, the loop binds everything once and then runs::

    while cond_kernels() and pred:        # each kernel: one call with its fixed address table
        body_kernels()
        copy each state element the body wrote elsewhere back into the state

(The copies are for state elements buffer assignment could not update in place -- a loop
counter the body still reads after computing the next one; XLA's copy insertion adds the same
copies.) That loop itself runs natively (:mod:`~xla_teach.runtime.native_loop`): one call from
Python for the whole loop, kernels split over the native pool as usual. Anything else -- host
calls inside, tuples or tokens in the state, non-default layouts, a profiler that wants each
kernel's time -- takes the general path of ``WhileThunk``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np

from xla_teach.runtime.buffers import RunBuffers, aligned_empty, logical_view
from xla_teach.runtime.thunks import KernelThunk, Profiler

if TYPE_CHECKING:
    from xla_teach.runtime.executable import SequenceExecutable


def _bind(seq: SequenceExecutable, state: Sequence[np.ndarray]) -> RunBuffers | None:
    """Buffers of one sequence with its parameters bound to ``state``, its outputs and temporaries
    to memory of their own for the whole loop (None if the sequence is not kernels only)."""
    if not all(type(t) is KernelThunk for t in seq.thunks):
        return None
    temp = seq.assignment.temp_allocation
    buffers = RunBuffers(seq.assignment, seq.constants, aligned_empty(temp.size) if temp is not None else None)
    for (alloc_index, _), array in zip(seq.parameter_leaves, state, strict=True):
        buffers.bind(alloc_index, array)
    for alloc in seq.output_allocations:
        buffers.bind(alloc.index, aligned_empty(alloc.size))
    return buffers


def _runners(seq: SequenceExecutable, buffers: RunBuffers, profiler: Profiler | None) -> list[Callable[[], None]]:
    if profiler is None:
        return [thunk.with_fixed_addresses(buffers) for thunk in seq.thunks]  # type: ignore[attr-defined]
    return [_timed(thunk, buffers, profiler) for thunk in seq.thunks]  # type: ignore[arg-type]


def _timed(thunk: KernelThunk, buffers: RunBuffers, profiler: Profiler) -> Callable[[], None]:
    """The kernel with its table filled once, each call reported to the profiler as the kernel
    thunk reports one (its parts on the pool's threads too)."""
    _, args, _, _ = thunk.fixed_step(buffers)
    return lambda: thunk.run_table_profiled(args, profiler)


def run_fixed_loop(condition: SequenceExecutable, body: SequenceExecutable,
                   state: list[np.ndarray], profiler: Profiler | None = None) -> tuple[list[np.ndarray], int] | None:
    """Run the loop on ``state`` (arrays of the loop's own, updated in place); returns the final
    state and the trip count, or None when the loop does not qualify (see the module docstring)."""
    shapes = [shape for _, shape in body.parameter_leaves]
    if any(not s.is_array or not s.has_default_layout() for s in shapes):
        return None
    if len(condition.parameter_leaves) != len(state) or len(body.outputs) != len(state):
        return None
    # After the body each state element is passed through (its output is the parameter itself),
    # updated in place (donated), or written to an output buffer and copied back into the state.
    param_allocs = {alloc for alloc, _ in body.parameter_leaves}
    copied_back = []
    for n, ((slice_, _), (param_alloc, _)) in enumerate(zip(body.outputs, body.parameter_leaves, strict=True)):
        if slice_.allocation.index == param_alloc or n in body.donated:
            continue
        if slice_.allocation.kind not in ("output", "constant") or slice_.allocation.index in param_allocs:
            return None  # e.g. state elements that trade places: left to the general path
        copied_back.append(n)
    # Elements written in place or copied into must be the loop's own (the while thunk's result
    # buffers); passed-through elements may stay the caller's: nothing writes them.
    state = [np.array(a, copy=True) if n in copied_back else np.ascontiguousarray(a) for n, a in enumerate(state)]
    body_buffers, cond_buffers = _bind(body, state), _bind(condition, state)
    if body_buffers is None or cond_buffers is None:
        return None
    copies = [(state[n], body_buffers.array(*body.outputs[n])) for n in copied_back]
    (pred_slice, pred_shape), = condition.outputs
    pred = cond_buffers.array(pred_slice, pred_shape) if pred_slice.allocation.kind != "constant" else \
        logical_view(condition.constants[pred_slice.allocation.index], pred_shape)
    native = _run_natively(condition, cond_buffers, body, body_buffers, pred, copies) if profiler is None else None
    if native is not None:
        return state, native
    # profiled (each kernel's time wanted), or split kernels without the native pool: from Python
    cond_kernels, body_kernels = _runners(condition, cond_buffers, profiler), _runners(body, body_buffers, profiler)
    trips = 0
    while True:
        for run in cond_kernels:
            run()
        if not bool(pred.reshape(())):
            return state, trips
        for run in body_kernels:
            run()
        for target, source in copies:
            np.copyto(target, source)
        trips += 1


def _run_natively(condition: SequenceExecutable, cond_buffers: RunBuffers, body: SequenceExecutable,
                  body_buffers: RunBuffers, pred: np.ndarray,
                  copies: list[tuple[np.ndarray, np.ndarray]]) -> int | None:
    """The loop as one native call (``runtime/native_loop.py``): its trip count, or None where
    kernels are split over Python threads (no native pool) and the loop stays in Python."""
    from xla_teach.runtime import native_loop
    from xla_teach.runtime.native_pool import native_pool

    cond_steps = [t.fixed_step(cond_buffers) for t in condition.thunks]  # type: ignore[attr-defined]
    body_steps = [t.fixed_step(body_buffers) for t in body.thunks]  # type: ignore[attr-defined]
    pool = native_pool()
    if pool is None and any(parts > 1 for *_, parts in cond_steps + body_steps):
        return None
    if pred.dtype.itemsize != 1 or not pred.flags.c_contiguous:
        return None
    copy_table = native_loop.copies([(target.ctypes.data, source.ctypes.data, target.nbytes)
                                     for target, source in copies])
    return native_loop.run_loop(native_loop.steps(cond_steps), len(cond_steps), pred.ctypes.data,
                                native_loop.steps(body_steps), len(body_steps), copy_table, len(copies),
                                pool.parallel_for_address if pool is not None else 0)
