"""The GPU backend's HLO pipeline: the shared pipeline with GPU fusion choices.

GPU differences from the CPU pipeline: ``divide`` and ``rsqrt`` count as cheap
(single instructions), so fusion may duplicate them; the tree-reduction
rewriter splits very long reductions so that many blocks share them; ``row-fusion`` makes
softmax and layer norm one kernel (a block per row); dots stay
emitted kernels (a tiled shared-memory kernel, no vendor library). The expanders
(``rng-expander``, ``topk-decomposer``, ``tuple-constant-splitter``,
``all-reduce-splitter``, ``conditional-to-select``) run first, as on the CPU, then
``stable-sort-expander``: the GPU's bitonic sort is not stable, so ties are broken by
position (an extra ``iota`` operand) and every sort gives the interpreter's order.
"""

from __future__ import annotations

from xla_teach.backends.llvm.elemental_emitter import emittable_fusion
from xla_teach.passes.expanders import add_expanders
from xla_teach.passes.expanders.stable_sort_expander import StableSortExpander
from xla_teach.passes.fusion.fusion_rules import FusionConfig
from xla_teach.passes.fusion.row_fusion import RowFusion
from xla_teach.passes.lowering.reshape_to_bitcast import ReshapeToBitcast
from xla_teach.passes.lowering.tree_reduction_rewriter import TreeReductionRewriter
from xla_teach.passes.pass_base import HloPassPipeline
from xla_teach.passes.pipeline import default_pipeline
from xla_teach.passes.scheduling.hlo_memory_scheduler import HloMemoryScheduler

GPU_FUSION = FusionConfig(cheap_ops=frozenset({"divide", "rsqrt"}))


def gpu_pipeline() -> HloPassPipeline:
    pipeline = default_pipeline("gpu", GPU_FUSION)
    add_expanders(pipeline, keep_fusion=emittable_fusion)
    optimization = pipeline.find("optimization")
    assert isinstance(optimization, HloPassPipeline)
    optimization.insert_after("conditional-to-select", StableSortExpander())
    pipeline.insert_before("fusion", TreeReductionRewriter(parts=1024, max_kept=1024))
    pipeline.insert_before("fusion", RowFusion("gpu"))
    pipeline.add_pass(HloPassPipeline("gpu-codegen-prepare", [ReshapeToBitcast(), HloMemoryScheduler()]))
    return pipeline
