"""The CPU backend's HLO pipeline, written out top to bottom in one list (:func:`cpu_pipeline`).

The shared stages are :func:`xla_teach.passes.pipeline.optimization` and
:func:`~xla_teach.passes.pipeline.fusion` (their order is documented there); the CPU adds the
expanders first (``rng-expander``,
``topk-decomposer``, ``scan-expander``, ``tuple-constant-splitter``, ``all-reduce-splitter``,
``conditional-to-select``: ops with no kernel of their own), ``change-op-data-type``
(f16/bf16 and mixed-type products computed in f32), ``conv-canonicalization`` (convolutions in
the layout of the blocked im2col + BLAS kernel), ``all-reduce-combiner`` (in a module for several
devices: one meeting for independent all-reduces), its fusion rules, the dot strategy,
``attention-fusion`` (a product, a softmax and a product as one kernel with the scores in a tile), and
the memory scheduler that backends need before buffer assignment.
"""

from __future__ import annotations

from xla_teach.backends.cpu.kernels.topk import topk_parameters
from xla_teach.backends.cpu.passes.attention_fusion import AttentionFusion
from xla_teach.backends.cpu.passes.change_op_data_type import ChangeOpDataType
from xla_teach.backends.cpu.passes.conv_canonicalization import ConvCanonicalization
from xla_teach.backends.cpu.passes.dot_strategy import DotStrategy
from xla_teach.backends.llvm.elemental_emitter import emittable_fusion
from xla_teach.passes.expanders import expanders
from xla_teach.passes.fusion.fusion_rules import FusionConfig
from xla_teach.passes.fusion.row_fusion import RowFusion
from xla_teach.passes.lowering.clone_loop_inits import CloneCheapLoopInits
from xla_teach.passes.lowering.reshape_to_bitcast import ReshapeToBitcast
from xla_teach.passes.lowering.tree_reduction_rewriter import TreeReductionRewriter
from xla_teach.passes.pass_base import HloPassPipeline
from xla_teach.passes.pipeline import fusion, optimization, spmd_partitioning
from xla_teach.passes.scheduling.hlo_memory_scheduler import HloMemoryScheduler
from xla_teach.passes.spmd.all_reduce_combiner import AllReduceCombiner

# A CPU loop fusion is one loop whose body LLVM compiles once; long elementwise chains (JAX
# writes erf as some 180 instructions) cost nothing per element to keep together, and splitting
# them writes every intermediate to memory: 8 kernels and 128 MiB of temporaries for an erf-GELU
# of 4M floats at a limit of 64, one kernel and none at 512.
CPU_FUSION = FusionConfig(max_instructions=512, column_reduction_side_outputs=False)


def cpu_pipeline() -> HloPassPipeline:
    """The CPU's HLO passes, in the order they run (``xla-teach opt --list-passes`` prints them)."""
    return HloPassPipeline("cpu-pipeline", [
        spmd_partitioning(),      # several devices: JAX's global program becomes the per-device one
        optimization(expanders(keep_fusion=emittable_fusion,  # the rest of the top-k run the top-k kernel
                               decompose_topk=lambda topk: topk_parameters(topk) is None)),
        ChangeOpDataType(),       # f16/bf16 and mixed-type products computed in f32
        ConvCanonicalization(),   # convolutions in the layout of the im2col + BLAS kernel
        AllReduceCombiner(),      # several devices: independent all-reduces meet once
        TreeReductionRewriter(),  # huge reductions in two steps, so threads share them
        RowFusion(),              # softmax, layer norm... one kernel per row-wise computation
        fusion(CPU_FUSION),       # instruction fusion, multi-output fusion, dce
        HloPassPipeline("cpu-codegen-prepare", [
            ReshapeToBitcast(),   # reshapes that move no data become bitcasts
            DotStrategy(),        # how each dot runs: BLAS, a tiled loop, a strided gemm...
            AttentionFusion(),    # product, softmax, product: one kernel, the scores in a tile
            CloneCheapLoopInits(),  # a loop's state elements each start from their own broadcast
            HloMemoryScheduler(),  # the order that keeps peak memory low; buffer assignment follows it
        ]),
    ])
