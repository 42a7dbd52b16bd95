"""The default HLO pass pipeline, a simplified mirror of XLA's CPU/GPU pipelines.

Order (each line a pipeline, nested as XLA nests them; ``(fix)`` reruns its passes
until none of them changes the module)::

    <backend>-pipeline
      optimization
        call-inliner                      # once, first: later passes see across calls
        layout-assignment                 # intermediate arrays row-major (JAX's {0,1} transposes)
        simplification (fix)
          algsimp                         # local algebraic rewrites (rule table in its docstring)
          constant_folding                # evaluate constant subexpressions with the interpreter
          cse                             # merge identical instructions and equal constants
          tuple-simplifier                # gte(tuple(...)) and re-packed tuples
          reshape-mover                   # sink reshapes/transposes below elementwise ops
          transpose-folding               # absorb transposes into dot dimension numbers
          simplify-while-loops            # loops that never run, dead loop state
          while-loop-invariant-code-motion
          dce                             # remove what the passes above left unused
        while-loop-trip-count-annotator   # known_trip_count of counted loops, in backend_config
      fusion
        fusion, multi_output_fusion, dce

XLA runs more passes (expanders, copy insertion...; its layout assignment chooses every
intermediate layout, where this one only makes them row-major) and splits
``transpose-folding`` and ``cse`` out of its ``simplification`` fixed point; keeping
them inside here costs nothing and lets their results feed ``algsimp`` again.

Each backend writes its whole pipeline out as one list (``backends/cpu/cpu_pipeline.py``,
``backends/gpu/gpu_pipeline.py``), with :func:`optimization` and :func:`fusion` as two of its
entries and its own passes between; students can insert theirs anywhere with
``insert_before``/``insert_after``, e.g.::

    pipeline = default_pipeline()
    pipeline.find("simplification").insert_after("algsimp", MyPass())
"""

from __future__ import annotations

from collections.abc import Sequence

from xla_teach.passes.fusion.fusion_rules import FusionConfig
from xla_teach.passes.fusion.instruction_fusion import InstructionFusion
from xla_teach.passes.fusion.multi_output_fusion import MultiOutputFusion
from xla_teach.passes.lowering.layout_assignment import LayoutAssignment
from xla_teach.passes.lowering.while_loop_trip_count_annotator import WhileLoopTripCountAnnotator
from xla_teach.passes.pass_base import HloPass, HloPassFix, HloPassPipeline
from xla_teach.passes.simplifiers.algebraic_simplifier import AlgebraicSimplifier
from xla_teach.passes.simplifiers.call_inliner import CallInliner
from xla_teach.passes.simplifiers.constant_folding import ConstantFolding
from xla_teach.passes.simplifiers.cse import CommonSubexpressionElimination
from xla_teach.passes.simplifiers.dce import DeadCodeElimination
from xla_teach.passes.simplifiers.reshape_mover import ReshapeMover
from xla_teach.passes.simplifiers.transpose_folding import TransposeFolding
from xla_teach.passes.simplifiers.tuple_simplifier import TupleSimplifier
from xla_teach.passes.simplifiers.while_loop_invariant_code_motion import WhileLoopInvariantCodeMotion
from xla_teach.passes.simplifiers.while_loop_simplifier import WhileLoopSimplifier
from xla_teach.passes.spmd.spmd_partitioner import SpmdPartitioner


def simplification_passes() -> list[HloPass]:
    """The passes of the ``simplification`` fixed point, in order (fresh instances)."""
    return [
        AlgebraicSimplifier(), ConstantFolding(), CommonSubexpressionElimination(), TupleSimplifier(),
        ReshapeMover(), TransposeFolding(), WhileLoopSimplifier(), WhileLoopInvariantCodeMotion(),
        DeadCodeElimination(),
    ]


def optimization(first: Sequence[HloPass] = ()) -> HloPassPipeline:
    """The ``optimization`` stage: ``first`` (a backend's expanders), then the call inliner, layout
    assignment, the ``simplification`` fixed point and the trip-count annotator."""
    return HloPassPipeline("optimization", [*first, CallInliner(), LayoutAssignment(),
                                            HloPassFix("simplification", simplification_passes()),
                                            WhileLoopTripCountAnnotator()])


def spmd_partitioning() -> HloPassPipeline:
    """The ``spmd-partitioning`` stage: a global program for several devices, as JAX writes it
    before XLA partitions it, becomes the per-device program, its calls inlined first as XLA's CPU
    compiler does (a per-device module passes through unchanged:
    :func:`~xla_teach.passes.spmd.spmd_partitioner.needs_partitioning`)."""
    return HloPassPipeline("spmd-partitioning", [CallInliner(only_global_programs=True),
                                                 SpmdPartitioner(only_unpartitioned=True)])


def fusion(config: FusionConfig | None = None) -> HloPassPipeline:
    """The ``fusion`` stage: instruction fusion, multi-output fusion, and what they left unused."""
    config = config or FusionConfig()
    return HloPassPipeline("fusion", [InstructionFusion(config), MultiOutputFusion(config), DeadCodeElimination()])


def default_pipeline(backend: str = "cpu", fusion_config: FusionConfig | None = None) -> HloPassPipeline:
    """The shared pipeline alone: ``optimization`` then ``fusion`` (each backend's own pipeline,
    in ``backends/<name>/<name>_pipeline.py``, writes these stages out with its passes between)."""
    return HloPassPipeline(f"{backend}-pipeline", [optimization(), fusion(fusion_config)])


def interpreter_pipeline() -> HloPassPipeline:
    """What "the interpreter's passes" mean: it runs HLO as it is, so the shared pipeline."""
    return default_pipeline("interpreter")
