"""Expanders: passes that rewrite an op no code generator implements into ops that one does.

Like XLA's ``xla/hlo/transforms/expanders/``, each pass here replaces one opcode by an
equivalent group of simpler instructions (``topk`` -> ``sort`` + ``slice``, legacy ``rng``
-> ``rng-get-and-update-state`` + ``rng-bit-generator`` + conversion, a tuple ``constant`` ->
``tuple`` of array constants, a variadic ``all-reduce`` -> one per operand, a ``conditional``
inside a reducer -> ``select``s, an asynchronous collective's start/done pair -> the collective). They run first
in the CPU and GPU pipelines, so
the optimizer sees the simple ops and can fuse and simplify them like any others
(:func:`add_expanders` puts them there).
"""

from __future__ import annotations

from collections.abc import Callable

from xla_teach.hlo.ir import HloInstruction
from xla_teach.passes.expanders.all_reduce_splitter import AllReduceSplitter
from xla_teach.passes.expanders.async_collective_to_sync import AsyncCollectiveToSync
from xla_teach.passes.expanders.conditional_to_select import ConditionalToSelect
from xla_teach.passes.expanders.rng_expander import RngExpander
from xla_teach.passes.expanders.topk_custom_call_rewriter import TopkCustomCallRewriter
from xla_teach.passes.expanders.topk_decomposer import TopkDecomposer
from xla_teach.passes.expanders.tuple_constant_splitter import TupleConstantSplitter
from xla_teach.passes.fusion.defuser import Defuser
from xla_teach.passes.pass_base import HloPassPipeline


def add_expanders(pipeline: HloPassPipeline, keep_fusion: Callable[[HloInstruction], bool] | None = None,
                  decompose_topk: Callable[[HloInstruction], bool] | None = None) -> None:
    """Put the expanders at the very start of ``pipeline``'s ``optimization`` stage, after the
    ``defuser`` (a module that arrives fused, as XLA's optimized HLO does, keeps the fusions
    ``keep_fusion`` accepts -- those the backend's kernels emit -- and the rest are unfused);
    ``decompose_topk`` says which ``topk`` instructions become a sort (default: all).

    First of all: ``rng-expander`` orders the ``rng`` draws (control edges) as the
    interpreter runs them, which no pass may have changed yet (see its docstring)."""
    optimization = pipeline.find("optimization")
    if not isinstance(optimization, HloPassPipeline):
        raise ValueError(f"{pipeline.name} has no 'optimization' stage to put the expanders in")
    optimization.passes[:0] = [Defuser(keep_fusion), RngExpander(), TopkCustomCallRewriter(),
                               TopkDecomposer(decompose_topk), TupleConstantSplitter(),
                               AsyncCollectiveToSync(), AllReduceSplitter(), ConditionalToSelect()]


__all__ = ["AllReduceSplitter", "AsyncCollectiveToSync", "ConditionalToSelect", "RngExpander", "TopkCustomCallRewriter",
           "TopkDecomposer",
           "TupleConstantSplitter", "add_expanders"]
