"""Exercise `bisect`: find the pass that breaks a program.

Somewhere in a compiler pipeline a pass is wrong: the compiled program computes
something else than the HLO it was given. Which pass? Every stage of the pipeline is an
HLO module, and the interpreter can run any HLO module, so:

1. run the pipeline once, recording the module after every pass
   (``pipeline.run(module, PassOptions(), recorder)`` with a ``PassRecorder``; each
   ``recorder.records[i]`` has ``pass_name``, ``changed`` and ``after``, the module text
   after the pass);
2. compute the right answer: the interpreter on the *input* module
   (``evaluate_module(module, args)``, from ``xla_teach.hlo.evaluator``);
3. a stage is *good* if the interpreter gives the same results on it
   (``parse_hlo(record.after)``; compare with ``np.allclose``, a tolerance of 1e-3 is
   plenty); the first bad stage was made by the broken pass. Passes that changed nothing
   cannot be to blame, and once a module is broken it stays broken, so you can
   **bisect**: with 30 stages, 5 interpreter runs instead of 30.

Write ``find_broken_pass(module, pipeline, args)``: return the name of the pass that
broke the module, or ``None`` if every stage computes the right results.

xla_teach has a tool for exactly this: ``xla_teach.tools.bugs.bisect.bisect_passes(module,
pipeline, args)`` returns a result whose ``.pass_name`` is the culprit ("" for none), and
``xla-teach bisect`` runs it from the command line. Use it -- or, to learn how it works,
write steps 1-3 yourself (the grader accepts both).

Grade it:  xla-teach grade bisect path/to/bisect_exercise.py
"""

from __future__ import annotations

from typing import Any

from xla_teach.hlo.ir import HloModule
from xla_teach.passes.pass_base import HloPassPipeline


def find_broken_pass(module: HloModule, pipeline: HloPassPipeline, args: list[Any]) -> str | None:
    """The name of the first pass after which ``module`` computes something else, or None."""
    # BEGIN SOLUTION: bisect the pipeline's stages (xla_teach.tools.bugs.bisect, or your own search)
    from xla_teach.tools.bugs.bisect import bisect_passes

    result = bisect_passes(module, pipeline, args)
    return result.pass_name or None
    # END SOLUTION
