"""Instruction fusion (``fusion``): golden before/after modules, the interpreter as the semantic
oracle, and the rules -- kinds, duplication, cycles, size limits -- each with the reason the pass
writes into the stage record when it refuses a candidate."""

from __future__ import annotations

import graphlib
import re

import pytest
from hypothesis import HealthCheck, given, settings

from tests.hypothesis_modules import hlo_modules
from tests.passes.pass_test_utils import assert_same_results, check_pass
from xla_teach.hlo.ir import HloInstruction, HloModule
from xla_teach.hlo.text.parser import parse_hlo
from xla_teach.hlo.verifier import verify_module
from xla_teach.passes.fusion import fusion_rules
from xla_teach.passes.fusion.fusion_rules import FusionConfig, fusion_decision, is_cheap_fusion
from xla_teach.passes.fusion.instruction_fusion import InstructionFusion, fusible_computations
from xla_teach.passes.pass_base import HloPassPipeline, PassOptions, PassRecorder

ADD_F32 = """
add_f32 {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
"""

SEED = "HloModule seed\n" + ADD_F32 + """
ENTRY main {
  x = f32[1024] parameter(0)
  y = f32[1024] parameter(1)
  z = f32[1024] parameter(2)
  mul = f32[1024] multiply(y, z)
  add = f32[1024] add(x, mul)
  zero = f32[] constant(0)
  ROOT sum = f32[] reduce(add, zero), dimensions={0}, to_apply=add_f32
}
"""

DENSE_RELU = """
HloModule dense_relu
ENTRY main {
  x = f32[8,16] parameter(0)
  w = f32[16,4] parameter(1)
  bias = f32[4] parameter(2)
  d = f32[8,4] dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  bb = f32[8,4] broadcast(bias), dimensions={1}
  a = f32[8,4] add(d, bb)
  zero = f32[] constant(0)
  zeros = f32[8,4] broadcast(zero), dimensions={}
  ROOT relu = f32[8,4] maximum(a, zeros)
}
"""


def fuse_with_record(text: str, config: FusionConfig | None = None) -> tuple[HloModule, HloModule, list[str]]:
    """Parse ``text``, run ``fusion`` in a pipeline with a recorder; (original, fused, notes)."""
    original = parse_hlo(text)
    module = original.clone()
    recorder = PassRecorder()
    HloPassPipeline("fusion", [InstructionFusion(config)]).run(module, PassOptions(), recorder)
    (record,) = recorder.records
    assert record.pass_name == "fusion"
    return original, module, record.notes


def fusions(module: HloModule) -> list[HloInstruction]:
    return [i for i in module.entry.instructions if i.opcode == "fusion"]


def count_opcode(module: HloModule, opcode: str) -> int:
    """Occurrences of ``opcode`` anywhere in the module, fused computations included."""
    return sum(1 for i in module.instructions() if i.opcode == opcode)


# ---- the three fusion kinds -----------------------------------------------------------------------
def test_seed_reduce_sum_becomes_exactly_one_input_fusion() -> None:
    module = check_pass(InstructionFusion(), SEED, "HloModule seed\n" + ADD_F32 + """
fused_computation {
  param_2 = f32[1024]{0} parameter(0)
  param_3.1 = f32[1024]{0} parameter(1)
  param_4 = f32[1024]{0} parameter(2)
  mul.1 = f32[1024]{0} multiply(param_3.1, param_4)
  add.1 = f32[1024]{0} add(param_2, mul.1)
  zero.1 = f32[] constant(0)
  ROOT sum.1 = f32[] reduce(add.1, zero.1), dimensions={0}, to_apply=add_f32
}
ENTRY main {
  x = f32[1024]{0} parameter(0)
  y = f32[1024]{0} parameter(1)
  z = f32[1024]{0} parameter(2)
  ROOT add_reduce_fusion = f32[] fusion(x, y, z), kind=kInput, calls=fused_computation
}
""")
    (fusion,) = fusions(module)
    assert fusion.fusion_kind == "kInput" and fusion.is_root()
    assert [i.opcode for i in module.entry.instructions] == ["parameter"] * 3 + ["fusion"]


def test_elementwise_chain_with_data_movement_is_one_loop_fusion() -> None:
    """broadcast, transpose, reshape, slice, pad, iota and concatenate all join one kLoop."""
    module = check_pass(InstructionFusion(), """
HloModule chain
ENTRY main {
  x = f32[4,6] parameter(0)
  y = f32[6,4] parameter(1)
  c = f32[] constant(2)
  b = f32[4,6] broadcast(c), dimensions={}
  t = f32[4,6] transpose(y), dimensions={1,0}
  m = f32[4,6] multiply(x, t)
  a = f32[4,6] add(m, b)
  r = f32[24] reshape(a)
  s = f32[20] slice(r), slice={[2:22]}
  z = f32[] constant(0)
  p = f32[24] pad(s, z), padding=2_2
  i = f32[24] iota(), iota_dimension=0
  cat = f32[48] concatenate(p, i), dimensions={0}
  ROOT n = f32[48] negate(cat)
}
""", """
HloModule chain
fused_computation {
  param_3.2 = f32[4,6]{1,0} parameter(0)
  param_4.1 = f32[6,4]{1,0} parameter(1)
  t.1 = f32[4,6]{1,0} transpose(param_4.1), dimensions={1,0}
  m.1 = f32[4,6]{1,0} multiply(param_3.2, t.1)
  c.1 = f32[] constant(2)
  b.1 = f32[4,6]{1,0} broadcast(c.1), dimensions={}
  a.1 = f32[4,6]{1,0} add(m.1, b.1)
  r.1 = f32[24]{0} reshape(a.1)
  s.1 = f32[20]{0} slice(r.1), slice={[2:22]}
  z.1 = f32[] constant(0)
  p.1 = f32[24]{0} pad(s.1, z.1), padding=2_2
  i.1 = f32[24]{0} iota(), iota_dimension=0
  cat.1 = f32[48]{0} concatenate(p.1, i.1), dimensions={0}
  ROOT n.1 = f32[48]{0} negate(cat.1)
}
ENTRY main {
  x = f32[4,6]{1,0} parameter(0)
  y = f32[6,4]{1,0} parameter(1)
  ROOT concatenate_negate_fusion = f32[48]{0} fusion(x, y), kind=kLoop, calls=fused_computation
}
""")
    (fusion,) = fusions(module)
    assert fusion.fusion_kind == "kLoop"


def test_dot_with_bias_and_relu_becomes_an_output_fusion() -> None:
    module = check_pass(InstructionFusion(), DENSE_RELU, """
HloModule dense_relu
fused_computation {
  param_3.2 = f32[8,16]{1,0} parameter(1)
  param_4 = f32[16,4]{1,0} parameter(2)
  d.1 = f32[8,4]{1,0} dot(param_3.2, param_4), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  param_3.1 = f32[4]{0} parameter(0)
  bb.1 = f32[8,4]{1,0} broadcast(param_3.1), dimensions={1}
  a.1 = f32[8,4]{1,0} add(d.1, bb.1)
  zero.1 = f32[] constant(0)
  zeros.1 = f32[8,4]{1,0} broadcast(zero.1), dimensions={}
  ROOT relu.1 = f32[8,4]{1,0} maximum(a.1, zeros.1)
}
ENTRY main {
  bias = f32[4]{0} parameter(2)
  x = f32[8,16]{1,0} parameter(0)
  w = f32[16,4]{1,0} parameter(1)
  ROOT broadcast_maximum_fusion = f32[8,4]{1,0} fusion(bias, x, w), kind=kOutput, calls=fused_computation
}
""")
    (fusion,) = fusions(module)
    assert fusion.fusion_kind == "kOutput"
    # The dot's operands stay in memory: they are operands of the fusion, read by the dot itself.
    dot = next(i for i in fusion.fused_computation.instructions if i.opcode == "dot")
    assert all(op.opcode == "parameter" for op in dot.operands)


def test_transpose_after_the_epilogue_keeps_the_dot_out_of_the_fusion() -> None:
    """Regression (fusion_rules ``_reads_elementwise``): the epilogue, then a transpose, reads the dot's
    result at transposed indices, so the dot must not join -- also when the transpose keeps the dims."""
    for rows, cols in [(8, 4), (4, 4)]:
        text = f"""
HloModule dense_relu_t
ENTRY main {{
  x = f32[{rows},16] parameter(0)
  w = f32[16,{cols}] parameter(1)
  bias = f32[{cols}] parameter(2)
  d = f32[{rows},{cols}] dot(x, w), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}
  bb = f32[{rows},{cols}] broadcast(bias), dimensions={{1}}
  a = f32[{rows},{cols}] add(d, bb)
  zero = f32[] constant(0)
  zeros = f32[{rows},{cols}] broadcast(zero), dimensions={{}}
  relu = f32[{rows},{cols}] maximum(a, zeros)
  ROOT t = f32[{cols},{rows}] transpose(relu), dimensions={{1,0}}
}}
"""
        original, module, notes = fuse_with_record(text)
        (fusion,) = fusions(module)
        assert fusion.fusion_kind == "kLoop"
        assert module.entry.instruction("d").opcode == "dot"  # still its own kernel
        assert fusion.operand(0).name == "d"
        assert ("not fusing d into maximum_transpose_fusion: the epilogue reads the dot at other indices "
                "(broadcast/transpose)") in notes
        assert_same_results(original, module)


@pytest.mark.parametrize("epilogue,result", [("convert(s)", "f16"), ("compare(s, d), direction=GT", "pred")])
def test_an_epilogue_that_changes_the_element_type_keeps_the_dot_out(epilogue: str, result: str) -> None:
    """Regression: the dot's sums are staged in the fusion's output buffer, so an f16 or pred
    epilogue (half or a quarter of the bytes) made BLAS write past the end of it (a bus error)."""
    text = f"""
HloModule narrowing
ENTRY main {{
  x = f32[8,16] parameter(0)
  w = f32[16,4] parameter(1)
  d = f32[8,4] dot(x, w), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}
  s = f32[8,4] add(d, d)
  ROOT r = {result}[8,4] {epilogue}
}}
"""
    original, module, notes = fuse_with_record(text)
    assert module.entry.instruction("d").opcode == "dot"
    assert all(f.fusion_kind != "kOutput" for f in fusions(module))
    assert f"not fusing d into add_{epilogue.split('(')[0]}_fusion: the epilogue changes the element type (f32 -> {result})" in notes
    assert_same_results(original, module)


# ---- duplication ----------------------------------------------------------------------------------
def test_expensive_ops_with_several_users_are_never_duplicated_cheap_ones_are() -> None:
    original, module, notes = fuse_with_record("""
HloModule dup
ENTRY main {
  x = f32[4] parameter(0)
  y = f32[4] parameter(1)
  e = f32[4] exponential(x)
  q = f32[4] divide(x, y)
  c = f32[] constant(3)
  b = f32[4] broadcast(c), dimensions={}
  u1 = f32[4] add(e, q)
  u2 = f32[4] multiply(e, b)
  u3 = f32[4] subtract(q, b)
  ROOT t = (f32[4], f32[4], f32[4]) tuple(u1, u2, u3)
}
""")
    assert count_opcode(module, "exponential") == 1 and count_opcode(module, "divide") == 1
    assert module.entry.instruction("e").opcode == "exponential"
    assert module.entry.instruction("q").opcode == "divide"
    # The broadcast of a constant is cheap: each consumer recomputes it instead of reading it.
    assert count_opcode(module, "broadcast") == 2
    assert all(i.opcode != "broadcast" for i in module.entry.instructions)
    assert sorted(f.name for f in fusions(module)) == ["broadcast_multiply_fusion", "broadcast_subtract_fusion"]
    for producer, consumer, opcode in [("e", "u1", "exponential"), ("q", "u1", "divide"),
                                       ("e", "broadcast_multiply_fusion", "exponential"),
                                       ("q", "broadcast_subtract_fusion", "divide")]:
        assert (f"not fusing {producer} into {consumer}: {opcode} is expensive and has other users "
                "(never duplicated)") in notes
    assert_same_results(original, module)


CHEAP_FUSION = """
HloModule cheap
fill {
  c = f32[] constant(1.5)
  ROOT b = f32[4] broadcast(c), dimensions={}
}
work {
  p = f32[4] parameter(0)
  c2 = f32[] constant(2)
  b2 = f32[4] broadcast(c2), dimensions={}
  ROOT m = f32[4] add(p, b2)
}
ENTRY main {
  x = f32[4] parameter(0)
  y = f32[4] parameter(1)
  ones = f32[4] fusion(), kind=kLoop, calls=fill
  w = f32[4] fusion(y), kind=kLoop, calls=work
  a = f32[4] multiply(x, ones)
  s = f32[4] subtract(x, ones)
  a2 = f32[4] multiply(x, w)
  s2 = f32[4] subtract(x, w)
  ROOT t = (f32[4], f32[4], f32[4], f32[4]) tuple(a, s, a2, s2)
}
"""


def test_a_cheap_loop_fusion_is_duplicated_into_each_consumer_a_working_one_is_not() -> None:
    original, module, notes = fuse_with_record(CHEAP_FUSION)
    before = original.entry
    assert is_cheap_fusion(before.instruction("ones"))  # only constant + broadcast
    assert not is_cheap_fusion(before.instruction("w"))  # it adds: real work
    names = {i.name for i in module.entry.instructions}
    assert "ones" not in names and {"ones_multiply_fusion", "ones_subtract_fusion"} <= names
    assert "fused ones into ones_multiply_fusion (kLoop)" in notes
    assert "fused ones into ones_subtract_fusion (kLoop)" in notes
    # The working fusion is computed once; both users still read its result.
    w = module.entry.instruction("w")
    assert sorted(u.name for u in w.users) == ["a2", "s2"]
    assert "not fusing w into a2: fusion is expensive and has other users (never duplicated)" in notes
    assert_same_results(original, module)


def test_no_duplication_when_the_backend_turns_it_off() -> None:
    original, module, notes = fuse_with_record("""
HloModule nodup
ENTRY main {
  x = f32[4] parameter(0)
  c = f32[] constant(3)
  b = f32[4] broadcast(c), dimensions={}
  u1 = f32[4] add(x, b)
  u2 = f32[4] multiply(x, b)
  ROOT t = (f32[4], f32[4]) tuple(u1, u2)
}
""", FusionConfig(may_duplicate=False))
    assert count_opcode(module, "broadcast") == 1
    assert "not fusing b into u2: producer has other users and duplication is off" in notes
    assert_same_results(original, module)


# ---- cycles, size limits, constants ------------------------------------------------------------------
DIAMOND = "HloModule diamond\n" + ADD_F32 + """
ENTRY main {
  x = f32[4,8] parameter(0)
  n = f32[4,8] negate(x)
  zero = f32[] constant(0)
  rowsum = f32[4] reduce(n, zero), dimensions={1}, to_apply=add_f32
  bs = f32[4,8] broadcast(rowsum), dimensions={0}
  ROOT out = f32[4,8] subtract(n, bs)
}
"""


def _is_acyclic(module: HloModule) -> bool:
    """No computation's operand graph has a cycle (checked independently of ``post_order``)."""
    for comp in module.computations:
        graph = {i.unique_id: {op.unique_id for op in i.operands} for i in comp.instructions}
        try:
            tuple(graphlib.TopologicalSorter(graph).static_order())
        except graphlib.CycleError:
            return False
    return True


def test_fusing_never_creates_a_cycle() -> None:
    """``n`` feeds ``out`` directly and through ``rowsum`` (a reduction, which stays outside). ``n`` is
    cheap and has another user, so it is *copied* into both fusions; the original's path through
    ``rowsum`` no longer exists as a dependency of a moved ``n``, so no cycle forms."""
    original, module, notes = fuse_with_record(DIAMOND)
    assert fusion_decision(original.entry.instruction("n"), original.entry.instruction("out"), FusionConfig()) is None
    assert module.entry.instruction("negate_reduce_fusion").fusion_kind == "kInput"
    assert "fused n into negate_reduce_fusion (kInput)" in notes
    root = module.entry.root
    assert root.opcode == "fusion" and "negate" in [i.opcode for i in root.fused_computation.instructions]
    assert "n" not in [i.name for i in module.entry.instructions]  # every use was copied; the original died
    verify_module(module)
    assert _is_acyclic(module)
    assert_same_results(original, module)


def test_a_producer_that_would_move_is_refused_when_another_path_exists() -> None:
    """The cycle check itself: with the direct edge removed from the count, a path through the
    consumer's other operand means fusing would close a loop."""
    from xla_teach.passes.fusion.fusion_rules import _creates_cycle

    module = parse_hlo(DIAMOND)
    n, out = module.entry.instruction("n"), module.entry.instruction("out")
    assert _creates_cycle(n, out)
    assert not _creates_cycle(module.entry.instruction("bs"), out)


def test_fusions_stay_under_the_instruction_limit() -> None:
    ops = "\n".join(f"  n{k + 1} = f32[8] negate(n{k})" for k in range(8))
    text = f"HloModule long\nENTRY main {{\n  n0 = f32[8] parameter(0)\n{ops}\n  ROOT r = f32[8] abs(n8)\n}}\n"
    original, module, notes = fuse_with_record(text, FusionConfig(max_instructions=4))
    for fusion in fusions(module):
        assert len(fusion.fused_computation.instructions) <= 4
    assert len(fusions(module)) >= 3
    assert any(re.search(r": the fusion would hold \d+ instructions \(limit 4\)$", n) for n in notes)
    assert_same_results(original, module)


def test_only_scalar_constants_are_fused() -> None:
    original, module, notes = fuse_with_record("""
HloModule consts
ENTRY main {
  x = f32[3] parameter(0)
  table = f32[3] constant({1, 2, 3})
  two = f32[] constant(2)
  b = f32[3] broadcast(two), dimensions={}
  m = f32[3] multiply(x, b)
  ROOT a = f32[3] add(m, table)
}
""")
    (fusion,) = fusions(module)
    assert module.entry.instruction("table").opcode == "constant"
    assert any(op.name == "table" for op in fusion.operands)
    assert (f"not fusing table into {fusion.name}: only scalar constants are fused "
            "(large literals stay in memory)") in notes
    assert_same_results(original, module)


# ---- names and notes ------------------------------------------------------------------------------
def test_fusions_are_named_producer_consumer_fusion() -> None:
    """Like XLA's CPU pipeline (``multiply_add_fusion`` in the seed's dump): named after the opcodes of
    the first producer fused and the consumer; a merged loop fusion lends its name's stem instead."""
    _, module, _ = fuse_with_record("""
HloModule names
ENTRY main {
  x = f32[4] parameter(0)
  y = f32[4] parameter(1)
  m = f32[4] multiply(x, y)
  ROOT a = f32[4] add(m, x)
}
""")
    (fusion,) = fusions(module)
    assert fusion.name == "multiply_add_fusion"
    assert fusion.fused_computation.name == "fused_computation"
    assert all(re.fullmatch(r"param_\d+(\.\d+)?", p.name) for p in fusion.fused_computation.parameter_instructions)
    _, module, _ = fuse_with_record(CHEAP_FUSION)
    assert {"ones_multiply_fusion", "ones_subtract_fusion"} <= {f.name for f in fusions(module)}


class _LoggingFusion(InstructionFusion):
    """Instruction fusion that also remembers every refusal it decided, to check the notes against."""

    def __init__(self) -> None:
        super().__init__()
        self.refusals: list[tuple[str, str, str]] = []

    def decide(self, producer: HloInstruction, consumer: HloInstruction) -> str | None:
        reason = super().decide(producer, consumer)
        if reason is not None:
            self.refusals.append((producer.name, consumer.name, reason))
        return reason


NOTE = re.compile(r"not fusing (\S+) into (\S+): (.+)")


def _check_reasons(text: str) -> list[str]:
    module = parse_hlo(text)
    fusion = _LoggingFusion()
    recorder = PassRecorder()
    HloPassPipeline("fusion", [fusion]).run(module, PassOptions(), recorder)
    notes = recorder.records[0].notes
    # Every refusal is in the stage record, with its reason ...
    for producer, consumer, reason in fusion.refusals:
        assert f"not fusing {producer} into {consumer}: {reason}" in notes
    # ... every "not fusing" note names a pair and a non-empty reason ...
    refused = [n for n in notes if n.startswith("not fusing")]
    assert all(NOTE.fullmatch(n) for n in refused)
    # ... and no edge left unfused was skipped silently: it is refused now, or was refused (with a
    # reason in the notes) when its consumer was visited. (In DIAMOND the cycle that stopped ``n``
    # is gone once ``n`` has been duplicated into the reduction: a single pass does not go back.)
    for comp in fusible_computations(module):
        for consumer in comp.instructions:
            for producer in set(consumer.operands):
                if fusion_decision(producer, consumer, fusion.config) is None:
                    assert any(n.startswith(f"not fusing {producer.name} into {consumer.name}: ") for n in refused)
    return notes


def test_every_rejected_candidate_has_a_reason_in_the_pass_record() -> None:
    for text in (SEED, DENSE_RELU, DIAMOND, CHEAP_FUSION):
        assert any(n.startswith("not fusing") for n in _check_reasons(text))


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(module=hlo_modules())
def test_random_modules_fuse_to_a_fixed_point_with_the_same_results(module: HloModule) -> None:
    _check_reasons(module.to_text())
    fused = module.clone()
    InstructionFusion().run(fused)
    verify_module(fused)
    assert _is_acyclic(fused)
    assert_same_results(module, fused, rtol=1e-4)


def test_an_epilogue_whose_values_fan_out_and_meet_again_is_checked_in_linear_time(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Regression: the output-fusion check walked every path from the dot to the root, and 20 stacked
    diamonds (``v' = negate(v) + abs(v)``) have 2^20 paths: seconds per decision. Each instruction
    is looked at once now."""
    diamonds = 20
    lines = ["  x = f32[4,4] parameter(0)", "  w = f32[4,4] parameter(1)",
             "  v0 = f32[4,4] dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}"]
    for k in range(diamonds):
        lines += [f"  a{k} = f32[4,4] negate(v{k})", f"  b{k} = f32[4,4] abs(v{k})",
                  f"  {'ROOT ' if k == diamonds - 1 else ''}v{k + 1} = f32[4,4] add(a{k}, b{k})"]
    text = "HloModule diamonds\nENTRY main {\n" + "\n".join(lines) + "\n}\n"
    calls = 0
    real = fusion_rules.is_elementwise

    def counting(opcode: str) -> bool:
        nonlocal calls
        calls += 1
        return real(opcode)

    monkeypatch.setattr(fusion_rules, "is_elementwise", counting)
    original, module, _ = fuse_with_record(text)
    (fusion,) = fusions(module)
    assert fusion.fusion_kind == "kOutput"
    assert calls < 10_000  # 2^20 before the fix
    assert_same_results(original, module, rtol=1e-4)
