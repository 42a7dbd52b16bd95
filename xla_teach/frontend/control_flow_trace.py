"""Tracing a function into a computation of its own: the step every control-flow primitive
starts with.

``cond``'s branches, a loop's body and ``shard_map``'s function are each traced by
:func:`trace_closed` into a computation ``(inputs..., captures...) -> tuple(outputs)``: values
the function uses from enclosing traces (closures) become extra parameters, as JAX's closure
conversion does. :func:`splice` then moves such a computation's instructions into the
HLO-shaped wrapper the primitive needs (one tuple parameter, unpacked with
``get-tuple-element``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from xla_teach.frontend import dtypes
from xla_teach.frontend.errors import CompilationError
from xla_teach.frontend.numpy_api import astype
from xla_teach.frontend.pytree import PyTreeDef, tree_flatten
from xla_teach.frontend.tracer import ShapedArray, TraceContext, Tracer, current_context, push_context
from xla_teach.hlo.builder import XlaBuilder, XlaOp
from xla_teach.hlo.ir import HloComputation


@dataclass
class ClosedTrace:
    """A function traced into a computation ``(inputs..., captures...) -> tuple(outputs)``."""

    computation: HloComputation
    out_tree: PyTreeDef
    out_avals: list[ShapedArray]
    captured: list[Tracer]  # tracers of enclosing contexts the function used


def trace_closed(fn: Callable[..., Any], in_avals: Sequence[ShapedArray], name: str,
                 out_avals: Sequence[ShapedArray] | None = None) -> ClosedTrace:
    """Trace ``fn(*tracers)`` into a new computation of the current module. If
    ``out_avals`` is given, outputs are converted to those dtypes when they are
    weakly typed (a Python scalar returned for a float32 loop variable) and checked."""
    parent = current_context()
    assert parent is not None
    sub = parent.builder.create_sub_builder(name, keep_metadata=True)
    params = [sub.parameter(i, a.hlo_shape(), f"arg_{i}") for i, a in enumerate(in_avals)]
    count = [len(params)]

    def capture(outer: Tracer) -> XlaOp:
        op = sub.parameter(count[0], outer.op.shape, f"capture_{count[0] - len(params)}")
        count[0] += 1
        return op

    ctx = TraceContext(sub, f"{parent.name_stack}/{name}", parent, capture)
    with push_context(ctx):
        tracers = [Tracer(ctx, p, a.weak_type) for p, a in zip(params, in_avals, strict=True)]
        out = fn(*tracers)
        leaves, out_tree = tree_flatten(out)
        results = [ctx.lift(leaf) for leaf in leaves]
        if out_avals is not None:
            results = match_avals(results, out_avals, name)
        comp = sub.build_computation(sub.tuple([r.op for r in results]))
    return ClosedTrace(comp, out_tree, [r.aval for r in results], ctx.captured)


def match_avals(results: list[Tracer], avals: Sequence[ShapedArray], name: str) -> list[Tracer]:
    if len(results) != len(avals):
        raise CompilationError(f"{name}", f"the function returned {len(results)} arrays but the loop state has "
                               f"{len(avals)}", "return a value with the same structure as the initial state")
    out = []
    for r, a in zip(results, avals, strict=True):
        if r.shape != a.shape:
            raise CompilationError(f"{name}", f"the function returned {r.aval} where the loop state has {a} "
                                   "(a loop state must keep its shape: every iteration runs the same program)",
                                   "keep shapes fixed, e.g. preallocate with xnp.zeros and write with .at[i].set")
        if r.dtype != a.dtype:
            if not r.weak_type and not (dtypes.is_float(a.dtype) and dtypes.is_float(r.dtype) and a.weak_type):
                raise CompilationError(f"{name}", f"the function returned dtype {r.dtype} where the loop state "
                                       f"has {a.dtype}", f"convert with .astype({a.dtype.name})")
            r = astype(r, a.dtype)
        out.append(r)
    return out


def splice(closed: HloComputation, builder: XlaBuilder, args: Sequence[XlaOp]) -> XlaOp:
    """Move the instructions of ``closed`` into ``builder``'s computation, its parameters
    replaced by ``args``; returns the moved root. (An inliner on a fresh computation.)"""
    target = builder.computation
    params = closed.parameter_instructions
    for param, arg in zip(params, args, strict=True):
        param.replace_all_uses_with(arg.instruction)
    root = closed.root
    for instr in list(closed.instructions):
        closed.instructions.remove(instr)
        if instr.opcode == "parameter":
            instr.detach_operands()
            instr.parent = None
            continue
        instr.parent = target
        target.instructions.append(instr)
    closed.root_instruction = None
    builder.module.remove_computation(closed)
    return XlaOp(builder, root)


def unique_tracers(tracers: Sequence[Tracer]) -> list[Tracer]:
    """``tracers`` without repeats (by identity), in first-seen order."""
    seen: dict[int, Tracer] = {}
    for t in tracers:
        seen.setdefault(id(t), t)
    return list(seen.values())


def elements_of(sub: XlaBuilder, result: XlaOp, n: int) -> list[XlaOp]:
    """The elements of a tuple-shaped op: the operands of a ``tuple`` instruction nobody
    else uses (which is then removed), else ``get-tuple-element``s."""
    instr = result.instruction
    if instr.opcode == "tuple" and not instr.users:
        elements = [XlaOp(sub, op) for op in instr.operands]
        sub.computation.remove_instruction(instr)
        return elements
    return [sub.get_tuple_element(result, i) for i in range(n)]
