"""The GPU backend's HLO pipeline: the shared pipeline with GPU fusion choices.

GPU differences from the CPU pipeline: ``divide`` and ``rsqrt`` count as cheap
(single instructions), so fusion may duplicate them; the tree-reduction
rewriter splits very long reductions so that many blocks share them; ``row-fusion`` makes
softmax and layer norm one kernel (a block per row); dots stay
emitted kernels (a tiled shared-memory kernel, no vendor library), convolutions become products of
their patches (``convolution-im2col``), and ``dot_decomposer`` first
makes every dot one the kernels take (``x @ W`` on 3-D activations: one product of the merged
rows). The expanders
(``rng-expander``, ``topk-decomposer``, ``tuple-constant-splitter``,
``all-reduce-splitter``, ``conditional-to-select``) run first, as on the CPU, then
``stable-sort-expander``: the GPU's bitonic sort is not stable, so ties are broken by
position (an extra ``iota`` operand) and every sort gives the interpreter's order; and
``select-and-scatter-expander``: max-pooling's gradient as a reduce-window that picks each window's
element and a parallel scatter, where the kernel of its own ran on one thread.
"""

from __future__ import annotations

from xla_teach.backends.llvm.elemental_emitter import emittable_fusion
from xla_teach.passes.expanders import expanders
from xla_teach.passes.expanders.select_and_scatter_expander import SelectAndScatterExpander
from xla_teach.passes.expanders.stable_sort_expander import StableSortExpander
from xla_teach.passes.fusion.fusion_rules import FusionConfig
from xla_teach.passes.fusion.row_fusion import RowFusion
from xla_teach.passes.lowering.convolution_im2col import ConvolutionIm2col
from xla_teach.passes.lowering.dot_decomposer import DotDecomposer
from xla_teach.passes.lowering.reduce_window_rewriter import ReduceWindowRewriter
from xla_teach.passes.lowering.reshape_to_bitcast import ReshapeToBitcast
from xla_teach.passes.lowering.tree_reduction_rewriter import TreeReductionRewriter
from xla_teach.passes.pass_base import HloPassPipeline
from xla_teach.passes.pipeline import fusion, optimization
from xla_teach.passes.scheduling.hlo_memory_scheduler import HloMemoryScheduler

GPU_FUSION = FusionConfig(cheap_ops=frozenset({"divide", "rsqrt"}))


def gpu_pipeline() -> HloPassPipeline:
    """The GPU's HLO passes, in the order they run (``xla-teach opt --list-passes --platform gpu``)."""
    return HloPassPipeline("gpu-pipeline", [
        optimization([*expanders(keep_fusion=emittable_fusion),
                      StableSortExpander(),                     # ties of the bitonic sort broken by an iota
                      SelectAndScatterExpander()]),             # max-pool's gradient: reduce-window + scatter
        ConvolutionIm2col(),                                    # convolutions as products of their patches
        DotDecomposer(),                                        # dots as [batch, m, k] x [batch, k, n] products
        ReduceWindowRewriter(),                                 # cumsum in log2(n) passes, not n^2 / 2 adds
        TreeReductionRewriter(parts=1024, max_kept=1024),       # long reductions shared by many blocks
        RowFusion("gpu"),                                       # softmax, layer norm: a block per row
        fusion(GPU_FUSION),                                     # divide and rsqrt count as cheap here
        HloPassPipeline("gpu-codegen-prepare", [ReshapeToBitcast(), HloMemoryScheduler()]),
    ])
