"""Complete example modules for the passes whose docstring example is abbreviated.

The pass reference pages (``docs/hooks/pass_pages.py``) run every pass of the CPU
pipeline on an example and draw the module before and after. The example is the
``Before::`` block of the pass's docstring, which is a whole module for nearly every
pass (``tests/passes/test_pass_docstrings.py`` runs them). Multi-output fusion's
docstring starts from the fusions that instruction fusion left, which reads better
than the raw softmax but is not what its page should show the pipeline doing; its
page runs the complete module below instead, after instruction fusion, and says so.
An entry here for a pass whose docstring example already runs is an error: one
example per pass.

``PREPARE`` names the passes that make the example's "before": multi-output fusion
combines *fusions*, so its example is first run through instruction fusion, as it
is in the pipeline.
"""

from __future__ import annotations

_ADD = """\
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
"""

_MAX = """\
max {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT m = f32[] maximum(a, b)
}
"""

_SOFTMAX_ENTRY = """\
ENTRY main {
  x = f32[8,100] parameter(0)
  ninf = f32[] constant(-inf)
  mx = f32[8] reduce(x, ninf), dimensions={1}, to_apply=max
  mxb = f32[8,100] broadcast(mx), dimensions={0}
  sub = f32[8,100] subtract(x, mxb)
  e = f32[8,100] exponential(sub)
  zero = f32[] constant(0)
  s = f32[8] reduce(e, zero), dimensions={1}, to_apply=add
  sb = f32[8,100] broadcast(s), dimensions={0}
  ROOT d = f32[8,100] divide(e, sb)
}
"""

EXAMPLES: dict[str, str] = {
    "multi_output_fusion": "HloModule softmax\n\n" + _ADD + "\n" + _MAX + "\n" + _SOFTMAX_ENTRY,
}

PREPARE: dict[str, list[str]] = {
    "multi_output_fusion": ["fusion"],
}
