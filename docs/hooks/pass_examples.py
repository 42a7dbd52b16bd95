"""Complete example modules for the passes whose docstring example is abbreviated.

The pass reference pages (``docs/hooks/pass_pages.py``) run every pass of the CPU
pipeline on an example and draw the module before and after. The example is the
``Before::`` block of the pass's docstring when that block is a whole module (the
simplifiers' are; ``tests/passes/test_pass_docstrings.py`` checks them). Some
docstrings show only the interesting lines (``...`` for the rest, or one
instruction); for those passes the page runs the complete module below instead and
says so.

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
    "simplify-while-loops": """\
HloModule simplify_while_loops

cond {
  s = (s32[], f32[4]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  ten = s32[] constant(10)
  ROOT lt = pred[] compare(i, ten), direction=LT
}

body {
  s = (s32[], f32[4]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  one = s32[] constant(1)
  next = s32[] add(i, one)
  x = f32[4] get-tuple-element(s), index=1
  y = f32[4] exponential(x)
  ROOT t = (s32[], f32[4]) tuple(next, y)
}

ENTRY main {
  x0 = f32[4] parameter(0)
  zero = s32[] constant(0)
  init = (s32[], f32[4]) tuple(zero, x0)
  loop = (s32[], f32[4]) while(init), condition=cond, body=body
  ROOT n = s32[] get-tuple-element(loop), index=0
}
""",
    "while-loop-invariant-code-motion": """\
HloModule while_loop_invariant_code_motion

cond {
  s = (s32[], f32[4], f32[4]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  ten = s32[] constant(10)
  ROOT lt = pred[] compare(i, ten), direction=LT
}

body {
  s = (s32[], f32[4], f32[4]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  x = f32[4] get-tuple-element(s), index=1
  w = f32[4] get-tuple-element(s), index=2
  one = s32[] constant(1)
  next = s32[] add(i, one)
  e = f32[4] exponential(w)
  y = f32[4] add(x, e)
  ROOT t = (s32[], f32[4], f32[4]) tuple(next, y, w)
}

ENTRY main {
  x0 = f32[4] parameter(0)
  w0 = f32[4] parameter(1)
  zero = s32[] constant(0)
  init = (s32[], f32[4], f32[4]) tuple(zero, x0, w0)
  loop = (s32[], f32[4], f32[4]) while(init), condition=cond, body=body
  ROOT r = f32[4] get-tuple-element(loop), index=1
}
""",
    "tree_reduction_rewriter": "HloModule tree_reduction\n\n" + _ADD + """
ENTRY main {
  x = f32[16777216] parameter(0)
  zero = f32[] constant(0)
  ROOT r = f32[] reduce(x, zero), dimensions={0}, to_apply=add
}
""",
    "row-fusion": "HloModule softmax\n\n" + _ADD + "\n" + _MAX + "\n" + _SOFTMAX_ENTRY,
    "fusion": "HloModule seed\n\n" + _ADD + """
ENTRY main {
  x = f32[1024] parameter(0)
  y = f32[1024] parameter(1)
  z = f32[1024] parameter(2)
  mul = f32[1024] multiply(y, z)
  sum = f32[1024] add(x, mul)
  zero = f32[] constant(0)
  ROOT r = f32[] reduce(sum, zero), dimensions={0}, to_apply=add
}
""",
    "multi_output_fusion": "HloModule softmax\n\n" + _ADD + "\n" + _MAX + "\n" + _SOFTMAX_ENTRY,
    "reshape-to-bitcast": """\
HloModule reshape_to_bitcast

ENTRY main {
  x = f32[2,3,20]{2,1,0} parameter(0)
  r = f32[6,20]{1,0} reshape(x)
  ROOT n = f32[6,20]{1,0} negate(r)
}
""",
    "dot-strategy": """\
HloModule dot_strategy

ENTRY main {
  a = f32[512,512]{1,0} parameter(0)
  b = f32[512,512]{1,0} parameter(1)
  ROOT dot = f32[512,512]{1,0} dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}
""",
    "hlo-memory-scheduler": """\
HloModule memory_scheduler

ENTRY main {
  x = f32[1024] parameter(0)
  y = f32[1024] parameter(1)
  a = f32[1024] exponential(x)
  b = f32[1024] log(y)
  c = f32[1024] negate(x)
  d = f32[1024] add(a, c)
  ROOT r = f32[1024] multiply(d, b)
}
""",
}

PREPARE: dict[str, list[str]] = {
    "multi_output_fusion": ["fusion"],
}
