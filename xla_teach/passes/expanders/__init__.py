"""Expanders: passes that rewrite an op no code generator implements into ops that one does.

Like XLA's ``xla/hlo/transforms/expanders/``, each pass here replaces one opcode by an
equivalent group of simpler instructions (``topk`` -> ``sort`` + ``slice``, ``scan`` ->
``reduce-window`` or a ``while`` loop, legacy ``rng`` -> ``rng-get-and-update-state`` +
``rng-bit-generator`` + conversion, a tuple ``constant`` -> ``tuple`` of array constants, a
variadic ``all-reduce`` -> one per operand, a ``conditional`` inside a reducer -> ``select``s, an
asynchronous collective's start/done pair -> the collective). They run first in the CPU and GPU
pipelines, so the optimizer sees the simple ops and can fuse and simplify them like any others
(:func:`expanders` lists them in order).
"""

from __future__ import annotations

from collections.abc import Callable

from xla_teach.hlo.ir import HloInstruction
from xla_teach.passes.expanders.all_reduce_splitter import AllReduceSplitter
from xla_teach.passes.expanders.async_collective_to_sync import AsyncCollectiveToSync
from xla_teach.passes.expanders.conditional_to_select import ConditionalToSelect
from xla_teach.passes.expanders.rng_expander import RngExpander
from xla_teach.passes.expanders.scan_expander import ScanExpander
from xla_teach.passes.expanders.topk_custom_call_rewriter import TopkCustomCallRewriter
from xla_teach.passes.expanders.topk_decomposer import TopkDecomposer
from xla_teach.passes.expanders.tuple_constant_splitter import TupleConstantSplitter
from xla_teach.passes.fusion.defuser import Defuser
from xla_teach.passes.pass_base import HloPass


def expanders(keep_fusion: Callable[[HloInstruction], bool] | None = None,
              decompose_topk: Callable[[HloInstruction], bool] | None = None) -> list[HloPass]:
    """The expanders, in order, for the very start of a backend's ``optimization`` stage: first the
    ``defuser`` (a module that arrives fused, as XLA's optimized HLO does, keeps the fusions
    ``keep_fusion`` accepts -- those the backend's kernels emit -- and the rest are unfused);
    ``decompose_topk`` says which ``topk`` instructions become a sort (default: all).

    First of all: ``rng-expander`` orders the ``rng`` draws (control edges) as the
    interpreter runs them, which no pass may have changed yet (see its docstring)."""
    return [Defuser(keep_fusion), RngExpander(), TopkCustomCallRewriter(), TopkDecomposer(decompose_topk),
            ScanExpander(), TupleConstantSplitter(), AsyncCollectiveToSync(), AllReduceSplitter(),
            ConditionalToSelect()]


__all__ = ["AllReduceSplitter", "AsyncCollectiveToSync", "ConditionalToSelect", "RngExpander", "ScanExpander",
           "TopkCustomCallRewriter", "TopkDecomposer",
           "TupleConstantSplitter", "expanders"]
