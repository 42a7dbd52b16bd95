"""The default HLO pass pipeline, a simplified mirror of XLA's CPU/GPU pipelines.

Order (each line a pipeline, nested as XLA nests them)::

    optimization
      simplification (fixed point): dce, ...
    fusion
      fusion, multi_output_fusion, dce

Backends append their own passes (see ``backends/cpu/cpu_pipeline.py``) and
students can insert theirs anywhere with ``insert_before``/``insert_after``.
"""

from __future__ import annotations

from xla_teach.passes.fusion.fusion_rules import FusionConfig
from xla_teach.passes.fusion.instruction_fusion import InstructionFusion
from xla_teach.passes.fusion.multi_output_fusion import MultiOutputFusion
from xla_teach.passes.pass_base import HloPassFix, HloPassPipeline
from xla_teach.passes.simplifiers.dce import DeadCodeElimination


def default_pipeline(backend: str = "cpu", fusion_config: FusionConfig | None = None) -> HloPassPipeline:
    config = fusion_config or FusionConfig()
    simplification = HloPassFix("simplification", [DeadCodeElimination()])
    optimization = HloPassPipeline("optimization", [simplification])
    fusion = HloPassPipeline("fusion", [InstructionFusion(config), MultiOutputFusion(config),
                                        DeadCodeElimination()])
    return HloPassPipeline(f"{backend}-pipeline", [optimization, fusion])
