"""The ``conditional`` primitive behind ``cond`` and ``switch``, and its reverse-mode rule.

Each branch is traced into its own computation (:func:`~xla_teach.frontend.control_flow_trace.trace_closed`);
the branches must return the same structure, shapes and dtypes. Values the branches capture are
passed to every branch. Lowered, it is HLO's ``conditional``: a ``pred`` selector with two
branches, or an ``s32`` index with any number.

Its transpose is another ``conditional`` on the same selector whose branch ``k`` computes the
VJP of branch ``k``: only the branch that ran forward runs backward.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from xla_teach.frontend.autodiff import is_recorded
from xla_teach.frontend.control_flow_autodiff import Rule, differentiable, transpose_step
from xla_teach.frontend.control_flow_trace import ClosedTrace, splice, trace_closed, unique_tracers
from xla_teach.frontend.errors import CompilationError
from xla_teach.frontend.pytree import tree_flatten, tree_unflatten
from xla_teach.frontend.tracer import Primitive, Tracer, bind, current_context
from xla_teach.hlo.builder import XlaBuilder, XlaOp
from xla_teach.hlo.ir import HloComputation
from xla_teach.hlo.shape import Shape


def conditional_primitive(selector: Tracer, branches: list[Callable[..., Any]], operands: Sequence[Any]) -> Any:
    ctx = current_context()
    assert ctx is not None
    leaves, tree = tree_flatten(tuple(operands))
    ops_in = [ctx.lift(leaf) for leaf in leaves]
    avals = [t.aval for t in ops_in]
    closed = [trace_closed(lambda *xs, fn=fn: fn(*tree_unflatten(tree, xs)), avals, f"branch_{k}")
              for k, fn in enumerate(branches)]
    first = closed[0]
    for k, c in enumerate(closed[1:], 1):
        if c.out_tree != first.out_tree or [(a.shape, a.dtype) for a in c.out_avals] != \
                [(a.shape, a.dtype) for a in first.out_avals]:
            raise CompilationError("cond", "the branches return different structures, shapes or dtypes: "
                                   f"branch 0 gives {first.out_tree} {[str(a) for a in first.out_avals]}, branch "
                                   f"{k} gives {c.out_tree} {[str(a) for a in c.out_avals]}",
                                   "make both branches return arrays of the same shapes and dtypes (cast with "
                                   ".astype, pad to a common shape)")
    n = len(ops_in)
    per_branch = [list(c.captured) for c in closed]
    captured_all = unique_tracers([t for caps in per_branch for t in caps])
    n_out = len(first.out_avals)

    def lower(b: XlaBuilder, selector_op: XlaOp, *ops: XlaOp) -> list[XlaOp]:
        operand_ops, capture_ops = list(ops[:n]), list(ops[n:])
        op_of = {id(t): op for t, op in zip(captured_all, capture_ops, strict=True)}
        tuples, comps = [], []
        for k, c in enumerate(closed):
            branch_tuple = b.tuple(operand_ops + [op_of[id(t)] for t in per_branch[k]])
            comps.append(_branch_wrapper(b, k, branch_tuple.shape, c))
            tuples.append(branch_tuple)
        if len(closed) == 2 and selector_op.shape.element_type.is_pred:
            result = b.conditional(selector_op, tuples[0], comps[0], tuples[1], comps[1])
        else:
            result = b.indexed_conditional(selector_op, comps, tuples)
        return [b.get_tuple_element(result, i) for i in range(n_out)]

    prim = Primitive("cond", lower, multiple_results=True)
    if is_recorded([*ops_in, *captured_all]):
        flat_branches = [lambda *xs, fn=fn: tree_flatten(fn(*tree_unflatten(tree, xs)))[0] for fn in branches]
        prim.vjp = cond_transpose_rule(flat_branches, captured_all)
    outs = bind(prim, selector, *ops_in, *captured_all)
    return tree_unflatten(first.out_tree, outs)


def _branch_wrapper(builder: XlaBuilder, k: int, shape: Shape, closed: ClosedTrace) -> HloComputation:
    sub = builder.create_sub_builder(f"branch_{k}_computation")
    param = sub.parameter(0, shape, "operands")
    args = [sub.get_tuple_element(param, i) for i in range(len(shape.tuple_shapes))]
    return sub.build_computation(splice(closed.computation, sub, args))


def cond_transpose_rule(branches: Sequence[Callable[..., list[Any]]], captured: Sequence[Tracer]) -> Rule:
    """The rule of one ``conditional``: inputs ``(selector, operands..., captured...)``.
    ``branches[k](*operands)`` returns the flat outputs of branch ``k``."""
    def rule(cts: Sequence[Tracer | None], inputs: Sequence[Tracer], outputs: Sequence[Tracer]
             ) -> list[Tracer | None]:
        n_ops = len(inputs) - 1 - len(captured)
        selector, operands, outer = inputs[0], list(inputs[1:1 + n_ops]), list(inputs[1 + n_ops:])
        wrt = differentiable(operands)
        wrt_closed = differentiable(outer)
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
