"""clone-cheap-loop-inits: a loop whose state elements all start from one shared broadcast (a
scan's stacked outputs, all zeros) gets a broadcast per element, so buffer assignment writes each
straight into its element's buffer: the shared value's buffer is gone from the temporaries, and
the results are the same bits."""

from __future__ import annotations

import numpy as np

from xla_teach import flags
from xla_teach.api import compile_module
from xla_teach.hlo.text.parser import parse_hlo
from xla_teach.passes.lowering.clone_loop_inits import CloneCheapLoopInits

SCAN = """HloModule scan

cond {
  cs = (s32[], f32[64,256], f32[64,256], f32[64,256]) parameter(0)
  ci = s32[] get-tuple-element(cs), index=0
  n = s32[] constant(64)
  ROOT lt = pred[] compare(ci, n), direction=LT
}

body {
  bs = (s32[], f32[64,256], f32[64,256], f32[64,256]) parameter(0)
  bi = s32[] get-tuple-element(bs), index=0
  one = s32[] constant(1)
  next = s32[] add(bi, one)
  x = f32[64,256] get-tuple-element(bs), index=3
  a = f32[64,256] get-tuple-element(bs), index=1
  b = f32[64,256] get-tuple-element(bs), index=2
  row = f32[1,256] slice(x), slice={[0:1], [0:256]}
  zero = s32[] constant(0)
  a2 = f32[64,256] dynamic-update-slice(a, row, bi, zero)
  t = f32[1,256] tanh(row)
  b2 = f32[64,256] dynamic-update-slice(b, t, bi, zero)
  ROOT out = (s32[], f32[64,256], f32[64,256], f32[64,256]) tuple(next, a2, b2, x)
}

ENTRY main {
  x = f32[64,256] parameter(0)
  i0 = s32[] constant(0)
  z = f32[] constant(0)
  zs = f32[64,256] broadcast(z), dimensions={}
  init = (s32[], f32[64,256], f32[64,256], f32[64,256]) tuple(i0, zs, zs, x)
  w = (s32[], f32[64,256], f32[64,256], f32[64,256]) while(init), condition=cond, body=body
  a = f32[64,256] get-tuple-element(w), index=1
  b = f32[64,256] get-tuple-element(w), index=2
  ROOT r = (f32[64,256], f32[64,256]) tuple(a, b)
}
"""


def test_each_state_element_gets_its_own_broadcast_and_the_shared_buffer_is_gone() -> None:
    x = np.random.default_rng(0).standard_normal((64, 256)).astype(np.float32)
    cloned = compile_module(SCAN, "cpu")
    with flags.override(xla_disable_hlo_passes="clone-cheap-loop-inits"):
        shared = compile_module(SCAN, "cpu")
    init = next(i for i in cloned.module.entry.instructions if i.opcode == "while").operand(0)
    assert init.operand(1) is not init.operand(2) and all(init.operand(k).opcode == "fusion" for k in (1, 2))
    assert cloned.buffer_assignment.temp_bytes() <= shared.buffer_assignment.temp_bytes() - 64 * 256 * 4
    for got, want in zip(cloned.execute([x]), shared.execute([x]), strict=True):
        np.testing.assert_array_equal(got, want)


def test_a_value_that_is_not_cheap_or_not_shared_is_left_alone() -> None:
    module = parse_hlo(SCAN.replace("init = (s32[], f32[64,256], f32[64,256], f32[64,256]) tuple(i0, zs, zs, x)",
                                    "init = (s32[], f32[64,256], f32[64,256], f32[64,256]) tuple(i0, x, zs, x)"))
    assert not CloneCheapLoopInits().run(module)  # x is shared but a parameter; zs is used once
