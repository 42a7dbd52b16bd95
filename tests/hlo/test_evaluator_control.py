"""Control flow, calls, custom calls, collectives, arguments and the driver's API."""

from __future__ import annotations

import numpy as np
import pytest

from tests.hlo.evaluator_util import run_hlo
from xla_teach.hlo.evaluator import EvaluationError, HloEvaluator, evaluate_instruction, evaluate_module
from xla_teach.hlo.ir import HloComputation, HloInstruction, HloModule
from xla_teach.hlo.shape import Shape
from xla_teach.hlo.text.parser import parse_hlo

WHILE = """HloModule t
%cond (s: (s32[], f32[3])) -> pred[] {
  %s = (s32[], f32[3]) parameter(0)
  %i = s32[] get-tuple-element(%s), index=0
  %n = s32[] constant(5)
  ROOT %lt = pred[] compare(%i, %n), direction=LT
}

%body (s: (s32[], f32[3])) -> (s32[], f32[3]) {
  %s = (s32[], f32[3]) parameter(0)
  %i = s32[] get-tuple-element(%s), index=0
  %x = f32[3] get-tuple-element(%s), index=1
  %one = s32[] constant(1)
  %next = s32[] add(%i, %one)
  %two = f32[] constant(2)
  %twos = f32[3] broadcast(%two), dimensions={}
  %y = f32[3] multiply(%x, %twos)
  ROOT %t = (s32[], f32[3]) tuple(%next, %y)
}

ENTRY e {
  x = f32[3] parameter(0)
  zero = s32[] constant(0)
  init = (s32[], f32[3]) tuple(zero, x)
  ROOT w = (s32[], f32[3]) while(init), condition=%cond, body=%body
}
"""


def test_while_loop() -> None:
    count, values = run_hlo(WHILE, np.array([1, 2, 3], np.float32))
    assert count == 5
    np.testing.assert_array_equal(values, [32, 64, 96])


CONDITIONAL = """HloModule t
%b0 (x: f32[]) -> f32[] {
  %x = f32[] parameter(0)
  ROOT %r = f32[] negate(%x)
}

%b1 (x: f32[]) -> f32[] {
  %x = f32[] parameter(0)
  ROOT %r = f32[] add(%x, %x)
}

%b2 (x: f32[]) -> f32[] {
  %x = f32[] parameter(0)
  ROOT %r = f32[] multiply(%x, %x)
}

ENTRY e {
  i = s32[] parameter(0)
  x = f32[] parameter(1)
  ROOT c = f32[] conditional(i, x, x, x), branch_computations={%b0, %b1, %b2}
}
"""


@pytest.mark.parametrize(("index", "expected"), [(0, -3), (1, 6), (2, 9), (7, 9), (-3, 9)])
def test_conditional_index_form_out_of_range_runs_last_branch(index: int, expected: float) -> None:
    assert run_hlo(CONDITIONAL, np.int32(index), np.float32(3)) == expected


def test_conditional_pred_form() -> None:
    text = CONDITIONAL.replace("i = s32[] parameter(0)", "i = pred[] parameter(0)").replace(
        "conditional(i, x, x, x), branch_computations={%b0, %b1, %b2}",
        "conditional(i, x, x), true_computation=%b0, false_computation=%b1")
    assert run_hlo(text, np.bool_(True), np.float32(3)) == -3
    assert run_hlo(text, np.bool_(False), np.float32(3)) == 6


CALLS = """HloModule t
%square (x: f32[2]) -> f32[2] {
  %x = f32[2] parameter(0)
  ROOT %r = f32[2] multiply(%x, %x)
}

%fused (a: f32[2], b: f32[2]) -> f32[2] {
  %a = f32[2] parameter(0)
  %b = f32[2] parameter(1)
  ROOT %r = f32[2] subtract(%a, %b)
}

%clip (a: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %zero = f32[] constant(0)
  %one = f32[] constant(1)
  ROOT %r = f32[] clamp(%zero, %a, %one)
}

ENTRY e {
  x = f32[2] parameter(0)
  sq = f32[2] call(x), to_apply=%square
  f = f32[2] fusion(sq, x), kind=kLoop, calls=%fused
  m = f32[2] map(f), dimensions={0}, to_apply=%clip
  b = f32[2] opt-barrier(m)
  ROOT t = (f32[2], f32[2]) tuple(f, b)
}
"""


def test_call_fusion_map_and_opt_barrier() -> None:
    for fast in (True, False):
        f, clipped = run_hlo(CALLS, np.array([3, 0.5], np.float32), fast=fast)
        np.testing.assert_array_equal(f, [6, -0.25])
        np.testing.assert_array_equal(clipped, [1, 0])


def test_collectives_and_ids_on_one_device() -> None:
    text = """HloModule t
%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %r = f32[] add(%a, %b)
}

ENTRY e {
  x = f32[2] parameter(0)
  ar = f32[2] all-reduce(x), replica_groups={}, to_apply=%add
  ag = f32[2] all-gather(ar), dimensions={0}
  same = f32[2] collective-permute(ag), source_target_pairs={{0,0}}
  none = f32[2] collective-permute(ag), source_target_pairs={{0,1},{1,0}}
  r = u32[] replica-id()
  p = u32[] partition-id()
  ROOT t = (f32[2], f32[2], u32[], u32[]) tuple(same, none, r, p)
}
"""
    same, none, replica, partition = run_hlo(text, np.array([1, 2], np.float32))
    np.testing.assert_array_equal(same, [1, 2])
    np.testing.assert_array_equal(none, [0, 0])
    assert replica.dtype == np.uint32 and replica == 0 and partition == 0


# ---- arguments ------------------------------------------------------------------------
ADD = """HloModule t
ENTRY e {
  x = f32[2] parameter(0)
  n = s32[] parameter(1)
  c = f32[] convert(n)
  b = f32[2] broadcast(c), dimensions={}
  ROOT r = f32[2] add(x, b)
}
"""


def test_argument_checking() -> None:
    module = parse_hlo(ADD)
    np.testing.assert_array_equal(evaluate_module(module, [[1.5, 2], 3]), [np.array([4.5, 5], np.float32)])
    with pytest.raises(ValueError, match="takes 2 argument"):
        evaluate_module(module, [np.zeros(2, np.float32)])
    with pytest.raises(ValueError, match=r"parameter 0 'x': expected f32\[2\], got an array of dtype float64"):
        evaluate_module(module, [np.zeros(2), np.int32(1)])
    with pytest.raises(ValueError, match=r"parameter 0 'x': expected f32\[2\].*shape \[3\]"):
        evaluate_module(module, [np.zeros(3, np.float32), np.int32(1)])
    with pytest.raises(ValueError, match="parameter 1 'n'.*not exactly representable"):
        evaluate_module(module, [np.zeros(2, np.float32), 2.5])
    with pytest.raises(ValueError, match="parameter 0 'x'.*not exactly representable"):
        evaluate_module(module, [[0.1, 0], 1])
    with pytest.raises(ValueError, match="parameter 1 'n'"):
        evaluate_module(module, [np.zeros(2, np.float32), 2**40])


def test_results_do_not_alias_constants_or_arguments() -> None:
    text = """HloModule t
ENTRY e {
  x = f32[2] parameter(0)
  c = f32[2] constant({1, 2})
  ROOT t = (f32[2], f32[2]) tuple(x, c)
}
"""
    module = parse_hlo(text)
    x = np.zeros(2, np.float32)
    out_x, out_c = evaluate_module(module, [x])
    out_x[0], out_c[0] = 5, 5
    assert x[0] == 0
    np.testing.assert_array_equal(evaluate_module(module, [x])[1], [1, 2])


def test_trace_stats_and_evaluate_instruction() -> None:
    seen: list[str] = []
    evaluator = HloEvaluator(trace=lambda instr, value: seen.append(instr.name))
    evaluator.evaluate_module(parse_hlo(ADD), [np.zeros(2, np.float32), np.int32(1)])
    assert seen == ["x", "n", "c", "b", "r"]
    assert evaluator.stats["instructions"] == 3  # parameters are not counted

    comp = HloComputation("c")
    a = comp.add_instruction(HloInstruction("constant", Shape.array("s32", (2,)),
                                            attrs={"literal": np.array([3, 4], np.int32)}))
    neg = comp.add_instruction(HloInstruction("negate", Shape.array("s32", (2,)), [a]))
    np.testing.assert_array_equal(evaluate_instruction(neg, [np.array([3, 4], np.int32)]), [-3, -4])
    HloModule("m").add_computation(comp, is_entry=True)
    with pytest.raises(EvaluationError, match="parameter"):
        evaluate_instruction(HloInstruction("parameter", Shape.scalar("f32"), attrs={"parameter_number": 0}), [])


def test_errors_name_the_instruction() -> None:
    text = """HloModule t
ENTRY e {
  x = s32[2] parameter(0)
  ROOT bad = s32[2] exponential(x)
}
"""
    with pytest.raises(EvaluationError, match="bad = s32\\[2\\] exponential.*floating-point"):
        run_hlo(text, np.zeros(2, np.int32))


# ---- a training step must be fast -----------------------------------------------------
MLP_STEP = """HloModule mlp_step
%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %r = f32[] add(%a, %b)
}

%max (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %r = f32[] maximum(%a, %b)
}

ENTRY step {
  x = f32[64,784] parameter(0)
  y = f32[64,10] parameter(1)
  w1 = f32[784,128] parameter(2)
  b1 = f32[128] parameter(3)
  w2 = f32[128,10] parameter(4)
  b2 = f32[10] parameter(5)
  zero = f32[] constant(0)
  ninf = f32[] constant(-inf)
  lr = f32[] constant(0.1)
  inv_n = f32[] constant(0.015625)
  h0 = f32[64,128] dot(x, w1), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  b1b = f32[64,128] broadcast(b1), dimensions={1}
  hpre = f32[64,128] add(h0, b1b)
  zeros_h = f32[64,128] broadcast(zero), dimensions={}
  h = f32[64,128] maximum(hpre, zeros_h)
  l0 = f32[64,10] dot(h, w2), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  b2b = f32[64,10] broadcast(b2), dimensions={1}
  logits = f32[64,10] add(l0, b2b)
  m = f32[64] reduce(logits, ninf), dimensions={1}, to_apply=%max
  mb = f32[64,10] broadcast(m), dimensions={0}
  shifted = f32[64,10] subtract(logits, mb)
  e = f32[64,10] exponential(shifted)
  s = f32[64] reduce(e, zero), dimensions={1}, to_apply=%add
  sb = f32[64,10] broadcast(s), dimensions={0}
  p = f32[64,10] divide(e, sb)
  logp = f32[64,10] log(p)
  ylogp = f32[64,10] multiply(y, logp)
  total = f32[] reduce(ylogp, zero), dimensions={0,1}, to_apply=%add
  mean = f32[] multiply(total, inv_n)
  loss = f32[] negate(mean)
  diff = f32[64,10] subtract(p, y)
  inv_nb = f32[64,10] broadcast(inv_n), dimensions={}
  dlogits = f32[64,10] multiply(diff, inv_nb)
  dw2 = f32[128,10] dot(h, dlogits), lhs_contracting_dims={0}, rhs_contracting_dims={0}
  db2 = f32[10] reduce(dlogits, zero), dimensions={0}, to_apply=%add
  dh = f32[64,128] dot(dlogits, w2), lhs_contracting_dims={1}, rhs_contracting_dims={1}
  active = pred[64,128] compare(hpre, zeros_h), direction=GT
  dhpre = f32[64,128] select(active, dh, zeros_h)
  dw1 = f32[784,128] dot(x, dhpre), lhs_contracting_dims={0}, rhs_contracting_dims={0}
  db1 = f32[128] reduce(dhpre, zero), dimensions={0}, to_apply=%add
  lr1 = f32[784,128] broadcast(lr), dimensions={}
  step_w1 = f32[784,128] multiply(lr1, dw1)
  w1n = f32[784,128] subtract(w1, step_w1)
  lrb1 = f32[128] broadcast(lr), dimensions={}
  step_b1 = f32[128] multiply(lrb1, db1)
  b1n = f32[128] subtract(b1, step_b1)
  lr2 = f32[128,10] broadcast(lr), dimensions={}
  step_w2 = f32[128,10] multiply(lr2, dw2)
  w2n = f32[128,10] subtract(w2, step_w2)
  lrb2 = f32[10] broadcast(lr), dimensions={}
  step_b2 = f32[10] multiply(lrb2, db2)
  b2n = f32[10] subtract(b2, step_b2)
  ROOT out = (f32[], f32[784,128], f32[128], f32[128,10], f32[10]) tuple(loss, w1n, b1n, w2n, b2n)
}
"""


def _numpy_mlp_step(*arrays: np.ndarray) -> list[np.ndarray]:
    """The same step in float64 NumPy."""
    x, y, w1, b1, w2, b2 = arrays
    hpre = x @ w1 + b1
    h = np.maximum(hpre, 0)
    logits = h @ w2 + b2
    e = np.exp(logits - logits.max(axis=1, keepdims=True))
    p = e / e.sum(axis=1, keepdims=True)
    loss = -(y * np.log(p)).sum() / 64
    dlogits = (p - y) / 64
    dhpre = np.where(hpre > 0, dlogits @ w2.T, 0)
    return [loss, w1 - 0.1 * x.T @ dhpre, b1 - 0.1 * dhpre.sum(0), w2 - 0.1 * h.T @ dlogits, b2 - 0.1 * dlogits.sum(0)]


def test_mlp_training_step_is_correct_and_fast() -> None:
    import time

    module = parse_hlo(MLP_STEP)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(64, 784)).astype(np.float32)
    y = np.eye(10, dtype=np.float32)[rng.integers(0, 10, size=64)]
    params = [rng.normal(scale=0.05, size=s).astype(np.float32) for s in [(784, 128), (128,), (128, 10), (10,)]]
    evaluate_module(module, [x, y, *params])  # warm up
    start = time.perf_counter()
    outputs = evaluate_module(module, [x, y, *params])
    elapsed = time.perf_counter() - start
    assert elapsed < 0.5, f"one MLP training step took {elapsed:.3f}s"
    expected = _numpy_mlp_step(*(a.astype(np.float64) for a in [x, y, *params]))
    for actual, wanted in zip(outputs, expected, strict=True):
        np.testing.assert_allclose(actual, wanted, rtol=1e-4, atol=1e-5)


def test_evaluate_computation_with_tuple_parameter_and_general_map() -> None:
    text = """HloModule t
%mix (a: f32[], b: s32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = s32[] parameter(1)
  %bf = f32[] convert(%b)
  ROOT %r = f32[] multiply(%a, %bf)
}

ENTRY e {
  t = (f32[3], s32[3]) parameter(0)
  a = f32[3] get-tuple-element(t), index=0
  b = s32[3] get-tuple-element(t), index=1
  ROOT m = f32[3] map(a, b), dimensions={0}, to_apply=%mix
}
"""
    module = parse_hlo(text)
    evaluator = HloEvaluator()
    result = evaluator.evaluate_computation(module.entry, [(np.array([1, 2, 3], np.float32), [4, 5, 6])])
    np.testing.assert_array_equal(result, [4, 10, 18])
    assert evaluator.stats["elementwise calls (general path)"] == 1
    with pytest.raises(ValueError, match="expected a tuple"):
        evaluator.evaluate_computation(module.entry, [np.zeros(3, np.float32)])


def test_collectives_that_need_several_replicas_say_so() -> None:
    """An all-gather that grows its operand is valid HLO from a multi-device program; one replica
    cannot run it, and the interpreter says that (as the CPU does), not "internal error"."""
    text = """HloModule m
ENTRY e {
  p = f32[2] parameter(0)
  ROOT r = f32[4] all-gather(p), dimensions={0}
}
"""
    with pytest.raises(EvaluationError, match=r"all-gather of f32\[2\] into f32\[4\] needs several replicas"):
        run_hlo(text, np.ones(2, np.float32))
