"""Multi-output fusion (``multi_output_fusion``): producer-consumer and sibling fusion, golden
modules after the fusion pipeline (``fusion``, ``multi_output_fusion``, ``dce``, as in
``default_pipeline``), kernel counts, and results checked against the interpreter (and, for the
real softmax sample, against what XLA computed)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tests.passes.pass_test_utils import assert_same_results, check_pass
from xla_teach.hlo.evaluator import evaluate_module
from xla_teach.hlo.ir import HloModule
from xla_teach.hlo.text.parser import parse_hlo
from xla_teach.passes.fusion.instruction_fusion import InstructionFusion, fusible_computations
from xla_teach.passes.fusion.multi_output_fusion import MultiOutputFusion
from xla_teach.passes.pass_base import HloPassPipeline, PassOptions, PassRecorder
from xla_teach.passes.pipeline import default_pipeline
from xla_teach.passes.simplifiers.dce import DeadCodeElimination

SAMPLES = Path(__file__).parents[2] / "tests" / "data" / "xla_samples"
NOT_KERNELS = {"parameter", "constant", "tuple", "get-tuple-element", "bitcast"}


def kernel_count(module: HloModule) -> int:
    """Kernels a backend launches: fusions plus unfused ops that compute something, in the
    computations that run as kernel sequences (not inside fusions or reducers)."""
    return sum(1 for comp in fusible_computations(module) for i in comp.instructions if i.opcode not in NOT_KERNELS)


def fusion_pipeline() -> HloPassPipeline:
    return HloPassPipeline("fusion", [InstructionFusion(), MultiOutputFusion(), DeadCodeElimination()])


def multi_output_notes(text: str) -> tuple[HloModule, HloModule, list[str]]:
    original = parse_hlo(text)
    module = original.clone()
    recorder = PassRecorder()
    fusion_pipeline().run(module, PassOptions(), recorder)
    (record,) = [r for r in recorder.records if r.pass_name == "multi_output_fusion"]
    return original, module, record.notes


REDUCERS = """
add_f32 {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
max_f32 {
  a.1 = f32[] parameter(0)
  b.1 = f32[] parameter(1)
  ROOT m = f32[] maximum(a.1, b.1)
}
"""

SOFTMAX = "HloModule softmax\n" + REDUCERS + """
ENTRY main {
  x = f32[8,16] parameter(0)
  ninf = f32[] constant(-inf)
  mx = f32[8] reduce(x, ninf), dimensions={1}, to_apply=max_f32
  bmx = f32[8,16] broadcast(mx), dimensions={0}
  sub = f32[8,16] subtract(x, bmx)
  e = f32[8,16] exponential(sub)
  zero = f32[] constant(0)
  sum = f32[8] reduce(e, zero), dimensions={1}, to_apply=add_f32
  bsum = f32[8,16] broadcast(sum), dimensions={0}
  ROOT out = f32[8,16] divide(e, bsum)
}
"""


def test_softmax_is_three_kernels_with_exp_as_an_extra_output_of_the_sum() -> None:
    """Fusion alone leaves 4 kernels (max, exp, sum, divide): ``exp`` is expensive and has two users.
    Producer-consumer multi-output fusion computes it inside the sum's kernel and stores it there."""
    fused_only = parse_hlo(SOFTMAX)
    InstructionFusion().run(fused_only)
    assert kernel_count(fused_only) == 4
    module = check_pass(fusion_pipeline(), SOFTMAX, "HloModule softmax\n" + REDUCERS + """
fused_computation {
  param_0 = f32[8,16]{1,0} parameter(0)
  param_2 = f32[8]{0} parameter(1)
  bsum.1 = f32[8,16]{1,0} broadcast(param_2), dimensions={0}
  ROOT out.1 = f32[8,16]{1,0} divide(param_0, bsum.1)
}
fused_computation.1 {
  param_1.4 = f32[8,16]{1,0} parameter(0)
  param_2.3 = f32[8]{0} parameter(1)
  bmx.2 = f32[8,16]{1,0} broadcast(param_2.3), dimensions={0}
  sub.2 = f32[8,16]{1,0} subtract(param_1.4, bmx.2)
  e.2 = f32[8,16]{1,0} exponential(sub.2)
  zero.1 = f32[] constant(0)
  sum.1 = f32[8]{0} reduce(e.2, zero.1), dimensions={1}, to_apply=add_f32
  ROOT tuple = (f32[8]{0}, f32[8,16]{1,0}) tuple(sum.1, e.2)
}
fused_computation.3 {
  param_0.3 = f32[8,16]{1,0} parameter(0)
  ninf.1 = f32[] constant(-inf)
  ROOT mx.1 = f32[8]{0} reduce(param_0.3, ninf.1), dimensions={1}, to_apply=max_f32
}
ENTRY main {
  x = f32[8,16]{1,0} parameter(0)
  constant_reduce_fusion.1 = f32[8]{0} fusion(x), kind=kInput, calls=fused_computation.3
  constant_reduce_fusion = (f32[8]{0}, f32[8,16]{1,0}) fusion(x, constant_reduce_fusion.1), kind=kInput, calls=fused_computation.1
  get-tuple-element.1 = f32[8,16]{1,0} get-tuple-element(constant_reduce_fusion), index=1
  get-tuple-element = f32[8]{0} get-tuple-element(constant_reduce_fusion), index=0
  ROOT broadcast_divide_fusion = f32[8,16]{1,0} fusion(get-tuple-element.1, get-tuple-element), kind=kLoop, calls=fused_computation
}
""")
    assert kernel_count(module) == 3
    assert sum(1 for i in module.instructions() if i.opcode == "exponential") == 1  # not duplicated


def test_softmax_notes_say_what_was_combined_and_what_was_not() -> None:
    _, _, notes = multi_output_notes(SOFTMAX)
    assert "fused subtract_exponential_fusion into constant_reduce_fusion, keeping it as an extra output" in notes
    assert ("not fusing constant_reduce_fusion.1 into subtract_exponential_fusion as an extra output: "
            "only single-output loop fusions become extra outputs") in notes


@pytest.mark.skipif(not (SAMPLES / "softmax" / "meta.json").is_file(), reason=f"no softmax sample under {SAMPLES}")
def test_jax_softmax_sample_is_at_most_three_kernels_and_matches_xla() -> None:
    """JAX's own softmax module (XLA's CPU pipeline makes 6 kernels of it)."""
    folder = SAMPLES / "softmax"
    original = parse_hlo((folder / "before_optimizations.txt").read_text())
    module = original.clone()
    default_pipeline().run(module, PassOptions(record=False))
    assert kernel_count(module) <= 3
    xla_module = parse_hlo((folder / "after_optimizations.txt").read_text())
    assert kernel_count(module) < kernel_count(xla_module)
    meta = json.loads((folder / "meta.json").read_text())
    inputs, outputs = np.load(folder / "inputs.npz"), np.load(folder / "outputs.npz")
    args = [inputs[p["key"]] for p in meta["parameters"]]
    (result,) = evaluate_module(module, args)
    np.testing.assert_allclose(result, outputs["out0"], rtol=meta["tolerance"]["rtol"], atol=meta["tolerance"]["atol"])
    assert_same_results(original, module)


SIBLINGS = "HloModule siblings\n" + REDUCERS + """
ENTRY main {
  x = f32[8,16] parameter(0)
  zero = f32[] constant(0)
  ninf = f32[] constant(-inf)
  sq = f32[8,16] multiply(x, x)
  sumsq = f32[8] reduce(sq, zero), dimensions={1}, to_apply=add_f32
  ab = f32[8,16] abs(x)
  maxabs = f32[8] reduce(ab, ninf), dimensions={1}, to_apply=max_f32
  ROOT t = (f32[8], f32[8]) tuple(sumsq, maxabs)
}
"""


def test_sibling_reductions_of_the_same_input_become_one_kernel() -> None:
    module = check_pass(fusion_pipeline(), SIBLINGS, "HloModule siblings\n" + REDUCERS + """
fused_computation.2 {
  param_0.2 = f32[8,16]{1,0} parameter(0)
  ab.2 = f32[8,16]{1,0} abs(param_0.2)
  ninf.2 = f32[] constant(-inf)
  maxabs.2 = f32[8]{0} reduce(ab.2, ninf.2), dimensions={1}, to_apply=max_f32
  sq.2 = f32[8,16]{1,0} multiply(param_0.2, param_0.2)
  zero.2 = f32[] constant(0)
  sumsq.2 = f32[8]{0} reduce(sq.2, zero.2), dimensions={1}, to_apply=add_f32
  ROOT tuple = (f32[8]{0}, f32[8]{0}) tuple(maxabs.2, sumsq.2)
}
ENTRY main {
  x = f32[8,16]{1,0} parameter(0)
  abs_reduce_multiply_reduce_fusion = (f32[8]{0}, f32[8]{0}) fusion(x), kind=kInput, calls=fused_computation.2
  get-tuple-element.1 = f32[8]{0} get-tuple-element(abs_reduce_multiply_reduce_fusion), index=1
  get-tuple-element = f32[8]{0} get-tuple-element(abs_reduce_multiply_reduce_fusion), index=0
  ROOT t = (f32[8]{0}, f32[8]{0}) tuple(get-tuple-element.1, get-tuple-element)
}
""")
    assert kernel_count(module) == 1
    _, _, notes = multi_output_notes(SIBLINGS)
    assert notes == ["merged siblings abs_reduce_fusion and multiply_reduce_fusion (both read x)"]


def test_reductions_over_different_dimensions_stay_apart() -> None:
    original, module, notes = multi_output_notes(SIBLINGS.replace(
        "maxabs = f32[8] reduce(ab, ninf), dimensions={1}", "maxabs = f32[16] reduce(ab, ninf), dimensions={0}").replace(
        "(f32[8], f32[8]) tuple", "(f32[8], f32[16]) tuple"))
    assert kernel_count(module) == 2
    assert notes == ["not merging siblings abs_reduce_fusion and multiply_reduce_fusion: "
                     "reductions over different shapes or dimensions"]
    assert_same_results(original, module)


def test_producer_consumer_keeps_the_producer_as_an_extra_output() -> None:
    text = """
HloModule producer_consumer
ENTRY main {
  x = f32[16] parameter(0)
  y = f32[16] parameter(1)
  s = f32[16] subtract(x, y)
  e = f32[16] exponential(s)
  c = f32[] constant(1)
  b = f32[16] broadcast(c), dimensions={}
  n = f32[16] add(e, b)
  ROOT t = (f32[16], f32[16]) tuple(e, n)
}
"""
    module = check_pass(fusion_pipeline(), text, """
HloModule producer_consumer
fused_computation {
  param_1.2 = f32[16]{0} parameter(0)
  param_2.2 = f32[16]{0} parameter(1)
  s.2 = f32[16]{0} subtract(param_1.2, param_2.2)
  e.2 = f32[16]{0} exponential(s.2)
  c.1 = f32[] constant(1)
  b.1 = f32[16]{0} broadcast(c.1), dimensions={}
  n.1 = f32[16]{0} add(e.2, b.1)
  ROOT tuple = (f32[16]{0}, f32[16]{0}) tuple(n.1, e.2)
}
ENTRY main {
  x = f32[16]{0} parameter(0)
  y = f32[16]{0} parameter(1)
  broadcast_add_fusion = (f32[16]{0}, f32[16]{0}) fusion(x, y), kind=kLoop, calls=fused_computation
  get-tuple-element.1 = f32[16]{0} get-tuple-element(broadcast_add_fusion), index=1
  get-tuple-element = f32[16]{0} get-tuple-element(broadcast_add_fusion), index=0
  ROOT t = (f32[16]{0}, f32[16]{0}) tuple(get-tuple-element.1, get-tuple-element)
}
""")
    assert kernel_count(module) == 1
    _, _, notes = multi_output_notes(text)
    assert notes == ["fused subtract_exponential_fusion into broadcast_add_fusion, keeping it as an extra output"]


def test_loops_of_different_shapes_are_not_merged() -> None:
    original, module, notes = multi_output_notes("""
HloModule sibling_shapes
ENTRY main {
  x = f32[4,4] parameter(0)
  n = f32[4,4] negate(x)
  e = f32[4,4] exponential(n)
  r = f32[16] reshape(x)
  a = f32[16] abs(r)
  l = f32[16] log(a)
  ROOT t = (f32[4,4], f32[16]) tuple(e, l)
}
""")
    assert kernel_count(module) == 2
    assert notes == ["not merging siblings abs_log_fusion and negate_exponential_fusion: different loop shapes"]
    assert_same_results(original, module)


def test_siblings_connected_through_another_kernel_are_not_merged() -> None:
    """``broadcast_multiply_fusion`` feeds the dot that feeds ``subtract_transpose_fusion``: one kernel
    for both would have to run before and after the dot."""
    original, module, notes = multi_output_notes("""
HloModule sibling_dependency
ENTRY main {
  x = f32[4,4] parameter(0)
  w = f32[4,4] parameter(1)
  c = f32[] constant(2)
  b = f32[4,4] broadcast(c), dimensions={}
  a = f32[4,4] multiply(x, b)
  d = f32[4,4] dot(a, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  s = f32[4,4] subtract(x, d)
  ROOT t = f32[4,4] transpose(s), dimensions={1,0}
}
""")
    assert kernel_count(module) == 3
    assert notes == ["not merging siblings subtract_transpose_fusion and broadcast_multiply_fusion: "
                     "one depends on the other"]
    assert_same_results(original, module)


def test_unfused_elementwise_siblings_join_a_fusion_that_reads_the_same_operand() -> None:
    """``exponential(x)`` and ``log(x)`` read only a parameter, so instruction fusion has nothing
    to give them; as siblings of ``broadcast_multiply_fusion`` they still share its read of ``x``."""
    original, module, notes = multi_output_notes("""
HloModule unfused_siblings
ENTRY main {
  x = f32[64] parameter(0)
  two = f32[] constant(2)
  b = f32[64] broadcast(two), dimensions={}
  m = f32[64] multiply(x, b)
  e = f32[64] exponential(x)
  y = f32[16] parameter(1)
  l = f32[16] log(y)
  ROOT t = (f32[64], f32[64], f32[16]) tuple(m, e, l)
}
""")
    assert kernel_count(module) == 2  # {multiply, exponential} and log (which reads y, a 16-element loop)
    assert notes[0] == "merged siblings e and broadcast_multiply_fusion (both read x)"
    (merged,) = [i for i in module.entry.instructions if i.opcode == "fusion" and i.shape.is_tuple]
    assert sorted(i.opcode for i in merged.fused_computation.instructions) == [
        "broadcast", "constant", "exponential", "multiply", "parameter", "tuple"]
    assert module.entry.instruction("l").opcode == "log"  # nothing shares its operand
    assert_same_results(original, module)


def test_xlas_wrapped_reduce_is_neither_fused_into_nor_kept_beside_its_consumer() -> None:
    """XLA's optimized HLO wraps a lone reduce in a kLoop fusion (``wrapped_reduce``). Fusing it into
    an elementwise consumer -- or keeping it as the consumer's extra output -- put a reduction in an
    element loop whose side output has the reduction's output shape, and the CPU emitter crashed
    (an Adam step on a softmax regression, found in XLA's own HLO). Both fusions now refuse it and
    the module computes what the interpreter does."""
    text = """HloModule wrapped
add { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT s = f32[] add(a, b) }
wrapped_reduce_computation {
  p = f32[4,10] parameter(0)
  z = f32[] parameter(1)
  ROOT r = f32[10] reduce(p, z), dimensions={0}, to_apply=add
}
update {
  g = f32[10] parameter(0)
  v = f32[10] parameter(1)
  c = f32[] constant(0.999)
  cb = f32[10] broadcast(c), dimensions={}
  vv = f32[10] multiply(v, cb)
  gg = f32[10] multiply(g, g)
  ROOT n = f32[10] add(vv, gg)
}
ENTRY main {
  x = f32[4,10] parameter(0)
  v = f32[10] parameter(1)
  zero = f32[] constant(0)
  g = f32[10] fusion(x, zero), kind=kLoop, calls=wrapped_reduce_computation
  n = f32[10] fusion(g, v), kind=kLoop, calls=update
  m = f32[10] negate(g)
  ROOT t = (f32[10], f32[10]) tuple(n, m)
}"""
    from tests.backends.backend_test_utils import assert_same, run_both
    from xla_teach.api import compile_module

    got, want = run_both(text, None, "cpu")
    assert_same(got, want)
    optimized = compile_module(text, "cpu").module
    for fusion in (i for i in optimized.entry.instructions if i.opcode == "fusion"):
        opcodes = {i.opcode for i in fusion.fused_computation.instructions}
        assert not ("reduce" in opcodes and "add" in opcodes and "multiply" in opcodes), fusion.to_text()
